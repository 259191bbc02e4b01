"""The C tier (vmrt/vm/ctier): the same results, errors and VM stacks as the Python
tier, bit for bit; calls it does not model fall back; builds are cached on disk.

The rest of the suite runs the Python tier (tests/conftest.py); `VMRT_TIER=c pytest
tests/vm` runs the differential tests in C as well.
"""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.errors import DepthExceeded, StatusCode, VMError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.ctier.build import compiler_identity

pytestmark = pytest.mark.skipif(compiler_identity() is None, reason="needs a C compiler")

PROGRAM = r"""
vm.module @ctier version 0
vm.type i32
vm.type i64
vm.type f32
vm.type !vm.buffer
vm.type !vm.list<!vm.buffer>
vm.rodata[0] = 01000000020000000300000004000000

vm.export @loop_sum
vm.func @loop_sum(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i2 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i2
  %i2 = vm.add.i32 %i2, %i3
  %i4 = vm.cmp.lt.i32.s %i2, %i0
  vm.cond_br %i4, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

vm.func @twice(%i0:1: i64) -> (i64) {
^bb0:
  %i2:3 = vm.add.i64 %i0:1, %i0:1
  vm.return %i2:3
}

vm.export @call_wide
vm.func @call_wide(%i0:1: i64) -> (i64) {
^bb0:
  %i0:1 = vm.call @twice(%i0:1)
  %i0:1 = vm.call @twice(%i0:1)
  vm.return %i0:1
}

vm.export @divide
vm.func @divide(%i0: i32, %i1: i32) -> (i32, i32) {
^bb0:
  %i2 = vm.div.i32.s %i0, %i1
  %i3 = vm.rem.i32.s %i0, %i1
  vm.return %i2, %i3
}

vm.export @floats
vm.func @floats(%i0: f32, %i1: f32) -> (f32, f32, f32, i32) {
^bb0:
  %i2 = vm.fma.f32 %i0, %i1, %i0
  %i3 = vm.div.f32 %i0, %i1
  %i4 = vm.sqrt.f32 %i1
  %i5 = vm.cast.f32.si32 %i3
  vm.return %i2, %i3, %i4, %i5
}

vm.export @buffer_sum
vm.func @buffer_sum(%r0: !vm.buffer, %i0:1: i64) -> (f32) {
^bb0:
  %i2:3 = vm.const.i64.zero
  %i4:5 = vm.const.i64 1
  %i6 = vm.const.f32.zero
  vm.br ^bb1()
^bb1:
  %i7 = vm.buffer.load.f32 %r0, %i2:3
  %i6 = vm.add.f32 %i6, %i7
  %i2:3 = vm.add.i64 %i2:3, %i4:5
  %i8 = vm.cmp.lt.i64.s %i2:3, %i0:1
  vm.cond_br %i8, ^bb1(), ^bb2()
^bb2:
  vm.return %i6
}

vm.export @store
vm.func @store(%r0: !vm.buffer, %i0:1: i64, %i2: i32) -> () {
^bb0:
  vm.buffer.store.i32 %i2, %r0, %i0:1
  vm.return
}

vm.export @binding_sum
vm.func @binding_sum(%r0: !vm.list<!vm.buffer>, %i0: i32) -> (i32) {
^bb0:
  %r1 = vm.list.get.ref %r0, %i0 : !vm.buffer
  %i2:3 = vm.const.i64.zero
  %i1 = vm.buffer.load.i32 %r1, %i2:3
  %r2 = vm.const.ref.rodata 0
  %i4:5 = vm.const.i64 3
  %i6 = vm.buffer.load.i32 %r2, %i4:5
  %i1 = vm.add.i32 %i1, %i6
  vm.return %i1
}

vm.export @scratch
vm.func @scratch(%i0:1: i64) -> (i64) {
^bb0:
  %i2 = vm.const.i32 8
  %r0 = vm.buffer.alloc %i0:1, %i2
  %i3 = vm.const.i32 7
  %i4:5 = vm.const.i64.zero
  vm.buffer.fill.i32 %r0, %i4:5, %i0:1, %i3
  %i6:7 = vm.buffer.length %r0
  vm.return %i6:7
}

vm.export @refuse
vm.func @refuse(%i0: i32) -> () {
^bb0:
  vm.fail %i0, "refused by the module"
}

vm.export @recurse
vm.func @recurse(%i0: i32) -> (i32) {
^bb0:
  %i0 = vm.call @recurse(%i0)
  vm.return %i0
}
"""


@pytest.fixture(scope="module")
def program() -> bytes:
    return assemble(PROGRAM)


def load(program: bytes, tier: str, monkeypatch):
    monkeypatch.setenv("VMRT_TIER", tier)
    return vmrt.load(program)


@pytest.fixture
def tiers(program, monkeypatch):
    """(C tier module, Python tier module) of the program."""
    c = load(program, "c", monkeypatch)
    python = load(program, "python", monkeypatch)
    return c, python


def bits(value):
    if isinstance(value, float):
        return ("f", struct.pack("<d", value))
    if isinstance(value, tuple):
        return tuple(bits(v) for v in value)
    return value


def outcome(fn, *args):
    try:
        return "ok", bits(fn(*args))
    except VMError as error:
        return "error", type(error).__name__, error.code, error.message, error.stack


def test_functions_run_in_c(tiers):
    c, python = tiers
    entry = c.function("loop_sum").entry
    assert getattr(entry, "vmrt_c_ordinal", None) is not None
    assert getattr(python.function("loop_sum").entry, "vmrt_c_ordinal", None) is None


@pytest.mark.parametrize("name, args", [
    ("loop_sum", (10,)), ("loop_sum", (100_000,)), ("loop_sum", (-5,)),
    ("call_wide", (2**62 + 3,)), ("call_wide", (-(2**63),)),
    ("divide", (7, -2)), ("divide", (-(2**31), -1)), ("divide", (5, 0)),
    ("floats", (1.5, 3.0)), ("floats", (-0.0, 0.0)), ("floats", (math.inf, -2.0)),
    ("floats", (3e38, 3e38)), ("floats", (float("nan"), 1.0)),
    ("scratch", (5,)), ("scratch", (-1,)), ("scratch", (0,)),
    ("refuse", (0,)), ("refuse", (3,)), ("refuse", (1 << 20 | 9,)),
])
def test_same_outcome_as_python_tier(tiers, name, args):
    c, python = tiers
    assert outcome(c.function(name), *args) == outcome(python.function(name), *args)


@pytest.mark.parametrize("offset", [0, 3, 4, -1, 2**40])
def test_buffer_access_and_errors_match(tiers, offset):
    c, python = tiers
    data = struct.pack("<4f", 1.25, -2.5, 3.0, 1e30)
    results = []
    for module in (c, python):
        buffer = VMBuffer.from_bytes(data)
        results.append((outcome(module.function("buffer_sum"), buffer, 4),
                        outcome(module.function("store"), buffer, offset, -7),
                        bytes(buffer.view)))
    assert results[0] == results[1]


def test_read_only_buffer_refused_alike(tiers):
    c, python = tiers
    errors = [outcome(m.function("store"), VMBuffer.from_bytes(b"\0" * 8, mutable=False), 0, 1)
              for m in (c, python)]
    assert errors[0] == errors[1] and errors[0][2] == StatusCode.PERMISSION_DENIED


def test_lists_of_buffers_and_rodata(tiers):
    c, python = tiers
    from vmrt.vm.list import VMList
    from vmrt.vm.ref import as_type_def

    def bindings():
        lst = VMList(as_type_def("!vm.buffer"), 2)
        lst.push_ref(VMBuffer.from_bytes(struct.pack("<i", 40)))
        lst.push_ref(None)
        return lst

    for index in (0, 1, 2, -1):
        assert outcome(c.function("binding_sum"), bindings(), index) == \
            outcome(python.function("binding_sum"), bindings(), index)
    assert c.function("binding_sum")(bindings(), 0) == 44


def test_unmodelled_ref_falls_back_to_python(tiers):
    c, python = tiers
    from vmrt.vm.list import VMList
    from vmrt.vm.ref import as_type_def

    variant = VMList(as_type_def("?"), 1)  # a variant list: the C tier models none
    variant.push_ref(VMBuffer.from_bytes(struct.pack("<i", 1)))
    assert outcome(c.function("binding_sum"), variant, 0) == \
        outcome(python.function("binding_sum"), variant, 0)


def test_unbounded_recursion_is_a_depth_error(tiers):
    c, _ = tiers
    with pytest.raises(DepthExceeded) as caught:
        c.function("recurse")(1)
    assert caught.value.stack[0].startswith("ctier.recurse")
    assert len(caught.value.one_line()) < 1000


def test_error_stack_names_c_frames_then_python_callers(tiers):
    c, python = tiers
    for module in (c, python):
        with pytest.raises(VMError) as caught:
            module.function("divide")(1, 0)
        assert caught.value.stack and caught.value.stack[0].startswith("ctier.divide+")
        assert "integer division by zero" in caught.value.message


def test_bad_tier_name_is_a_clear_error(program, monkeypatch):
    monkeypatch.setenv("VMRT_TIER", "fast")
    with pytest.raises(vmrt.VmrtError, match="VMRT_TIER"):
        vmrt.load(program)


def test_two_threads_share_a_c_module(tiers):
    import threading

    c, python = tiers
    results = []

    def work():
        results.append(c.function("loop_sum")(200_000))
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [python.function("loop_sum")(200_000)] * 2


def test_cached_build_loads_without_a_compiler(program, tmp_path, monkeypatch):
    """A second process finds the build in VMRT_CACHE_DIR: no compiler needed."""
    path = tmp_path / "ctier.vmfb"
    path.write_bytes(program)
    script = ("import sys, vmrt; m = vmrt.load(sys.argv[1]); "
              "print(m.function('loop_sum')(1000), "
              "getattr(m.function('loop_sum').entry, 'vmrt_c_ordinal', None) is not None)")
    env = dict(os.environ, VMRT_TIER="auto", VMRT_CACHE_DIR=str(tmp_path / "cache"))
    first = subprocess.run([sys.executable, "-c", script, str(path)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert first.stdout.split() == ["499500", "True"], first.stderr
    env["CC"] = "/nonexistent/cc"
    second = subprocess.run([sys.executable, "-c", script, str(path)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert second.stdout.split() == ["499500", "True"], second.stderr
    assert second.stderr == ""
    env["VMRT_CACHE_DIR"] = str(tmp_path / "empty")
    third = subprocess.run([sys.executable, "-c", script, str(path)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert third.stdout.split() == ["499500", "False"], third.stderr
    assert third.stderr.count("\n") == 1 and "Python tier" in third.stderr


# -- limits ---------------------------------------------------------------------------------
def limited(program, tier, monkeypatch, **limits):
    monkeypatch.setenv("VMRT_TIER", tier)
    return vmrt.load(program, limits=vmrt.Limits(**limits))


@pytest.mark.parametrize("fuel", [1, 7, 50, 1000, 123_457])
def test_same_fuel_stops_both_tiers_at_the_same_point(program, monkeypatch, fuel):
    outcomes = []
    for tier in ("c", "python"):
        module = limited(program, tier, monkeypatch, fuel=fuel)
        outcomes.append((outcome(module.function("loop_sum"), 100_000),
                         outcome(module.function("call_wide"), 5),
                         module.context.fuel_remaining if hasattr(module, "context") else None))
    assert outcomes[0] == outcomes[1]


def test_limits_run_in_c(program, monkeypatch):
    load(program, "c", monkeypatch).function("loop_sum")  # built (limited calls never build)
    module = limited(program, "c", monkeypatch, fuel=10**9)
    fn = module.function("loop_sum")
    assert fn(1000) == 499500
    assert getattr(fn.entry, "vmrt_c_ordinal", None) is not None or \
        "vmrt_c_ordinal" in getattr(fn.entry, "__dict__", {})


def test_timeout_stops_a_c_loop(program, monkeypatch):
    import time

    module = limited(program, "c", monkeypatch, timeout=0.2)
    start = time.monotonic()
    with pytest.raises(vmrt.DeadlineExceeded):
        module.function("loop_sum")(2**31 - 1)  # ~ seconds of work without a deadline
    assert time.monotonic() - start < 2.0


def test_cancel_from_another_thread_stops_a_c_loop(program, monkeypatch):
    import threading

    module = limited(program, "c", monkeypatch, fuel=10**15)
    timer = threading.Timer(0.2, module.context.cancel)
    timer.start()
    try:
        with pytest.raises(vmrt.Cancelled):
            for _ in range(100):
                module.function("loop_sum")(2**31 - 1)
    finally:
        timer.cancel()


def test_memory_limit_holds_for_c_allocations(program, monkeypatch):
    outcomes = []
    for tier in ("c", "python"):
        module = limited(program, tier, monkeypatch, max_memory=1 << 16)
        outcomes.append((outcome(module.function("scratch"), 1 << 20),
                         outcome(module.function("scratch"), 1 << 10)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][1] == "MemoryLimitExceeded"


def test_depth_limit_same_in_both_tiers(program, monkeypatch):
    outcomes = [outcome(limited(program, tier, monkeypatch, max_depth=50).function("recurse"), 1)
                for tier in ("c", "python")]
    assert outcomes[0][:4] == outcomes[1][:4]


def test_limited_contexts_never_wait_for_a_build_in_auto(tmp_path, monkeypatch):
    """A build takes seconds no deadline allows for: under limits, the Python tier
    runs until the build exists (made by a context without limits)."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("VMRT_CACHE_DIR", str(cache))
    fresh = assemble(PROGRAM.replace("@ctier", "@ctier_fresh"))
    monkeypatch.setenv("VMRT_TIER", "auto")
    limited_fn = vmrt.load(fresh, limits=vmrt.Limits(timeout=5)).function("loop_sum")
    assert limited_fn(10) == 45
    assert "vmrt_c_ordinal" not in limited_fn.entry.__dict__
    assert vmrt.load(fresh).function("loop_sum")(10) == 45  # builds
    limited_fn = vmrt.load(fresh, limits=vmrt.Limits(timeout=5)).function("loop_sum")
    assert limited_fn(10) == 45
    assert "vmrt_c_ordinal" in limited_fn.entry.__dict__
