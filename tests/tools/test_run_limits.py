"""`vmrt run --fuel/--timeout/--max_memory/--max_depth`: limits from the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vmrt.asm import assemble

PROGRAM = """vm.module @lim version 1
vm.type i32
vm.type i64
vm.export @spin
vm.func @spin() -> () {
^bb0:
  vm.br ^bb0
}
vm.export @count
vm.func @count(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 0
  %i2 = vm.const.i32 1
  vm.br ^bb1
^bb1:
  %i1 = vm.add.i32 %i1, %i2
  %i3 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i3, ^bb1, ^bb2
^bb2:
  vm.return %i1
}
vm.export @deep
vm.func @deep(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 1
  %i2 = vm.sub.i32 %i0, %i1
  vm.cond_br %i0, ^bb1, ^bb2
^bb1:
  %i3 = vm.call @deep(%i2)
  vm.return %i3
^bb2:
  vm.return %i0
}
vm.export @grab
vm.func @grab(%i0: i32) -> (i32) {
^bb0:
  %i2:3 = vm.ext.i32.i64.u %i0
  %i4 = vm.const.i32 16
  %r0 = vm.buffer.alloc %i2:3, %i4
  vm.return %i0
}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "lim.vmfb"
    path.write_bytes(assemble(PROGRAM))
    return path


def vmrt_run(module, *flags):
    return subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "run", f"--module={module}",
                           *flags], capture_output=True, text=True, timeout=120)


def test_no_limit_flags_run_as_before(module):
    result = vmrt_run(module, "--function=count", "--input=1000")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "result[0]: i32=1000"


def test_timeout_stops_an_endless_loop(module):
    result = vmrt_run(module, "--function=spin", "--timeout=0.2")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "DEADLINE_EXCEEDED" in result.stderr


@pytest.mark.parametrize("fuel,ok", [(10_000, True), (500, False)])
def test_fuel(module, fuel, ok):
    result = vmrt_run(module, "--function=count", "--input=1000", f"--fuel={fuel}")
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert "RESOURCE_EXHAUSTED" in result.stderr and "fuel" in result.stderr


def test_max_depth(module):
    assert vmrt_run(module, "--function=deep", "--input=50", "--max_depth=100").returncode == 0
    result = vmrt_run(module, "--function=deep", "--input=500", "--max_depth=100")
    assert result.returncode == 1 and "RESOURCE_EXHAUSTED" in result.stderr


def test_max_memory(module):
    assert vmrt_run(module, "--function=grab", "--input=1000",
                    "--max_memory=4096").returncode == 0
    result = vmrt_run(module, "--function=grab", "--input=100000", "--max_memory=4096")
    assert result.returncode == 1 and "RESOURCE_EXHAUSTED" in result.stderr


def test_bad_limit_is_one_line(module):
    result = vmrt_run(module, "--function=spin", "--max_depth=20000")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "INVALID_ARGUMENT" in result.stderr
