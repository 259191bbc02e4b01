"""HAL files: byte sources and sinks for queue read/write (hal.ex.file.from_memory
wraps host memory; runtime/src/iree/hal/file.h)."""

from __future__ import annotations

from vmrt.errors import HalError, StatusCode
from vmrt.hal.types import ACCESS_READ, ACCESS_WRITE
from vmrt.vm.ref import RefObject


class MemoryFile(RefObject):
    """A hal.file over host memory (no copy)."""

    __slots__ = ("memory", "access")

    def __init__(self, memory, access: int = ACCESS_READ):
        view = memoryview(memory)
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B")
        self.memory = view
        self.access = access

    @property
    def length(self) -> int:
        return len(self.memory)

    def __repr__(self) -> str:
        return f"<hal.file memory {len(self.memory)} bytes>"

    def _range(self, offset: int, length: int) -> slice:
        if offset < 0 or length < 0 or offset + length > len(self.memory):
            raise HalError(f"file range [{offset}, {offset + length}) is out of bounds of "
                           f"{len(self.memory)} bytes", StatusCode.OUT_OF_RANGE)
        return slice(offset, offset + length)

    def read(self, offset: int, length: int) -> memoryview:
        if not self.access & ACCESS_READ:
            raise HalError("file is not readable", StatusCode.PERMISSION_DENIED)
        return self.memory[self._range(offset, length)]

    def write(self, offset: int, data) -> None:
        if not self.access & ACCESS_WRITE or self.memory.readonly:
            raise HalError("file is not writable", StatusCode.PERMISSION_DENIED)
        data = memoryview(data).cast("B")
        self.memory[self._range(offset, len(data))] = data
