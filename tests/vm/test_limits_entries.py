"""Calls from outside generated code under limits, through the meter's one host
entry (vmrt.vm.limits, Meter.entry): straight-line exports are charged there,
exactly, in both tiers, and a cancel or a deadline refuses them; each outermost call
gets its deadline at its start, a yielding one keeps it across threads, and a
nested call (a native module re-entering the context) continues from its import
call site's depth; calls into C keep a whole slice from one call to the next."""

from __future__ import annotations

import threading
import time

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.errors import StatusCode, VMError
from vmrt.vm.call_guard import current_guard
from vmrt.vm.limits import Limits

SOURCE = """
vm.module @entries version 0
vm.type i32
vm.import @host.tick cconv "0i_i"
vm.global.i32 private mutable @count

// Straight-line: load, const, add, store, return (5 instructions).
vm.export @bump
vm.func @bump() -> (i32) {
^bb0:
  %i0 = vm.global.load.i32 @count
  %i1 = vm.const.i32 1
  %i0 = vm.add.i32 %i0, %i1
  vm.global.store.i32 %i0, @count
  vm.return %i0
}

// A loop the C tier compiles: 3 + 3 per iteration + 1 instructions.
vm.export @sum_to
vm.func @sum_to(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i2 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i2
  %i3 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i3, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

// Calls the import (which moves CUR), then yields: a generator.
vm.export @tick_and_yield
vm.func @tick_and_yield(%i0: i32) -> (i32) {
^bb0:
  %i0 = vm.call @host.tick(%i0)
  vm.yield ^bb1()
^bb1:
  vm.return %i0
}

// Calls the import, then counts to %i0 (sum_to): cannot yield.
vm.export @tick_then_count
vm.func @tick_then_count(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @host.tick(%i0)
  %i1 = vm.call @sum_to(%i0)
  vm.return %i1
}

// Calls the import, yields, then counts to %i0 (sum_to).
vm.export @tick_yield_count
vm.func @tick_yield_count(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @host.tick(%i0)
  vm.yield ^bb1()
^bb1:
  %i1 = vm.call @sum_to(%i0)
  vm.return %i1
}
"""
BUMP_COST = 5


class Host(vmrt.NativeModule, name="host", version=0):
    def __init__(self, delay: float = 0.0):
        self.delay = delay

    @vmrt.export("0i_i")
    def tick(self, x):
        time.sleep(self.delay)
        return x + 1


@pytest.fixture(scope="module")
def program() -> bytes:
    return assemble(SOURCE)


def context(program: bytes, tier: str = "python", host: Host | None = None,
            **limits) -> vmrt.Context:
    """A context of the module in `tier`, with Limits(**limits) (none without)."""
    return vmrt.Context(modules=[host or Host(), vmrt.load_module(program)],
                        limits=Limits(**limits) if limits else None, tier=tier)


def needs_c_build(program: bytes) -> None:
    """Builds the module's C (a context with limits never builds), or skips."""
    from vmrt.vm.ctier.build import compiler_identity

    if compiler_identity() is None:
        pytest.skip("needs a C compiler")
    context(program, "c").function("entries.sum_to")(3)


def tiers(program: bytes, tier: str) -> str:
    if tier == "c":
        needs_c_build(program)
    return tier


# -- straight-line entries ----------------------------------------------------------------------
@pytest.mark.parametrize("tier", ["python", "c"])
def test_straight_line_calls_spend_exactly_their_cost(program, tier):
    budget = 5000 * BUMP_COST + 3
    ctx = context(program, tiers(program, tier), fuel=budget)
    bump = ctx.function("entries.bump")
    assert hasattr(bump.entry, "vmrt_c_ordinal") == (tier == "c")
    for calls in range(1, 5001):
        assert bump() == calls
        if calls % 997 == 0:
            assert ctx.fuel_remaining == budget - calls * BUMP_COST
    with pytest.raises(VMError) as info:
        bump()
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert ctx.fuel_remaining == 3
    ctx.refuel(BUMP_COST - 3)
    assert bump() == 5001
    assert ctx.fuel_remaining == 0


@pytest.mark.parametrize("tier", ["python", "c"])
@pytest.mark.parametrize("stop, code", [("cancel", StatusCode.CANCELLED),
                                        ("deadline", StatusCode.DEADLINE_EXCEEDED)])
def test_a_cancel_or_a_deadline_refuses_straight_line_calls(program, tier, stop, code):
    ctx = context(program, tiers(program, tier), fuel=10**6)
    bump = ctx.function("entries.bump")
    assert hasattr(bump.entry, "vmrt_c_ordinal") == (tier == "c")
    for _ in range(10):
        bump()
    if stop == "cancel":
        ctx.cancel()
    else:
        ctx.set_deadline(time.monotonic() - 1)
    with pytest.raises(VMError) as info:
        bump()
    assert info.value.code == code
    assert "entries.bump" in str(info.value)
    assert ctx.fuel_remaining == 10**6 - 10 * BUMP_COST
    ctx.clear_cancel()
    ctx.set_deadline(None)
    assert bump() == 11


# -- yielding exports --------------------------------------------------------------------------
def test_a_yielding_export_leaves_the_depth_as_it_found_it(program):
    """Its import call site moves CUR; the entry gives it back when the generator
    ends: a hundred calls fit in a depth of 2, and each is an outermost call (the
    cancel refuses the next one at its start)."""
    ctx = context(program, max_depth=2)
    tick = ctx.function("entries.tick_and_yield")
    assert [tick(i) for i in range(100)] == list(range(1, 101))
    ctx.cancel()
    with pytest.raises(VMError) as info:
        tick(0)
    assert info.value.code == StatusCode.CANCELLED


@pytest.mark.parametrize("name", ["tick_yield_count", "tick_then_count"])
def test_a_call_counts_its_timeout_from_its_start(program, name):
    """Its entry starts its deadline: a slow import before its first check point
    counts (timed from that check point, the call would end well inside it)."""
    host = Host()
    ctx = context(program, host=host, timeout=0.2)
    count = ctx.function(f"entries.{name}")
    assert count(3000) == 3000
    host.delay = 0.3
    with pytest.raises(VMError) as info:
        count(3000)  # (its slices refill, each a check point)
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    assert current_guard() is None  # (the call's guard went with it)
    host.delay = 0
    assert count(10) == 10  # (the next call has its own deadline)


def test_a_suspended_call_keeps_its_deadline_on_another_thread(program):
    """The call's guard is current only while it runs: calls made while it is
    suspended have their own; resumed on another thread, it keeps its deadline."""
    ctx = context(program, timeout=0.2)
    count = ctx.function("entries.tick_yield_count")
    call = count.invoke_async(300_000)
    assert call.resume() is False  # (suspended at its yield)
    assert current_guard() is None
    assert count(10) == 10  # (between its steps: a call of its own, not late)
    time.sleep(0.25)
    assert count(10) == 10  # (its own deadline, not the suspended call's)
    errors = []

    def resume():
        try:
            call.wait()
        except VMError as error:
            errors.append(error.code)
    thread = threading.Thread(target=resume)
    thread.start()
    thread.join()
    assert errors == [StatusCode.DEADLINE_EXCEEDED]


# -- host re-entry -------------------------------------------------------------------------------
def test_a_native_module_re_entering_continues_from_the_call_site_depth(program):
    """A call from the import (nested in the context's call on this thread) runs one
    frame deeper than the import call site, and the depth goes back after it: with
    max_depth 3, tick_then_count (depth 1) -> tick -> sum_to (depth 2) fits, as
    many times as the import re-enters."""
    calls = []

    class Reentering(Host):
        @vmrt.export("0i_i")
        def tick(self, x):
            calls.extend(ctx.function("entries.sum_to")(5) for _ in range(3))
            return x + 1
    ctx = context(program, host=Reentering(), max_depth=2)
    assert ctx.function("entries.tick_then_count")(4) == 4
    assert calls == [5, 5, 5]
    deep = context(program, host=Reentering(), max_depth=1)
    with pytest.raises(VMError) as info:
        deep.function("entries.tick_then_count")(4)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED


# -- slices ---------------------------------------------------------------------------------
def refills_of(ctx, calls) -> int:
    """How many times the context's meter refilled its slice during `calls()`."""
    meter, counted = ctx.meter, []
    refill = meter.refill

    def counting(*args, **kwargs):
        counted.append(1)
        return refill(*args, **kwargs)
    meter.refill = counting  # (what the C tier's code calls back)
    try:
        calls()
    finally:
        del meter.refill
    return len(counted)


def test_calls_into_c_under_a_timeout_keep_a_whole_slice(program):
    """Calls of a few thousand instructions refill once a slice, not each call."""
    ctx = context(program, tiers(program, "c"), fuel=10**12, timeout=60)
    sum_to = ctx.function("entries.sum_to")
    assert hasattr(sum_to.entry, "vmrt_c_ordinal")
    for _ in range(20):  # (the slice grows to its pace)
        sum_to(3000)
    assert refills_of(ctx, lambda: [sum_to(3000) for _ in range(50)]) <= 5
    ctx.cancel()  # (and yet each call checks for a stop at its start)
    with pytest.raises(VMError) as info:
        sum_to(3)
    assert info.value.code == StatusCode.CANCELLED
