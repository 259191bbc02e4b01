"""Local HAL devices: queue operations ordered by semaphores, and the two
drivers of upstream's local HAL.

- `local-sync` (SyncDevice): every queue operation waits for its wait fence,
  runs on the calling thread and signals its signal fence before returning
  (runtime/src/iree/hal/drivers/local_sync). A failed operation fails its
  signal fence and also raises to the caller.
- `local-task` (TaskDevice): queue operations start when their wait fences are
  reached and run on an issue thread; a dispatch's workgroups, and the
  independent commands between two barriers, run on a pool of worker threads.
  Failures travel through the signal fences.
"""

from __future__ import annotations

import itertools
import os
import threading

from vmrt import timeline
from vmrt.errors import Cancelled, HalError, StatusCode, VmrtError, release_frames, run_with
from vmrt.hal.allocator import HeapAllocator
from vmrt.hal.buffer import Buffer, check_fill_pattern, fill_view, map_copy
from vmrt.hal.command_buffer import CommandBuffer, DispatchCommand
from vmrt.hal.executable import DispatchState, Executable, ExecutableLoader
from vmrt.hal.file import MemoryFile
from vmrt.hal.semaphore import Fence, Semaphore
from vmrt.hal.tracing import TracedExecutable, traced_queue_operation
from vmrt.hal.types import ACCESS_READ, ACCESS_WRITE, WHOLE_BUFFER
from vmrt.vm.call_guard import carry_guard
from vmrt.vm.ref import RefObject


#: Kinds of the steps of a command buffer's plan (Device._plan).
_NATIVE, _TRANSFERS, _DISPATCHES = "native", "transfers", "dispatches"


def as_error(exc: BaseException) -> VmrtError:
    """A status-carrying error for anything a queue operation raised (CANCELLED for
    KeyboardInterrupt and the like: they reach the submitter as themselves)."""
    if isinstance(exc, VmrtError):
        return exc
    if not isinstance(exc, Exception):
        return Cancelled(f"the operation was interrupted ({type(exc).__name__})")
    return HalError(f"{type(exc).__name__}: {exc}", StatusCode.INTERNAL)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as a container or taskset
    sets it; all of the machine's where there is none): a local-task device's
    default worker count, so that no two of its workers share a core."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Device(RefObject):
    """A hal.device: allocator, executable loaders and queue operations.

    Subclasses decide how a queue operation is scheduled (`_submit`) and how a
    dispatch's workgroups are run (`_run_dispatches`).
    """

    __slots__ = ("identifier", "allocator", "loaders")

    def __init__(self, identifier: str, loaders=None, allocator: HeapAllocator | None = None):
        self.identifier = identifier
        self.allocator = allocator or HeapAllocator()
        if loaders is None:
            from vmrt.hal.native_loader import NativeLoader
            from vmrt.hal.python_loader import PythonLoader
            from vmrt.hal.vmvx_loader import VmvxLoader
            loaders = [VmvxLoader(), NativeLoader(), PythonLoader()]
        self.loaders: list[ExecutableLoader] = list(loaders)

    def __repr__(self) -> str:
        return f"<hal.device {self.identifier}>"

    # -- queries --------------------------------------------------------------------------------
    @property
    def concurrency(self) -> int:
        return 1

    def query_i64(self, category: str, key: str) -> int:
        """iree_hal_device_query_i64; NOT_FOUND for keys the device does not know."""
        if category == "hal.device.id":
            return 1 if match_pattern(self.identifier, key) else 0
        if category == "hal.executable.format":
            return 1 if any(loader.supports(key) for loader in self.loaders) else 0
        if category in ("hal.device", "hal.dispatch") and key == "concurrency":
            return self.concurrency
        raise HalError(f"unknown device configuration key value '{category} :: {key}'",
                       StatusCode.NOT_FOUND)

    # -- resources ------------------------------------------------------------------------------
    def create_semaphore(self, initial_value: int = 0) -> Semaphore:
        return Semaphore(initial_value)

    def create_fence(self) -> Fence:
        """A fence over a new semaphore, reached at value 1 (hal.fence.create)."""
        return Fence.at(Semaphore(0), 1)

    def create_command_buffer(self, mode: int, categories: int, queue_affinity: int = -1,
                              binding_capacity: int = 0) -> CommandBuffer:
        return CommandBuffer(self.allocator, mode, categories, queue_affinity, binding_capacity)

    def create_executable(self, executable_format: str, data, constants: bytes = b"",
                          queue_affinity: int = -1) -> Executable:
        for loader in self.loaders:
            if loader.supports(executable_format):
                return loader.load(executable_format, data, constants)
        formats = ", ".join(f for loader in self.loaders for f in loader.formats)
        raise HalError(f"no executable loader supports the format '{executable_format}' "
                       f"(available: {formats})", StatusCode.NOT_FOUND)

    # -- scheduling (subclasses) -------------------------------------------------------------------
    def _submit(self, wait: Fence | None, signal: Fence | None, work) -> None:
        raise NotImplementedError

    def _run_dispatches(self, dispatches: list[tuple[Executable, DispatchState]]) -> None:
        raise NotImplementedError

    def wait_idle(self, timeout_seconds: float | None = None) -> None:
        """Blocks until all submitted work has finished."""

    def close(self) -> None:
        """Releases worker threads (a closed device can still run inline)."""

    # -- queue operations --------------------------------------------------------------------------
    def queue_alloca(self, queue_affinity: int, wait: Fence | None, signal: Fence | None,
                     memory_type: int, usage: int, size: int, flags: int = 0,
                     zeroed: bool = True) -> Buffer:
        """Returns the buffer at once; it may be used once `signal` is reached. Its
        contents are undefined (as upstream's) unless `zeroed`."""
        buffer = self.allocator.allocate_buffer(memory_type, usage, size, 0, queue_affinity,
                                                None, zeroed)  # (positional: cheaper)
        self._submit(wait, signal, None)
        return buffer

    def queue_dealloca(self, queue_affinity: int, wait: Fence | None, signal: Fence | None,
                       buffer: Buffer, flags: int = 0) -> None:
        # The memory goes back to Python once the last reference to it drops.
        self._submit(wait, signal, None)

    def queue_fill(self, queue_affinity: int, wait, signal, target: Buffer, offset: int,
                   length: int, pattern: bytes, flags: int = 0) -> None:
        check_fill_pattern(len(pattern))

        def fill():
            view = target.map_range(ACCESS_WRITE, offset, length)
            if len(view):
                fill_view(view, offset, pattern)
        self._submit(wait, signal, fill)

    def queue_update(self, queue_affinity: int, wait, signal, data, target: Buffer,
                     offset: int, length: int, flags: int = 0) -> None:
        source = bytes(data[:length]) if length != WHOLE_BUFFER else bytes(data)

        def update():
            view = target.map_range(ACCESS_WRITE, offset, len(source))
            view[:] = source
        self._submit(wait, signal, update)

    def queue_copy(self, queue_affinity: int, wait, signal, source: Buffer, source_offset: int,
                   target: Buffer, target_offset: int, length: int, flags: int = 0) -> None:
        self._submit(wait, signal,
                     lambda: map_copy(source, source_offset, target, target_offset, length))

    def queue_read(self, queue_affinity: int, wait, signal, source: MemoryFile,
                   source_offset: int, target: Buffer, target_offset: int, length: int,
                   flags: int = 0) -> None:
        def read():
            view = target.map_range(ACCESS_WRITE, target_offset, length)
            view[:] = source.read(source_offset, len(view))
        self._submit(wait, signal, read)

    def queue_write(self, queue_affinity: int, wait, signal, source: Buffer, source_offset: int,
                    target: MemoryFile, target_offset: int, length: int,
                    flags: int = 0) -> None:
        def write():
            target.write(target_offset, source.map_range(ACCESS_READ, source_offset, length))
        self._submit(wait, signal, write)

    def queue_barrier(self, queue_affinity: int, wait, signal, flags: int = 0) -> None:
        self._submit(wait, signal, None)

    def queue_host_call(self, queue_affinity: int, wait, signal, work) -> None:
        """Runs `work()` on the host as a queue operation: after `wait`, before
        `signal` (failed with the error `work` raises). Native modules move bytes
        this way (io_parameters reads and writes parameter files)."""
        self._submit(wait, signal, work)

    def queue_flush(self, queue_affinity: int = -1) -> None:
        pass

    def queue_execute(self, queue_affinity: int, wait, signal,
                      command_buffer: CommandBuffer | None, binding_table=(),
                      flags: int = 0, copy_table: bool = True) -> None:
        """Runs a finalized command buffer; `binding_table` is a sequence of
        (buffer, offset, length) for its indirect references, copied unless
        `copy_table` is false: a list of such tuples the caller made for this call
        alone (the hal module's, on every call) is taken as it is."""
        table = [tuple(b) for b in binding_table] if copy_table else binding_table
        if command_buffer is None:
            self._submit(wait, signal, None)
            return
        command_buffer.validate_submission(table)
        self._submit(wait, signal, lambda: self._execute(command_buffer, table))

    def _execute(self, command_buffer: CommandBuffer, table) -> None:
        """Runs the commands region by region, as planned once per command buffer
        (`_plan`); under a timeline every dispatch is its own traced step."""
        tracer = timeline.active
        steps = command_buffer.plan(("steps", self.concurrency, tracer is None), self._plan)
        for kind, item in steps:
            if kind is _NATIVE:
                item.run(self._native_pool(), table)
            elif kind is _TRANSFERS:
                for command in item:
                    command.run(table, None)
            else:
                self._run_dispatches([
                    (command.executable if tracer is None else
                     TracedExecutable(tracer, command.executable, command.function),
                     command.resolve(table)) for command in item])

    def _plan(self, command_buffer: CommandBuffer) -> list[tuple]:
        """The steps of a command buffer: its transfer commands; dispatches of native
        executables gathered across regions into NativePlans (one C call each) until
        a region needs Python; other dispatches region by region."""
        pooling = timeline.active is None
        steps: list[tuple] = []
        pooled: list[tuple] = []  # (DispatchCommand, region number)
        for number, region in enumerate(command_buffer.regions()):
            dispatches = [c for c in region if isinstance(c, DispatchCommand)]
            transfers = [c for c in region if not isinstance(c, DispatchCommand)]
            if transfers:
                pooled = self._close_plan(steps, pooled)
                steps.append((_TRANSFERS, transfers))
            if pooling and all(c.executable.pooled for c in dispatches):
                pooled.extend((command, number) for command in dispatches)
            else:
                pooled = self._close_plan(steps, pooled)
                steps.append((_DISPATCHES, dispatches))
        self._close_plan(steps, pooled)
        return steps

    def _close_plan(self, steps: list[tuple], pooled: list[tuple]) -> list[tuple]:
        """Adds the gathered native dispatches as one step; an empty list for more."""
        if pooled:
            from vmrt.hal.native_loader import NativePlan
            steps.append((_NATIVE, NativePlan(pooled, self.concurrency)))
        return []

    def _native_pool(self):
        return _solo_pool()


def _solo_pool():
    """NativePool.solo, imported on first use (a device without native executables
    never loads the C extension for it)."""
    global _solo_pool
    from vmrt.hal.native_loader import NativePool
    _solo_pool = NativePool.solo
    return NativePool.solo()


def match_pattern(value: str, pattern: str) -> bool:
    """iree_string_view_match_pattern: `*` matches any run of characters (none too),
    `?` any one, every other character itself (no classes: `[` is a character)."""
    v = p = 0
    star, resume = -1, 0  # the last `*` seen, and where its match would go on from
    while v < len(value):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, v
            p += 1
        elif p < len(pattern) and (pattern[p] == "?" or pattern[p] == value[v]):
            v += 1
            p += 1
        elif star >= 0:  # the last `*` takes one more character
            resume += 1
            v, p = resume, star + 1
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


class SyncDevice(Device):
    """`local-sync`: everything runs inline on the caller's thread."""

    __slots__ = ()

    def __init__(self, identifier: str = "local-sync", loaders=None, allocator=None):
        super().__init__(identifier, loaders, allocator)

    def _submit(self, wait: Fence | None, signal: Fence | None, work) -> None:
        if timeline.active is not None:
            work = traced_queue_operation(work)
        if wait is not None and wait.timepoints:
            wait.wait()
        if work is not None:
            try:
                work()
            except BaseException as exc:
                error = as_error(exc)
                if signal is not None:
                    signal.fail(error)
                if error is exc or not isinstance(exc, Exception):
                    raise
                raise error from exc
        if signal is not None:
            signal.signal()

    def _run_dispatches(self, dispatches) -> None:
        for executable, state in dispatches:
            prepared = executable.prepare(state)
            executable.run_range(prepared, state, 0, state.workgroup_total, 0)


class TaskDevice(Device):
    """`local-task`: queue operations on an issue thread, workgroups on workers."""

    __slots__ = ("worker_count", "inline_ready", "_workers", "_workers_local", "_take_id",
                 "_issuer", "_pending", "_idle", "_lock", "_pool")

    def __init__(self, identifier: str = "local-task", loaders=None, allocator=None,
                 worker_count: int | None = None, inline_ready: bool = True):
        # Imported here: it brings logging, a start-up cost only local-task should pay.
        import concurrent.futures

        super().__init__(identifier, loaders, allocator)
        self.worker_count = max(1, worker_count or min(8, usable_cpus()))
        #: Ready work runs on the submitting thread when nothing is in flight (see
        #: _submit); False: always on an issue thread, the submitter never blocked
        #: (a host overlapping its own work with the device's, through async calls).
        self.inline_ready = inline_ready
        # Every thread that runs workgroups (workers, and issue threads running a
        # dispatch's first chunk themselves) has its own worker id: executables keep
        # per-worker state (VMVX contexts, local memory) by it.
        ids = itertools.count()
        local = threading.local()

        def take_id():
            local.worker_id = next(ids)
            return local.worker_id
        self._take_id = take_id
        self._workers = concurrent.futures.ThreadPoolExecutor(
            self.worker_count, thread_name_prefix="vmrt-hal-worker", initializer=take_id)
        self._workers_local = local
        # Independent queue operations may run side by side; each may wait on the workers.
        self._issuer = concurrent.futures.ThreadPoolExecutor(
            2, thread_name_prefix="vmrt-hal-issue", initializer=take_id)
        self._pending = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pool = None  # native dispatches' workers, made on first use

    @property
    def concurrency(self) -> int:
        return self.worker_count

    def _submit(self, wait: Fence | None, signal: Fence | None, work) -> None:
        """Runs `work` on an issue thread once `wait` is reached, then signals. With
        nothing in flight on the device and nothing to wait for, it runs here at once,
        as an issue thread would (native dispatches still spread over the workers):
        an issue thread's start and the waiter's wake-up are two thread hand-offs,
        more than a small VM's call costs. Either way a failure reaches the signal fence,
        not the submitter."""
        if timeline.active is not None:
            work = traced_queue_operation(work)
        with self._lock:
            inline = self.inline_ready and not self._pending and (wait is None or
                                                                  wait.passed())
            self._pending += 1
        if not inline:
            work = carry_guard(work)  # the submitting call's limits go with its work

        def run():
            nonlocal work
            error = interrupt = None
            try:
                if work is not None:
                    work()
            except BaseException as exc:  # travels through the signal fence (as a copy)
                error = as_error(exc)
                if inline and not isinstance(exc, Exception):
                    interrupt = exc  # (Ctrl-C on the submitting thread: its caller's too)
                else:
                    release_frames(exc, keep_traceback=False)
            work = None  # what the work held goes before its fence wakes anyone
            self._finish(signal, error)
            if interrupt is not None:
                try:
                    raise interrupt
                finally:
                    interrupt = None

        def ready(error):
            if error is not None or work is None:
                self._finish(signal, error)
            else:
                self._issuer.submit(run)

        if inline:
            run()
        elif wait is None:
            ready(None)
        else:
            wait.on_reached(ready)

    def _finish(self, signal: Fence | None, error) -> None:
        """A submission's end: `signal` signalled (or failed with `error`), and one
        operation fewer in flight."""
        try:
            if signal is not None:
                if error is None:
                    signal.signal()
                else:
                    signal.fail(error)
        finally:
            with self._lock:
                self._pending -= 1
                if not self._pending:
                    self._idle.notify_all()

    def _run_dispatches(self, dispatches) -> None:
        """Splits every dispatch of a region into one chunk of workgroups per
        worker; the calling thread runs the first chunk itself (one thread
        hand-off fewer) and the workers the rest; returns when all are done."""
        local = self._workers_local
        chunks = []
        for executable, state in dispatches:
            state.max_concurrency = self.worker_count
            prepared = executable.prepare(state)
            chunks.extend((executable, prepared, state, start, stop)
                          for start, stop in executable.split(prepared, state,
                                                              self.worker_count))
        if not chunks:
            return

        def run_chunk(executable, prepared, state, start, stop):
            worker_id = getattr(local, "worker_id", None)
            if worker_id is None:  # a thread of the host's running the region
                worker_id = self._take_id()
            executable.run_range(prepared, state, start, stop, worker_id)
        run_with(lambda: run_chunk(*chunks[0]),
                 [self._workers.submit(run_chunk, *chunk) for chunk in chunks[1:]])

    def _native_pool(self):
        with self._lock:
            if self._pool is None:
                from vmrt.hal.native_loader import NativePool
                self._pool = NativePool(self.worker_count)
            return self._pool

    def wait_idle(self, timeout_seconds: float | None = None) -> None:
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout_seconds):
                raise HalError("timeout waiting for the device to become idle",
                               StatusCode.DEADLINE_EXCEEDED)

    def close(self) -> None:
        self._issuer.shutdown(wait=True)
        self._workers.shutdown(wait=True)
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def create_device(name: str = "local-sync", **options) -> Device:
    """A device by driver name: 'local-sync' or 'local-task' (also 'local',
    an alias of local-sync)."""
    if name in ("local-sync", "local"):
        return SyncDevice(**options)
    if name == "local-task":
        return TaskDevice(**options)
    raise HalError(f"no HAL driver named '{name}' (available: local-sync, local-task)",
                   StatusCode.NOT_FOUND)
