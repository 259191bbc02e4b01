"""The guard of one VM call under limits: made at the call's host entry
(vmrt.vm.limits, Meter.entry), current on its thread while it runs, and carried
to the HAL work it starts (device threads run under it, waits and workgroup loops
check it). It holds the call's deadline and, through its meter, the context's
cancellation, fuel and memory."""

from __future__ import annotations

import contextvars
import threading
import time


def raise_error(error) -> None:
    """Raises `error` if there is one, leaving no frame that refers to it (a frame
    in an error's traceback holding the error is a cycle keeping the failed call's
    values until the garbage collector runs)."""
    if error is not None:
        try:
            raise error
        finally:
            error = None


class CallGuard:
    """The limits of one outermost VM call: its `meter` (vmrt.vm.limits.Meter) and
    its own `deadline` (time.monotonic(), or None), made on `thread`."""

    __slots__ = ("meter", "deadline", "thread")

    def __init__(self, meter, deadline: float | None):
        self.meter = meter
        self.deadline = deadline
        self.thread = threading.get_ident()  # the calling thread

    def check(self) -> None:
        """Raises CANCELLED or DEADLINE_EXCEEDED when the call must stop."""
        meter, deadline = self.meter, self.deadline
        if meter.cancelled or meter.deadline is not None or (
                deadline is not None and time.monotonic() >= deadline):
            raise_error(meter.interruption_at(deadline))

    def moved(self) -> CallGuard:
        """The same call's guard for the thread it now runs on (its deadline kept)."""
        return CallGuard(self.meter, self.deadline)


#: The CallGuard of the call this thread works for.
GUARD: contextvars.ContextVar = contextvars.ContextVar("vmrt_call_guard", default=None)


def current_guard() -> CallGuard | None:
    """The CallGuard of the VM call this thread works for, if it has limits."""
    return GUARD.get()


#: Resets the CallGuard that Meter.enter_guard made current, given its token.
leave_guard = GUARD.reset


class guarded:  # noqa: N801 (used as a function: `with guarded(meter):`)
    """Runs a `with` block under the current call's CallGuard, checked first
    (Meter.enter_guard)."""

    __slots__ = ("meter", "token")

    def __init__(self, meter):
        self.meter = meter

    def __enter__(self) -> None:
        self.token = self.meter.enter_guard()

    def __exit__(self, *error) -> None:
        GUARD.reset(self.token)


def carry_guard(work):
    """`work` (a callable, or None) to run on another thread under this thread's
    CallGuard: device threads keep working for the call that submitted the work."""
    guard = GUARD.get()
    if guard is None or work is None:
        return work

    def under_guard():
        token = GUARD.set(guard)
        try:
            return work()
        finally:
            GUARD.reset(token)
    return under_guard
