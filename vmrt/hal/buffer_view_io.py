"""Buffer views as text, numpy arrays and .npy files, the way IREE's tools read
and print them (runtime/src/iree/hal/string_util.c, buffer_view_util.c,
runtime/src/iree/tooling/function_io.c, numpy_io.c).

Text form: `2x3xf32=1 2 3 4 5 6` (shape `AxB...x`, element type, `=`, values
separated by spaces, commas or brackets); a single value fills the whole
tensor, no values means zeros. Printing nests rows in brackets
(`2x3xf32=[1 2 3][4 5 6]`), floats as C's `%G`, and stops after
`max_element_count` elements with `...`.
"""

from __future__ import annotations

import functools
import math
import re
import struct
import sys

from vmrt.elements import (
    NARROW_FLOATS, ElementType, NumericalType, atof, atoi, e8m0_to_f32,
    element_bit_count, element_byte_count, format_element_type, format_shape_and_type,
    make_element_type, parse_element, parse_shape_and_type, strip_quotes, to_f32,
)
from vmrt.errors import HalError, StatusCode
from vmrt.hal.buffer_view import BufferView, compute_view_size
from vmrt.hal.types import ACCESS_READ, BufferUsage, EncodingType, MemoryType
from vmrt.memory import fill_pattern

E = ElementType


def parse_scalar(text: str, kind: str):
    """A primitive `--input` for cconv type `kind` (i, I, f, F) as
    iree-run-module parses it (C strtol/strtod rules, see vmrt.elements.atoi)."""
    text = text.strip()
    if kind in ("i", "I"):
        value = atoi(text, 32 if kind == "i" else 64)
    elif kind in ("f", "F"):
        value = atof(text, 32 if kind == "f" else 64)
    else:
        raise HalError(f"unimplemented cconv type `{kind}`", StatusCode.UNIMPLEMENTED)
    if value is None:
        name = {"i": "i32", "I": "i64", "f": "f32", "F": "f64"}[kind]
        raise HalError(f"parsing value `{text}` as {name}", StatusCode.INVALID_ARGUMENT)
    return value


# -- elements --------------------------------------------------------------------------------------
_INT_FORMATS = {
    int(E.INT_8): "b", int(E.SINT_8): "b", int(E.UINT_8): "B",
    int(E.INT_16): "h", int(E.SINT_16): "h", int(E.UINT_16): "H",
    int(E.INT_32): "i", int(E.SINT_32): "i", int(E.UINT_32): "I",
    int(E.INT_64): "q", int(E.SINT_64): "q", int(E.UINT_64): "Q",
}


_SEPARATORS = re.compile(r"[\s,\[\]]+")


def parse_elements(text: str, element_type: int, element_count: int) -> bytes:
    """Dense bytes of `element_count` elements; one value is a splat, no
    values are zeros, any other count is OUT_OF_RANGE."""
    data = bytearray(element_byte_count(element_type) * element_count)
    write_elements(data, text, element_type, element_count)
    return bytes(data)


def write_elements(target, text: str, element_type: int, element_count: int) -> None:
    """parse_elements into `target` (zero-filled, exactly the elements' size), in place."""
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if not tokens:
        return
    if len(tokens) > element_count:
        raise HalError(f"output data overflow: element_capacity={element_count} < dst_i="
                       f"{element_count}", StatusCode.OUT_OF_RANGE)
    if len(tokens) == 1:
        pattern = parse_element(tokens[0], element_type)
        _check_element_bytes(target, len(pattern) * element_count)
        if element_count:
            fill_pattern(target, 0, len(target), pattern)
        return
    if len(tokens) < element_count:
        raise HalError(f"input data string underflow: dst_i={len(tokens)} < "
                       f"element_capacity={element_count}", StatusCode.OUT_OF_RANGE)
    data = b"".join(parse_element(t, element_type) for t in tokens)
    _check_element_bytes(target, len(data))
    memoryview(target)[:] = data


def _check_element_bytes(target, size: int) -> None:
    if len(target) != size:
        raise HalError(f"elements of {size} bytes do not fill a buffer of {len(target)} bytes",
                       StatusCode.INVALID_ARGUMENT)


def _format_float(value: float) -> str:
    """C's printf("%G", value), including the sign of NaN."""
    if math.isnan(value):
        return "-NAN" if math.copysign(1.0, value) < 0 else "NAN"
    return "%G" % value


def element_formatter(element_type: int):
    """A function (bytes of one element) -> text, as iree_hal_format_element."""
    element_type = int(element_type)
    int_format = _INT_FORMATS.get(element_type)
    if int_format is not None:
        unpack = struct.Struct("<" + int_format).unpack
        return lambda data: str(unpack(data)[0])
    if element_type == E.FLOAT_32:
        unpack = struct.Struct("<f").unpack
        return lambda data: _format_float(unpack(data)[0])
    if element_type == E.FLOAT_64:
        unpack = struct.Struct("<d").unpack
        return lambda data: _format_float(unpack(data)[0])
    narrow = NARROW_FLOATS.get(element_type)
    if narrow is not None:
        unpack = struct.Struct("<" + narrow[0]).unpack
        fmt = narrow[1]
        return lambda data: _format_float(to_f32(unpack(data)[0], fmt))
    if element_type == E.FLOAT_8_E8M0_FNU:
        return lambda data: _format_float(e8m0_to_f32(data[0]))
    return lambda data: bytes(data).hex().upper()


def format_elements(data, shape, element_type: int, max_element_count: int = 1024) -> str:
    """iree_hal_format_buffer_elements: nested rows in brackets, at most
    `max_element_count` elements in all (a cut row ends in `...`)."""
    data = memoryview(data).cast("B")
    size = element_byte_count(element_type)
    fmt = element_formatter(element_type)
    remaining = [max(0, max_element_count)]
    parts: list[str] = []

    def rows(offset: int, dims) -> None:
        if len(dims) > 1:
            stride = size
            for d in dims[1:]:
                stride *= d
            if len(data) - offset < stride * dims[0]:
                raise _underflow(len(data) - offset, stride * dims[0])
            for i in range(dims[0]):
                parts.append("[")
                rows(offset + i * stride, dims[1:])
                parts.append("]")
            return
        count = min(remaining[0], dims[0])
        if len(data) - offset < count * size:
            raise _underflow(len(data) - offset, count * size)
        remaining[0] -= count
        parts.append(" ".join(fmt(data[offset + i * size:offset + (i + 1) * size])
                              for i in range(count)))
        if count < dims[0]:
            parts.append("...")

    rows(0, tuple(shape) or (1,))
    return "".join(parts)


def _underflow(have: int, need: int) -> HalError:
    return HalError(f"input data underflow: data_length={have} < expected={need}",
                    StatusCode.OUT_OF_RANGE)


# -- buffer views ----------------------------------------------------------------------------------
#: Buffers made for host-provided inputs: device-local, mappable, default usage.
INPUT_MEMORY_TYPE = int(MemoryType.DEVICE_LOCAL)
INPUT_USAGE = int(BufferUsage.DEFAULT | BufferUsage.MAPPING)


def _allocator_of(device_or_allocator):
    return getattr(device_or_allocator, "allocator", device_or_allocator)


def buffer_view_from_bytes(device_or_allocator, shape, element_type: int, data) -> BufferView:
    """A new buffer view holding a copy of `data` (exactly the view's size)."""
    allocator = _allocator_of(device_or_allocator)
    size = compute_view_size(shape, element_type)
    data = memoryview(data).cast("B")
    if len(data) != size:
        raise HalError(f"buffer view {format_shape_and_type(shape, element_type)} needs {size} "
                       f"bytes but {len(data)} were given", StatusCode.INVALID_ARGUMENT)
    buffer = allocator.allocate_buffer(INPUT_MEMORY_TYPE, INPUT_USAGE, size, initial_data=data)
    return BufferView(buffer, shape, element_type, EncodingType.DENSE_ROW_MAJOR)


def parse_buffer_view(text: str, device_or_allocator) -> BufferView:
    """iree_hal_buffer_view_parse: `2x3xf32=1 2 3 4 5 6`, `f32=2.5`, `4xi8=7`."""
    text = strip_quotes(text)
    shape, element_type = parse_shape_and_type(text)
    _, _, data_text = text.partition("=")
    count = 1
    for d in shape:
        count *= d
    # As upstream: the buffer first (an impossible size fails here, at once), then
    # the elements parsed into it.
    size = compute_view_size(shape, element_type)
    if size != element_byte_count(element_type) * count:  # (sub-byte types: packed)
        data = parse_elements(data_text, element_type, count)
        return buffer_view_from_bytes(device_or_allocator, shape, element_type, data)
    buffer = _allocator_of(device_or_allocator).allocate_buffer(INPUT_MEMORY_TYPE,
                                                                INPUT_USAGE, size)
    write_elements(buffer.view(), data_text, element_type, count)
    return BufferView(buffer, shape, element_type, EncodingType.DENSE_ROW_MAJOR)


def buffer_view_bytes(view: BufferView) -> memoryview:
    """The bytes of a dense buffer view (a view of its buffer, no copy)."""
    return view.buffer.map_range(ACCESS_READ, 0, view.byte_length)


def format_buffer_view(view: BufferView, max_element_count: int = 1024) -> str:
    """iree_hal_buffer_view_format: `2x3xf32=[1 2 3][4 5 6]`."""
    data = view.buffer.map_range(ACCESS_READ, 0, -1)
    return (format_shape_and_type(view.shape, view.element_type) + "=" +
            format_elements(data, view.shape, view.element_type, max_element_count))


# -- numpy -----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _dtype_table() -> dict:
    """Element type -> numpy dtype (built once; numpy is imported on first use)."""
    import numpy as np
    types = {
        E.BOOL_8: np.bool_, E.INT_8: np.int8, E.SINT_8: np.int8, E.UINT_8: np.uint8,
        E.INT_16: np.int16, E.SINT_16: np.int16, E.UINT_16: np.uint16, E.INT_32: np.int32,
        E.SINT_32: np.int32, E.UINT_32: np.uint32, E.INT_64: np.int64, E.SINT_64: np.int64,
        E.UINT_64: np.uint64, E.FLOAT_16: np.float16, E.FLOAT_32: np.float32,
        E.FLOAT_64: np.float64, E.COMPLEX_FLOAT_64: np.complex64,
        E.COMPLEX_FLOAT_128: np.complex128,
    }
    return {int(k): np.dtype(v) for k, v in types.items()}


def dtype_for_element_type(element_type: int):
    """The numpy dtype holding an element type (opaque and other types without a
    numpy twin come out as raw unsigned integers of their width)."""
    import numpy as np
    dtype = _dtype_table().get(element_type)
    if dtype is not None:
        return dtype
    size = element_byte_count(element_type)
    if element_bit_count(element_type) % 8 == 0 and size in (1, 2, 4, 8):
        return np.dtype(f"<u{size}")
    raise HalError(f"element type {format_element_type(element_type)} has no numpy dtype",
                   StatusCode.UNIMPLEMENTED)


def element_type_for_dtype(dtype) -> int:
    import numpy as np
    dtype = np.dtype(dtype)
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        return int(E.BOOL_8)
    if kind in "iu" and size in (1, 2, 4, 8):
        numerical = NumericalType.INTEGER_SIGNED if kind == "i" else \
            NumericalType.INTEGER_UNSIGNED
        return make_element_type(numerical, size * 8)
    if kind == "f" and size in (2, 4, 8):
        return make_element_type(NumericalType.FLOAT_IEEE, size * 8)
    if kind == "c" and size in (8, 16):
        return make_element_type(NumericalType.FLOAT_COMPLEX, size * 8)
    raise HalError(f"numpy dtype {dtype} has no IREE element type", StatusCode.INVALID_ARGUMENT)


_LITTLE_ENDIAN = sys.byteorder == "little"
#: numpy byte orders of little-endian data (`=`, native, only on a little-endian host).
_LITTLE_ENDIAN_ORDERS = ("=", "<", "|") if _LITTLE_ENDIAN else ("<", "|")

#: Element types of the dtypes arrays arrived with (a host call converts the same
#: few dtypes again and again).
_ELEMENT_TYPES: dict = {}


def _dense_array(array):
    """(the array as C-ordered little-endian numpy, its element type)."""
    import numpy as np
    array = np.asarray(array)
    dtype = array.dtype
    element_type = _ELEMENT_TYPES.get(dtype)
    if element_type is None:
        element_type = _ELEMENT_TYPES[dtype] = element_type_for_dtype(dtype)
    if not (array.flags.c_contiguous and dtype.byteorder in _LITTLE_ENDIAN_ORDERS):
        array = np.ascontiguousarray(array, dtype=dtype.newbyteorder("<"))
    return array, element_type


def buffer_view_from_numpy(array, device_or_allocator) -> BufferView:
    """A new buffer view holding a copy of a numpy array (C order, little-endian)."""
    return _view_of_dense(*_dense_array(array), _allocator_of(device_or_allocator))


def _view_of_dense(array, element_type: int, allocator) -> BufferView:
    """A buffer view holding a copy of a _dense_array result, in its own allocation."""
    # Every dtype maps to a whole-byte element type: the array's bytes are the view's;
    # and numpy's ranks (at most 64) are within MAX_RANK.
    # (Buffer.allocate takes the array's bytes as they are: one memoryview cast, its own)
    size = array.nbytes
    buffer = allocator.allocate_buffer(INPUT_MEMORY_TYPE, INPUT_USAGE, size, 0, -1,
                                       array if size else b"")
    return BufferView.of_dense(buffer, array.shape, element_type, size)


#: Arrays up to this size share one allocation in buffer_views_from_numpy (a large
#: one keeps its own, so no result held long keeps other inputs' memory alive).
SHARED_INPUT_BYTES = 4096


def buffer_views_from_numpy(arrays: list, device_or_allocator) -> list[BufferView]:
    """buffer_view_from_numpy of each array, the small ones (a call's usual inputs)
    copied into one allocation when there are several (HeapAllocator.allocate_copies;
    one alone is cheaper to allocate by itself)."""
    allocator = _allocator_of(device_or_allocator)
    if len(arrays) == 1:  # (a call's usual single input, without the lists below)
        return [_view_of_dense(*_dense_array(arrays[0]), allocator)]
    # (one loop each way, no comprehensions: a call converts its inputs every time)
    dense, small = [], []
    for array in arrays:
        array, element_type = _dense_array(array)
        dense.append((array, element_type))
        size = array.nbytes
        if size <= SHARED_INPUT_BYTES:
            small.append(memoryview(array).cast("B") if size else memoryview(b""))
    shared = iter(allocator.allocate_copies(INPUT_MEMORY_TYPE, INPUT_USAGE, small)
                  if len(small) > 1 else ())
    views = []
    for array, element_type in dense:
        size = array.nbytes
        if size > SHARED_INPUT_BYTES or len(small) < 2:
            views.append(_view_of_dense(array, element_type, allocator))
        else:
            views.append(BufferView.of_dense(next(shared), array.shape, element_type, size))
    return views


def buffer_view_to_numpy(view: BufferView):
    """A numpy array holding a copy of a dense buffer view's contents (a copy, so that
    nothing the module does later, nor the buffer's release, can change it)."""
    import numpy as np
    if view.encoding_type not in _NUMPY_ENCODINGS:
        raise HalError("only dense row-major buffer views convert to numpy",
                       StatusCode.UNIMPLEMENTED)
    element_type = view.element_type
    dtype = _DTYPES.get(element_type)
    if dtype is None:
        dtype = _DTYPES[element_type] = dtype_for_element_type(element_type)
    # (every type with a dtype is whole bytes: the view's bytes are its elements)
    data = view.buffer.map_range(ACCESS_READ, 0, view.byte_length)
    # (an ndarray over the bytes, copied: cheaper than frombuffer's and reshape's two arrays)
    return np.ndarray(view.shape, dtype, data).copy()


_NUMPY_ENCODINGS = (int(EncodingType.DENSE_ROW_MAJOR), int(EncodingType.OPAQUE))
#: dtype_for_element_type of the element types results came back with.
_DTYPES: dict = {}


# -- .npy files and tool inputs --------------------------------------------------------------------
class InputStreams:
    """Files opened by `--input` values: `@path` reads from the start, `+path`
    continues where the previous input from that file stopped."""

    def __init__(self):
        self._files: dict[str, object] = {}

    def open(self, path: str, append: bool):
        stream = self._files.get(path)
        if stream is None:
            stream = self._files[path] = open(path, "rb")
        elif not append:
            stream.seek(0)
        return stream

    def close(self) -> None:
        for stream in self._files.values():
            stream.close()
        self._files.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _at_end(stream) -> bool:
    position = stream.tell()
    more = stream.read(1)
    stream.seek(position)
    return not more


def read_npy(stream, device_or_allocator) -> BufferView:
    """One array from a .npy stream as a buffer view."""
    import numpy as np
    try:
        array = np.lib.format.read_array(stream, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise HalError(f"invalid .npy data: {error}", StatusCode.INVALID_ARGUMENT) from None
    return buffer_view_from_numpy(array, device_or_allocator)


def parse_tensor_input(text: str, device_or_allocator, streams: InputStreams) -> list:
    """The values one `--input` for a ref argument stands for, as iree-run-module
    reads them: `(null)`, `@a.npy` / `+a.npy` (next array), `*a.npy` (every
    remaining array: several values), `2x3xf32=@raw.bin` / `=+raw.bin` (raw
    bytes), `&...` (the buffer of a view), or a text buffer view."""
    text = text.strip()
    if not text:
        raise HalError("no value specified for input", StatusCode.INVALID_ARGUMENT)
    if text in ("(null)", "(ignored)"):
        return [None]
    if text[0] in "@+*":
        path = text[1:]
        if not path.endswith(".npy"):
            raise HalError("only numpy (.npy) files are supported for metadata-less variant I/O",
                           StatusCode.UNIMPLEMENTED)
        stream = streams.open(path, append=text[0] != "@")
        if text[0] != "*":
            return [read_npy(stream, device_or_allocator)]
        views = []
        while not _at_end(stream):
            views.append(read_npy(stream, device_or_allocator))
        return views
    storage = text.startswith("&")
    if storage:
        text = text[1:]
    metadata, sep, contents = text.partition("=")
    if sep and contents[:1] in ("@", "+"):
        shape, element_type = parse_shape_and_type(metadata)
        size = compute_view_size(shape, element_type)
        stream = streams.open(contents[1:], append=contents[0] == "+")
        data = stream.read(size)
        if len(data) < size:
            raise HalError(f"file {contents[1:]} ended after {len(data)} of {size} bytes",
                           StatusCode.OUT_OF_RANGE)
        view = buffer_view_from_bytes(device_or_allocator, shape, element_type, data)
    else:
        if not storage and "=" not in text and "x" not in text:
            raise HalError("invalid tensor specification, requires at least a shape/type "
                           "(`4x2xf32=...`)", StatusCode.INVALID_ARGUMENT)
        view = parse_buffer_view(text, device_or_allocator)
    return [view.buffer if storage else view]


def format_result(index: int, value, max_element_count: int = 1024,
                  list_name: str = "result") -> str:
    """One `result[i]: ...` entry as iree-run-module prints it (buffer views as
    `hal.buffer_view` and their contents on the next line; numbers are the
    caller's business and are formatted here only for refs)."""
    head = f"{list_name}[{index}]: "
    if value is None:
        return head + "(null)"
    if isinstance(value, BufferView):
        return head + "hal.buffer_view\n" + format_buffer_view(value, max_element_count)
    ref_type = getattr(value, "ref_type", None)
    name = ref_type.name if ref_type is not None else type(value).__name__
    return head + name + "\n(no printer)"
