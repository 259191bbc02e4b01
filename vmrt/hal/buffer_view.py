"""Buffer views: a buffer with a shape, an IREE element type and an encoding
(runtime/src/iree/hal/buffer_view.h), and the size rules that go with them."""

from __future__ import annotations

from vmrt.elements import (
    MAX_RANK, element_bit_count, element_packed_byte_count, format_shape_and_type,
)
from vmrt.errors import HalError, StatusCode
from vmrt.hal.buffer import Buffer
from vmrt.hal.types import ENCODING_DENSE_ROW_MAJOR, EncodingType
from vmrt.vm.ref import RefObject

_DEVICE_SIZE_MAX = (1 << 64) - 1


def compute_view_size(shape, element_type: int,
                      encoding_type: int = EncodingType.DENSE_ROW_MAJOR) -> int:
    """iree_hal_buffer_compute_view_size: bytes a dense row-major view needs."""
    if encoding_type != EncodingType.DENSE_ROW_MAJOR:
        raise HalError("unimplemented encoding type size calculation",
                       StatusCode.UNIMPLEMENTED)
    if element_bit_count(element_type) == 0:
        raise HalError("opaque element types cannot be indexed", StatusCode.INVALID_ARGUMENT)
    count = 1
    for index, dim in enumerate(shape):
        count *= dim
        if count > _DEVICE_SIZE_MAX:  # (upstream's iree_device_size_t is 64 bits)
            raise HalError(f"shape element count overflows device size at dimension {index}",
                           StatusCode.OUT_OF_RANGE)
    size = element_packed_byte_count(element_type, count)
    if size > _DEVICE_SIZE_MAX:
        raise HalError("shape byte size overflows device size", StatusCode.OUT_OF_RANGE)
    return size


class BufferView(RefObject):
    """A hal.buffer_view. `shape` is a tuple of non-negative ints."""

    __slots__ = ("buffer", "shape", "element_type", "encoding_type", "byte_length")

    def __init__(self, buffer: Buffer, shape, element_type: int,
                 encoding_type: int = EncodingType.DENSE_ROW_MAJOR):
        if buffer is None:
            raise HalError("buffer view needs a buffer", StatusCode.INVALID_ARGUMENT)
        shape = tuple(shape)
        for dim in shape:
            if dim.__class__ is not int:  # (numpy integers, bools: as ints)
                shape = tuple(int(d) for d in shape)
                break
        if len(shape) > MAX_RANK:
            raise HalError(f"shape rank {len(shape)} exceeds {MAX_RANK}",
                           StatusCode.RESOURCE_EXHAUSTED)
        self.buffer = buffer
        self.shape = shape
        self.element_type = element_type = int(element_type) & 0xFFFFFFFF
        self.encoding_type = int(encoding_type) & 0xFFFFFFFF
        count = 1
        for dim in shape:
            count *= dim
        self.byte_length = element_packed_byte_count(element_type, count)

    @classmethod
    def of_dense(cls, buffer: Buffer, shape: tuple, element_type: int,
                 byte_length: int) -> "BufferView":
        """A dense row-major view from arguments already in the form __init__ gives
        them (a tuple of ints of rank <= MAX_RANK, a 32-bit element type, the packed
        byte length): host arrays arrive so on every call."""
        view = cls.__new__(cls)
        view.buffer = buffer
        view.shape = shape
        view.element_type = element_type
        view.encoding_type = ENCODING_DENSE_ROW_MAJOR
        view.byte_length = byte_length
        return view

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element_count(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    def dim(self, index: int) -> int:
        """iree_hal_buffer_view_shape_dim; an index past the rank is an error here
        (upstream reads past the shape array)."""
        if not 0 <= index < len(self.shape):
            raise HalError(f"shape dimension {index} out of range of rank {len(self.shape)}",
                           StatusCode.OUT_OF_RANGE)
        return self.shape[index]

    def __repr__(self) -> str:
        return f"<hal.buffer_view {format_shape_and_type(self.shape, self.element_type)}>"
