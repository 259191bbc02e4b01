"""Start-up: what loading and running a .vmfb imports (checked in fresh processes;
times are measured by benchmarks/startup_bench.py, never asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SCALAR = REPO_ROOT / "examples" / "scalar.vmfb"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Keeps the processes started here out of the user's ~/.cache."""
    monkeypatch.setenv("VMRT_CACHE_DIR", str(tmp_path / "vmrt-cache"))


def modules_after(code: str) -> set[str]:
    """The modules in sys.modules after running `code` in a fresh interpreter."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=dict(os.environ), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


RUN_SCALAR = f"""
import vmrt
module = vmrt.load_module({str(SCALAR)!r})
context = vmrt.Context(vmrt.Instance(), modules=[module])
assert context.function("module.demo")(48, 18, 27, 2.0) == (6, 111, 9232, 1.4142135381698608, 5)
"""


def test_loading_and_running_a_module_does_not_import_the_assembler():
    loaded = modules_after(RUN_SCALAR)
    assert "vmrt.vm.module" in loaded
    assert not {name for name in loaded if name == "vmrt.asm" or name.startswith("vmrt.asm.")}
    assert "construct" not in loaded  # the module format is read with struct


def test_importing_the_core_defers_numpy():
    # numpy (tens of milliseconds) comes with the first module read, not the import.
    loaded = modules_after("import vmrt, vmrt.vm.module, vmrt.vm.context, vmrt.format")
    assert "numpy" not in loaded
    assert "construct" not in loaded


def test_instructions_of_one_layout_share_a_decoder():
    from vmrt.isa import INSTRUCTIONS
    from vmrt.isa.decoder import DECODERS, operand_layout

    decoders = {}
    for inst in INSTRUCTIONS:
        if inst.kind == "op":
            decoder = DECODERS[inst.opcode_set][inst.opcode]
            decoders.setdefault(operand_layout(inst), decoder)
            assert decoders[operand_layout(inst)] is decoder
    assert len(decoders) < len(INSTRUCTIONS) // 4
