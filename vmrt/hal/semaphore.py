"""Timeline semaphores and fences: monotonically increasing payload values,
blocking waits with deadlines, callbacks when a value is reached, and failure
that propagates to every waiter (runtime/src/iree/hal/semaphore.h, fence.h).

A failed semaphore keeps its error; waiting on it or querying it raises a copy.
"""

from __future__ import annotations

import threading
import time

from vmrt import timeline
from vmrt.errors import HalError, StatusCode, VmrtError, limit_of
from vmrt.vm.call_guard import current_guard
from vmrt.vm.ref import RefObject


def copy_error(error: VmrtError) -> HalError:
    """A fresh error with the same code and message (one error object per raise)."""
    copy = HalError(error.message, error.code)
    copy.annotations = list(error.annotations)
    copy.limit = limit_of(error)  # a limit's error keeps its class through the fence
    return copy


#: One condition for every semaphore: state changes are rare and short, and a
#: per-semaphore Condition costs more to create than a whole queue operation.
_CHANGED_LOCK = threading.Lock()
#: (`with _CHANGED_LOCK` is Condition's own lock without its Python-level __enter__.)
_CHANGED = threading.Condition(_CHANGED_LOCK)
#: Threads blocked in _CHANGED.wait() (changed under _CHANGED): signals skip
#: notify_all, a few Python calls, when nobody waits.
_waiting = 0


#: How often a wait under a CallGuard looks at the call's cancellation and deadline.
GUARD_POLL_SECONDS = 0.01
#: How long such a wait still waits, once its call must stop, for the work it waits
#: on (which stops with the call) to end.
GUARD_SETTLE_SECONDS = 0.05


class _Interruption:
    """A wait under a CallGuard: it polls the call's cancellation and deadline, and
    once the call must stop it waits GUARD_SETTLE_SECONDS more for the work it waits
    on, which stops with the call too: the call then fails after that work let go of
    what it held (memory back at once). Then it raises the call's error."""

    __slots__ = ("guard", "error", "until")

    def __init__(self, guard):
        self.guard = guard
        self.error = None
        self.until = None

    def next_wait(self, remaining: float | None) -> float:
        """How long to wait next (at most `remaining`); raises once settled."""
        if self.until is None:
            guard = self.guard
            self.error = guard.meter.interruption_at(guard.deadline)
            if self.error is None:
                return GUARD_POLL_SECONDS if remaining is None else \
                    min(remaining, GUARD_POLL_SECONDS)
            self.until = time.monotonic() + GUARD_SETTLE_SECONDS
        left = self.until - time.monotonic()
        if left <= 0:
            error, self.error = self.error, None
            try:
                raise error
            finally:  # (no frame of the error's traceback refers to it)
                error = None
        return left if remaining is None else min(remaining, left)


def deadline_after(timeout_seconds: float | None) -> float | None:
    return None if timeout_seconds is None else time.monotonic() + max(0.0, timeout_seconds)


class Semaphore(RefObject):
    """A hal.semaphore: a 64-bit timeline value or a failure."""

    __slots__ = ("_value", "_failure", "_timepoints")

    def __init__(self, initial_value: int = 0):
        self._value = initial_value
        self._failure: VmrtError | None = None
        self._timepoints: list[tuple[int, object]] = []

    def __repr__(self) -> str:
        state = f"failed ({self._failure.code.name})" if self._failure else f"{self._value}"
        return f"<hal.semaphore {state}>"

    @property
    def failure(self) -> VmrtError | None:
        return self._failure

    def query(self) -> int:
        """The current value; raises the failure of a failed semaphore."""
        failure = self._failure
        if failure is not None:
            raise copy_error(failure)
        return self._value

    def signal(self, value: int) -> None:
        # (acquire/release rather than `with`: a lock's __exit__ takes its arguments as
        # a tuple, and every queue operation signals a semaphore)
        _CHANGED_LOCK.acquire()
        try:
            if self._failure is not None:
                raise copy_error(self._failure)
            if value <= self._value:
                raise HalError(f"semaphore values must be monotonically increasing; current "
                               f"value is {self._value}, attempted to signal {value}",
                               StatusCode.OUT_OF_RANGE)
            self._value = value
            ready = ()
            if self._timepoints:
                ready = [cb for v, cb in self._timepoints if v <= value]
                if ready:
                    self._timepoints = [(v, cb) for v, cb in self._timepoints if v > value]
            if _waiting:
                _CHANGED.notify_all()
        finally:
            _CHANGED_LOCK.release()
        for callback in ready:
            callback(None)

    def fail(self, error: VmrtError) -> None:
        """Fails the semaphore (the first failure wins) and wakes every waiter. It
        keeps a copy: the error's traceback would keep the failed work (and its
        closures, often this semaphore's fence) alive."""
        error = copy_error(error)
        with _CHANGED:
            if self._failure is not None:
                return
            self._failure = error
            ready = [cb for _, cb in self._timepoints]
            self._timepoints = []
            if _waiting:
                _CHANGED.notify_all()
        for callback in ready:
            callback(copy_error(error))

    def wait(self, value: int, deadline: float | None = None) -> None:
        """Blocks until `value` is reached; DEADLINE_EXCEEDED past `deadline`
        (a time.monotonic() value; None waits forever). A thread working for a VM
        call with limits (vmrt.vm.limits.current_guard) also stops when the call
        must: cancelled or past its deadline (the call's VMError)."""
        global _waiting
        guard = None
        with _CHANGED:
            while True:
                if self._failure is not None:
                    raise copy_error(self._failure)
                if self._value >= value:
                    return
                if deadline is None:
                    remaining = None
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise HalError("timeout waiting on semaphore",
                                       StatusCode.DEADLINE_EXCEEDED)
                if guard is None:
                    guard = current_guard()
                    guard = _Interruption(guard) if guard is not None else False
                if guard:
                    remaining = guard.next_wait(remaining)
                _waiting += 1
                try:
                    _CHANGED.wait(remaining)
                finally:
                    _waiting -= 1

    def on_reached(self, value: int, callback) -> None:
        """Calls `callback(None)` once `value` is reached, or `callback(error)`
        when the semaphore fails; immediately if either already happened."""
        with _CHANGED:
            failure = self._failure
            if failure is None and self._value < value:
                self._timepoints.append((value, callback))
                return
        callback(copy_error(failure) if failure is not None else None)


def _merge_timepoints(timepoints: dict, added) -> None:
    """Adds (semaphore, value) pairs to a fence's timepoints: a semaphore already
    present keeps the larger value."""
    for semaphore, value in added:
        current = timepoints.get(semaphore)
        if current is None or value > current:
            timepoints[semaphore] = value


class Fence(RefObject):
    """A hal.fence: a set of (semaphore, value) timepoints, one per semaphore."""

    __slots__ = ("timepoints",)

    def __init__(self, timepoints=()):
        self.timepoints: dict[Semaphore, int] = {}
        _merge_timepoints(self.timepoints, timepoints)

    @classmethod
    def at(cls, semaphore: Semaphore, value: int) -> "Fence":
        """A fence of one timepoint (hal.fence.create makes one per call)."""
        fence = cls.__new__(cls)
        fence.timepoints = {semaphore: value}
        return fence

    @classmethod
    def join(cls, fences) -> "Fence":
        """A fence of the timepoints of all of `fences` (hal.fence.join, on every call
        of a model that waits for two queue operations)."""
        joined = cls.__new__(cls)
        joined.timepoints = timepoints = {}
        for fence in fences:
            _merge_timepoints(timepoints, fence.timepoints.items())
        return joined

    def __repr__(self) -> str:
        return f"<hal.fence {len(self.timepoints)} timepoints>"

    def insert(self, semaphore: Semaphore, value: int) -> None:
        """Adds a timepoint (see _merge_timepoints)."""
        _merge_timepoints(self.timepoints, ((semaphore, value),))

    def extend(self, other: "Fence | None") -> None:
        if other is not None:
            _merge_timepoints(self.timepoints, other.timepoints.items())

    def status(self) -> tuple[StatusCode, VmrtError | None]:
        """(OK, None) when reached, (DEFERRED, None) when pending, else the failure."""
        pending = False
        for semaphore, value in self.timepoints.items():
            failure = semaphore.failure
            if failure is not None:
                return failure.code, copy_error(failure)
            if semaphore._value < value:
                pending = True
        return (StatusCode.DEFERRED if pending else StatusCode.OK), None

    def passed(self) -> bool:
        """True when every timepoint is reached and none failed (no lock: a value
        only grows, a failure stays)."""
        for semaphore, value in self.timepoints.items():
            if semaphore._value < value or semaphore._failure is not None:
                return False
        return True

    def is_reached(self) -> bool:
        """True when every timepoint is reached; raises a failure."""
        if self.passed():
            return True
        code, error = self.status()
        if error is not None:
            raise error
        return code == StatusCode.OK

    def signal(self) -> None:
        for semaphore, value in self.timepoints.items():
            semaphore.signal(value)

    def fail(self, error: VmrtError) -> None:
        for semaphore in self.timepoints:
            semaphore.fail(error)

    def wait(self, deadline: float | None = None) -> None:
        tracer = timeline.active
        if tracer is not None:  # a span on the waiting thread (vmrt.timeline)
            tracer.call("fence.wait", "fence", self._wait, deadline,
                        args={"timepoints": len(self.timepoints)})
            return
        self._wait(deadline)

    def _wait(self, deadline: float | None) -> None:
        for semaphore, value in self.timepoints.items():
            # (a value only grows: one reached without failure needs no lock)
            if semaphore._value < value or semaphore._failure is not None:
                semaphore.wait(value, deadline)

    def on_reached(self, callback) -> None:
        """Calls `callback(None)` when all timepoints are reached or
        `callback(error)` on the first failure; exactly once."""
        pending = [len(self.timepoints)]
        if not pending[0]:
            callback(None)
            return
        lock = threading.Lock()
        done = [False]

        def one(error):
            with lock:
                if done[0]:
                    return
                if error is None:
                    pending[0] -= 1
                    if pending[0]:
                        return
                done[0] = True
            callback(error)

        for semaphore, value in list(self.timepoints.items()):
            semaphore.on_reached(value, one)
