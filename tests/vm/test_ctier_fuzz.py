"""A bounded, seeded run of scripts/ctier_fuzz.py (the long runs stay outside CI):
byte-mutated modules loaded and run in the C tier never crash, hang or leak a raw
Python exception."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ctier_fuzz.py"


def test_bounded_ctier_fuzz_run(tmp_path):
    env = dict(os.environ, VMRT_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, str(SCRIPT), "--mutants", "120", "--seed", "11"],
                          capture_output=True, text=True, env=env, timeout=900)
    counts = json.loads(done.stdout[done.stdout.index("{"):])
    assert done.returncode == 0, (counts, done.stderr[-2000:])
    assert counts["refused"] + counts["ran"] == 120
    assert counts["crash"] == counts["hang"] == counts["raw"] == 0
    assert counts["c_functions"] > 0  # mutants that load run in C, not only in Python
