"""Limits of a context: fuel, call depth, memory, a deadline and cancellation.

A host that runs modules it does not trust gives their context `Limits`; the
code the context compiles then counts (vmrt.vm.codegen, "Limits"), and the
Meter here holds the budgets and answers the generated code's slow path.

Work a call starts outside generated code runs under the same limits:

- HAL work (queue operations, dispatches, fence waits) runs under the call's
  `CallGuard` (`guarded(meter)`, read with `current_guard()`): device threads
  get it with the work they run, waits and workgroup loops check it, and the
  VM code of a VMVX dispatch runs in worker contexts whose `DispatchMeter`
  draws fuel and memory from the calling context's meter.
- Memory a native module allocates for the context's code is a `MemoryHold`
  (`Meter.hold`), released when the object holding it is freed.
"""

from __future__ import annotations

import contextvars
import gc
import itertools
import math
import numbers
import operator
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass

from vmrt.errors import (Cancelled, DeadlineExceeded, DepthExceeded, FuelExhausted,
                          InvalidLimit, MemoryLimitExceeded, StatusCode, VMError)

#: The deepest call stack a context may allow. Deeper stacks of generator frames
#: (yieldable calls) would overflow the C stack, which crashes the process.
MAX_SUPPORTED_DEPTH = 10_000

#: Key of a call's deadline (a _CallDeadline) in the frame locals of its outermost VM
#: frame: each call, on whatever thread, has its own.
_DEADLINE_TAG = "\0vmrt call deadline"


class _CallDeadline:
    """A call's deadline, in the locals of its outermost VM frame: it lives as long as
    that frame, so a weak reference to it tells whether a frame found at the same
    address later is still that call's (Meter.call_deadline). It keeps the call's
    CallGuard once one is asked for (Meter.guard), made again only on another thread."""

    __slots__ = ("deadline", "guard", "__weakref__")

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.guard = None


if sys.version_info >= (3, 13):  # f_locals: a write-through proxy (PEP 667)
    def _frame_deadline(frame, timeout: float) -> _CallDeadline:
        """The call deadline kept on `frame` (now + `timeout`, kept there first if none)."""
        found = frame.f_locals.get(_DEADLINE_TAG)
        if found is None:
            found = frame.f_locals[_DEADLINE_TAG] = _CallDeadline(time.monotonic() + timeout)
        return found
else:
    def _frame_deadline(frame, timeout: float) -> _CallDeadline:
        """The call deadline kept on `frame` (now + `timeout`, kept there first if none).
        f_locals is a snapshot dict kept on the frame: only the tag stays in it, so no
        register value outlives its register because a refill looked."""
        snapshot = frame.f_locals
        found = snapshot.get(_DEADLINE_TAG)
        snapshot.clear()
        if found is None:
            found = _CallDeadline(time.monotonic() + timeout)
        snapshot[_DEADLINE_TAG] = found
        return found


#: Whether this interpreter has a GIL (see Meter.charge_memory).
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


def _under(lock, method):
    """`method` called with `lock` held."""
    def locked(*args):
        with lock:
            return method(*args)
    return locked


def _raise(error: VMError | None) -> None:
    """Raises `error` if there is one, leaving no frame that refers to it (a frame
    in an error's traceback holding the error is a cycle keeping the failed call's
    values until the garbage collector runs)."""
    if error is not None:
        try:
            raise error
        finally:
            error = None


def _limit_error(name: str, value, what: str) -> InvalidLimit:
    return InvalidLimit(f"limit {name} must be {what} (got {value!r})",
                        StatusCode.INVALID_ARGUMENT)


def _count_limit(name: str, value) -> int | None:
    """A non-negative integer limit (bool, float and str are refused)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _limit_error(name, value, "a non-negative integer")
    try:
        count = operator.index(value)
    except TypeError:
        raise _limit_error(name, value, "a non-negative integer") from None
    if count < 0:
        raise _limit_error(name, value, "a non-negative integer")
    return count


def _seconds_limit(name: str, value) -> float | None:
    """A non-negative number of seconds (inf: never; NaN is refused)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _limit_error(name, value, "a non-negative number of seconds")
    seconds = float(value)
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
        from its start (for a function that cannot yield, called from the host:
        from its first check point, at most FIRST_SLICE instructions after it
        starts); each call has its own, also when several threads call one
        context. See also `Context.set_deadline` for an absolute deadline.

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


_ENTRY_MAKERS: dict[int, types.CodeType] = {}


def _entry_maker(arity: int) -> types.CodeType:
    """Code of make(fn) -> an entry taking `arity` arguments into `fn`, a generated
    generator function (a function that may yield), with CUR and STOP free:
    bound to a context's cells, the entry uses them as directly as generated code does
    (no *args: an entry costs ~0.15 us, not ~0.5). CUR goes back to the caller's when
    the generator ends, not when it is made: its import call sites move CUR as it runs
    (else the next outermost call would start deeper, and skip its check).

    An outermost call (CUR 0) is refused at once if the context is cancelled or late
    (STOP: BEGIN_CALL), and gets its CallGuard (CALL_GUARD: its deadline starts
    there), current on its thread while its code runs, not while it is suspended:
    its check points and HAL calls find it without looking at frames
    (Meter.call_deadline). Its timeout counting from its start, it needs no trimmed
    first slice (Meter.begin_call). Generated code only resumes a call with next()."""
    code = _ENTRY_MAKERS.get(arity)
    if code is None:
        params = ", ".join(f"a{i}" for i in range(arity))
        comma = ", " if arity else ""
        source = f"""
def scope():
    CUR = STOP = None
    def make(fn):
        def nested(generator, base):
            nonlocal CUR
            try:
                return (yield from generator)
            finally:
                CUR = base
        def outermost(generator, guard):
            nonlocal CUR
            try:
                while True:
                    token = SET_GUARD(guard)
                    try:
                        step = next(generator)
                    except StopIteration as stop:
                        return stop.value
                    finally:
                        RESET_GUARD(token)
                    try:
                        yield step
                    except GeneratorExit:
                        generator.close()
                        raise
                    if guard.thread != GET_IDENT():  # (resumed on another thread)
                        guard = guard.moved()
            finally:
                CUR = 0
        def call({params}):
            base = CUR
            if base:
                return nested(fn({params}{comma}base + 1), base)
            if STOP: BEGIN_CALL()
            return outermost(fn({params}{comma}1), CALL_GUARD())
        return call
"""
        scope = compile(source, "<vmrt limits entry>", "exec").co_consts[0]
        code = _ENTRY_MAKERS[arity] = next(c for c in scope.co_consts
                                           if isinstance(c, types.CodeType))
    return code


class MemoryHold:
    """Bytes charged to a meter for as long as the object holding this lives (a HAL
    buffer, the commands a command buffer recorded, an executable): released once,
    by `release()` or when freed. Holds sit outside reference cycles, so a freed
    owner gives its bytes back at once."""

    __slots__ = ("meter", "nbytes")

    def __init__(self, meter: "Meter", nbytes: int):
        self.meter = meter  # already charged by Meter.hold
        self.nbytes = nbytes

    def grow(self, nbytes: int) -> None:
        """Charges `nbytes` more (RESOURCE_EXHAUSTED over the limit; nothing changes)."""
        meter = self.meter
        if meter is not None and nbytes > 0:
            meter.charge_memory(nbytes)
            self.nbytes += nbytes

    def release(self) -> None:
        meter, self.meter = self.meter, None
        if meter is not None:
            meter.release_memory(self.nbytes)

    def __del__(self) -> None:  # (release, less the clearing: nothing reads it after)
        meter = self.meter
        if meter is not None:
            meter.release_memory(self.nbytes)


_new_hold = object.__new__


#: An exhausted ticket iterator: a TICKETS_<k> cell with nothing lent.
NO_TICKETS = iter(())


class _ThreadHolders(threading.local):
    """A thread's fuel holders (Meter.add_fuel_holder); none until it adds one."""

    holders: tuple = ()


class _Cells(dict):
    """The cells a meter's generated code and entries share, by name: FUEL, CUR,
    WATCH (an outermost call must BEGIN_CALL), STOP (the same for a call into C: it
    is not trimmed), and TICKETS_<k> (Meter.ticket_cell), made when first asked for."""

    def __init__(self, meter: "Meter"):
        super().__init__(FUEL=types.CellType(0), CUR=types.CellType(0),
                         WATCH=types.CellType(False), STOP=types.CellType(False))
        self._meter = meter

    def __missing__(self, name: str) -> types.CellType:
        prefix, _, cost = name.partition("_")
        if prefix != "TICKETS" or not cost.isdigit():
            raise KeyError(name)
        cell = self[name] = self._meter.ticket_cell(int(cost))
        return cell


class CallGuard:
    """The limits of one VM call, carried to the HAL work it starts: the context's
    cancellation and absolute deadline, the call's own deadline, and through
    `meter` its fuel and memory."""

    __slots__ = ("meter", "deadline", "thread")

    def __init__(self, meter: "Meter", deadline: float | None):
        self.meter = meter
        self.deadline = deadline
        self.thread = threading.get_ident()  # the calling thread

    def check(self) -> None:
        """Raises CANCELLED or DEADLINE_EXCEEDED when the call must stop (HAL calls
        check each: the clock is read here, and interruption_at runs only to raise)."""
        meter = self.meter
        if meter._cancelled or meter._deadline is not None:  # (rare: the full test)
            _raise(meter.interruption_at(self.deadline))
        elif self.deadline is not None and time.monotonic() >= self.deadline:
            _raise(meter.interruption_at(self.deadline))

    def moved(self) -> CallGuard:
        """The same call's guard for the thread it now runs on (its deadline kept)."""
        return CallGuard(self.meter, self.deadline)


_GUARD: contextvars.ContextVar = contextvars.ContextVar("vmrt_call_guard", default=None)


def current_guard() -> CallGuard | None:
    """The CallGuard of the VM call this thread works for, if it has limits."""
    return _GUARD.get()


class guarded:  # noqa: N801 (used as a function: `with guarded(meter):`)
    """Runs a `with` block under the current call's CallGuard (see Meter.guard). A
    class: HAL calls enter one each, and a generator's context manager costs ~1 us."""

    __slots__ = ("meter", "token")

    def __init__(self, meter: "Meter"):
        self.meter = meter

    def __enter__(self) -> None:
        self.token = self.meter.enter_guard(sys._getframe(1))

    def __exit__(self, *error) -> None:
        _GUARD.reset(self.token)


#: Resets the CallGuard that Meter.enter_guard made current, given its token.
leave_guard = _GUARD.reset


class Meter:
    """The running state of a context's Limits, shared by its generated code.

    Fuel lives in two places: `reserve` (the budget not handed out; None when
    unlimited) and the cell FUEL (a slice the generated code spends without
    asking). When the slice runs out the code calls `refill`, which checks
    cancellation and the deadline and hands out the next slice; a slice lasts
    about SLICE_SECONDS at the pace of the last one (it shrinks at once, grows
    at most twofold), so a deadline is noticed promptly even when imports are
    slow.

    An outermost call of a function that may yield gets its CallGuard (and with
    it its deadline) at entry, current on its thread while it runs (_entry_maker).
    Others need nothing at entry: the deadline of such a call is kept in the frame
    locals of its outermost VM frame, found from its first refill, so each call has
    its own, whatever thread makes it (call_deadline); with a timeout, such a call
    starts with at most FIRST_SLICE of a larger slice (refill raises WATCH,
    begin_call trims it), so that its first check point comes soon.

    Straight-line functions called from outside generated code (the host, a native
    module re-entering the context) pay from fuel lent ahead, counted as remaining
    and taken back by a refill first, so fuel runs out where it would without:
    - in the Python tier, tickets: the cell TICKETS_<k> holds an iterator of tickets
      worth k fuel each (`pay` lends them), which an entry takes one of (`next`: no
      int made, no WATCH to read). None are lent while the context is cancelled or
      has an absolute deadline (each outermost call must then check), and setting
      either takes them back, on whatever thread;
    - in C, fuel holders (the C tier's contexts, one a thread: add_fuel_holder) keep
      fuel that calls pay from without a Python operation (pay_holder lends it); a
      refill on the holder's thread takes it back. The entries check STOP first.
    Neither needs the timeout trim (begin_call): a straight-line call reaches no
    check point before it ends.

    Memory held only by reference cycles (vm.lists holding each other) is
    collected before a charge is refused, after a failed call and when
    `memory_in_use` is read, so cycles never decide whether the context can run.
    """

    MIN_SLICE = 64
    MAX_SLICE = 1 << 16
    MAX_NATIVE_SLICE = 1 << 26  # (the C tier's code: a slice is still ~SLICE_SECONDS)
    SLICE_SECONDS = 0.002
    #: Fuel an outermost call entered without a CallGuard starts with at most, with a
    #: timeout: its first check point (where its timeout starts) comes soon even if
    #: its imports are slow.
    FIRST_SLICE = 1024
    #: Fuel lent at once in tickets of one cost: `pay` runs once per that many
    #: instructions of straight-line calls from outside generated code.
    HELD_FUEL = 4096

    def __init__(self, limits: Limits, default_max_depth: int):
        self.limits = limits
        # Shared by the context's generated code (vmrt.vm.codegen) and entries.
        self.cells = _Cells(self)
        self.fuel_cell, self._watch_cell = self.cells["FUEL"], self.cells["WATCH"]
        self._cur_cell, self._stop_cell = self.cells["CUR"], self.cells["STOP"]
        self._last_call = threading.local()  # .frame: see call_deadline
        self._tickets: dict[int, types.CellType] = {}  # cost -> TICKETS_<cost> (see pay)
        self.reserve = limits.fuel
        self.max_depth = min(limits.max_depth if limits.max_depth is not None
                             else default_max_depth, MAX_SUPPORTED_DEPTH)
        # Each VM frame is at least one Python frame; leave room for the host's.
        if sys.getrecursionlimit() < self.max_depth + 1000:
            sys.setrecursionlimit(self.max_depth + 1000)
        self.max_memory = limits.max_memory
        #: Whether memory is bounded (C-tier buffers, which die with the C call making
        #: them, are charged only then: vmrt/vm/ctier/runtime.h).
        self.bounds_memory = limits.max_memory is not None
        self.memory_in_use = 0
        self.timeout = limits.timeout
        self._deadline: float | None = None      # absolute (time.monotonic)
        self._cancelled = False
        self._watch()
        self._slice = self.MIN_SLICE
        self._trimmed = 0  # the slice begin_call last trimmed from (see _next_slice)
        self._last_refill = time.monotonic()
        self._fuel_lock = threading.Lock()    # dispatch workers take fuel from other threads
        self._containers = 0      # live metered vm.lists that can hold refs (can form cycles)
        self._collected_at = 0    # memory_in_use at or below which nothing needs collecting
        self._holders = weakref.WeakSet()       # fuel holders (all threads')
        self._thread_holders = _ThreadHolders()  # .holders: this thread's
        if not _GIL:  # (buffers may be freed on another thread: see charge_memory)
            self._lock_memory()

    # -- fuel, deadline, cancellation ---------------------------------------------------------
    def _stopping(self) -> bool:
        """Cancelled or an absolute deadline: each outermost call checks at entry."""
        return self._cancelled or self._deadline is not None

    def _watch(self) -> None:
        # (refill also raises WATCH, to trim a large slice: see begin_call)
        stopping = self._stopping()
        if stopping:
            self._take_back_held()  # (a ticket would skip the check)
        self._watch_cell.cell_contents = self._stop_cell.cell_contents = stopping

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
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, numbers.Real) or math.isnan(value)):
            raise _limit_error("deadline", value, "a time.monotonic() value or None")
        self._deadline = None if value is None else float(value)
        self._watch()

    @property
    def fuel_remaining(self) -> int | None:
        """Fuel left (exact between calls; during one, batched loops hold some)."""
        if self.reserve is None:
            return None
        held = sum(operator.length_hint(cell.cell_contents) * cost
                   for cost, cell in list(self._tickets.items()))
        with self._fuel_lock:
            held += sum(holder.fuel for holder in self._holders)
        return self.reserve + self.fuel_cell.cell_contents + held

    def refuel(self, amount: int) -> None:
        """Adds `amount` fuel to what remains."""
        if self.reserve is None:
            raise VMError("this context has no fuel limit", StatusCode.FAILED_PRECONDITION)
        amount = _count_limit("refuel", amount)
        with self._fuel_lock:
            self.reserve += amount

    def set_fuel(self, amount: int) -> None:
        """Makes the fuel remaining `amount` (wasmtime's Store.set_fuel), between calls:
        what was lent (the FUEL slice, tickets) comes back first, and what another
        thread's call holds counts against `amount` (the reserve may go below zero)."""
        if self.reserve is None:
            raise VMError("this context has no fuel limit", StatusCode.FAILED_PRECONDITION)
        amount = _count_limit("set_fuel", amount)
        self._take_back_held()
        with self._fuel_lock:
            self.fuel_cell.cell_contents = 0
            self.reserve = amount - sum(holder.fuel for holder in self._holders)

    def refill(self, cost: int) -> None:
        """Generated code's slow path: FUEL went negative after charging `cost`."""
        self.refill_with(cost, self._interruption(sys._getframe(1)))

    def refill_with(self, cost: int, error: VMError | None, max_slice: int = 0) -> None:
        """refill, the interruption (if any) looked up by the caller: the C tier's
        code has no Python frames to find its call's deadline in (vmrt.vm.ctier), and
        runs a slice ~100 times faster, so it may ask for larger ones (`max_slice`)."""
        self._take_back_held()
        cell = self.fuel_cell
        fuel = cell.cell_contents
        if error is None:
            grant = self._take_fuel(self._next_slice(max_slice or self.MAX_SLICE) - fuel)
            if fuel + grant >= 0:
                cell.cell_contents = fuel + grant
                if fuel + grant > self.FIRST_SLICE and self.timeout is not None:
                    self._watch_cell.cell_contents = True  # the next call trims it: begin_call
                return
            self._return_fuel(grant)
            error = FuelExhausted(f"out of fuel: the next block needs {cost} instructions, "
                                  f"{grant + fuel + cost} remain")
        cell.cell_contents = fuel + cost  # the block does not run
        _raise(error)

    def charge(self, cost: int) -> None:
        """Charges `cost` from outside generated code, as generated code charges."""
        self.fuel_cell.cell_contents -= cost
        if self.fuel_cell.cell_contents < 0:
            self.refill(cost)

    # -- fuel lent to entries (see the class docstring) -----------------------------------------
    def ticket_cell(self, cost: int) -> types.CellType:
        """The cell TICKETS_<cost> of the straight-line entries of that cost."""
        cell = self._tickets.get(cost)
        if cell is None:
            with self._fuel_lock:
                cell = self._tickets.setdefault(cost, types.CellType(NO_TICKETS))
        return cell

    def pay(self, cost: int) -> None:
        """A straight-line entry of `cost` instructions found no ticket: an outermost
        call is refused if the context is cancelled or late; the call is charged as
        generated code charges (REFILL when short: it may stop there); and, unless
        each outermost call must check, up to HELD_FUEL more is lent in tickets."""
        if self._stopping() and not self._cur_cell.cell_contents:
            _raise(self.interruption_at(None))
        self.charge(cost)
        if self._stopping():
            return
        cell = self.ticket_cell(cost)
        self._take_back(cost, cell)  # (another thread's loan, if any, first)
        count = self._lend(cost) // cost
        if count:
            cell.cell_contents = itertools.repeat(True, count)
            if self._stopping():  # (cancelled meanwhile, from another thread)
                self._take_back(cost, cell)

    def add_fuel_holder(self, holder) -> None:
        """`holder` (with a `fuel` attribute) may keep fuel on this thread from now on."""
        self._thread_holders.holders = (*self._thread_holders.holders, holder)
        with self._fuel_lock:
            self._holders.add(holder)

    def pay_holder(self, holder, cost: int) -> None:
        """A straight-line call of `cost` instructions found too little in `holder` to
        pay: what it holds comes back, the call is charged as generated code charges
        (REFILL when short: the call may stop there), and up to HELD_FUEL more is lent."""
        self._take_back_held()
        self.charge(cost)
        holder.fuel = self._lend(1)

    def release_fuel_holder(self, holder) -> None:
        """`holder` goes away (its thread did; any thread may say so): what it held
        goes back to the reserve."""
        held, holder.fuel = holder.fuel, 0
        self._return_fuel(held)

    def _lend(self, cost: int) -> int:
        """Up to HELD_FUEL of FUEL, a multiple of `cost`, taken out to lend."""
        cell = self.fuel_cell
        lent = min(cell.cell_contents, self.HELD_FUEL) // cost * cost
        cell.cell_contents -= lent
        return lent

    def _take_back(self, cost: int, cell: types.CellType) -> None:
        # (one statement: CPython switches threads at calls and backward jumps only,
        # so no entry takes a ticket between the swap and the count)
        tickets, cell.cell_contents = cell.cell_contents, NO_TICKETS
        left = operator.length_hint(tickets)
        if left:
            self.fuel_cell.cell_contents += left * cost

    def _take_back_held(self) -> None:
        """Every ticket lent, and what this thread's holders keep, back into FUEL (on
        their thread, no holder is in a call that spends it: see CCall.refill)."""
        if self._tickets:  # (none until a straight-line entry is called from the host)
            for cost, cell in list(self._tickets.items()):
                self._take_back(cost, cell)
        for holder in self._thread_holders.holders:
            held = holder.fuel
            if held:
                holder.fuel = 0
                self.fuel_cell.cell_contents += held

    def _next_slice(self, max_slice: int) -> int:
        """About SLICE_SECONDS of work at the pace of the last slice (at most twice it,
        or the size begin_call trimmed the slice from)."""
        now = time.monotonic()
        elapsed, self._last_refill = now - self._last_refill, now
        last = self._slice
        wanted = last * 2 if elapsed <= 0 else int(last * self.SLICE_SECONDS / elapsed)
        grown, self._trimmed = max(last * 2, self._trimmed), 0
        self._slice = max(self.MIN_SLICE, min(max_slice, wanted, grown))
        return self._slice

    def _take_fuel(self, wanted: int) -> int:
        """Up to `wanted` fuel out of the reserve (all of it when unlimited)."""
        if self.reserve is None:
            return wanted
        with self._fuel_lock:
            grant = max(0, min(wanted, self.reserve))
            self.reserve -= grant
        return grant

    def lend_fuel(self, wanted: int, pool: bool = False) -> int:
        """Up to `wanted` fuel for a dispatch's worker context (DispatchMeter): the
        reserve, and when it is short and `pool` (the dispatch runs on the calling
        thread, whose code waits for it) what this meter's own slice holds, so a
        dispatch runs out exactly where the call would."""
        if self.reserve is None:
            return wanted
        if pool and self.reserve < wanted:  # (what is held matters only when short)
            self._take_back_held()
        with self._fuel_lock:
            reserve = self.reserve
            if reserve < wanted and pool:
                reserve += self.fuel_cell.cell_contents
                self.fuel_cell.cell_contents = 0
            grant = max(0, min(wanted, reserve))
            self.reserve = reserve - grant
        return grant

    def _return_fuel(self, amount: int) -> None:
        if self.reserve is not None and amount:
            with self._fuel_lock:
                self.reserve += amount

    def interruption_at(self, call_deadline: float | None) -> VMError | None:
        """CANCELLED when cancelled, DEADLINE_EXCEEDED past the absolute deadline or
        `call_deadline`, else None."""
        if self._cancelled:
            return Cancelled("the context was cancelled")
        deadline = self._deadline
        if call_deadline is not None and (deadline is None or call_deadline < deadline):
            deadline = call_deadline
        if deadline is not None and time.monotonic() >= deadline:
            return DeadlineExceeded("the deadline passed")
        return None

    def _interruption(self, frame) -> VMError | None:
        return self.interruption_at(self.call_deadline(frame))

    def call_deadline(self, frame) -> float | None:
        """The timeout deadline of the call `frame` runs in (None without a timeout or
        outside any call of this context): its CallGuard's, current since its entry,
        if it has one (an outermost call through an entry: _entry_maker). Else the
        first lookup of a call keeps it in the locals of its outermost VM frame: the
        timeout runs from there (see Limits.timeout). This thread remembers that
        frame (by address, and a weak reference to the deadline kept there), so later
        lookups of the call stop there, reading no frame's locals."""
        if self.timeout is None:
            return None
        guard = _GUARD.get()
        if guard is not None and guard.meter is self and guard.thread == threading.get_ident():
            return guard.deadline  # (VM code nested in HAL work of a call: that call's)
        found = self._call(frame)
        return None if found is None else found.deadline

    def _call(self, frame) -> _CallDeadline | None:
        """The _CallDeadline of the call `frame` runs in, with a timeout (see
        call_deadline); None outside any call of this context."""
        known = getattr(self._last_call, "frame", None)  # (id(frame), weakref to its deadline)
        outermost = None
        while frame is not None:
            if frame.f_globals.get("METER") is self:
                if known is not None and id(frame) == known[0]:
                    found = known[1]()
                    if found is not None:
                        return found
                outermost = frame
            frame = frame.f_back
        if outermost is None:
            return None
        found = _frame_deadline(outermost, self.timeout)
        self._last_call.frame = (id(outermost), weakref.ref(found))
        return found

    def begin_call(self) -> None:
        """An outermost call starts while WATCH is set: in a cancelled context or one
        with an absolute deadline it is refused at once if cancelled or late; with a
        timeout it starts with at most FIRST_SLICE of the slice (the rest goes back)."""
        self.begin_native_call()
        cell = self.fuel_cell
        excess = cell.cell_contents - self.FIRST_SLICE
        if excess > 0:
            cell.cell_contents -= excess
            self._return_fuel(excess)
            # The next refill measures the pace of this call's first FIRST_SLICE.
            self._trimmed = max(self._trimmed, self._slice)
            self._slice, self._last_refill = self.FIRST_SLICE, time.monotonic()
        self._watch()

    def begin_native_call(self) -> None:
        """An outermost call into C, or one whose timeout counts from its entry
        (_entry_maker), starts while STOP is set: refused at once if the context is
        cancelled or late. (C makes no imports: its first check point comes within a
        slice, ~SLICE_SECONDS of its work, untrimmed.)"""
        if self._stopping():
            _raise(self.interruption_at(None))

    def call_guard(self) -> CallGuard:
        """The CallGuard of an outermost call starting on this thread (CALL_GUARD of
        the entries: _entry_maker); with a timeout, its deadline starts now."""
        timeout = self.timeout
        if timeout is None:  # (all the thread's calls have the same: made once)
            guard = getattr(self._last_call, "guard", None)
            if guard is None:
                guard = self._last_call.guard = CallGuard(self, None)
            return guard
        return CallGuard(self, time.monotonic() + timeout)

    def guard(self, frame=None) -> CallGuard:
        """The CallGuard of the call running on this thread: the one its entry made
        current, else (a call entered without one) from its VM frames, found from
        `frame` on (the caller's by default), made once per call and thread (HAL
        calls ask for it each): kept with the call's deadline, or without a timeout
        by the thread (all its calls have the same)."""
        guard = _GUARD.get()
        if guard is not None and guard.meter is self and guard.thread == threading.get_ident():
            return guard
        if self.timeout is None:
            return self.call_guard()
        found = self._call(frame or sys._getframe(1))
        if found is None:
            return CallGuard(self, None)
        guard = found.guard
        if guard is None or guard.thread != threading.get_ident():
            guard = found.guard = CallGuard(self, found.deadline)
        return guard

    def enter_guard(self, frame) -> contextvars.Token:
        """Makes the CallGuard of the call `frame` runs in current (a check point: a
        call doing HAL work stops here once it must); the token resets it
        (leave_guard). What `guarded` does, in one call for the hot HAL paths."""
        guard = self.guard(frame)
        guard.check()
        return _GUARD.set(guard)

    # -- depth ---------------------------------------------------------------------------------------
    def depth_exceeded(self, depth: int) -> None:
        raise DepthExceeded(f"VM call stack depth {depth} exceeds the limit of {self.max_depth}")

    def entry(self, fn, static_cost: int | None = None):
        """`fn` (a generated generator function taking its depth last: one that may
        yield, never straight-line) callable from outside generated code: by the host,
        by another module's import, by a native module re-entering the context (which
        continues from the depth of the import call site in the cell CUR). Other
        functions have host entries of their own (vmrt.vm.codegen, host_prologue)."""
        if static_cost:
            raise VMError("a straight-line function needs its own host entry",
                          StatusCode.INTERNAL)
        code = _entry_maker(fn.__code__.co_argcount - 1)
        namespace = {"METER": self, "BEGIN_CALL": self.begin_native_call,
                     "CALL_GUARD": self.call_guard, "SET_GUARD": _GUARD.set,
                     "RESET_GUARD": _GUARD.reset, "GET_IDENT": threading.get_ident}
        make = types.FunctionType(code, namespace, "make", None,
                                  tuple(self.cells[name] for name in code.co_freevars))
        return make(fn)

    # -- memory ------------------------------------------------------------------------------------
    # The counter's updates are statements with no call and no backward jump in them,
    # where CPython never switches threads: with a GIL they need no lock (a lock taken
    # and given back costs each HAL allocation ~0.6 us); free-threaded, _lock_memory
    # puts them under one.
    def charge_memory(self, nbytes: int) -> None:
        in_use = self.memory_in_use + nbytes  # (_try_charge, inline: allocations charge here)
        if self.max_memory is None or in_use <= self.max_memory:
            self.memory_in_use = in_use
            return
        if not self._try_charge(nbytes):
            # Bytes only cycles hold are not in use: collect them, then decide.
            if not (self._containers and self._collect()) or not self._try_charge(nbytes):
                in_use = self.memory_in_use + nbytes
                raise MemoryLimitExceeded(f"allocating {nbytes} bytes would hold {in_use} "
                                          f"bytes, over the limit of {self.max_memory}")

    def _try_charge(self, nbytes: int) -> bool:
        in_use = self.memory_in_use + nbytes
        if self.max_memory is not None and in_use > self.max_memory:
            return False
        self.memory_in_use = in_use
        return True

    def release_memory(self, nbytes: int) -> None:
        in_use = self.memory_in_use = self.memory_in_use - nbytes
        if in_use < self._collected_at:
            self._collected_at = in_use

    def _lock_memory(self) -> None:
        """Free-threaded CPython: the counter's updates each under the meter's lock
        (re-entrant: a collection before refusing a charge frees holds)."""
        lock = threading.RLock()
        for name in ("charge_memory", "_try_charge", "release_memory"):
            setattr(self, name, _under(lock, getattr(self, name)))

    def hold(self, nbytes: int) -> MemoryHold:
        """Charges `nbytes` (RESOURCE_EXHAUSTED over the limit) to a MemoryHold."""
        if nbytes < 0:
            nbytes = 0
        self.charge_memory(nbytes)
        hold = _new_hold(MemoryHold)  # (no __init__ frame: every HAL allocation makes one)
        hold.meter, hold.nbytes = self, nbytes
        return hold

    def track_container(self, delta: int) -> None:
        """A metered vm.list that can hold refs was made (+1) or freed (-1)."""
        self._containers += delta

    def collect_cycles(self) -> None:
        """Frees what only reference cycles hold, when some may exist: lists that
        can hold refs are alive and memory grew since the last collection."""
        if self._containers and self.memory_in_use > self._collected_at:
            self._collect()

    def _collect(self) -> bool:
        before = self.memory_in_use
        gc.collect()
        self._collected_at = self.memory_in_use
        return self.memory_in_use < before


class DispatchMeter(Meter):
    """The meter of a VMVX worker context running dispatches for a context with
    limits (`parent`): fuel comes from the parent's budget and goes back when a
    dispatch ends (`settle`), memory is charged to the parent, and the parent's
    cancellation and absolute deadline and the dispatching call's deadline
    (`bind`, per dispatch) stop it. Used by one thread at a time."""

    def __init__(self, parent: Meter):
        super().__init__(Limits(max_depth=parent.max_depth), parent.max_depth)
        self.parent = parent
        self.limits = parent.limits
        self.reserve = parent.reserve
        self.call_limit: float | None = None
        self._pool = False
        self.charge_memory = parent.charge_memory
        self.release_memory = parent.release_memory
        self.bounds_memory = parent.bounds_memory
        self._return_fuel = parent._return_fuel  # (bound: a dispatch gives back fuel each)
        self.hold = parent.hold
        self.track_container = parent.track_container

    def bind(self, guard: CallGuard) -> None:
        """Works for the call of `guard` (its deadline; its thread: see lend_fuel), lent
        a slice at once: the dispatch's first block would ask for it, from C a callback
        (settle gives back what it did not spend)."""
        self.call_limit = guard.deadline
        self._pool = pool = guard.thread == threading.get_ident()
        self.fuel_cell.cell_contents += self.parent.lend_fuel(self._slice, pool)

    def _take_fuel(self, wanted: int) -> int:
        return self.parent.lend_fuel(wanted, self._pool)

    def _interruption(self, frame) -> VMError | None:
        return self.parent.interruption_at(self.call_limit)

    def interruption_at(self, call_deadline: float | None) -> VMError | None:
        return self.parent.interruption_at(
            self.call_limit if call_deadline is None else call_deadline)

    def begin_call(self) -> None:
        _raise(self.parent.interruption_at(self.call_limit))

    begin_native_call = begin_call

    @property
    def fuel_remaining(self) -> int | None:
        return self.parent.fuel_remaining

    def settle(self) -> None:
        """Gives the unspent slice back to the parent (fuel_remaining is exact again)."""
        if self._tickets or self._thread_holders.holders:
            self._take_back_held()
        cell = self.fuel_cell
        left, cell.cell_contents = cell.cell_contents, 0
        if left:
            self._return_fuel(left)


def carry_guard(work):
    """`work` (a callable, or None) to run on another thread under this thread's
    CallGuard: device threads keep working for the call that submitted the work."""
    guard = _GUARD.get()
    if guard is None or work is None:
        return work

    def under_guard():
        token = _GUARD.set(guard)
        try:
            return work()
        finally:
            _GUARD.reset(token)
    return under_guard
