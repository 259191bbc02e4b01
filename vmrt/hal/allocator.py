"""The heap allocator of the local devices: every buffer is host memory that the
device can also use (runtime/src/iree/hal/allocator_heap.c)."""

from __future__ import annotations

from dataclasses import dataclass

from vmrt.errors import HalError, StatusCode
from vmrt.hal.buffer import Buffer
from vmrt.hal.types import (
    ACCESS_ALL, COMPATIBILITY_ALLOCATABLE, COMPATIBILITY_IMPORTABLE, MEMORY_DEVICE_VISIBLE,
    MEMORY_HOST_VISIBLE, MEMORY_OPTIMAL, USAGE_DEFAULT, BufferCompatibility, BufferUsage,
)
from vmrt.vm.ref import RefObject

_USAGE_ADDED = int(BufferUsage.MAPPING_SCOPED | BufferUsage.MAPPING_PERSISTENT |
                   BufferUsage.MAPPING_ACCESS_RANDOM | BufferUsage.TRANSFER)
_BASE_COMPATIBILITY = int(BufferCompatibility.ALLOCATABLE | BufferCompatibility.IMPORTABLE |
                          BufferCompatibility.EXPORTABLE)
#: (usage bits, the queue compatibility they give a device-visible buffer).
_QUEUE_USES = ((int(BufferUsage.TRANSFER), int(BufferCompatibility.QUEUE_TRANSFER)),
               (int(BufferUsage.DISPATCH), int(BufferCompatibility.QUEUE_DISPATCH)))
#: How many parameter combinations an allocator remembers (_allocation_params_of).
_REMEMBERED_PARAMS = 64


def canonical_params(memory_type: int, usage: int, access: int = 0) -> tuple[int, int, int]:
    """iree_hal_buffer_params_canonicalize: zero fields take their defaults."""
    return memory_type or MEMORY_OPTIMAL, usage or USAGE_DEFAULT, access or ACCESS_ALL


@dataclass
class AllocatorStatistics:
    host_bytes_allocated: int = 0
    device_bytes_allocated: int = 0
    buffers_allocated: int = 0
    buffers_imported: int = 0


def queue_compatibility(memory_type: int, usage: int) -> int:
    """The compatibility bits of query_compatibility alone (command buffers
    validate every recorded binding with it)."""
    compatibility = _BASE_COMPATIBILITY
    if memory_type & MEMORY_DEVICE_VISIBLE == MEMORY_DEVICE_VISIBLE:
        for uses, queue in _QUEUE_USES:
            if usage & uses:
                compatibility |= queue
    return compatibility


class HeapAllocator(RefObject):
    """A hal.allocator handing out host memory buffers."""

    __slots__ = ("identifier", "statistics", "_allocation_params")

    def __init__(self, identifier: str = "heap"):
        self.identifier = identifier
        self.statistics = AllocatorStatistics()
        self._allocation_params: dict[tuple, tuple[int, int, int]] = {}

    def __repr__(self) -> str:
        return f"<hal.allocator {self.identifier}>"

    def query_compatibility(self, memory_type: int, usage: int) -> tuple[int, int, int]:
        """(compatibility bits, memory type, usage) a buffer with these params gets."""
        return (queue_compatibility(memory_type, usage),
                # Host memory is always mappable; OPTIMAL is only an allocation hint.
                (memory_type | MEMORY_HOST_VISIBLE) & ~MEMORY_OPTIMAL, usage | _USAGE_ADDED)

    def allocate_buffer(self, memory_type: int, usage: int, size: int, access: int = 0,
                        queue_affinity: int = -1, initial_data=None,
                        zeroed: bool = True) -> Buffer:
        """A new buffer, zero-filled or holding a copy of `initial_data` (`size` bytes),
        or not `zeroed` (Buffer.allocate)."""
        params = self._allocation_params.get((memory_type, usage, access))
        if params is None:
            params = self._allocation_params_of(memory_type, usage, access)
        memory_type, access, usage = params  # (a call without *params: cheaper)
        buffer = Buffer.allocate(size, memory_type, access, usage, queue_affinity, initial_data,
                                 zeroed)
        stats = self.statistics
        stats.buffers_allocated += 1
        stats.host_bytes_allocated += size
        return buffer

    def allocate_copies(self, memory_type: int, usage: int, contents: list, access: int = 0,
                        queue_affinity: int = -1) -> list[Buffer]:
        """New buffers holding copies of `contents` (small byte memoryviews), in one
        allocation (Buffer.allocate_copies)."""
        params = self._allocation_params.get((memory_type, usage, access)) or \
            self._allocation_params_of(memory_type, usage, access)
        buffers = Buffer.allocate_copies(contents, *params, queue_affinity)
        stats = self.statistics
        stats.buffers_allocated += len(buffers)
        stats.host_bytes_allocated += sum(map(len, contents))
        return buffers

    def _allocation_params_of(self, memory_type: int, usage: int,
                              access: int) -> tuple[int, int, int]:
        """(memory type, access, usage) of a buffer allocated with these parameters,
        remembered for the next allocation alike (a model allocates with the same
        few parameters on every call; a bounded number, whatever a module asks)."""
        key = (memory_type, usage, access)
        memory_type, usage, access = canonical_params(memory_type, usage, access)
        compatibility, memory_type, usage = self.query_compatibility(memory_type, usage)
        if not compatibility & COMPATIBILITY_ALLOCATABLE:
            raise HalError("allocator cannot allocate a buffer with the given parameters",
                           StatusCode.INVALID_ARGUMENT)
        params = (memory_type, access, usage)
        if len(self._allocation_params) < _REMEMBERED_PARAMS:
            self._allocation_params[key] = params
        return params

    def import_buffer(self, memory, memory_type: int, usage: int, access: int = 0,
                      queue_affinity: int = -1) -> Buffer:
        """Wraps host memory (anything with the buffer protocol) without copying."""
        return self.importer(memory_type, usage, access, queue_affinity)(memory)

    def importer(self, memory_type: int, usage: int, access: int = 0,
                 queue_affinity: int = -1, *, views_handed_over: bool = False):
        """import_buffer with these parameters, checked once: a function of the memory
        (a parameter load imports hundreds of buffers alike). With `views_handed_over`
        the memory is a memoryview made for the import that the caller never releases:
        the buffer keeps it (Buffer.adopt)."""
        memory_type, access, usage = self._import_params(memory_type, usage, access)
        statistics = self.statistics
        wrap = Buffer.adopt if views_handed_over else Buffer.wrap

        def import_memory(memory) -> Buffer:
            buffer = wrap(memory, memory_type, access, usage, queue_affinity)
            statistics.buffers_imported += 1
            return buffer
        return import_memory

    def import_views(self, views, memory_type: int, usage: int, access: int = 0,
                     queue_affinity: int = -1) -> list[Buffer]:
        """importer(..., views_handed_over=True) of each of `views` in one call
        (Buffer.adopt_all): what a parameter load lends, hundreds of views alike."""
        memory_type, access, usage = self._import_params(memory_type, usage, access)
        buffers = Buffer.adopt_all(views, memory_type, access, usage, queue_affinity)
        self.statistics.buffers_imported += len(buffers)
        return buffers

    def _import_params(self, memory_type: int, usage: int,
                       access: int) -> tuple[int, int, int]:
        """(memory type, access, usage) of a buffer imported with these parameters."""
        memory_type, usage, access = canonical_params(memory_type, usage, access)
        compatibility, memory_type, usage = self.query_compatibility(memory_type, usage)
        if not compatibility & COMPATIBILITY_IMPORTABLE:
            raise HalError("allocator cannot import a buffer with the given parameters",
                           StatusCode.INVALID_ARGUMENT)
        return memory_type, access, usage
