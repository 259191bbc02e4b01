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

from tests.vm.ctier_programs import LOOP_SUM

pytestmark = pytest.mark.skipif(compiler_identity() is None, reason="needs a C compiler")

PROGRAM = r"""
vm.module @ctier version 0
vm.type i32
vm.type i64
vm.type f32
vm.type !vm.buffer
vm.type !vm.list<!vm.buffer>
vm.rodata[0] = 01000000020000000300000004000000
""" + LOOP_SUM + r"""
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


def test_a_ref_of_the_wrong_type_is_named_alike_in_both_tiers(tiers):
    from vmrt.vm.list import VMList
    from vmrt.vm.ref import as_type_def

    errors = [outcome(m.function("buffer_sum"), VMList(as_type_def("i32"), 1), 1)
              for m in tiers]
    assert errors[0] == errors[1]
    assert errors[0][3] == "vm.buffer.load.f32: ref operand of the wrong type (!vm.list)"


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


INIT_PROGRAM = r"""
vm.module @ctier_init version 0
vm.type i32
vm.global.i32 mutable @total

vm.export @__init
vm.func @__init() -> () {
^bb0:
  %i0 = vm.const.i32 10
  %i1 = vm.call @loop_sum(%i0)
  vm.global.store.i32 %i1, @total
  vm.return
}

vm.export @total
vm.func @total() -> (i32) {
^bb0:
  %i0 = vm.global.load.i32 @total
  vm.return %i0
}
""" + PROGRAM[PROGRAM.index("vm.export @loop_sum"):PROGRAM.index("vm.func @twice")]


@pytest.mark.parametrize("limits", [None, vmrt.Limits(fuel=10**9)], ids=["plain", "limits"])
def test_init_runs_in_python_in_auto_and_later_calls_choose_their_tier(monkeypatch, limits):
    """`__init` runs once per context: in auto neither it nor what it calls looks at the
    C tier; afterwards the same functions run in C as usual."""
    program = assemble(INIT_PROGRAM)
    monkeypatch.setenv("VMRT_TIER", "auto")
    with vmrt.load(program) as built:  # builds its C (a context with limits never builds)
        built.loop_sum(1)
    from vmrt.vm.ctier import analysis
    looked_at = []
    real = analysis.may_compile
    monkeypatch.setattr(analysis, "may_compile",
                        lambda module, ordinal: looked_at.append(ordinal) or real(module, ordinal))
    m = vmrt.load(program, limits=limits)
    assert looked_at == [] and m.total() == 45
    assert m.loop_sum(10) == 45
    assert getattr(m.function("loop_sum").entry, "vmrt_c_ordinal", None) is not None
    assert looked_at


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
    """The deadline ends a C loop part of the way through, not at its end: the fuel
    it spent (fuel counts the work done) is less than the whole loop costs."""
    import time

    budget, n = 10**15, 2**31 - 1

    def run(count: int, **limits) -> int:
        """Fuel spent by loop_sum(count) under `limits`."""
        module = limited(program, "c", monkeypatch, fuel=budget, **limits)
        module.function("loop_sum")(count)
        return budget - module.context.fuel_remaining
    per_thousand = run(2000) - run(1000)
    whole_loop = run(1000) + per_thousand * (n - 1000) // 1000
    module = limited(program, "c", monkeypatch, fuel=budget, timeout=0.2)
    start = time.monotonic()
    with pytest.raises(vmrt.DeadlineExceeded):
        module.function("loop_sum")(n)
    assert time.monotonic() - start < 60  # (only a hang comes near)
    assert 0 < budget - module.context.fuel_remaining < whole_loop


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


@pytest.mark.parametrize("bound", [None, 1 << 16], ids=["unbounded", "bounded"])
def test_c_allocations_are_charged_only_to_a_bounded_meter(program, monkeypatch, bound):
    """A buffer made in C dies with the C call making it: with no memory bound it is
    not counted (no call back into Python for it); with one it is charged, then given
    back, and none is held once the call returns either way."""
    from vmrt.vm.memory_limit import MemoryCounter

    charged = []
    real = MemoryCounter.charge_memory
    monkeypatch.setattr(MemoryCounter, "charge_memory",
                        lambda self, nbytes: charged.append(nbytes) or real(self, nbytes))
    module = limited(program, "c", monkeypatch, fuel=10**6, max_memory=bound)
    assert "vmrt_c_ordinal" in module.function("scratch").entry.__dict__
    assert module.function("scratch")(0) == 0
    with pytest.raises(vmrt.VMError, match="out-of-bounds"):  # (fills 4 bytes an element)
        module.function("scratch")(1000)
    assert charged == ([] if bound is None else [0, 1000])
    assert module.context.memory_in_use == 0


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


# -- limits: the entries into C (runtime.straight_entry) ---------------------------------------
def limited_in_both_tiers(program, monkeypatch, **limits):
    """(C tier module, Python tier module) in contexts with `limits`."""
    load(program, "c", monkeypatch).function("loop_sum")  # built (limited calls never build)
    return [limited(program, tier, monkeypatch, **limits) for tier in ("c", "python")]


LIMITED_CALLS = [
    ("loop_sum", (100,)), ("call_wide", (2**62 + 3,)), ("divide", (7, 0)),
    ("floats", (1.5, 3.0)), ("floats", (float("nan"), 1.0)), ("scratch", (5,)),
    ("scratch", (1 << 20,)), ("refuse", (3,)), ("recurse", (1,)),
    ("buffer_sum", (VMBuffer.from_bytes(struct.pack("<4f", 1.25, -2.5, 3.0, 1e30)), 4)),
]


@pytest.mark.parametrize("fuel", [0, 1, 2, 9, 40, 10**6])
def test_limited_calls_end_alike_in_both_tiers(program, monkeypatch, fuel):
    """Outcome, VM stack and fuel left, for scalar and ref arguments, fuel running
    out at the entry (a straight-line function pays there) or in C, and failures
    of C's own (the depth, memory and the module's)."""
    ends = []
    for module in limited_in_both_tiers(program, monkeypatch, fuel=fuel, max_depth=40,
                                        max_memory=1 << 16):
        ends.append([(outcome(module.function(name), *args), module.context.fuel_remaining)
                     for name, args in LIMITED_CALLS])
    assert ends[0] == ends[1]


def test_a_call_refused_at_entry_names_its_function_in_both_tiers(program, monkeypatch):
    """A cancelled context refuses a call before it runs, naming the function (a C
    function that charges for itself used to give no VM stack)."""
    refused = []
    for module in limited_in_both_tiers(program, monkeypatch, fuel=10**6):
        module.context.cancel()
        refused.append([outcome(module.function(name), *args)
                        for name, args in (("loop_sum", (10,)), ("call_wide", (3,)))])
    assert refused[0] == refused[1]
    assert refused[0][0][1:] == ("Cancelled", StatusCode.CANCELLED,
                                 "the context was cancelled", ["ctier.loop_sum"])


def test_each_c_call_has_its_own_timeout(program, monkeypatch):
    module = limited(program, "c", monkeypatch, timeout=0.2)
    for _ in range(2):  # each starts its own (at its first refill)
        with pytest.raises(vmrt.DeadlineExceeded):
            module.function("loop_sum")(2**31 - 1)
    assert module.function("loop_sum")(1000) == 499500


def test_an_argument_c_refuses_leaves_the_fuel(program, monkeypatch):
    load(program, "c", monkeypatch).function("loop_sum")
    module = limited(program, "c", monkeypatch, fuel=1000)
    entry = module.function("loop_sum").entry  # (Function.__call__ would convert it)
    with pytest.raises(OverflowError):
        entry(2**40)
    assert module.context.fuel_remaining == 1000
    assert entry(10) == 45


MIXED = r"""
vm.module @mixed version 0
vm.type i32
vm.import @host.twice cconv "0i_i"

// Calls an import, so it runs in Python; its callees run in C.
vm.export @twice_then_sum
vm.func @twice_then_sum(%i0: i32) -> (i32) {
^bb0:
  %i0 = vm.call @host.twice(%i0)
  %i0 = vm.call @sum_to(%i0)
  %i0 = vm.call @plus_one(%i0)
  vm.return %i0
}

vm.export @plus_one
vm.func @plus_one(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 1
  %i0 = vm.add.i32 %i0, %i1
  vm.return %i0
}
""" + PROGRAM[PROGRAM.index("vm.export @loop_sum"):PROGRAM.index("vm.func @twice")].replace(
    "@loop_sum", "@sum_to")


class Twice(vmrt.NativeModule, name="host", version=0):
    @vmrt.export("0i_i")
    def twice(self, x):
        return 2 * x


def mixed_context(monkeypatch, tier: str, **limits):
    program = assemble(MIXED)
    monkeypatch.setenv("VMRT_TIER", "c")
    vmrt.Context(modules=[Twice(), vmrt.load_module(program)]).function("mixed.plus_one")(1)
    monkeypatch.setenv("VMRT_TIER", tier)
    return vmrt.Context(modules=[Twice(), vmrt.load_module(program)],
                        limits=vmrt.Limits(**limits))


def test_python_tier_code_calling_c_under_limits(monkeypatch):
    """Generated code calls a C function with its depth, charged by itself (a loop)
    or by the caller's block (straight-line): fuel and depth as in the Python tier."""
    ends = []
    for tier in ("c", "python"):
        for fuel in (0, 5, 30, 10**6):
            ctx = mixed_context(monkeypatch, tier, fuel=fuel, max_depth=2)
            ends.append((fuel, outcome(ctx.function("mixed.twice_then_sum"), 6),
                         ctx.fuel_remaining))
        callees = ctx.module("mixed").namespace  # (of the call that ran to the end)
        assert all(hasattr(callees[f"F{i}"], "vmrt_c_ordinal") == (tier == "c") for i in (1, 2))
    assert ends[:4] == ends[4:]
    assert ends[-1][1] == ("ok", 67)


@pytest.mark.parametrize("fuel", [0, 7, 100, 5000, 10_000])
def test_mixed_calls_run_out_where_the_python_tier_does(monkeypatch, fuel):
    """Straight-line calls (paid at their host entry) and calls that charge, in C or
    in Python, stop at the same call, with the same fuel left, in both tiers."""
    runs = []
    for tier in ("c", "python"):
        ctx = mixed_context(monkeypatch, tier, fuel=fuel)
        calls = [(ctx.function(f"mixed.{name}"), args) for name, args in
                 (("plus_one", (3,)), ("sum_to", (30,)), ("plus_one", (4,)),
                  ("twice_then_sum", (9,)))]
        runs.append([(outcome(fn, *args), ctx.fuel_remaining)
                     for _ in range(100) for fn, args in calls])
    assert runs[0] == runs[1]


def test_calls_from_another_thread_spend_exactly_their_fuel(program, monkeypatch):
    import threading

    (module, _) = limited_in_both_tiers(program, monkeypatch, fuel=100_000)
    call_wide = module.function("call_wide")
    call_wide(3)
    cost = 100_000 - module.context.fuel_remaining
    thread = threading.Thread(target=lambda: [call_wide(3) for _ in range(10)])
    thread.start()
    thread.join()
    assert module.context.fuel_remaining == 100_000 - 11 * cost
