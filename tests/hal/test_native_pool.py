"""The native pool (csrc/vmrt_pool.c, NativePool): a command buffer's native
dispatches run region after region in one C call, on the caller and the pool's
threads. What must hold: regions in order (a barrier really waits), transfer
commands between them, a failure stopping later regions, two host threads on one
device, a forked child, and the same results as the one-dispatch-at-a-time path
that tracing still takes."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from vmrt import timeline
from vmrt.hal import BufferUsage, HalError, create_device
from vmrt.hal.device import SyncDevice
from vmrt.hal.native_loader import EMBEDDED_FORMAT, NativePool, native_unavailable_reason

from tests.hal.test_native_executables import ANY, DEFAULT, DEVICE_LOCAL, _buffer, _run, _values

pytestmark = pytest.mark.skipif(native_unavailable_reason() is not None,
                                reason=str(native_unavailable_reason()))

ELEMENTS = 4096  # one workgroup per element: many workgroups per region


@pytest.fixture(params=["local-sync", "local-task"])
def device(request):
    device = create_device(request.param)
    yield device
    device.close()


def _add(cb, executable, source, target, amount: int, count: int = ELEMENTS) -> None:
    cb.dispatch(executable, 0, (count // 64, 64, 1), struct.pack("<i", amount),
                [(source, 0, 0, -1), (target, 0, 0, -1)])


def _chain(executable, a, b, steps: int):
    """`steps` dispatches adding 1, 2, 3, ... alternately a -> b and b -> a, each
    in a region of its own: a barrier that did not wait shows in the sums."""
    def record(cb):
        for step in range(steps):
            source, target = (a, b) if step % 2 == 0 else (b, a)
            _add(cb, executable, source, target, step + 1)
            cb.execution_barrier()
    return record


def test_regions_run_in_order(build, device):
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    for _ in range(5):  # barriers racing would show up in some of the runs
        a, b = _buffer(device, list(range(ELEMENTS))), _buffer(device, [0] * ELEMENTS)
        _run(device, _chain(executable, a, b, 40))
        assert _values(a) == [v + 40 * 41 // 2 for v in range(ELEMENTS)]


def test_transfer_commands_between_native_regions(build, device):
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    a, b = _buffer(device, list(range(ELEMENTS))), _buffer(device, [0] * ELEMENTS)
    c = _buffer(device, [0] * ELEMENTS)
    whole = ELEMENTS * 4

    def record(cb):
        _add(cb, executable, a, b, 1)
        cb.execution_barrier()
        cb.copy_buffer((b, 0, 0, whole), (a, 0, 0, whole))  # needs the first dispatch
        cb.execution_barrier()
        _add(cb, executable, a, c, 10)  # needs the copy
        cb.execution_barrier()
        cb.fill_buffer((a, 0, 0, whole), struct.pack("<i", -1))  # after the last read of a
    _run(device, record)
    assert _values(c) == [v + 11 for v in range(ELEMENTS)]
    assert _values(a) == [-1] * ELEMENTS


def test_a_failure_stops_the_later_regions(build, device):
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    a, b = _buffer(device, list(range(ELEMENTS))), _buffer(device, [0] * ELEMENTS)
    c = _buffer(device, [0] * ELEMENTS)

    def record(cb):
        _add(cb, executable, a, b, 1)
        cb.execution_barrier()
        cb.dispatch(executable, 1, (64, 1, 1), struct.pack("<i", 37))
        cb.execution_barrier()
        _add(cb, executable, b, c, 1)
    with pytest.raises(HalError, match=r"fail_at workgroup \(37, 0, 0\).*catastrophic error 42"):
        _run(device, record)
    assert _values(b) == [v + 1 for v in range(ELEMENTS)]
    assert _values(c) == [0] * ELEMENTS


def test_the_traced_path_gives_the_same_results(build, device):
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    sums = []
    for traced in (False, True):
        a, b = _buffer(device, list(range(ELEMENTS))), _buffer(device, [0] * ELEMENTS)
        if traced:
            with timeline.Timeline() as recorded:
                _run(device, _chain(executable, a, b, 7))
            names = [e.get("name") for e in recorded.trace_events()]
            assert names.count("add_constant") >= 7  # one span per range: not pooled
        else:
            _run(device, _chain(executable, a, b, 7))
        sums.append(_values(b))
    assert sums[0] == sums[1] == [v + 28 for v in range(ELEMENTS)]


def test_two_host_threads_on_one_device(build):
    device = create_device("local-task")
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    failures = []

    def work(seed: int) -> None:
        try:
            for _ in range(10):
                a = _buffer(device, [seed] * ELEMENTS)
                b = _buffer(device, [0] * ELEMENTS)
                _run(device, _chain(executable, a, b, 6))
                if _values(a) != [seed + 21] * ELEMENTS:
                    failures.append(seed)
        except BaseException as error:  # reported below, not lost in the thread
            failures.append(error)
    threads = [threading.Thread(target=work, args=(seed,)) for seed in (100, 200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    device.close()
    assert failures == []


class _PooledSync(SyncDevice):
    """local-sync running its dispatches in a given pool (the fork test's)."""

    __slots__ = ()
    pool: NativePool

    def _native_pool(self):
        return _PooledSync.pool


def test_a_forked_child_runs_without_the_parents_threads(build):
    _PooledSync.pool = NativePool(2)
    device = _PooledSync()
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    a, b = _buffer(device, [5] * ELEMENTS), _buffer(device, [0] * ELEMENTS)
    _run(device, _chain(executable, a, b, 2))  # the pool's threads have started
    assert _values(a) == [8] * ELEMENTS
    pid = os.fork()
    if pid == 0:  # the child: no pool threads; a hang here fails the wait below
        try:
            _run(device, _chain(executable, a, b, 2))
            os._exit(0 if _values(a) == [11] * ELEMENTS else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    _PooledSync.pool.close()
    _run(device, _chain(executable, a, b, 2))  # a closed pool runs on the caller
    assert _values(a) == [11] * ELEMENTS


def test_a_workgroup_count_read_from_a_buffer_each_run(build, device):
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    a, b = _buffer(device, list(range(ELEMENTS))), _buffer(device, [0] * ELEMENTS)
    counts = device.allocator.allocate_buffer(
        DEVICE_LOCAL, DEFAULT | int(BufferUsage.DISPATCH_INDIRECT_PARAMETERS), 12)
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    cb.dispatch(executable, 0, None, struct.pack("<i", 3),
                [(a, 0, 0, -1), (b, 0, 0, -1)], workgroup_count_ref=(counts, 0, 0, 12))
    cb.end()
    for rows in (1, 64, 2):  # the same command buffer: the count is read at each run
        counts.map_write(0, struct.pack("<3I", 64, rows, 1))
        b.map_write(0, bytes(4 * ELEMENTS))
        signal = device.create_fence()
        device.queue_execute(-1, None, signal, cb)
        signal.wait()
        done = 64 * rows
        assert _values(b) == [v + 3 for v in range(done)] + [0] * (ELEMENTS - done)


def test_many_short_runs_with_workers_joining_late(build):
    """Runs of a few workgroups each, back to back: the workers wake up while the
    caller already works (or has finished), join whichever run is on, and must
    never run a workgroup of a region before the previous one is done, nor touch a
    run that ended."""
    device = create_device("local-task", worker_count=4)
    try:
        executable = device.create_executable(EMBEDDED_FORMAT, build())
        count = 256  # four workgroups of 64 per dispatch
        a, b = _buffer(device, list(range(count))), _buffer(device, [0] * count)
        cb = device.create_command_buffer(0, ANY)
        cb.begin()
        for step in range(3):
            source, target = (a, b) if step % 2 == 0 else (b, a)
            _add(cb, executable, source, target, 1, count)
            cb.execution_barrier()
        cb.end()
        for run in range(1, 301):
            signal = device.create_fence()
            device.queue_execute(-1, None, signal, cb)
            signal.wait()
            assert _values(b) == [v + 2 * run + 1 for v in range(count)], run
    finally:
        device.close()


def test_a_region_starts_after_the_last_workgroup_of_the_previous_one(build):
    """The next region reads first what the previous one wrote last (the tail of
    `b`, written by the last grains, which another thread may be running): it must
    wait for those workgroups to finish, not only for the counters to run out. The
    first region is long enough for the worker to wake up and take part."""
    device = create_device("local-task", worker_count=2)
    try:
        executable = device.create_executable(EMBEDDED_FORMAT, build())
        elements, tail = 1 << 18, 512
        a, b = _buffer(device, list(range(elements))), _buffer(device, [0] * elements)
        c = _buffer(device, [0] * tail)
        start = (elements - tail) * 4

        def record(cb):
            _add(cb, executable, a, b, 1, elements)
            cb.execution_barrier()
            cb.dispatch(executable, 0, (tail // 64, 64, 1), struct.pack("<i", 10),
                        [(b, 0, start, tail * 4), (c, 0, 0, -1)])
        expected = [v + 11 for v in range(elements - tail, elements)]
        for run in range(40):
            b.map_fill(0, elements * 4, b"\0")
            _run(device, record)
            assert _values(c) == expected, run
    finally:
        device.close()


_THREAD_MASKS = """
import json, os
from vmrt.hal.native_loader import NativePool
before = set(os.listdir("/proc/self/task"))
pool = NativePool(3)
threads = set(os.listdir("/proc/self/task")) - before
print(json.dumps(sorted(sorted(os.sched_getaffinity(int(t))) for t in threads)))
pool.close()
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("setting", [None, "0"])
def test_pool_threads_are_pinned_one_per_cpu_unless_told_not_to(setting):
    """A pool's threads are each pinned to one CPU the process may use, the first
    left to the caller (IREE pins its workers likewise); VMRT_POOL_PIN=0: unpinned.
    (In a child process: no other thread starts meanwhile.)"""
    import json
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "VMRT_POOL_PIN"}
    if setting is not None:
        env["VMRT_POOL_PIN"] = setting
    masks = json.loads(subprocess.run([sys.executable, "-c", _THREAD_MASKS], env=env,
                                      capture_output=True, text=True, check=True).stdout)
    allowed = sorted(os.sched_getaffinity(0))
    if setting is None:
        assert masks == sorted([[allowed[1 % len(allowed)]], [allowed[2 % len(allowed)]]])
    else:
        assert masks == [allowed, allowed]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_caller_on_a_workers_cpu_steps_aside_for_the_run_only(build):
    """A run whose caller sits on a pinned worker's CPU moves it off for the run
    (else the two share that core) and gives it back its own affinity after."""
    allowed = sorted(os.sched_getaffinity(0))
    device = create_device("local-task", worker_count=2)
    try:
        executable = device.create_executable(EMBEDDED_FORMAT, build())
        os.sched_setaffinity(0, {allowed[1]})  # where the pool's one worker is pinned
        os.sched_setaffinity(0, allowed)       # (still on that CPU, free to move)
        a, b = _buffer(device, list(range(ELEMENTS))), _buffer(device, [0] * ELEMENTS)
        _run(device, _chain(executable, a, b, 4))
        assert _values(a) == [v + 4 * 5 // 2 for v in range(ELEMENTS)]
        assert sorted(os.sched_getaffinity(0)) == allowed
    finally:
        os.sched_setaffinity(0, allowed)
        device.close()
