"""How exports over HAL objects (the hal and io_parameters modules) take their VM
arguments and run under the calling VM call's limits."""

from __future__ import annotations

from vmrt.hal.semaphore import Fence
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.call_guard import current_guard, leave_guard
from vmrt.vm.ref import null_ref_error

UINT32_MAX = 0xFFFFFFFF


# -- arguments -------------------------------------------------------------------------------------
def deref(value, cls, what: str):
    """`value` when it is a `cls`; otherwise the null/wrong-type ref error naming `what`.
    (Exports on every call's path test the type themselves and call it only to fail:
    a call to it costs more than the test.)"""
    if isinstance(value, cls):
        return value
    raise null_ref_error(what, value)


def deref_or_null(value, cls, what: str):
    """As deref, but None passes."""
    if value is None or isinstance(value, cls):
        return value
    raise null_ref_error(what, value)


def fence_or_none(value) -> Fence | None:
    """iree_hal_fence_deref: anything that is not a fence is no fence."""
    return value if isinstance(value, Fence) else None


def buffer_string(value) -> str:
    """iree_vm_buffer_as_string (a null buffer is the empty string)."""
    if value is None:
        return ""
    buffer = deref(value, VMBuffer, "buffer")
    return bytes(buffer.view).decode("utf-8", "replace")


def u32(value: int) -> int:
    return value & UINT32_MAX


def i32(value: int) -> int:
    value &= UINT32_MAX
    return value - (1 << 32) if value >> 31 else value


# -- limits ----------------------------------------------------------------------------------------
# In a context with limits a module's per-context state is the context's Meter
# (vmrt.vm.limits), passed to exports as `meter` (None without limits).


def charged(meter, nbytes: int, allocate):
    """allocate() with `nbytes` charged to `meter` while the object it returns lives
    (its `charge`); over the limit it fails before allocating anything."""
    if meter is None:
        return allocate()
    hold = meter.hold(nbytes)
    try:
        made = allocate()
    except BaseException:
        hold.release()
        raise
    made.charge = hold
    return made


def guarded_call(meter, fn, *args):
    """fn(*args), under the calling VM call's limits when its context has them:
    waits, device work and dispatches stop with the call, VM code is metered."""
    if meter is None:
        return fn(*args)
    guard = current_guard()
    if guard is not None and guard.meter is meter:  # (the call's, current since its entry)
        guard.check()
        return fn(*args)
    token = meter.enter_guard()  # (what `with guarded(meter)` does, cheaper)
    try:
        return fn(*args)
    finally:
        leave_guard(token)


def queue_call(meter, queue_method, queue_affinity, wait_fence, signal_fence, *args):
    """A device.queue.* export's work: `queue_method` (a Device queue_* method) after
    `wait_fence`, signalling `signal_fence`, under the call's limits. The fences are
    the VM's refs as passed: anything that is not a fence is no fence."""
    wait, signal = fence_or_none(wait_fence), fence_or_none(signal_fence)
    if meter is None:  # (guarded_call's own first test, without its frame)
        return queue_method(queue_affinity, wait, signal, *args)
    return guarded_call(meter, queue_method, queue_affinity, wait, signal, *args)


def queue_bookkeeping(meter, queue_method, queue_affinity, wait_fence, signal_fence, *args):
    """queue_call of an operation that runs no code and moves no data (alloca,
    dealloca, barrier). With nothing to wait for it cannot block or run long, so it
    needs no CallGuard (its allocation is charged by `charged`, and the call stops at
    its next check point all the same): looking the guard up is a good part of what
    limits add to a small model's call."""
    wait = fence_or_none(wait_fence)
    if meter is not None and wait is not None and not wait.passed():
        return queue_call(meter, queue_method, queue_affinity, wait, signal_fence, *args)
    return queue_method(queue_affinity, wait, fence_or_none(signal_fence), *args)
