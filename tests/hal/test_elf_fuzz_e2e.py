"""A bounded, seeded run of scripts/elf_fuzz_e2e.py: structure-only mutations of the
add model's embedded-elf and system-elf payloads, loaded and called end to end in
worker processes. None may crash, hang or leak a non-vmrt exception."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from vmrt.hal.native_loader import native_unavailable_reason

pytestmark = pytest.mark.skipif(native_unavailable_reason() is not None,
                                reason=str(native_unavailable_reason()))

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "elf_fuzz_e2e.py"


def test_mutated_payloads_run_or_are_refused_never_crash(tmp_path):
    spec = importlib.util.spec_from_file_location("elf_fuzz_e2e", SCRIPT)
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    fuzz.compile_seeds(tmp_path, models="add")
    rows = fuzz.fuzz(tmp_path, 60, seed=34, jobs=1, code=False, chunk=60)
    outcomes = Counter(row[3] for row in rows)
    assert len(rows) == 60
    bad = {o: n for o, n in outcomes.items() if o in ("crashed", "hung") or o.startswith("leak")}
    assert not bad, (bad, [row for row in rows if row[3] in bad])
    # The mutations reach both outcomes: some are refused, some still run.
    assert outcomes["refused"] > 0 and outcomes["ran"] + outcomes["ran_wrong"] > 0, outcomes
