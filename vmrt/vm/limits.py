"""Limits of a context: fuel, call depth, memory, a deadline and cancellation.

Two mechanisms, as in wasmtime. Fuel: generated code charges each block's
instruction count to the counter FUEL (a slice of the budget) and, when it goes
negative, calls `Meter.refill`, the one slow path, which also stops the call when
it is cancelled or late. Guard: each outermost call gets a CallGuard
(vmrt.vm.call_guard) at its one host entry (`Meter.entry`): it holds the call's
deadline for refill, and HAL work the call starts carries it (the VM code of a
VMVX dispatch on another thread spends the calling context's fuel through a
`DispatchMeter`). Memory is a counter under a lock, charged before allocating
(vmrt.vm.memory_limit).
"""

from __future__ import annotations

import contextvars
import math
import numbers
import operator
import sys
import threading
import time
import types
from dataclasses import dataclass

from vmrt.errors import (Cancelled, DeadlineExceeded, DepthExceeded, FuelExhausted,
                          InvalidLimit, StatusCode, VMError)
from vmrt.vm import generated_abi
from vmrt.vm.call_guard import GUARD, CallGuard, raise_error
from vmrt.vm.memory_limit import MemoryCounter

#: The deepest call stack a context may allow. Deeper stacks of generator frames
#: (yieldable calls) would overflow the C stack, which crashes the process.
MAX_SUPPORTED_DEPTH = 10_000


def _limit_error(name: str, value, what: str) -> InvalidLimit:
    return InvalidLimit(f"limit {name} must be {what} (got {value!r})",
                        StatusCode.INVALID_ARGUMENT)


def _count_limit(name: str, value) -> int | None:
    """A non-negative integer limit (bool, float and str are refused)."""
    if value is None:
        return None
    try:
        count = -1 if isinstance(value, bool) else operator.index(value)
    except TypeError:
        count = -1
    if count < 0:
        raise _limit_error(name, value, "a non-negative integer")
    return count


def _seconds_limit(name: str, value) -> float | None:
    """A non-negative number of seconds (inf: never; NaN is refused)."""
    if value is None:
        return None
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    seconds = float(value) if real else math.nan
    if math.isnan(seconds) or seconds < 0:
        raise _limit_error(name, value, "a non-negative number of seconds")
    return seconds


@dataclass(frozen=True)
class Limits:
    """What one context may use. None means unlimited.

    fuel: instructions (block markers excluded) its calls may execute in all,
        counted per block on entry, the VM code of its VMVX dispatches
        included. When a block cannot be paid for the call fails with
        FuelExhausted (RESOURCE_EXHAUSTED) before running it; `Context.refuel(n)`
        lets the context run again.
    max_depth: VM frames on the call stack (DepthExceeded beyond it; at
        most MAX_SUPPORTED_DEPTH). None: the instance's max_depth. Straight-line
        functions (one block, no recursion) are not checked: they add a bounded
        number of frames.
    max_memory: bytes held by live vm.buffer / vm.list allocations of the VM
        code, by the HAL objects its hal module calls allocate (buffers, queue
        allocations, recorded commands, executables, workgroup local memory)
        and by native modules that report theirs (MemoryLimitExceeded when an
        allocation would exceed it).
    timeout: seconds each outermost call may run (DeadlineExceeded), counted
        from its start; each call has its own, also when several threads call
        one context. See also `Context.set_deadline` for an absolute deadline.

    Counts must be integers and the timeout a number (inf: none); anything else,
    NaN included, is INVALID_ARGUMENT here.
    """

    fuel: int | None = None
    max_depth: int | None = None
    max_memory: int | None = None
    timeout: float | None = None

    def __post_init__(self):
        for name in ("fuel", "max_depth", "max_memory"):
            object.__setattr__(self, name, _count_limit(name, getattr(self, name)))
        timeout = _seconds_limit("timeout", self.timeout)
        object.__setattr__(self, "timeout", None if timeout == math.inf else timeout)
        if self.max_depth is not None and self.max_depth > MAX_SUPPORTED_DEPTH:
            raise InvalidLimit(f"max_depth {self.max_depth} exceeds the supported "
                               f"{MAX_SUPPORTED_DEPTH}", StatusCode.INVALID_ARGUMENT)


def _outermost(generator, guard: CallGuard):
    """An outermost call that may yield: its guard is current on its thread while it
    runs, not while it is suspended (calls made meanwhile are calls of their own)."""
    while True:
        token = GUARD.set(guard)
        try:
            step = next(generator)
        except StopIteration as stop:
            return stop.value
        finally:
            GUARD.reset(token)
        try:
            yield step
        except GeneratorExit:
            generator.close()
            raise
        if guard.thread != threading.get_ident():  # (resumed on another thread)
            guard = guard.moved()


def _nested(generator, base: int, cur: types.CellType):
    """A nested call that may yield: the depth of the import call site that made it
    goes back to CUR when it ends (its own import call sites move CUR)."""
    try:
        return (yield from generator)
    finally:
        cur.cell_contents = base


def _named(error: VMError, label: str) -> VMError:
    if not error.stack:
        error.stack = [label]
    return error


class Meter:
    """The running state of a context's Limits, shared by its generated code.

    Fuel lives in two places: `reserve` (the budget not handed out; None when
    unlimited) and the cell FUEL (a slice the generated code spends without
    asking). When the slice runs out the code calls `refill`, which checks
    cancellation and the call's deadline and hands out the next slice, sized to
    last about SLICE_SECONDS at the pace of the last one, so that a deadline or a
    cancel is noticed promptly even when imports are slow. The depth of the
    innermost import call site is in the cell CUR, where a host re-entering the
    context (a native module calling back) continues from.

    Memory is counted by a MemoryCounter (vmrt.vm.memory_limit), whose methods
    the meter offers as its own.
    """

    MIN_SLICE = 64
    MAX_SLICE = 1 << 16
    MAX_NATIVE_SLICE = 1 << 26  # (the C tier's code: a slice is still ~SLICE_SECONDS)
    SLICE_SECONDS = 0.002

    def __init__(self, limits: Limits, default_max_depth: int):
        self.limits = limits
        #: FUEL and CUR, closure cells of the context's generated code (vmrt.vm.generated_abi).
        self.cells = generated_abi.namespace(
            "cells", **{name: types.CellType(0) for name in generated_abi.CELLS})
        self.fuel_cell, self.cur_cell = self.cells["FUEL"], self.cells["CUR"]
        self.reserve = limits.fuel  # (None: unlimited)
        self.max_depth = min(limits.max_depth if limits.max_depth is not None
                             else default_max_depth, MAX_SUPPORTED_DEPTH)
        # Each VM frame is at least one Python frame; leave room for the host's.
        if sys.getrecursionlimit() < self.max_depth + 1000:
            sys.setrecursionlimit(self.max_depth + 1000)
        self.memory = memory = MemoryCounter(limits.max_memory)
        self.charge_memory, self.release_memory = memory.charge_memory, memory.release_memory
        self.hold, self.track_container = memory.hold, memory.track_container
        self.collect_cycles = memory.collect_cycles
        #: Whether memory is bounded (C-tier buffers, which die with the C call making
        #: them, are charged only then: vmrt/vm/ctier/runtime.h).
        self.bounds_memory = limits.max_memory is not None
        self.timeout = limits.timeout
        self._deadline: float | None = None      # absolute (time.monotonic)
        self.cancelled = False
        self._slice = self.MIN_SLICE
        self._last_refill = time.monotonic()
        self._fuel_lock = threading.Lock()    # dispatch workers take fuel from other threads

    @property
    def memory_in_use(self) -> int:
        return self.memory.memory_in_use

    @property
    def deadline(self) -> float | None:
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, numbers.Real) or math.isnan(value)):
            raise _limit_error("deadline", value, "a time.monotonic() value or None")
        self._deadline = None if value is None else float(value)

    def interruption_at(self, call_deadline: float | None) -> VMError | None:
        """CANCELLED when cancelled, DEADLINE_EXCEEDED past the absolute deadline or
        `call_deadline`, else None."""
        if self.cancelled:
            return Cancelled("the context was cancelled")
        deadline = self._deadline
        if call_deadline is not None and (deadline is None or call_deadline < deadline):
            deadline = call_deadline
        if deadline is not None and time.monotonic() >= deadline:
            return DeadlineExceeded("the deadline passed")
        return None

    def call_deadline(self) -> float | None:
        """The deadline of the call of this context running on this thread, if any."""
        guard = GUARD.get()
        return guard.deadline if guard is not None and guard.meter is self else None

    def begin_call(self) -> CallGuard:
        """The CallGuard of an outermost call starting now: refused at once when the
        context is cancelled or late; with a timeout, its deadline starts here."""
        if self.cancelled or self._deadline is not None:
            raise_error(self.interruption_at(None))
        return CallGuard(self, None if self.timeout is None else time.monotonic() + self.timeout)

    def enter_guard(self) -> contextvars.Token:
        """Makes current the CallGuard of the call of this context this thread runs
        for, checked (a check point), or of a new call (begin_call); the token resets
        it (leave_guard). What `guarded` does, in one call for the hot HAL paths."""
        guard = GUARD.get()
        if guard is None or guard.meter is not self:
            guard = self.begin_call()
        else:
            guard.check()
        return GUARD.set(guard)

    @property
    def fuel_remaining(self) -> int | None:
        """Fuel left (exact between calls)."""
        if self.reserve is None:
            return None
        return self.reserve + self.fuel_cell.cell_contents

    def refuel(self, amount: int) -> None:
        """Adds `amount` fuel to what remains."""
        if self.reserve is None:
            raise VMError("this context has no fuel limit", StatusCode.FAILED_PRECONDITION)
        amount = _count_limit("refuel", amount)
        with self._fuel_lock:
            self.reserve += amount

    def set_fuel(self, amount: int) -> None:
        """Makes the fuel remaining `amount` (wasmtime's Store.set_fuel), between calls."""
        if self.reserve is None:
            raise VMError("this context has no fuel limit", StatusCode.FAILED_PRECONDITION)
        amount = _count_limit("set_fuel", amount)
        with self._fuel_lock:
            self.fuel_cell.cell_contents = 0
            self.reserve = amount

    def refill(self, cost: int, max_slice: int = 0) -> None:
        """The slow path of generated code: FUEL went negative after charging `cost`.
        Stops the call when it must (cancelled, late, or out of fuel: the block does
        not run, its cost goes back), else hands out the next slice (the C tier's
        code, ~100 times as fast, may ask for larger ones: `max_slice`)."""
        cell = self.fuel_cell
        fuel = cell.cell_contents
        error = self.interruption_at(self.call_deadline())
        if error is None:
            grant = self._take_fuel(self._next_slice(max_slice or self.MAX_SLICE) - fuel)
            if fuel + grant >= 0:
                cell.cell_contents = fuel + grant
                return
            self._return_fuel(grant)
            error = FuelExhausted(f"out of fuel: the next block needs {cost} instructions, "
                                  f"{grant + fuel + cost} remain")
        cell.cell_contents = fuel + cost
        raise_error(error)

    def charge(self, cost: int) -> None:
        """Charges `cost` from outside generated code, as generated code charges."""
        self.fuel_cell.cell_contents -= cost
        if self.fuel_cell.cell_contents < 0:
            self.refill(cost)

    def _next_slice(self, max_slice: int) -> int:
        """About SLICE_SECONDS of work at the pace of the last slice (at most twice it)."""
        now = time.monotonic()
        elapsed, self._last_refill = now - self._last_refill, now
        last = self._slice
        wanted = last * 2 if elapsed <= 0 else int(last * self.SLICE_SECONDS / elapsed)
        self._slice = max(self.MIN_SLICE, min(max_slice, wanted, last * 2))
        return self._slice

    def _take_fuel(self, wanted: int) -> int:
        """Up to `wanted` fuel out of the reserve (all of it when unlimited)."""
        if self.reserve is None:
            return wanted
        with self._fuel_lock:
            grant = max(0, min(wanted, self.reserve))
            self.reserve -= grant
        return grant

    def _return_fuel(self, amount: int) -> None:
        if self.reserve is not None and amount:
            with self._fuel_lock:
                self.reserve += amount

    def depth_exceeded(self, depth: int) -> None:
        raise DepthExceeded(f"VM call stack depth {depth} exceeds the limit of {self.max_depth}")

    def entry(self, fn, static_cost: int | None, generator: bool, label: str):
        """The host entry of `fn`, a function of the context's code (`label` names it):
        what callers outside generated code call (the host, another module's import,
        a native module re-entering the context). A straight-line `fn` (`static_cost`
        instructions, which its callers in generated code pay) is charged here and
        takes no depth; any other takes its depth last, 1 for an outermost call, which
        gets its CallGuard here, and for a call nested in one of this context's calls
        on this thread, one more than its import call site's (in CUR). A `generator`
        fn returns a generator (a function that may yield). What `fn` carries (the C
        tier's vmrt_c_ordinal, run_workgroups) the entry carries too."""
        if static_cost is not None:
            made = self._straight_entry(fn, static_cost, label)
        else:
            made = self._entry(fn, generator, label)
        made.__dict__.update(getattr(fn, "__dict__", ()))
        return made

    def _entry(self, fn, generator: bool, label: str):
        cur = self.cur_cell

        def call(*args):
            guard = GUARD.get()
            if guard is not None and guard.meter is self:
                base = cur.cell_contents
                if generator:
                    return _nested(fn(*args, base + 1), base, cur)
                try:
                    return fn(*args, base + 1)
                finally:
                    cur.cell_contents = base
            try:
                guard = self.begin_call()
            except VMError as error:
                raise _named(error, label) from None
            if generator:
                return _outermost(fn(*args, 1), guard)
            token = GUARD.set(guard)
            try:
                return fn(*args, 1)
            finally:
                GUARD.reset(token)
        return call

    def _straight_entry(self, fn, cost: int, label: str):
        """A straight-line function reaches no check point before it ends: its entry
        stops a call of a cancelled or late context, and charges its cost."""
        cell = self.fuel_cell

        def call(*args):
            if self.cancelled or self._deadline is not None or cell.cell_contents < cost:
                try:
                    guard = GUARD.get()
                    if guard is None or guard.meter is not self:
                        self.begin_call()
                    self.charge(cost)
                except VMError as error:
                    raise _named(error, label) from None
                return fn(*args)
            cell.cell_contents -= cost
            return fn(*args)
        return call

class DispatchMeter(Meter):
    """The meter of a VMVX worker context running dispatches on another thread for
    a context with limits (`parent`): its slices come from the parent's budget and
    go back when a dispatch ends (`settle`), memory is charged to the parent, and
    the parent's cancellation and absolute deadline and the dispatching call's
    deadline (`bind`, per dispatch) stop it. Used by one thread at a time."""

    def __init__(self, parent: Meter):
        super().__init__(Limits(max_depth=parent.max_depth), parent.max_depth)
        self.parent = parent
        self.limits = parent.limits
        self.reserve = parent.reserve
        self.call_limit: float | None = None
        self.memory = parent.memory
        self.charge_memory, self.release_memory = parent.charge_memory, parent.release_memory
        self.hold, self.track_container = parent.hold, parent.track_container
        self.bounds_memory = parent.bounds_memory

    def bind(self, guard: CallGuard) -> None:
        """Works for the call of `guard` (its deadline) from now on."""
        self.call_limit = guard.deadline

    def _take_fuel(self, wanted: int) -> int:
        return self.parent._take_fuel(wanted)

    def _return_fuel(self, amount: int) -> None:
        self.parent._return_fuel(amount)

    def interruption_at(self, call_deadline: float | None) -> VMError | None:
        return self.parent.interruption_at(
            self.call_limit if call_deadline is None else call_deadline)

    def begin_call(self) -> CallGuard:
        guard = CallGuard(self, self.call_limit)
        guard.check()
        return guard

    #: The parent's cancellation and absolute deadline stop the dispatch.
    cancelled = property(lambda self: self.parent.cancelled, lambda self, value: None)
    deadline = property(lambda self: self.parent.deadline)

    @property
    def fuel_remaining(self) -> int | None:
        return self.parent.fuel_remaining

    def settle(self) -> None:
        """Gives the unspent slice back to the parent (fuel_remaining is exact again)."""
        cell = self.fuel_cell
        left, cell.cell_contents = cell.cell_contents, 0
        if left:
            self._return_fuel(left)
