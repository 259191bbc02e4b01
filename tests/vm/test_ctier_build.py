"""How the C tier compiles a build (vmrt/vm/ctier/toolchain.py): a module's functions
in several units compiled at once, cffi's wrappers in one more. However the
functions were split, the code is the same: the same results and the same fuel as
the Python tier, on VM code calling across units and on a VMVX model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.errors import VMError
from vmrt.vm.ctier import toolchain
from vmrt.vm.ctier.build import compiler_identity

from tests.vm.ctier_programs import counted_loop

ROOT = Path(__file__).resolve().parents[2]
needs_compiler = pytest.mark.skipif(compiler_identity() is None, reason="needs a C compiler")


def test_split_units_keeps_every_part_once_in_order():
    parts = [f"/*{i}*/" + "x" * size for i, size in enumerate([50, 10, 40, 30, 20, 60, 5])]
    for count in (1, 2, 3, 7, 20):
        units = toolchain.split_units(parts, count)
        assert 1 <= len(units) <= min(count, len(parts))
        assert sorted(p for unit in units for p in unit) == sorted(parts)
        for unit in units:
            assert unit == sorted(unit, key=parts.index)
    sizes = [sum(map(len, unit)) for unit in toolchain.split_units(parts, 2)]
    assert max(sizes) - min(sizes) <= 60  # (no group bigger than the other by more than a part)


def test_split_units_of_nothing_is_nothing():
    assert toolchain.split_units([], 4) == []


#: Functions calling one another: split one per unit, each call crosses units.
CALLS = r"""
vm.module @MODULE version 0
vm.type i32
""" + counted_loop("outer", """
  %i4 = vm.call @middle(%i2)
  %i1 = vm.add.i32 %i1, %i4
""", flag="%i5") + r"""
vm.func @middle(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i2 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  %i6 = vm.const.i32 3
  vm.br ^bb1()
^bb1:
  %i4 = vm.call @inner(%i0, %i2)
  %i1 = vm.xor.i32 %i1, %i4
  %i2 = vm.add.i32 %i2, %i3
  %i5 = vm.cmp.lt.i32.s %i2, %i6
  vm.cond_br %i5, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

vm.func @inner(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.const.i32 7
  %i3 = vm.mul.i32 %i0, %i2
  %i3 = vm.add.i32 %i3, %i1
  %i4 = vm.const.i32 1000003
  %i3 = vm.rem.i32.s %i3, %i4
  %i5 = vm.const.i32 1
  %i6 = vm.cmp.lt.i32.s %i0, %i5
  vm.cond_br %i6, ^bb1(), ^bb2()
^bb1:
  vm.return %i3
^bb2:
  %i0 = vm.sub.i32 %i0, %i5
  %i3 = vm.call @inner(%i0, %i3)
  vm.return %i3
}
"""


def outcome(module, fuel=None):
    """The result, or the error with its VM stack (the module's name left out: each
    build has a module of its own), and the fuel left under limits."""
    try:
        result = module.outer(40)
    except VMError as error:
        name = module.module.name
        result = (type(error).__name__, error.code, error.message.replace(name, "M"),
                  [frame.replace(name, "M") for frame in error.stack])
    return result, module.context.fuel_remaining if fuel is not None else None


@needs_compiler
@pytest.mark.parametrize("fuel", [None, 10**9, 5000, 37])
def test_functions_split_over_units_run_as_in_one_unit_and_in_python(monkeypatch, tmp_path,
                                                                     fuel):
    """Each function in a unit of its own, and all in one: the same outcome (result,
    or error and VM stack) and the same fuel left as the Python tier's."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("VMRT_CACHE_DIR", str(cache))
    units = []  # (how many units each build made)
    real_split = toolchain.split_units
    monkeypatch.setattr(toolchain, "split_units", lambda parts, count: units.append(
        len(real_split(parts, count))) or real_split(parts, count))
    outcomes = []
    for name, units_per_job, jobs in (("apart", 8, 2), ("together", 1, 1)):
        monkeypatch.setattr(toolchain, "UNITS_PER_JOB", units_per_job)
        monkeypatch.setattr(toolchain, "processors", lambda jobs=jobs: jobs)
        program = assemble(CALLS.replace("MODULE", f"ctier_units_{name}_{fuel}"))
        monkeypatch.setenv("VMRT_TIER", "c")
        vmrt.load(program).outer(1)  # built here (a context with limits never builds)
        limits = {} if fuel is None else {"limits": vmrt.Limits(fuel=fuel, max_depth=64)}
        module = vmrt.load(program, **limits)
        assert getattr(module.function("outer").entry, "vmrt_c_ordinal", None) is not None
        outcomes.append(outcome(module, fuel))
    monkeypatch.setenv("VMRT_TIER", "python")
    limits = {} if fuel is None else {"limits": vmrt.Limits(fuel=fuel, max_depth=64)}
    outcomes.append(outcome(vmrt.load(assemble(CALLS.replace("MODULE", "ctier_units_py")),
                                      **limits), fuel))
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert units == [3, 1]


#: A fresh process: the VMVX example model under VMRT_TIER (argv: units per job,
#: jobs), once without limits and at each fuel; prints outputs and fuel left as JSON.
VMVX_RUN = r"""
import json, sys
import numpy as np
import vmrt
from vmrt.errors import VMError
from vmrt.vm.ctier import toolchain
toolchain.UNITS_PER_JOB = int(sys.argv[2])
toolchain.processors = lambda: int(sys.argv[3])
x = np.array([[1.0, 0.5, -0.5, 2.0], [-3.0, 0.25, 7.5, -1.0]], np.float32)
plain = vmrt.load(sys.argv[1])
runs = [plain.predict(x[:1]).tobytes().hex()]
for fuel in (10**9, 600, 120):
    module = vmrt.load(sys.argv[1], limits=vmrt.Limits(fuel=fuel))
    try:
        got = module.predict(x[1:]).tobytes().hex()
    except VMError as error:
        got = [type(error).__name__, int(error.code), error.message]
    runs.append([got, module.context.fuel_remaining])
print(json.dumps(runs))
"""


@needs_compiler
def test_vmvx_model_gives_the_same_outputs_and_fuel_however_built(tmp_path):
    """examples/mlp.vmfb (VMVX): built in units, in one unit, and in the Python tier,
    each in a fresh process with an empty cache, under no limits and under fuel
    that lasts and fuel that runs out."""
    ends = []
    for tier, units_per_job, jobs in (("c", 4, 2), ("c", 1, 1), ("python", 1, 1)):
        cache = tmp_path / f"cache-{tier}-{units_per_job}"
        cache.mkdir(mode=0o700)
        env = dict(os.environ, VMRT_TIER=tier, VMRT_CACHE_DIR=str(cache),
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", VMVX_RUN, str(ROOT / "examples/mlp.vmfb"),
                               str(units_per_job), str(jobs)], env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        ends.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if tier == "c":
            assert any(cache.rglob("_vmrt_c_*"))  # (the C tier ran: its build is cached)
    assert ends[0] == ends[1] == ends[2]
    assert ends[0][1][1] < 10**9 and isinstance(ends[0][3][0], list)  # (fuel spent; ran out)


@pytest.fixture
def compiler_env(monkeypatch):
    """Sets CC for this test: the compiler found is looked up again, before and after."""
    from vmrt.vm.ctier import build

    def set_cc(value: str) -> None:
        monkeypatch.setenv("CC", value)
        build.compiler_command.cache_clear()
        build.compiler_identity.cache_clear()
    yield set_cc
    monkeypatch.undo()
    build.compiler_command.cache_clear()
    build.compiler_identity.cache_clear()


@needs_compiler
def test_cc_may_carry_arguments(compiler_env, monkeypatch, tmp_path):
    from vmrt.vm.ctier.build import compiler_command

    real = compiler_command()[0]
    compiler_env(f"{real} -DVMRT_TEST_ARGUMENT=1")
    assert compiler_command()[1:] == ["-DVMRT_TEST_ARGUMENT=1"]
    monkeypatch.setenv("VMRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VMRT_TIER", "c")
    module = vmrt.load(assemble(CALLS.replace("MODULE", "ctier_cc_arguments")))
    assert module.outer(3) == vmrt.load(assemble(CALLS.replace("MODULE", "ctier_cc_py")),
                                        tier="python").outer(3)
    assert getattr(module.function("outer").entry, "vmrt_c_ordinal", None) is not None


def test_a_failing_compiler_is_a_clear_error_in_c_and_python_in_auto(compiler_env, monkeypatch,
                                                                     tmp_path, capsys):
    fake = tmp_path / "fake-cc"
    fake.write_text("#!/bin/sh\necho 'fake-cc: refused to compile' >&2\nexit 3\n")
    fake.chmod(0o755)
    compiler_env(str(fake))
    monkeypatch.setenv("VMRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VMRT_TIER", "c")
    with pytest.raises(vmrt.VmrtError, match="C tier build failed: fake-cc: refused"):
        vmrt.load(assemble(CALLS.replace("MODULE", "ctier_fake_cc_c"))).outer(3)
    monkeypatch.setenv("VMRT_TIER", "auto")
    module = vmrt.load(assemble(CALLS.replace("MODULE", "ctier_fake_cc_auto")))
    assert module.outer(3) == vmrt.load(assemble(CALLS.replace("MODULE", "ctier_fake_cc_py")),
                                        tier="python").outer(3)
    assert getattr(module.function("outer").entry, "vmrt_c_ordinal", None) is None
    assert "fake-cc: refused" in capsys.readouterr().err
    assert not list(tmp_path.glob("ctier/*/"))  # (no work directory left behind)


def test_the_environment_s_compiler_flags_reach_the_build(compiler_env, monkeypatch,
                                                          tmp_path):
    """CFLAGS from the environment are passed to the compiler, as setuptools passed
    them (and they are part of the build's name: build.BUILD_ENVIRONMENT)."""
    from vmrt.vm.ctier.build import compiler_command

    if compiler_command() is None:
        pytest.skip("needs a C compiler")
    monkeypatch.setenv("CFLAGS", "--vmrt-no-such-option")
    compiler_env(compiler_command()[0])
    monkeypatch.setenv("VMRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VMRT_TIER", "c")
    with pytest.raises(vmrt.VmrtError, match="vmrt-no-such-option"):
        vmrt.load(assemble(CALLS.replace("MODULE", "ctier_env_cflags"))).outer(3)


#: A fresh process interrupted (SIGINT, as Ctrl-C) while its build's compilers run
#: (argv: the file the compiler script writes its process ids to).
INTERRUPTED_BUILD = r"""
import os, signal, sys, threading, time
import vmrt
from vmrt.asm import assemble
pids = sys.argv[1]
def interrupt():
    while not os.path.exists(pids) or len(open(pids).read().split()) < 2:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt, daemon=True).start()
try:
    vmrt.load(assemble(sys.stdin.read()), tier="c").outer(1)
except KeyboardInterrupt:
    print("interrupted")
"""


@needs_compiler
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_an_interrupted_build_stops_its_compilers(tmp_path):
    """Ctrl-C during a build: the compilers running (and what they started) stop with
    it, rather than running on, or the interrupt waiting for them."""
    pids = tmp_path / "pids"
    script = tmp_path / "slow-cc"
    script.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nsleep 60 &\necho $! >> '{pids}'\n"
                      "wait\nexit 1\n")
    script.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = dict(os.environ, CC=str(script), VMRT_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_BUILD, str(pids)], env=env,
                          input=CALLS.replace("MODULE", "ctier_interrupted"),
                          capture_output=True, text=True, timeout=50)
    assert done.stdout.split() == ["interrupted"], done.stderr
    for pid in map(int, pids.read_text().split()):
        assert stopped(pid), f"process {pid} runs on"


def stopped(pid: int, limit: float = 10.0) -> bool:
    """Whether process `pid` ends (or is a zombie) within `limit` seconds (a limit to
    catch a process running on, as the compilers' `sleep 60` would)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return True
        if "zombie" in status:
            return True
        time.sleep(0.05)
    return False
