"""HAL buffers: host memory with a memory type, allowed access and usage; subspans; mapping.

An allocated buffer owns its storage (a writable memoryview of bytes, from a
bytearray or imported host memory). A subspan shares its allocated buffer's
storage at an offset; subspans of subspans collapse onto the allocated buffer
as upstream's iree_hal_buffer_subspan does. Ranges and checks follow
runtime/src/iree/hal/buffer.c; WHOLE_BUFFER (-1) means "to the end".
"""

from __future__ import annotations

import ctypes
import mmap
import threading

from vmrt.errors import HalError, StatusCode
from vmrt.memory import fill_pattern
from vmrt.hal.types import (
    ACCESS_ANY, ACCESS_DISCARD_WRITE, ACCESS_READ, ACCESS_WRITE, MEMORY_HOST_VISIBLE,
    USAGE_MAPPING_PERSISTENT, WHOLE_BUFFER, format_buffer_usage, format_memory_access,
    format_memory_type,
)
from vmrt.vm.ref import RefObject

_ACCESS_READ_WRITE = ACCESS_READ | ACCESS_WRITE

#: Allocations at least this large are anonymous mappings (see zeroed_memory).
MAPPED_ALLOCATION_BYTES = 32 << 20
_MAP_ANONYMOUS = getattr(mmap, "MAP_ANONYMOUS", 0)

#: Taken while an allocation moves to private pages (Buffer._make_private).
_PRIVATE_LOCK = threading.Lock()

# iree_hal_mapping_mode_t
MAPPING_MODE_SCOPED = 1 << 0
MAPPING_MODE_PERSISTENT = 1 << 1


def zeroed_memory(size: int):
    """Writable zero-filled host memory of `size` bytes.

    Large sizes are anonymous mappings advised onto transparent huge pages: the
    kernel hands out zero pages lazily, so allocating costs nothing and first
    touch faults in 2 MiB at a time. bytearray(n) instead mallocs and memsets,
    faulting in every 4 KiB page up front: several times slower for a fresh slab,
    though no slower once malloc recycles freed heap. Sizes below 32 MiB (glibc's
    largest dynamic mmap threshold) stay bytearrays all the same: a model's
    per-call buffers come and go at the same sizes, and recycled heap pages fault
    nothing in (where a new mapping would fault again), so only a buffer's first
    allocation pays; small ones would pay a syscall too.
    """
    return _zeroed_allocation(size)[0]


def _zeroed_allocation(size: int) -> tuple:
    """(zeroed_memory(size), its address or None when not known yet)."""
    if size >= MAPPED_ALLOCATION_BYTES and _MAP_ANONYMOUS:
        try:
            memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | _MAP_ANONYMOUS)
        except (OSError, OverflowError, ValueError):
            memory = None  # bytearray below reports the failure
        if memory is not None:
            try:
                memory.madvise(mmap.MADV_HUGEPAGE)
            except (AttributeError, OSError, ValueError):
                pass  # no THP: 4 KiB zero pages fault in on first touch, still lazily
            return memory, None
    return _aligned_bytearray(size, BUFFER_ALIGNMENT)


#: IREE_HAL_HEAP_BUFFER_ALIGNMENT: compiled dispatches may use aligned vector
#: loads on binding bases (AVX-512 needs 64 bytes); malloc gives only 16.
BUFFER_ALIGNMENT = 64


def aligned_bytearray_python(size: int,
                             alignment: int = BUFFER_ALIGNMENT) -> tuple[memoryview, int]:
    """`size` zero bytes starting at an `alignment` boundary of a bytearray, and
    their address (the twin of vmrt._cnative.aligned_bytearray)."""
    data = bytearray(size + alignment)
    base = ctypes.addressof(ctypes.c_char.from_buffer(data))
    offset = -base % alignment
    return memoryview(data)[offset:offset + size], base + offset


def _aligned_bytearray_in_c():
    """vmrt._cnative.aligned_bytearray (the same in one C call: a model's call
    allocates a few small buffers, and ctypes' address lookup was a good part of
    each), or None without the C extension."""
    from vmrt.memory import c_extension
    _, lib, unavailable = c_extension()
    if unavailable is not None:
        return None
    from vmrt import _cnative
    if getattr(_cnative, "aligned_bytearray", None) is None:
        lib.vmrt_aligned_install()
    return getattr(_cnative, "aligned_bytearray", None)


_ALIGNED_IN_C = _aligned_bytearray_in_c()


#: _aligned_bytearray(size, BUFFER_ALIGNMENT): aligned_bytearray_python, in C when
#: the extension is there (bound once: every allocation calls it).
_aligned_bytearray = _ALIGNED_IN_C or aligned_bytearray_python


#: Below this size copied_memory zero-fills a bytearray before copying: cheaper
#: than numpy's uninitialized memory, whose address costs more to read than
#: zero-filling that many bytes.
SMALL_COPY_BYTES = 64 << 10


def copied_memory(data) -> memoryview:
    """A BUFFER_ALIGNMENT-aligned private copy of the bytes of `data`: one copy into
    uninitialized memory (host inputs are overwritten whole; zero-filling first
    would touch every page twice)."""
    return _copied_allocation(data)[0]


def _copied_allocation(data) -> tuple[memoryview, int]:
    """(copied_memory(data), its address)."""
    source = memoryview(data).cast("B")
    target, address = _uninitialized_allocation(len(source))
    target[:] = source
    return target, address


def _uninitialized_allocation(size: int) -> tuple[memoryview, int]:
    """(`size` BUFFER_ALIGNMENT-aligned bytes of any contents, their address): small
    ones zero-filled all the same (see SMALL_COPY_BYTES)."""
    if size < SMALL_COPY_BYTES:
        return _aligned_bytearray(size, BUFFER_ALIGNMENT)
    import numpy as np  # a run-time dependency; imported late to keep start-up short
    raw = np.empty(size + BUFFER_ALIGNMENT, np.uint8)
    base = raw.ctypes.data
    offset = -base % BUFFER_ALIGNMENT
    return memoryview(raw)[offset:offset + size], base + offset


def memory_address(memory) -> int:
    """The address of the first byte of host memory with the buffer protocol
    (read-only too), kept alive by the caller."""
    view = memoryview(memory)
    if not view.readonly:
        return ctypes.addressof(ctypes.c_char.from_buffer(view))
    import numpy as np  # (ctypes takes writable memory only)
    return np.frombuffer(view, np.uint8).ctypes.data


def validate_memory_type(actual: int, expected: int) -> None:
    if actual & expected != expected:
        raise HalError("buffer memory type is not compatible with the requested operation; "
                       f"buffer has {format_memory_type(actual)}, operation requires "
                       f"{format_memory_type(expected)}", StatusCode.PERMISSION_DENIED)


def validate_access(allowed: int, required: int) -> None:
    if required & ACCESS_ANY:
        return
    if not required & _ACCESS_READ_WRITE:
        raise HalError("memory access must specify one or more of _READ or _WRITE",
                       StatusCode.INVALID_ARGUMENT)
    if allowed & required != required:
        raise HalError("buffer does not support the requested access type; buffer allows "
                       f"{format_memory_access(allowed)}, operation requires "
                       f"{format_memory_access(required)}", StatusCode.PERMISSION_DENIED)


def validate_usage(allowed: int, required: int) -> None:
    if allowed & required != required:
        raise HalError("requested usage was not specified when the buffer was allocated; "
                       f"buffer allows {format_buffer_usage(allowed)}, operation requires "
                       f"{format_buffer_usage(required)}", StatusCode.PERMISSION_DENIED)


def calculate_range(base_offset: int, max_length: int, offset: int,
                    length: int) -> tuple[int, int]:
    """(base_offset + offset, length) of a range inside [0, max_length); a
    length of WHOLE_BUFFER runs to the end (iree_hal_buffer_calculate_range).
    Negative offsets and lengths other than WHOLE_BUFFER are huge unsigned
    numbers upstream, so they are out of range here too."""
    if offset < 0 or offset > max_length:
        raise HalError("attempted to access an address off the end of the valid buffer range "
                       f"(offset={offset}, length={length}, buffer byte_length={max_length})",
                       StatusCode.OUT_OF_RANGE)
    if length == WHOLE_BUFFER:
        length = max_length - offset
    if length == 0:
        return base_offset + offset, 0
    if length < 0 or offset + length > max_length:
        raise HalError("attempted to access an address outside of the valid buffer range "
                       f"(offset={offset}, adjusted_length={length}, end={offset + length - 1}, "
                       f"buffer byte_length={max_length})", StatusCode.OUT_OF_RANGE)
    return base_offset + offset, length


class Buffer(RefObject):
    """A hal.buffer. `byte_offset`/`byte_length` locate it inside the storage
    of its allocated buffer (itself, unless it is a subspan)."""

    __slots__ = ("_root", "storage", "byte_offset", "byte_length", "allocation_size",
                 "memory_type", "allowed_access", "allowed_usage", "queue_affinity",
                 "_preserve_count", "_decommitted", "charge", "copy_on_write", "_address")

    def __init__(self, storage: memoryview, memory_type: int, allowed_access: int,
                 allowed_usage: int, queue_affinity: int = -1, *,
                 allocated: "Buffer | None" = None, byte_offset: int = 0,
                 byte_length: int | None = None):
        # None for an allocated buffer: a buffer never refers to itself, so dropping
        # the last reference frees it (and gives back its `charge`) at once.
        self._root = allocated
        self.storage = storage
        self.byte_offset = byte_offset
        self.allocation_size = size = len(storage)
        self.byte_length = size - byte_offset if byte_length is None else byte_length
        self.memory_type = memory_type
        self.allowed_access = allowed_access
        self.allowed_usage = allowed_usage
        self.queue_affinity = queue_affinity
        # Read-only memory a dispatch may write all the same (module constants): the
        # allocation moves to private pages when a dispatch binds it (map_binding).
        self.copy_on_write = False
        self._preserve_count = 1
        self._decommitted = False
        self._address = None  # of an allocated buffer's storage, once known (storage_address)

    @classmethod
    def allocate(cls, size: int, memory_type: int, allowed_access: int,
                 allowed_usage: int, queue_affinity: int = -1,
                 initial_data=None, zeroed: bool = True) -> "Buffer":
        """A new buffer of `size` bytes: zero-filled (see zeroed_memory), or a copy
        of `initial_data` (exactly `size` bytes) made without zero-filling first, or
        not `zeroed`: any contents (what the memory last held, for a queue allocation
        whose contents are undefined, as in IREE's pools: zero-filling a transient
        the workers last wrote costs more than the dispatch filling it)."""
        if size < 0:
            raise HalError(f"allocation size {size} is negative", StatusCode.INVALID_ARGUMENT)
        if initial_data is not None:
            initial_data = memoryview(initial_data).cast("B")
            if len(initial_data) != size:
                raise HalError(f"{len(initial_data)} bytes of initial data for a buffer of "
                               f"{size}", StatusCode.INVALID_ARGUMENT)
        try:
            if size < SMALL_COPY_BYTES:  # (the common case first: one frame fewer)
                data, address = _aligned_bytearray(size, BUFFER_ALIGNMENT)
                if initial_data is not None:
                    data[:] = initial_data
            elif initial_data is None:
                if zeroed or size >= MAPPED_ALLOCATION_BYTES:  # (a mapping is free zeros)
                    data, address = _zeroed_allocation(size)
                else:
                    data, address = _uninitialized_allocation(size)
            else:
                data, address = _copied_allocation(initial_data)
        except (MemoryError, OverflowError):
            raise HalError(f"cannot allocate a buffer of {size} bytes",
                           StatusCode.RESOURCE_EXHAUSTED) from None
        buffer = cls(data if address is not None else memoryview(data), memory_type,
                     allowed_access, allowed_usage, queue_affinity)
        buffer._address = address
        return buffer

    @classmethod
    def allocate_copies(cls, contents: list, memory_type: int, allowed_access: int,
                        allowed_usage: int, queue_affinity: int = -1) -> list["Buffer"]:
        """Buffers holding copies of `contents` (byte memoryviews), carved out of one
        allocation, each at a BUFFER_ALIGNMENT boundary: a host call's small inputs
        cost one allocation and one address lookup, not one each (the memory lives as
        long as the last of them, so callers pass small contents only)."""
        offsets, total = [], 0
        for data in contents:
            offsets.append(total)
            total += -(-len(data) // BUFFER_ALIGNMENT) * BUFFER_ALIGNMENT
        try:
            block, base = _aligned_bytearray(total, BUFFER_ALIGNMENT)
        except (MemoryError, OverflowError):
            raise HalError(f"cannot allocate {len(contents)} buffers of {total} bytes",
                           StatusCode.RESOURCE_EXHAUSTED) from None
        buffers = []
        for data, offset in zip(contents, offsets):
            storage = block[offset:offset + len(data)]
            storage[:] = data
            buffer = cls(storage, memory_type, allowed_access, allowed_usage, queue_affinity)
            buffer._address = base + offset
            buffers.append(buffer)
        return buffers

    @classmethod
    def wrap(cls, memory, memory_type: int, allowed_access: int, allowed_usage: int,
             queue_affinity: int = -1) -> "Buffer":
        """A buffer over existing host memory (no copy): anything exposing a
        contiguous buffer. Read-only memory only admits READ access."""
        # Over a view of its own: a caller's release() of a memoryview it passed
        # would otherwise take the buffer's bytes away.
        return cls.adopt(memoryview(memory), memory_type, allowed_access, allowed_usage,
                         queue_affinity)

    @classmethod
    def adopt(cls, view: memoryview, memory_type: int, allowed_access: int,
              allowed_usage: int, queue_affinity: int = -1) -> "Buffer":
        """wrap of a memoryview the caller hands over and never releases (a slice
        made for this buffer): the buffer keeps `view` itself, saving a view of it.
        Anything else is viewed."""
        return cls.adopt_all((view,), memory_type, allowed_access, allowed_usage,
                             queue_affinity)[0]

    @classmethod
    def adopt_all(cls, views, memory_type: int, allowed_access: int, allowed_usage: int,
                  queue_affinity: int = -1) -> list["Buffer"]:
        """adopt of each of `views`, in one call: a parameter load imports hundreds of
        slices alike, and a call per slice cost more than the checks."""
        buffers = []
        for view in views:
            if view.__class__ is not memoryview:  # (a provider lending other memory)
                view = memoryview(view)
            if view.format != "B" or view.ndim != 1:
                if not view.c_contiguous:
                    raise HalError("imported host memory must be contiguous",
                                   StatusCode.INVALID_ARGUMENT)
                view = view.cast("B")
            elif not view.c_contiguous:
                raise HalError("imported host memory must be contiguous",
                               StatusCode.INVALID_ARGUMENT)
            if allowed_access & ACCESS_WRITE and view.readonly:
                raise HalError("read-only host memory cannot be imported for writing",
                               StatusCode.PERMISSION_DENIED)
            buffers.append(cls(view, memory_type, allowed_access, allowed_usage,
                               queue_affinity))
        return buffers

    @property
    def allocated(self) -> "Buffer":
        """The allocated buffer whose storage this one covers (itself, or a subspan's root)."""
        root = self._root
        return self if root is None else root

    def __repr__(self) -> str:
        kind = "subspan " if self._root is not None else ""
        return (f"<hal.buffer {kind}{self.byte_length} bytes @{self.byte_offset} "
                f"{format_memory_type(self.memory_type)}>")

    # -- ranges --------------------------------------------------------------------------------
    def subspan(self, offset: int, length: int) -> "Buffer":
        """iree_hal_buffer_subspan: the whole buffer returns itself."""
        start, length = calculate_range(self.byte_offset, self.byte_length, offset, length)
        if start == self.byte_offset and length == self.byte_length:
            return self
        root = self.allocated
        return Buffer(root.storage, root.memory_type, root.allowed_access, root.allowed_usage,
                      allocated=root, byte_offset=start, byte_length=length,
                      queue_affinity=root.queue_affinity)

    # -- mapping -------------------------------------------------------------------------------
    def map_range(self, access: int, offset: int = 0, length: int = WHOLE_BUFFER,
                  mode: int = MAPPING_MODE_SCOPED) -> memoryview:
        """A writable view of bytes [offset, offset+length) of this buffer after
        upstream's checks (access, and for persistent mappings memory type and
        usage). Read-only access still gets a writable view of host memory only
        when the storage itself is writable; callers honour `access`."""
        if not access & ACCESS_ANY and (not access & _ACCESS_READ_WRITE or
                                         self.allowed_access & access != access):
            validate_access(self.allowed_access, access)
        if mode & MAPPING_MODE_PERSISTENT and (
                not self.memory_type & MEMORY_HOST_VISIBLE or
                not self.allowed_usage & USAGE_MAPPING_PERSISTENT):
            validate_memory_type(self.memory_type, MEMORY_HOST_VISIBLE)
            validate_usage(self.allowed_usage, USAGE_MAPPING_PERSISTENT)
        root = self._root
        if root is None:
            root = self
        if root._decommitted:
            raise HalError("buffer has been deallocated (hal.device.queue.dealloca)",
                           StatusCode.FAILED_PRECONDITION)
        storage = root.storage  # a subspan's own may predate _make_private
        byte_length = self.byte_length
        if offset == 0 and (length == WHOLE_BUFFER or length == byte_length):
            start = self.byte_offset  # the whole buffer: nothing can be out of range
            return storage[start:start + byte_length]
        start, length = calculate_range(self.byte_offset, byte_length, offset, length)
        return storage[start:start + length]

    def map_binding(self, offset: int, length: int) -> memoryview:
        """The bytes a dispatch binds (a persistent mapping of any access). A dispatch
        may write what it binds, even module constants imported read-only (iree-compile
        3.13 updates some in place): such an allocation first moves to private
        copy-on-write pages of the module file (or a private copy of its bytes), once
        per allocation, so the write lands there and nowhere else."""
        root, start, length = self.binding_span(offset, length)
        return root.storage[start:start + length]

    def binding_span(self, offset: int, length: int) -> tuple["Buffer", int, int]:
        """(allocated buffer, start, length) of the bytes map_binding maps, after
        its checks, without making a view: native dispatches take the address
        (storage_address() + start)."""
        root = self.binding_root()
        byte_length = self.byte_length
        if offset == 0 and (length == WHOLE_BUFFER or length == byte_length):
            return root, self.byte_offset, byte_length
        start, length = calculate_range(self.byte_offset, byte_length, offset, length)
        return root, start, length

    def binding_root(self) -> "Buffer":
        """The allocated buffer whose bytes a binding of this one maps, after the
        checks of binding_span that do not depend on the range (moved to private
        pages first when a dispatch may write module constants: map_binding)."""
        root = self._root
        if root is None:
            root = self
        if root.copy_on_write and root.storage.readonly:
            root._make_private()
        if not self.memory_type & MEMORY_HOST_VISIBLE or \
                not self.allowed_usage & USAGE_MAPPING_PERSISTENT:
            validate_memory_type(self.memory_type, MEMORY_HOST_VISIBLE)
            validate_usage(self.allowed_usage, USAGE_MAPPING_PERSISTENT)
        if root._decommitted:
            raise HalError("buffer has been deallocated (hal.device.queue.dealloca)",
                           StatusCode.FAILED_PRECONDITION)
        return root

    def storage_address(self) -> int:
        """The address of the allocation's storage (valid while the allocation lives
        and until it moves to private pages, which only a binding does)."""
        root = self._root
        if root is None:
            root = self
        address = root._address
        if address is None:
            address = root._address = memory_address(root.storage)
        return address

    def _make_private(self) -> None:
        with _PRIVATE_LOCK:
            if self.storage.readonly:
                from vmrt.format.mapped import private_pages
                private = private_pages(self.storage) or copied_memory(self.storage)
                # Forgotten before the storage changes: a binding that sees the new
                # storage never takes the old (read-only) address.
                self._address = None
                self.storage = private

    def view(self) -> memoryview:
        """The buffer's bytes (no access checks; for the device's own use)."""
        start = self.byte_offset
        return self.allocated.storage[start:start + self.byte_length]

    def map_read(self, offset: int, length: int) -> bytes:
        """iree_hal_buffer_map_read: a copy of bytes [offset, offset+length)."""
        if length == 0:
            return b""
        return bytes(self.map_range(ACCESS_READ, offset, length))

    def map_write(self, offset: int, data) -> None:
        """iree_hal_buffer_map_write: copies `data` (bytes-like) in at `offset`."""
        data = memoryview(data).cast("B")
        if len(data) == 0:
            return
        self.map_range(ACCESS_DISCARD_WRITE, offset, len(data))[:] = data

    def map_fill(self, offset: int, length: int, pattern: bytes) -> None:
        """iree_hal_buffer_map_fill with a 1, 2 or 4 byte pattern."""
        check_fill_pattern(len(pattern))
        if length == 0:
            return
        target = self.map_range(ACCESS_DISCARD_WRITE, offset, length)
        fill_view(target, offset, pattern)

    # -- allocation lifetime (hal.buffer.allocation.*) ---------------------------------------------
    def allocation_preserve(self) -> None:
        self.allocated._preserve_count += 1

    def allocation_discard(self) -> bool:
        """True when this drops the last preservation (the caller owns the memory)."""
        root = self.allocated
        root._preserve_count -= 1
        return root._preserve_count == 0

    def allocation_is_terminal(self) -> bool:
        return self.allocated._preserve_count == 1

    def decommit(self) -> None:
        """Marks the allocation dead (queue dealloca): later mappings fail."""
        self.allocated._decommitted = True


def check_fill_pattern(pattern_length: int) -> None:
    if pattern_length not in (1, 2, 4):
        raise HalError(f"fill patterns must be 1, 2, or 4 bytes (got {pattern_length})",
                       StatusCode.INVALID_ARGUMENT)


def fill_view(target: memoryview, offset: int, pattern: bytes) -> None:
    """Fills `target` (mapped from buffer offset `offset`) with `pattern`."""
    size = len(pattern)
    length = len(target)
    if offset % size or length % size:
        raise HalError(f"attempting to fill a range with {size} byte values that is not "
                       f"aligned (offset={offset}, length={length})",
                       StatusCode.INVALID_ARGUMENT)
    fill_pattern(target, 0, length, pattern)


def buffers_overlap(lhs: Buffer, lhs_offset: int, lhs_length: int, rhs: Buffer,
                 rhs_offset: int, rhs_length: int) -> bool:
    """True when two ranges share bytes of the same allocation."""
    if lhs.allocated is not rhs.allocated:
        return False
    lhs_start = lhs.byte_offset + lhs_offset
    rhs_start = rhs.byte_offset + rhs_offset
    if lhs_length == WHOLE_BUFFER:
        lhs_length = lhs.byte_length - lhs_offset
    if rhs_length == WHOLE_BUFFER:
        rhs_length = rhs.byte_length - rhs_offset
    if not lhs_length or not rhs_length:
        return False
    return lhs_start + lhs_length > rhs_start and rhs_start + rhs_length > lhs_start


def map_copy(source: Buffer, source_offset: int, target: Buffer, target_offset: int,
             length: int) -> None:
    """iree_hal_buffer_map_copy: ranges in the same allocation must not overlap."""
    if length == 0:
        return
    if buffers_overlap(source, source_offset, length, target, target_offset, length):
        raise HalError("source and target ranges must not overlap within the same buffer",
                       StatusCode.INVALID_ARGUMENT)
    src = source.map_range(ACCESS_READ, source_offset, length)
    dst = target.map_range(ACCESS_DISCARD_WRITE, target_offset, length)
    count = min(len(src), len(dst))
    dst[:count] = src[:count]
