"""Loops under limits (vmrt.vm.codegen, Loop: self-loops, simple cycles of blocks,
nested loops) are charged per block as the dispatch charges them, so Python loops
change nothing a host can see: fuel runs out at the very block, with the same
error, globals and fuel left, as when every block runs from the dispatch; a failing
block leaves the same fuel; REFILL (where deadlines and cancellation are checked) is
asked as often; a call stopped by its deadline or a cancel has spent exactly the
fuel that runs out at the same point; and the C tier agrees."""

from __future__ import annotations

import threading

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.errors import VMError
from vmrt.vm import codegen
from vmrt.vm.limits import Limits, Meter

# Each block of each loop stores to @steps, so the global tells how far a run got.
SOURCE = """
vm.module @loops version 0
vm.type i32
vm.global.i32 private mutable @steps

vm.export @steps
vm.func @steps() -> (i32) {
^bb0:
  %i0 = vm.global.load.i32 @steps
  vm.return %i0
}

// The test, then the body: cmp; cond_br / add; br.
vm.export @two_blocks
vm.func @two_blocks(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  vm.global.store.i32 %i1, @steps
  %i2 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i2, ^bb2(), ^bb3()
^bb2:
  %i1 = vm.add.i32 %i1, %i3
  vm.br ^bb1()
^bb3:
  vm.return %i1
}

// A do-while of three blocks: the body, a step, the test at the end.
vm.export @three_blocks
vm.func @three_blocks(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i3
  vm.br ^bb2()
^bb2:
  vm.global.store.i32 %i1, @steps
  vm.br ^bb3()
^bb3:
  %i2 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i2, ^bb1(), ^bb4()
^bb4:
  vm.return %i1
}

// %i0 rounds of an inner loop of %i1 iterations; @steps counts inner iterations.
vm.export @nested
vm.func @nested(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i4 = vm.const.i32.zero
  %i2 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i5 = vm.const.i32.zero
  %i7 = vm.cmp.lt.i32.s %i4, %i0
  vm.cond_br %i7, ^bb2(), ^bb5()
^bb2:
  %i6 = vm.cmp.lt.i32.s %i5, %i1
  vm.cond_br %i6, ^bb3(), ^bb4()
^bb3:
  %i5 = vm.add.i32 %i5, %i3
  %i2 = vm.add.i32 %i2, %i3
  vm.global.store.i32 %i2, @steps
  vm.br ^bb2()
^bb4:
  %i4 = vm.add.i32 %i4, %i3
  vm.br ^bb1()
^bb5:
  vm.return %i2
}

// A self-loop.
vm.export @self_loop
vm.func @self_loop(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i3
  vm.global.store.i32 %i1, @steps
  %i2 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i2, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

// Three levels: %i0 rounds of %i1 rounds of an inner loop of %i2 iterations.
vm.export @deep_nest
vm.func @deep_nest(%i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  %i3 = vm.const.i32.zero
  %i6 = vm.const.i32.zero
  %i7 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i4 = vm.const.i32.zero
  %i8 = vm.cmp.lt.i32.s %i3, %i0
  vm.cond_br %i8, ^bb2(), ^bb7()
^bb2:
  %i5 = vm.const.i32.zero
  %i9 = vm.cmp.lt.i32.s %i4, %i1
  vm.cond_br %i9, ^bb3(), ^bb6()
^bb3:
  %i10 = vm.cmp.lt.i32.s %i5, %i2
  vm.cond_br %i10, ^bb4(), ^bb5()
^bb4:
  %i5 = vm.add.i32 %i5, %i7
  %i6 = vm.add.i32 %i6, %i7
  vm.global.store.i32 %i6, @steps
  vm.br ^bb3()
^bb5:
  %i4 = vm.add.i32 %i4, %i7
  vm.br ^bb2()
^bb6:
  %i3 = vm.add.i32 %i3, %i7
  vm.br ^bb1()
^bb7:
  vm.return %i6
}

// %i0 rounds of an inner loop of %i1 iterations, whose body returns at once when
// the total reaches %i2 (leaving both loops).
vm.export @leaves_from_inner
vm.func @leaves_from_inner(%i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  %i3 = vm.const.i32.zero
  %i6 = vm.const.i32.zero
  %i7 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i5 = vm.const.i32.zero
  %i8 = vm.cmp.lt.i32.s %i3, %i0
  vm.cond_br %i8, ^bb2(), ^bb5()
^bb2:
  %i9 = vm.cmp.lt.i32.s %i5, %i1
  vm.cond_br %i9, ^bb3(), ^bb4()
^bb3:
  %i5 = vm.add.i32 %i5, %i7
  %i6 = vm.add.i32 %i6, %i7
  vm.global.store.i32 %i6, @steps
  %i10 = vm.cmp.lt.i32.s %i6, %i2
  vm.cond_br %i10, ^bb2(), ^bb5()
^bb4:
  %i3 = vm.add.i32 %i3, %i7
  vm.br ^bb1()
^bb5:
  vm.return %i6
}

// %i0 rounds of two inner loops one after the other (%i1 and %i2 iterations).
vm.export @two_inner
vm.func @two_inner(%i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  %i3 = vm.const.i32.zero
  %i6 = vm.const.i32.zero
  %i7 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i4 = vm.const.i32.zero
  %i5 = vm.const.i32.zero
  %i8 = vm.cmp.lt.i32.s %i3, %i0
  vm.cond_br %i8, ^bb2(), ^bb7()
^bb2:
  %i9 = vm.cmp.lt.i32.s %i4, %i1
  vm.cond_br %i9, ^bb3(), ^bb4()
^bb3:
  %i4 = vm.add.i32 %i4, %i7
  %i6 = vm.add.i32 %i6, %i7
  vm.br ^bb2()
^bb4:
  %i10 = vm.cmp.lt.i32.s %i5, %i2
  vm.cond_br %i10, ^bb5(), ^bb6()
^bb5:
  %i5 = vm.add.i32 %i5, %i7
  %i6 = vm.add.i32 %i6, %i7
  vm.global.store.i32 %i6, @steps
  vm.br ^bb4()
^bb6:
  %i3 = vm.add.i32 %i3, %i7
  vm.br ^bb1()
^bb7:
  vm.return %i6
}

// %i0 rounds of an inner loop of %i1 iterations, then a call of a function that
// charges its own blocks (three_blocks, %i1 iterations).
vm.export @calls_between
vm.func @calls_between(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i3 = vm.const.i32.zero
  %i6 = vm.const.i32.zero
  %i7 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i5 = vm.const.i32.zero
  %i8 = vm.cmp.lt.i32.s %i3, %i0
  vm.cond_br %i8, ^bb2(), ^bb5()
^bb2:
  %i9 = vm.cmp.lt.i32.s %i5, %i1
  vm.cond_br %i9, ^bb3(), ^bb4()
^bb3:
  %i5 = vm.add.i32 %i5, %i7
  %i6 = vm.add.i32 %i6, %i7
  vm.br ^bb2()
^bb4:
  %i11 = vm.call @three_blocks(%i1)
  %i6 = vm.add.i32 %i6, %i11
  %i3 = vm.add.i32 %i3, %i7
  vm.br ^bb1()
^bb5:
  vm.return %i6
}

// Divides by %i0 - i in the middle block of a three-block loop: iteration %i0
// fails there (integer division by zero).
vm.export @fails_midway
vm.func @fails_midway(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i3
  vm.global.store.i32 %i1, @steps
  vm.br ^bb2()
^bb2:
  %i4 = vm.sub.i32 %i0, %i1
  %i5 = vm.div.i32.s %i3, %i4
  vm.br ^bb3()
^bb3:
  %i2 = vm.cmp.lt.i32.s %i1, %i3
  vm.cond_br %i3, ^bb1(), ^bb4()
^bb4:
  vm.return %i1
}
"""

#: (export, arguments) run under each fuel budget below.
CALLS = [("two_blocks", (40,)), ("three_blocks", (40,)), ("nested", (6, 7)),
         ("self_loop", (40,)), ("deep_nest", (2, 3, 4)), ("leaves_from_inner", (5, 6, 17)),
         ("two_inner", (3, 4, 5)), ("calls_between", (3, 5)), ("fails_midway", (30,))]
LONG_CALLS = [("two_blocks", (700,)), ("three_blocks", (600,)), ("nested", (90, 20)),
              ("self_loop", (900,)), ("deep_nest", (7, 9, 11)),
              ("leaves_from_inner", (40, 30, 1000)), ("two_inner", (30, 20, 25)),
              ("calls_between", (20, 30)), ("fails_midway", (300,))]


@pytest.fixture(scope="module")
def program() -> bytes:
    return assemble(SOURCE)


@pytest.fixture
def dispatch_only(monkeypatch):
    """Has the code generator charge every block itself (no Loop), in fresh code."""
    def dispatch_only_code():
        monkeypatch.setenv("VMRT_CACHE", "0")
        monkeypatch.setattr(codegen.FunctionGenerator, "loops", lambda self: {})
    return dispatch_only_code


def run(program: bytes, name: str, args, **limits):
    """What a host sees of one call in a fresh context: outcome, @steps, fuel left."""
    ctx = vmrt.Context(modules=[vmrt.load_module(program)], limits=Limits(**limits))
    try:
        outcome = ("ok", ctx.function(f"loops.{name}")(*args))
    except VMError as error:
        outcome = ("error", type(error).__name__, error.message, error.stack)
    ctx.refuel(10**6)  # (@steps may be read whatever fuel was left)
    return outcome, ctx.function("loops.steps")(), ctx.fuel_remaining - 10**6


def fuel_needed(program: bytes, name: str, args) -> int:
    return 10**9 - run(program, name, args, fuel=10**9)[2]


def outcomes(program, calls, budgets):
    return {(name, fuel): run(program, name, args, fuel=fuel)
            for name, args in calls for fuel in budgets(program, name, args)}


def every_budget(program, name, args):
    return range(fuel_needed(program, name, args) + 2)


def budgets_across_slices(program, name, args):
    needed = fuel_needed(program, name, args)
    return sorted({*range(0, needed + 2, 97), *range(max(0, needed - 40), needed + 2)})


@pytest.mark.parametrize("calls, budgets", [(CALLS, every_budget),
                                            (LONG_CALLS, budgets_across_slices)],
                         ids=["every-budget", "across-slices"])
def test_fuel_runs_out_where_it_does_when_each_block_pays(program, dispatch_only, calls,
                                                          budgets):
    in_loops = outcomes(program, calls, budgets)
    assert any(outcome[0][0] == "error" and outcome[0][1] == "FuelExhausted"
               for outcome in in_loops.values())
    dispatch_only()
    assert outcomes(program, calls, budgets) == in_loops


@pytest.mark.parametrize("failing_iteration", [1, 2, 255, 256, 257, 600])
def test_a_block_failing_in_a_loop_leaves_the_fuel_it_would(program, dispatch_only,
                                                           failing_iteration):
    in_loops = run(program, "fails_midway", (failing_iteration,), fuel=10**7)
    assert in_loops[0][1] == "VMError" and "division by zero" in in_loops[0][2]
    assert in_loops[1] == failing_iteration
    dispatch_only()
    assert run(program, "fails_midway", (failing_iteration,), fuel=10**7) == in_loops


def test_refill_is_asked_as_often_as_when_each_block_pays(program, dispatch_only,
                                                          monkeypatch):
    """Deadlines and cancellation are checked at each refill: loops ask for fuel (a
    fixed slice here) as many times, after as much work."""
    monkeypatch.setattr(Meter, "MIN_SLICE", 1000)  # (every slice 1000)
    monkeypatch.setattr(Meter, "MAX_SLICE", 1000)
    asked = []
    refill = Meter.refill

    def counted(self, cost, max_slice=0):
        asked.append((self.fuel_remaining, cost))
        return refill(self, cost, max_slice)
    monkeypatch.setattr(Meter, "refill", counted)

    def refills():
        asked.clear()
        for name, args in LONG_CALLS[:-1]:
            run(program, name, args, fuel=10**6)
        return list(asked)
    in_loops = refills()
    assert len(in_loops) > 20
    dispatch_only()
    assert refills() == in_loops


@pytest.mark.parametrize("stop", ["deadline", "cancel"])
def test_a_nested_loop_stopped_early_spent_exactly_what_runs_out_there(program, stop):
    """Stopped at a refill by its deadline or a cancel, a call of nested loops has
    spent exactly what a budget that runs out at the very block it stopped at holds,
    with as many inner iterations run."""
    ctx = vmrt.Context(modules=[vmrt.load_module(program)],
                       limits=Limits(fuel=10**12, timeout=0.05 if stop == "deadline" else None))
    canceller = threading.Timer(0.05, ctx.cancel)
    if stop == "cancel":
        canceller.start()
    with pytest.raises(VMError) as info:
        ctx.function("loops.deep_nest")(10**6, 1000, 20)  # (endless at this pace)
    canceller.join() if stop == "cancel" else None
    assert type(info.value).__name__ == {"deadline": "DeadlineExceeded",
                                         "cancel": "Cancelled"}[stop]
    spent = 10**12 - ctx.fuel_remaining
    ctx.clear_cancel()
    steps = ctx.function("loops.steps")()
    assert steps > 1000
    (_, error, _, stack), again, _ = run(program, "deep_nest", (10**6, 1000, 20), fuel=spent)
    assert (error, stack, again) == ("FuelExhausted", info.value.stack, steps)


def test_c_tier_stops_at_the_same_point(program, monkeypatch):
    from vmrt.vm.ctier.build import compiler_identity

    if compiler_identity() is None:
        pytest.skip("needs a C compiler")
    monkeypatch.setenv("VMRT_TIER", "c")
    vmrt.load(program).function("steps")()  # built (a context with limits never builds)
    in_c = outcomes(program, CALLS, every_budget)
    monkeypatch.setenv("VMRT_TIER", "python")
    assert outcomes(program, CALLS, every_budget) == in_c
