"""Errors as a host first meets them: a call stopped by a limit or cancelled raises a
VMError subclass naming why (with its status code as before), an unbounded recursion's
message stays short (repeated frames collapsed as CPython does), and a file vmrt
cannot open is also the OSError the system reported."""

from __future__ import annotations

import errno
import os
import re
import threading

import numpy as np
import pytest

import vmrt
from vmrt.errors import StatusCode, VMError
from vmrt.vm.limits import Limits

PROGRAM = """
vm.module @m version 1
vm.type i32
vm.type !vm.buffer
vm.type !vm.list<i32>

vm.export @recurse
vm.func @recurse(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @recurse(%i0)
  vm.return %i1
}

vm.export @ping
vm.func @ping(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @pong(%i0)
  vm.return %i1
}

vm.func @pong(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @ping(%i0)
  vm.return %i1
}

vm.export @spin
vm.func @spin() -> () {
^bb0:
  vm.br ^bb0()
}

vm.export @alloc
vm.func @alloc(%i0: i32) -> (!vm.buffer) {
^bb0:
  %i2:3 = vm.ext.i32.i64.s %i0
  %i4 = vm.const.i32 16
  %r0 = vm.buffer.alloc %i2:3, %i4
  vm.return %r0
}

vm.export @list_of
vm.func @list_of(%i0: i32) -> (!vm.list<i32>) {
^bb0:
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i1 : !vm.list<i32>
  vm.list.resize %r0, %i0
  vm.return %r0
}
"""


def stopped(limits: Limits | None, export: str, *args, before=None) -> VMError:
    """The error of calling m.`export` in a context with `limits` (`before(context)` first)."""
    with vmrt.load(PROGRAM, limits=limits) as m:
        if before is not None:
            before(m.context)
        with pytest.raises(VMError) as info:
            m.function(export)(*args)
        return info.value


# -- item 4: one subclass per limit and for cancellation ------------------------------------------
@pytest.mark.parametrize("limits, export, args, class_name, code, limit", [
    (Limits(fuel=1000), "spin", (), "FuelExhausted", StatusCode.RESOURCE_EXHAUSTED, "fuel"),
    (Limits(max_depth=50), "recurse", (1,), "DepthExceeded", StatusCode.RESOURCE_EXHAUSTED,
     "max_depth"),
    (Limits(max_memory=1000), "alloc", (4000,), "MemoryLimitExceeded",
     StatusCode.RESOURCE_EXHAUSTED, "max_memory"),
    (Limits(max_memory=1000), "list_of", (4000,), "MemoryLimitExceeded",
     StatusCode.RESOURCE_EXHAUSTED, "max_memory"),
    (Limits(timeout=0.05), "spin", (), "DeadlineExceeded", StatusCode.DEADLINE_EXCEEDED,
     "timeout"),
])
def test_each_limit_has_its_error_class(limits, export, args, class_name, code, limit):
    error = stopped(limits, export, *args)
    assert type(error) is getattr(vmrt, class_name) and isinstance(error, vmrt.LimitExceeded)
    assert error.code == code and error.limit == limit
    assert str(error).startswith(code.name + ": ")


def test_unbounded_recursion_without_limits_is_depth_exceeded():
    error = stopped(None, "recurse", 1)
    assert type(error) is vmrt.DepthExceeded and error.code == StatusCode.RESOURCE_EXHAUSTED


def test_cancellation_has_its_error_class():
    error = stopped(Limits(), "spin", before=lambda ctx: ctx.cancel())
    assert type(error) is vmrt.Cancelled and error.code == StatusCode.CANCELLED
    with vmrt.load(PROGRAM, limits=Limits()) as m:  # cancelled while running
        timer = threading.Timer(0.05, m.context.cancel)
        timer.start()
        with pytest.raises(vmrt.Cancelled):
            m.spin()
        timer.join()


def test_set_deadline_is_deadline_exceeded():
    error = stopped(Limits(), "spin", before=lambda ctx: ctx.set_deadline(0.0))
    assert type(error) is vmrt.DeadlineExceeded


def test_vm_errors_pick_their_class_from_the_limit_tag_or_the_status():
    assert type(VMError("x", StatusCode.RESOURCE_EXHAUSTED, limit="fuel")) is vmrt.FuelExhausted
    assert type(VMError("x", StatusCode.CANCELLED)) is vmrt.Cancelled
    assert type(VMError("x", StatusCode.DEADLINE_EXCEEDED)) is vmrt.DeadlineExceeded
    assert type(VMError("x", StatusCode.RESOURCE_EXHAUSTED)) is VMError
    assert type(VMError("x")) is VMError and VMError("x").code == StatusCode.INTERNAL
    assert vmrt.FuelExhausted("x").code == StatusCode.RESOURCE_EXHAUSTED


@pytest.fixture(scope="module")
def hal_context():
    """A context with the hostile hal calls of the untrusted suite, per limits."""
    from tests.vm import hostile_hal
    opened = []

    def make(limits):
        opened.append(hostile_hal.context(limits, "local-sync"))
        return opened[-1]
    yield make
    for ctx in opened:
        hostile_hal.close(ctx)


def test_hal_work_stopped_by_limits_raises_their_classes(hal_context):
    from tests.vm import hostile_hal
    from vmrt.vm.buffer import VMBuffer
    executable = VMBuffer.from_bytes(hostile_hal.mlp_executable())
    ctx = hal_context(Limits(max_memory=1 << 20))
    with pytest.raises(vmrt.MemoryLimitExceeded):
        ctx.function("hostile.alloca_fill")(1024)  # a 1 GiB queue allocation
    ctx = hal_context(Limits(timeout=0.1))
    with pytest.raises(vmrt.DeadlineExceeded):
        ctx.function("hostile.dispatch")(executable, 0, 65535, 65535)
    ctx = hal_context(Limits())
    ctx.cancel()
    with pytest.raises(vmrt.Cancelled):
        ctx.function("hostile.dispatch")(executable, 0, 4, 4)


def test_fuel_running_out_in_a_dispatch_is_fuel_exhausted(hal_context):
    from tests.vm import hostile_hal
    from vmrt.vm.buffer import VMBuffer
    ctx = hal_context(Limits(fuel=100_000))
    spinning = VMBuffer.from_bytes(hostile_hal.spinning_executable())
    with pytest.raises(vmrt.FuelExhausted):
        ctx.function("hostile.dispatch_unbound")(spinning, 0, 1, 1)


# -- item 5: repeated frames collapsed ------------------------------------------------------------
def _frames_in(stack: list[str]) -> int:
    """The frames a stack stands for: the C tier keeps its innermost frames and counts
    the rest in a last entry (`... N more frames`)."""
    counted = re.fullmatch(r"\.\.\. (\d+) more frames", stack[-1]) if stack else None
    return len(stack) - 1 + int(counted.group(1)) if counted else len(stack)


def test_unbounded_recursion_message_is_short():
    error = stopped(None, "recurse", 1)
    assert _frames_in(error.stack) > 1000  # every frame is there for those who look
    message = str(error)
    assert len(message) < 2000, len(message)
    assert re.search(r"\.\.\. [\d,]+ more frames of m\.recurse\+", message), message
    assert message.startswith("RESOURCE_EXHAUSTED: ")
    assert len(error.format_stack()) < 2000


def test_mutual_recursion_message_is_short():
    error = stopped(Limits(max_depth=2000), "ping", 1)
    assert len(str(error)) < 2000
    assert f"more frames of ({error.stack[1]} <- {error.stack[2]})" in str(error)


def test_collapse_frames_keeps_distinct_frames_and_bounds_any_stack():
    from vmrt.errors import collapse_frames
    assert collapse_frames(["a", "b", "b", "b", "main"]) == ["a", "b", "b", "b", "main"]
    assert collapse_frames(["a"] + ["b"] * 10 + ["main"]) == \
        ["a", "b", "b", "b", "... 7 more frames of b", "main"]
    distinct = [f"m.f{i}" for i in range(1000)]
    shown = collapse_frames(distinct)
    assert len(shown) < 50 and shown[0] == "m.f0" and shown[-1] == "m.f999"
    assert any(entry.startswith("... ") and "more frames" in entry for entry in shown)


# -- item 6: file errors are OSErrors too ---------------------------------------------------------
def test_a_missing_module_file_is_file_not_found(tmp_path):
    missing = tmp_path / "model.vmfb"
    with pytest.raises(FileNotFoundError) as info:
        vmrt.load(missing)
    error = info.value
    assert isinstance(error, vmrt.VmrtError) and error.code == StatusCode.NOT_FOUND
    assert error.errno == errno.ENOENT and error.filename == str(missing)
    assert str(error).startswith("NOT_FOUND: cannot read module")


def test_load_module_of_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        vmrt.load_module(tmp_path / "missing.vmfb")
    assert isinstance(info.value, vmrt.ModuleFormatError)
    assert info.value.code == StatusCode.NOT_FOUND


def test_a_directory_is_is_a_directory_error(tmp_path):
    with pytest.raises(IsADirectoryError):
        vmrt.load(tmp_path)
    from vmrt.io import ParameterIndex
    with pytest.raises(IsADirectoryError) as info:
        ParameterIndex.load(tmp_path)
    assert isinstance(info.value, vmrt.VmrtError)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_permission_error(tmp_path):
    locked = tmp_path / "locked.vmfb"
    locked.write_bytes(b"")
    locked.chmod(0)
    with pytest.raises(PermissionError) as info:
        vmrt.load(locked)
    assert info.value.code == StatusCode.PERMISSION_DENIED


def test_a_missing_parameter_archive_is_file_not_found(tmp_path):
    from vmrt.io import ParameterIndex
    missing = tmp_path / "weights.irpa"
    with pytest.raises(FileNotFoundError) as info:
        ParameterIndex.load(missing)
    assert info.value.code == StatusCode.NOT_FOUND and info.value.filename == str(missing)
    index = ParameterIndex()
    index.add_buffer("w", np.zeros(4, np.float32).tobytes())
    index.save(tmp_path / "w.irpa")
    os.remove(tmp_path / "w.irpa")
    with pytest.raises(FileNotFoundError):
        ParameterIndex.load(tmp_path / "w.irpa", mode="preload")
