"""Native CPU executables from iree-compile's llvm-cpu target: `embedded-elf-x86_64`
(vmrt's own ELF loader, vmrt/hal/elf.py) and `system-elf-x86_64` (the system loader),
both speaking IREE's executable library ABI; workgroups run in C without the GIL
(csrc/vmrt_executable.c).
"""

from __future__ import annotations

import platform
import sys
import weakref

from vmrt import ctrl_c
from vmrt.environment import switched_on
from vmrt.errors import HalError, StatusCode
from vmrt.hal.buffer import Buffer
from vmrt.hal.executable import DispatchState, Executable, ExecutableLoader, FunctionInfo
from vmrt.hal.types import WHOLE_BUFFER
from vmrt.memory import c_extension

EMBEDDED_FORMAT = "embedded-elf-x86_64"
SYSTEM_FORMAT = "system-elf-x86_64"
NATIVE_FORMATS = (EMBEDDED_FORMAT, SYSTEM_FORMAT)
QUERY_SYMBOL = "iree_hal_executable_library_query"
_ERROR_CAPACITY = 512
_LOCAL_ALIGNMENT = 64

_ffi, _lib, _UNAVAILABLE = c_extension()  # a pure-Python install: no native executables
if _UNAVAILABLE is None and not (sys.platform.startswith("linux")
                                 and platform.machine() in ("x86_64", "AMD64")):
    _UNAVAILABLE = f"native executables are x86-64 Linux code; this is {platform.machine()}"


#: Native plans resolve their bindings in C (NativePlan._bind_in_c); off, through
#: their Python twin (VMRT_BIND_IN_C=0; tests compare the two).
BIND_IN_C = switched_on("VMRT_BIND_IN_C")


def native_unavailable_reason() -> str | None:
    """Why this process cannot run native executables, or None when it can."""
    return _UNAVAILABLE


def _check(status: int, error, what: str) -> None:
    if status:
        message = _ffi.string(error).decode("utf-8", "replace")
        raise HalError(f"{what}: {message}", StatusCode(status) if 0 < status <= 18
                       else StatusCode.INTERNAL)


def _address(view) -> int:
    """The address of a buffer's first byte (0 when it is empty)."""
    if not len(view):
        return 0
    with _ffi.from_buffer(view) as pointer:
        return int(_ffi.cast("uintptr_t", pointer))


class _SystemImage:
    """A shared object loaded by the system loader from a memfd (never a named file),
    once its bytes have passed vmrt's own loader's checks and those the system
    loader needs (csrc/vmrt_elf_system.c); `elf` describes the loaded copy."""

    def __init__(self, data):
        handle, query = _ffi.new("void**"), _ffi.new("void**")
        error = _ffi.new("char[]", _ERROR_CAPACITY)
        with memoryview(data) as raw, raw.cast("B") as view, \
                _ffi.from_buffer("uint8_t[]", view) as source:
            status = _lib.vmrt_system_library_load(source, view.nbytes, handle, query, error,
                                                   _ERROR_CAPACITY)
        _check(status, error, f"invalid {SYSTEM_FORMAT} executable")
        self._handle = handle[0]
        self.query_address = int(_ffi.cast("uintptr_t", query[0]))
        self.elf = _lib.vmrt_system_library_image(self._handle)

    def close(self) -> None:
        if self._handle is not None:
            _lib.vmrt_system_library_unload(self._handle)
            self._handle = None


class _EmbeddedImage:
    """An embedded ELF mapped by vmrt's own loader."""

    def __init__(self, data):
        from vmrt.hal.elf import ElfModule
        self._module = ElfModule(data)
        try:
            self.query_address = self._module.lookup(QUERY_SYMBOL)
        except HalError as error:
            self._module.close()
            raise HalError(f"invalid {EMBEDDED_FORMAT} executable: {error.message}",
                           error.code) from None
        self.elf = self._module.c_handle

    def close(self) -> None:
        self._module.close()


class _PreparedDispatch:
    """A dispatch's C block (vmrt_dispatch_block_t), shared by every worker that runs
    its workgroups, with the bound memoryviews that pin its binding addresses."""

    __slots__ = ("ordinal", "name", "block", "local_size", "bindings")

    def __init__(self, ordinal, name, block, local_size, bindings):
        self.ordinal = ordinal
        self.name = name
        self.block = block
        self.local_size = local_size
        self.bindings = bindings


class NativeExecutable(Executable):
    """A hal.executable backed by a native library; released with its last reference."""

    __slots__ = ("format", "library_name", "_image", "_library", "_local")
    pooled = True

    def __init__(self, executable_format: str, image, constants: bytes):
        self.format = executable_format
        self._image = image
        self._library = None
        self._local: dict[int, tuple] = {}
        count = len(constants) // 4
        values = _ffi.new("uint32_t[]", max(count, 1))
        _ffi.memmove(values, constants, count * 4)
        out, error = _ffi.new("vmrt_library_t**"), _ffi.new("char[]", _ERROR_CAPACITY)
        try:
            _check(_lib.vmrt_library_open(_ffi.cast("void*", image.query_address), image.elf,
                                          values, count, out, error, _ERROR_CAPACITY),
                   error, f"{executable_format} executable")
        except BaseException:
            image.close()
            raise
        self._library = out[0]
        self.library_name = _ffi.string(_lib.vmrt_library_name(self._library)).decode(
            "utf-8", "replace")
        super().__init__(self._read_exports())

    def _read_exports(self) -> list[FunctionInfo]:
        info = _ffi.new("vmrt_export_info_t*")
        functions = []
        for ordinal in range(_lib.vmrt_library_export_count(self._library)):
            _lib.vmrt_library_export_info(self._library, ordinal, info)
            functions.append(FunctionInfo(
                _ffi.string(info.name).decode("utf-8", "replace"), info.constant_count,
                info.binding_count, info.local_memory_size, tuple(info.workgroup_size)))
        return functions

    def __repr__(self) -> str:
        return f"<hal.executable {self.format} {self.library_name} {len(self.functions)} functions>"

    def on_release(self) -> None:
        library, self._library = self._library, None
        if library is not None:
            _lib.vmrt_library_close(library)
            self._image.close()

    def init_block(self, block, function: int, count, concurrency: int, constants: bytes,
                   binding_count: int) -> None:
        """Lays out a vmrt_dispatch_block_t (all but the binding addresses)."""
        info = self.functions[function] if 0 <= function < len(self.functions) \
            else self.function_info(function)  # (raises OUT_OF_RANGE)
        if _lib.vmrt_dispatch_block_init(block, info.workgroup_size, count, concurrency,
                                         constants, len(constants), binding_count):
            raise HalError(f"dispatch {info.name}: workgroup count {tuple(count)}, "
                           f"{len(constants)} constant bytes or {binding_count} "
                           "bindings out of range (z at most 65535, at most 64 each)",
                           StatusCode.OUT_OF_RANGE)

    def prepare(self, state: DispatchState) -> _PreparedDispatch:
        bindings = state.bindings
        block = _ffi.new("vmrt_dispatch_block_t*")
        self.init_block(block, state.function, state.workgroup_count, state.max_concurrency,
                        state.constants, len(bindings))
        info = self.functions[state.function]
        # Addresses only: a cffi view of a memoryview alive in a frame that an
        # exception holds can crash the garbage collector. The memoryviews in
        # `bindings` pin the memory while the dispatch runs.
        addresses, lengths = block.binding_addresses, block.binding_lengths
        for i, view in enumerate(bindings):
            addresses[i] = _address(view)
            lengths[i] = len(view)
        return _PreparedDispatch(state.function, info.name, block, info.local_memory_size,
                                 bindings)

    def split(self, prepared: _PreparedDispatch, state: DispatchState,
              workers: int) -> list[tuple[int, int]]:
        """Every worker takes small batches of workgroups from one shared counter
        (in C) until none are left, so a worker that gets its core late does less."""
        total = state.workgroup_total
        if workers <= 1 or total <= 1:
            return [(0, total)]
        prepared.block.grain = max(1, total // (4 * workers))
        return [(-1, total)] * min(workers, total)

    def run_range(self, prepared: _PreparedDispatch, state: DispatchState, start: int,
                  stop: int, worker_id: int = 0) -> None:
        """Runs [start, stop); a start of -1 (split's shares) takes workgroups of
        [0, stop) from the dispatch's shared counter instead."""
        size = prepared.local_size
        local = self._local_memory(worker_id, size) if size else _ffi.NULL
        block = prepared.block
        if start >= 0:
            failed = _lib.vmrt_library_dispatch(self._library, prepared.ordinal, block, start,
                                                stop, worker_id, local, size)
        else:
            failed = _lib.vmrt_library_dispatch_shared(self._library, prepared.ordinal, block,
                                                       stop, worker_id, local, size)
        if failed:
            self._raise_failure(prepared.name, prepared.block)

    @staticmethod
    def _raise_failure(name: str, block) -> None:
        if block.interrupted:
            ctrl_c.stopped()
        plane = block.state.workgroup_count_x * block.state.workgroup_count_y
        z, rest = divmod(block.failed_index, plane)
        y, x = divmod(rest, block.state.workgroup_count_x)
        raise HalError(f"dispatch {name} workgroup ({x}, {y}, {z}): executable "
                       f"entry point returned catastrophic error {block.result}",
                       StatusCode.INTERNAL)

    def _local_memory(self, worker_id: int, size: int):
        """The worker's local memory, 64-byte aligned as compiled code may assume;
        kept per worker (a worker id is one thread's) and grown when needed."""
        held = self._local.get(worker_id)
        if held is None or held[1] < size:
            raw = _ffi.new("uint8_t[]", size + _LOCAL_ALIGNMENT)
            offset = -int(_ffi.cast("uintptr_t", raw)) % _LOCAL_ALIGNMENT
            held = self._local[worker_id] = (raw, size, raw + offset)
        return held[2]


class NativePool:
    """Runs the native dispatches of consecutive command-buffer regions in one C call
    without the GIL (csrc/vmrt_pool.c): the caller and `participants - 1` threads of
    the pool take workgroups region after region. One participant: no threads."""

    _solo: "NativePool | None" = None

    def __init__(self, participants: int = 1):
        self._pool = _ffi.NULL
        self._finalizer = None
        if participants > 1:
            # Threads pinned one per CPU, as IREE pins its workers (unpinned ones ran
            # memory-bound models markedly slower on a small machine); VMRT_POOL_PIN=0:
            # not pinned.
            pool = _lib.vmrt_pool_create(min(participants, 64), int(switched_on("VMRT_POOL_PIN")))
            if pool == _ffi.NULL:
                raise HalError(f"cannot start {participants - 1} worker threads",
                               StatusCode.RESOURCE_EXHAUSTED)
            self._pool = pool
            self._finalizer = weakref.finalize(self, _lib.vmrt_pool_destroy, pool)

    @classmethod
    def solo(cls) -> "NativePool":
        """The pool of the calling thread alone (local-sync), shared: it holds no state."""
        if cls._solo is None:
            cls._solo = cls(1)
        return cls._solo

    def run(self, tasks, blocks, count: int) -> int:
        """Runs `count` tasks with their blocks; the index of the first failed one, or -1."""
        failed = _lib.vmrt_pool_run(self._pool, tasks, blocks, count)
        if failed == -2:
            raise HalError("cannot allocate the local memory of a dispatch",
                           StatusCode.RESOURCE_EXHAUSTED)
        return failed

    def close(self) -> None:
        """Stops the threads (a closed pool runs on the caller alone)."""
        if self._finalizer is not None:
            self._finalizer()
            self._pool = _ffi.NULL


class NativePlan:
    """Native dispatches of consecutive regions of one command buffer, ready to run
    many times: libraries, regions, workgroup counts and constants are laid out once
    (`template`); a run copies the template and fills in what a binding table
    decides, the bindings (and counts read from buffers)."""

    __slots__ = ("commands", "tasks", "template", "counted", "concurrency", "_spare",
                 "_slots", "_direct", "_binding_entries", "_binding_ranges", "_binding_total")

    def __init__(self, entries, concurrency: int):
        """`entries`: (DispatchCommand of a NativeExecutable, region number) pairs."""
        count = len(entries)
        self.commands = [command for command, _ in entries]
        self.concurrency = concurrency
        self.tasks = _ffi.new("vmrt_pool_task_t[]", count)
        self.template = _ffi.new("vmrt_dispatch_block_t[]", count)
        self.counted = []  # dispatches whose workgroup count is read when they run
        # Blocks of finished runs, for the next (a run rewrites all that changes:
        # bindings, counts read from buffers, the shared counters).
        self._spare: list = []
        for i, (command, region) in enumerate(entries):
            task = self.tasks[i]
            # (the library pointer stays valid while the executable does: run checks it)
            task.library = command.executable._library or _ffi.NULL
            task.ordinal, task.region = command.function, region
            if command.workgroup_count_ref is None:
                command.executable.init_block(self.template + i, command.function,
                                              command.workgroup_count, concurrency,
                                              command.constants, len(command.bindings))
            else:
                self.counted.append(i)
        self._index_bindings()

    def _index_bindings(self) -> None:
        """Lays out the bindings for _bind_in_c: each refers to an entry, a table slot
        (the slots first) or the buffer of a direct reference, at its offset and length."""
        refs = [ref for command in self.commands for ref in command.bindings]
        self._slots = sorted({slot for buffer, slot, _, _ in refs if buffer is None})
        self._direct = [buffer for buffer, _, _, _ in refs if buffer is not None]
        entry_of = {slot: index for index, slot in enumerate(self._slots)}
        entries, ranges, direct = [], [], len(self._slots)
        for buffer, slot, offset, length in refs:
            if buffer is None:
                entries.append(entry_of[slot])
            else:
                entries.append(direct)
                direct += 1
            ranges += (offset, length)
        self._binding_total = len(refs)
        try:
            self._binding_entries = _ffi.new("uint32_t[]", entries)
            self._binding_ranges = _ffi.new("int64_t[]", ranges)
        except OverflowError:  # (a host's references beyond i64: the twin's to refuse)
            self._binding_entries = self._binding_ranges = None

    def run(self, pool: NativePool, table) -> None:
        spare = self._spare
        blocks = spare.pop() if spare else self._new_blocks()
        try:
            self._run(pool, table, blocks)
        finally:
            if len(spare) < 2:  # (two threads may run the plan at once)
                spare.append(blocks)

    def _new_blocks(self):
        count = len(self.commands)
        blocks = _ffi.new("vmrt_dispatch_block_t[]", count)
        _lib.vmrt_dispatch_blocks_copy(blocks, self.template, count)
        return blocks

    def _run(self, pool: NativePool, table, blocks) -> None:
        count = len(self.commands)
        for i in self.counted:
            command = self.commands[i]
            command.executable.init_block(blocks + i, command.function, command.count_of(table),
                                          self.concurrency, command.constants,
                                          len(command.bindings))
        for command in self.commands:
            if command.executable._library is None:
                raise HalError("dispatch of a released executable",
                               StatusCode.FAILED_PRECONDITION)
        if not (BIND_IN_C and self._bind_in_c(table, blocks, count)):
            self._bind_in_python(table, blocks, count)
        # (the bound allocations stay alive until the run ends: the table and the
        # commands hold them)
        failed = pool.run(self.tasks, blocks, count)
        if failed >= 0:
            command = self.commands[failed]
            NativeExecutable._raise_failure(command.executable.functions[command.function].name,
                                            blocks + failed)

    def _bind_in_python(self, table, blocks, count: int) -> None:
        """Resolves every binding through `table` (DispatchCommand.binding_spans),
        raising the first error, and binds the blocks: _bind_in_c's twin."""
        addresses, lengths = [], []
        for command in self.commands:
            for root, start, length in command.binding_spans(table):
                if length:
                    address = root._address  # (storage_address, inline once known)
                    if address is None:
                        address = root.storage_address()
                    addresses.append(address + start)
                else:
                    addresses.append(0)
                lengths.append(length)
        if _lib.vmrt_dispatch_blocks_bind(blocks, count, addresses, lengths, len(addresses)):
            raise HalError("dispatch bindings do not match their blocks", StatusCode.INTERNAL)

    def _bind_in_c(self, table, blocks, count: int) -> bool:
        """Binds the blocks with each table entry's buffer checked once and the
        ranges resolved in C (vmrt_dispatch_blocks_bind_table); False when anything
        fails or falls outside what the C path admits: _bind_in_python then binds,
        or raises the first error as it comes in order."""
        if self._binding_entries is None:
            return False
        values = []
        try:
            for slot in self._slots:
                if slot >= len(table):
                    return False
                bound, offset, length = table[slot]
                if not isinstance(bound, Buffer):
                    return False
                root = bound.binding_root()
                values += (root._address or root.storage_address(), offset, length,
                           bound.byte_offset, bound.byte_length)
            for buffer in self._direct:
                root = buffer.binding_root()
                values += (root._address or root.storage_address(), 0, WHOLE_BUFFER,
                           buffer.byte_offset, buffer.byte_length)
            return _lib.vmrt_dispatch_blocks_bind_table(
                blocks, count, self._binding_entries, self._binding_ranges,
                self._binding_total, values, len(values) // 5) == 0
        except (HalError, OverflowError):
            return False


class NativeLoader(ExecutableLoader):
    """Loads llvm-cpu executables. The formats are offered even where this process
    cannot run them, so a module gets the reason from hal.executable.create rather
    than a bare "no device" from device selection."""

    formats = NATIVE_FORMATS

    def load(self, executable_format: str, data, constants: bytes = b"") -> NativeExecutable:
        if _UNAVAILABLE:
            raise HalError(f"cannot load {executable_format}: {_UNAVAILABLE}",
                           StatusCode.UNAVAILABLE)
        image_type = _EmbeddedImage if executable_format == EMBEDDED_FORMAT else _SystemImage
        ctrl_c.watch()  # (its workgroups stop on Ctrl-C: vmrt/ctrl_c.py)
        return NativeExecutable(executable_format, image_type(data), bytes(constants))
