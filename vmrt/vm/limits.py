"""Limits of a context: fuel, call depth, memory, a deadline and cancellation.

A host that runs modules it does not trust gives their context `Limits`; the
code the context compiles then counts (vmrt.vm.codegen, "Limits"), and the
Meter here holds the budgets and answers the generated code's slow path.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from dataclasses import dataclass

from vmrt.errors import StatusCode, VMError

#: The deepest call stack a context may allow. Deeper stacks of generator frames
#: (yieldable calls) would overflow the C stack, which crashes the process.
MAX_SUPPORTED_DEPTH = 10_000


@dataclass(frozen=True)
class Limits:
    """What one context may use. None means unlimited.

    fuel: instructions (block markers excluded) its calls may execute in all,
        counted per block on entry. When a block cannot be paid for the call
        fails with RESOURCE_EXHAUSTED before running it; `Context.refuel(n)`
        lets the context run again.
    max_depth: VM frames on the call stack (RESOURCE_EXHAUSTED beyond it; at
        most MAX_SUPPORTED_DEPTH). None: the instance's max_depth. Straight-line
        functions (one block, no recursion) are not checked: they add a bounded
        number of frames.
    max_memory: bytes held by live vm.buffer / vm.list allocations of the VM
        code (and by native modules that report theirs, e.g. HAL buffers)
        (RESOURCE_EXHAUSTED when an allocation would exceed it).
    timeout: seconds each outermost call may run (DEADLINE_EXCEEDED), counted
        from its first check point (at most a fuel slice, ~2 ms of work, after it
        starts); see also `Context.set_deadline` for an absolute deadline.
    """

    fuel: int | None = None
    max_depth: int | None = None
    max_memory: int | None = None
    timeout: float | None = None

    def __post_init__(self):
        for name in ("fuel", "max_depth", "max_memory", "timeout"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise VMError(f"limit {name} must not be negative (got {value})",
                              StatusCode.INVALID_ARGUMENT)
        if self.max_depth is not None and self.max_depth > MAX_SUPPORTED_DEPTH:
            raise VMError(f"max_depth {self.max_depth} exceeds the supported "
                          f"{MAX_SUPPORTED_DEPTH}", StatusCode.INVALID_ARGUMENT)


_ENTRY_MAKERS: dict[int, types.CodeType] = {}


def _entry_maker(arity: int) -> types.CodeType:
    """Code of make(fn, static_cost, begin_call, refill) -> an entry taking `arity`
    arguments, with FUEL, CUR, WATCH (an outermost call must run begin_call) and
    FRESH (an outermost call started since the last refill) free: bound to a context's cells, the entry uses them as directly as
    generated code does (no *args: an entry costs ~0.15 us, not ~0.5)."""
    code = _ENTRY_MAKERS.get(arity)
    if code is None:
        params = ", ".join(f"a{i}" for i in range(arity))
        source = f"""
def scope():
    FUEL = CUR = WATCH = FRESH = None
    def make(fn, static_cost, begin_call, refill):
        def call({params}):
            nonlocal FUEL, CUR, FRESH
            base = CUR
            if not base:
                FRESH = True
                if WATCH:
                    begin_call()
            if static_cost:
                FUEL -= static_cost
                if FUEL < 0:
                    refill(static_cost)
            try:
                return fn({params}{', ' if arity else ''}base + 1)
            finally:
                CUR = base
        return call
"""
        scope = compile(source, "<vmrt limits entry>", "exec").co_consts[0]
        code = _ENTRY_MAKERS[arity] = next(c for c in scope.co_consts
                                           if isinstance(c, types.CodeType))
    return code


class Meter:
    """The running state of a context's Limits, shared by its generated code.

    Fuel lives in two places: `reserve` (the budget not handed out; None when
    unlimited) and the cell FUEL (a slice the generated code spends without
    asking). When the slice runs out the code calls `refill`, which checks
    cancellation and the deadline and hands out the next slice; a slice lasts
    about SLICE_SECONDS (it halves when a slice took longer, doubles when not),
    so a deadline is noticed promptly even when imports are slow.
    """

    MIN_SLICE = 64
    MAX_SLICE = 1 << 16
    SLICE_SECONDS = 0.002

    def __init__(self, limits: Limits, default_max_depth: int):
        self.limits = limits
        # Shared by the context's generated code (vmrt.vm.codegen) and entries.
        self.cells = {"FUEL": types.CellType(0), "CUR": types.CellType(0),
                      "WATCH": types.CellType(False), "FRESH": types.CellType(False)}
        self.fuel_cell, self._watch_cell = self.cells["FUEL"], self.cells["WATCH"]
        self._fresh_cell = self.cells["FRESH"]
        self.reserve = limits.fuel
        self.max_depth = min(limits.max_depth if limits.max_depth is not None
                             else default_max_depth, MAX_SUPPORTED_DEPTH)
        # Each VM frame is at least one Python frame; leave room for the host's.
        if sys.getrecursionlimit() < self.max_depth + 1000:
            sys.setrecursionlimit(self.max_depth + 1000)
        self.max_memory = limits.max_memory
        self.memory_in_use = 0
        self.timeout = limits.timeout
        self._deadline: float | None = None      # absolute (time.monotonic)
        self.call_deadline: float | None = None  # outermost call start + timeout
        self._cancelled = False
        self._watch()
        self._slice = self.MIN_SLICE
        self._last_refill = time.monotonic()
        self._memory_lock = threading.Lock()  # buffers may be freed on another thread

    # -- fuel, deadline, cancellation ---------------------------------------------------------
    def _watch(self) -> None:
        # A timeout alone needs nothing at entry: see begin_call.
        self._watch_cell.cell_contents = bool(self._cancelled or self._deadline is not None)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @cancelled.setter
    def cancelled(self, value: bool) -> None:
        self._cancelled = bool(value)
        self._watch()

    @property
    def deadline(self) -> float | None:
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline = value
        self._watch()

    @property
    def fuel_remaining(self) -> int | None:
        """Fuel left (exact between calls; during one, batched loops hold some)."""
        if self.reserve is None:
            return None
        return self.reserve + self.fuel_cell.cell_contents

    def refuel(self, amount: int) -> None:
        if self.reserve is None:
            raise VMError("this context has no fuel limit", StatusCode.FAILED_PRECONDITION)
        if amount < 0:
            raise VMError(f"cannot refuel by {amount}", StatusCode.INVALID_ARGUMENT)
        self.reserve += amount

    def refill(self, cost: int) -> None:
        """Generated code's slow path: FUEL went negative after charging `cost`."""
        cell = self.fuel_cell
        fuel = cell.cell_contents
        if self._fresh_cell.cell_contents:
            self._start_timeout()
        error = self._interruption()
        reserve = self.reserve
        if error is None and reserve is not None and reserve + fuel < 0:
            error = VMError(f"out of fuel: the next block needs {cost} instructions, "
                            f"{reserve + fuel + cost} remain", StatusCode.RESOURCE_EXHAUSTED)
        if error is not None:
            cell.cell_contents = fuel + cost  # the block does not run
            raise error
        now = time.monotonic()
        if now - self._last_refill > self.SLICE_SECONDS:
            self._slice = max(self.MIN_SLICE, self._slice >> 1)
        else:
            self._slice = min(self.MAX_SLICE, self._slice << 1)
        self._last_refill = now
        grant = self._slice - fuel
        if reserve is not None:
            grant = min(grant, reserve)
            self.reserve = reserve - grant
        cell.cell_contents = fuel + grant

    def charge(self, cost: int) -> None:
        """Charges `cost` from outside generated code (a straight-line export)."""
        self.fuel_cell.cell_contents -= cost
        if self.fuel_cell.cell_contents < 0:
            self.refill(cost)

    def _interruption(self) -> VMError | None:
        if self._cancelled:
            return VMError("the context was cancelled", StatusCode.CANCELLED)
        deadline = self._deadline
        if self.call_deadline is not None and (deadline is None or self.call_deadline < deadline):
            deadline = self.call_deadline
        if deadline is not None and time.monotonic() >= deadline:
            return VMError("the deadline passed", StatusCode.DEADLINE_EXCEEDED)
        return None

    def _start_timeout(self) -> None:
        """An outermost call began since the last refill: its timeout runs from now.

        Entries only raise the FRESH flag (reading the clock on every call from the
        host would double the cost of a short call), so a call's timeout starts
        at its first check point: at most one fuel slice, about SLICE_SECONDS of
        work, after the call began.
        """
        self._fresh_cell.cell_contents = False
        if self.timeout is not None:
            self.call_deadline = time.monotonic() + self.timeout

    def begin_call(self) -> None:
        """An outermost call starts in a cancelled context or one with an absolute
        deadline: refuse it at once if cancelled or late."""
        if self._cancelled or self._deadline is not None:
            error = self._interruption()
            if error is not None:
                raise error

    # -- depth ---------------------------------------------------------------------------------------
    def depth_exceeded(self, depth: int) -> None:
        raise VMError(f"VM call stack depth {depth} exceeds the limit of {self.max_depth}",
                      StatusCode.RESOURCE_EXHAUSTED)

    def entry(self, fn, static_cost: int | None):
        """`fn` (a generated function taking its depth last) callable from outside
        generated code: by the host, by another module's import, by a native
        module re-entering the context (which continues from the depth of the
        import call site in the cell CUR)."""
        code = _entry_maker(fn.__code__.co_argcount - 1)
        make = types.FunctionType(code, {}, "make", None,
                                  tuple(self.cells[name] for name in code.co_freevars))
        return make(fn, static_cost or 0, self.begin_call, self.refill)

    # -- memory ------------------------------------------------------------------------------------
    def charge_memory(self, nbytes: int) -> None:
        with self._memory_lock:
            in_use = self.memory_in_use + nbytes
            if self.max_memory is not None and in_use > self.max_memory:
                raise VMError(f"allocating {nbytes} bytes would hold {in_use} bytes, over the "
                              f"limit of {self.max_memory}", StatusCode.RESOURCE_EXHAUSTED)
            self.memory_in_use = in_use

    def release_memory(self, nbytes: int) -> None:
        with self._memory_lock:
            self.memory_in_use -= nbytes
