"""Command buffers and device queues on local-sync and local-task, with a
Python executable standing in for compiled code: recording validation,
binding tables, fence ordering, failure propagation and concurrent workgroups."""

from __future__ import annotations

import struct
import threading
import time

import pytest

from vmrt.errors import StatusCode
from vmrt.hal import (
    BufferUsage, CommandCategory, Executable, Fence, FunctionInfo, HalError, MemoryType,
    Semaphore, create_device,
)
from vmrt.hal.command_buffer import CommandBuffer

DEVICE_LOCAL = int(MemoryType.DEVICE_LOCAL)
DEFAULT = int(BufferUsage.DEFAULT)
ANY = int(CommandCategory.ANY)


#: Seconds no test here comes near unless it hangs (or work meant to overlap did not).
HANG = 60


class Doubler(Executable):
    """Function 0: out[i] = in[i] * 2 + constant[0] for the i32 at workgroup x.
    Function 1: fails on workgroup 2. Records which worker ran each workgroup.
    With `meet`, the first `meet` workgroups to start wait for one another: they
    finish only if the device runs them at the same time (else the wait breaks)."""

    def __init__(self, meet: int = 0):
        super().__init__([FunctionInfo("double", constant_count=1, binding_count=2),
                          FunctionInfo("fail", binding_count=0)])
        self.meeting = threading.Barrier(meet, timeout=HANG) if meet else None
        self.started = 0
        self.workers: dict[int, int] = {}
        self.lock = threading.Lock()

    def run_workgroups(self, state, workgroups, worker_id=0):
        for x, y, z in workgroups:
            if state.function == 1 and x == 2:
                raise HalError("workgroup 2 refused", StatusCode.ABORTED)
            with self.lock:
                self.started += 1
                meets = self.meeting is not None and self.started <= self.meeting.parties
            if meets:
                self.meeting.wait()
            with self.lock:
                self.workers[x] = worker_id
            if state.function == 0:
                (bias,) = struct.unpack("<i", state.constants)
                source, target = state.bindings
                value = struct.unpack_from("<i", source, 4 * x)[0]
                struct.pack_into("<i", target, 4 * x, value * 2 + bias)


@pytest.fixture(params=["local-sync", "local-task"])
def device(request):
    device = create_device(request.param)
    yield device
    device.close()


def _buffer(device, values, usage=DEFAULT):
    buffer = device.allocator.allocate_buffer(DEVICE_LOCAL, usage, 4 * len(values))
    buffer.map_write(0, struct.pack(f"<{len(values)}i", *values))
    return buffer


def _values(buffer):
    return list(struct.unpack(f"<{buffer.byte_length // 4}i", buffer.map_read(0, -1)))


def _execute(device, command_buffer, table=()):
    signal = device.create_fence()
    device.queue_execute(-1, None, signal, command_buffer, table)
    signal.wait()


def test_transfer_commands_and_barriers(device):
    a = _buffer(device, [1, 2, 3, 4])
    b = _buffer(device, [0, 0, 0, 0])
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    cb.fill_buffer((b, 0, 0, 16), struct.pack("<i", 7))
    cb.execution_barrier()
    cb.copy_buffer((a, 0, 4, 8), (b, 0, 0, 8))
    cb.execution_barrier()
    cb.update_buffer(struct.pack("<i", 99), (b, 0, 12, 4))
    cb.end()
    assert [len(r) for r in cb.regions()] == [1, 1, 1]
    _execute(device, cb)
    assert _values(b) == [2, 3, 7, 99]


def test_dispatch_through_a_binding_table(device):
    executable = Doubler()
    source = _buffer(device, [0, 10, 20, 30, 40])
    target = _buffer(device, [0] * 8)
    cb = device.create_command_buffer(0, ANY, binding_capacity=2)
    cb.begin()
    cb.dispatch(executable, 0, (5, 1, 1), struct.pack("<i", 1),
                [(None, 0, 0, -1), (None, 1, 4, 20)])
    cb.end()
    assert cb.binding_count == 2
    _execute(device, cb, [(source, 0, -1), (target, 0, -1)])
    assert _values(target) == [0, 1, 21, 41, 61, 81, 0, 0]


def test_recording_validation(device):
    executable = Doubler()
    buffer = _buffer(device, [0, 0])
    cb = device.create_command_buffer(0, int(CommandCategory.TRANSFER))
    with pytest.raises(HalError) as info:
        cb.fill_buffer((buffer, 0, 0, 8), b"\0")  # before begin()
    assert info.value.code == StatusCode.FAILED_PRECONDITION
    cb.begin()
    with pytest.raises(HalError) as info:
        cb.dispatch(executable, 0, (1, 1, 1), b"\0" * 4, [])
    assert "DISPATCH" in info.value.message
    for pattern, ref in ((b"\0\0\0", (buffer, 0, 0, 8)), (b"\0\0\0\0", (buffer, 0, 2, 4))):
        with pytest.raises(HalError) as info:
            cb.fill_buffer(ref, pattern)
        assert info.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(HalError) as info:
        cb.copy_buffer((buffer, 0, 0, 4), (buffer, 0, 2, 4))
    assert "overlap" in info.value.message
    with pytest.raises(HalError) as info:
        cb.copy_buffer((None, 3, 0, 4), (buffer, 0, 4, 4))
    assert info.value.code == StatusCode.OUT_OF_RANGE  # slot past binding capacity 0
    cb.end()
    with pytest.raises(HalError):
        cb.begin()


def test_dispatch_arguments_must_match_the_function(device):
    executable = Doubler()
    buffer = _buffer(device, [0])
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    with pytest.raises(HalError) as info:
        cb.dispatch(executable, 0, (1, 1, 1), b"", [(buffer, 0, 0, 4)] * 2)
    assert "constant count mismatch" in info.value.message
    with pytest.raises(HalError) as info:
        cb.dispatch(executable, 0, (1, 1, 1), b"\0" * 4, [(buffer, 0, 0, 4)])
    assert "binding count mismatch" in info.value.message
    with pytest.raises(HalError) as info:
        cb.dispatch(executable, 5, (1, 1, 1), b"", [])
    assert info.value.code == StatusCode.OUT_OF_RANGE


def test_submission_checks_the_binding_table(device):
    buffer = _buffer(device, [0, 0])
    cb = device.create_command_buffer(0, ANY, binding_capacity=1)
    cb.begin()
    cb.fill_buffer((None, 0, 0, 8), b"\1")
    with pytest.raises(HalError) as info:
        device.queue_execute(-1, None, None, cb, [(buffer, 0, -1)])
    assert "finalized" in info.value.message
    cb.end()
    with pytest.raises(HalError) as info:
        device.queue_execute(-1, None, None, cb, [])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    buffer.allowed_usage &= ~int(BufferUsage.TRANSFER_TARGET)
    with pytest.raises(HalError) as info:
        device.queue_execute(-1, None, None, cb, [(buffer, 0, -1)])
    assert info.value.code == StatusCode.PERMISSION_DENIED


def test_indirect_workgroup_count(device):
    executable = Doubler()
    plain = _buffer(device, [3, 1, 1])
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    with pytest.raises(HalError) as info:  # not allocated for indirect parameters
        cb.dispatch(executable, 0, None, b"\0" * 4, [(plain, 0, 0, -1)] * 2,
                    workgroup_count_ref=(plain, 0, 0, 12))
    assert info.value.code == StatusCode.PERMISSION_DENIED
    counts = _buffer(device, [3, 1, 1],
                     DEFAULT | int(BufferUsage.DISPATCH_INDIRECT_PARAMETERS))
    source = _buffer(device, [1, 2, 3, 4])
    target = _buffer(device, [0, 0, 0, 0])
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    cb.dispatch(executable, 0, None, struct.pack("<i", 0), [(source, 0, 0, -1),
                                                            (target, 0, 0, -1)],
                workgroup_count_ref=(counts, 0, 0, 12))
    cb.end()
    _execute(device, cb)
    assert _values(target) == [2, 4, 6, 0]


def test_queue_operations_follow_their_fences(device):
    first, second = Semaphore(), Semaphore()
    buffer = _buffer(device, [0, 0])
    wait = Fence([(first, 1)])
    signal = Fence([(second, 1)])
    if device.identifier == "local-task":
        device.queue_fill(-1, wait, signal, buffer, 0, 8, b"\5")
        time.sleep(0.01)
        assert _values(buffer) == [0, 0] and second.query() == 0  # waiting for `first`
        first.signal(1)
        second.wait(1, time.monotonic() + 5)
    else:
        first.signal(1)  # local-sync waits inline: the wait must already be reachable
        device.queue_fill(-1, wait, signal, buffer, 0, 8, b"\5")
        assert second.query() == 1
    assert _values(buffer) == [0x05050505] * 2


def test_alloca_returns_at_once_and_dealloca_signals(device):
    signal = device.create_fence()
    buffer = device.queue_alloca(-1, None, signal, DEVICE_LOCAL, DEFAULT, 64)
    signal.wait(time.monotonic() + 5)
    assert buffer.byte_length == 64
    done = device.create_fence()
    device.queue_dealloca(-1, signal, done, buffer)
    done.wait(time.monotonic() + 5)


def test_a_failing_dispatch_fails_the_signal_fence(device):
    executable = Doubler()
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    cb.dispatch(executable, 1, (4, 1, 1), b"", [])
    cb.end()
    signal = device.create_fence()
    later = device.create_fence()
    if device.identifier == "local-sync":
        with pytest.raises(HalError) as info:
            device.queue_execute(-1, None, signal, cb)
        assert info.value.code == StatusCode.ABORTED
    else:
        device.queue_execute(-1, None, signal, cb)
        # Work waiting on the failed fence fails the same way without running.
        device.queue_barrier(-1, signal, later)
        with pytest.raises(HalError) as info:
            later.wait(time.monotonic() + 5)
        assert info.value.code == StatusCode.ABORTED
    code, error = signal.status()
    assert code == StatusCode.ABORTED and "workgroup 2 refused" in error.message


def test_task_device_spreads_workgroups_over_workers():
    device = create_device("local-task", worker_count=4)
    try:
        executable = Doubler(meet=4)  # one workgroup on each worker at once
        source = _buffer(device, list(range(16)))
        target = _buffer(device, [0] * 16)
        cb = device.create_command_buffer(0, ANY)
        cb.begin()
        cb.dispatch(executable, 0, (16, 1, 1), struct.pack("<i", 0),
                    [(source, 0, 0, -1), (target, 0, 0, -1)])
        cb.end()
        _execute(device, cb)
        assert _values(target) == [2 * i for i in range(16)]
        assert len(set(executable.workers.values())) == 4
        assert not executable.meeting.broken  # the first four ran together
        assert device.query_i64("hal.device", "concurrency") == 4
    finally:
        device.close()


def test_task_device_runs_independent_commands_of_a_region_together():
    device = create_device("local-task", worker_count=2)
    try:
        executable = Doubler(meet=2)  # each dispatch's workgroup waits for the other's
        buffers = [(_buffer(device, [i]), _buffer(device, [0])) for i in range(2)]
        cb = device.create_command_buffer(0, ANY)
        cb.begin()
        for source, target in buffers:  # no barrier between the two dispatches
            cb.dispatch(executable, 0, (1, 1, 1), struct.pack("<i", 0),
                        [(source, 0, 0, -1), (target, 0, 0, -1)])
        cb.end()
        _execute(device, cb)
        assert not executable.meeting.broken  # the two ran together
        assert [_values(t) for _, t in buffers] == [[0], [2]]
    finally:
        device.close()


def test_device_queries():
    device = create_device("local-sync")
    assert device.query_i64("hal.device.id", "local*") == 1
    assert device.query_i64("hal.device.id", "cuda") == 0
    assert device.query_i64("hal.executable.format", "vmvx-bytecode-fb") == 1
    # Offered even without the C extension: loading then says why it cannot.
    assert device.query_i64("hal.executable.format", "embedded-elf-x86_64") == 1
    assert device.query_i64("hal.executable.format", "system-elf-x86_64") == 1
    assert device.query_i64("hal.executable.format", "embedded-elf-arm_64") == 0
    with pytest.raises(HalError) as info:
        device.query_i64("hal.unknown", "key")
    assert info.value.code == StatusCode.NOT_FOUND
    with pytest.raises(HalError):
        create_device("cuda")


def test_command_buffer_repr_and_regions_skip_empty():
    cb = CommandBuffer(create_device().allocator, 0, ANY)
    cb.begin()
    cb.execution_barrier()
    cb.execution_barrier()
    cb.end()
    assert cb.regions() == []
