"""safetensors (https://huggingface.co/docs/safetensors): read and write.

Layout: u64 little-endian header length N, N bytes of UTF-8 JSON, then the
data buffer. The JSON maps each tensor name to {"dtype", "shape",
"data_offsets": [begin, end]} (offsets relative to the data buffer) plus an
optional "__metadata__" object of string pairs.

Reading follows IREE's parser (safetensors_parser.c): entries in header
order, each spanning its data_offsets, bounds-checked against the data
buffer; dtype and shape go to `entry.info`. Writing lays tensors out
back to back in index order (the format allows no holes), pads the header
with spaces to 8 bytes, and materializes splats. Each tensor is recorded
with the dtype and shape its entry declares (its info, else the numpy array
it wraps) when they account for its bytes, else as a U8 vector.
"""

from __future__ import annotations

import json
import math
import struct

from vmrt.errors import ArchiveError, StatusCode
from vmrt.io.file import FileHandle
from vmrt.io.index import ParameterIndex, ParameterIndexEntry

#: Bytes per element of the dtypes safetensors defines.
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}

HEADER_ALIGNMENT = 8


class _Object(list):
    """A JSON object as its (key, value) pairs, in file order, duplicates kept."""


def _decode_header(raw: bytes):
    try:
        text = raw.decode("utf-8")
        return json.loads(text, object_pairs_hook=_Object)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ArchiveError(f"safetensors header is not valid JSON: {error}",
                           StatusCode.INVALID_ARGUMENT) from None


def _is_uint(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_safetensors(handle: FileHandle, index: ParameterIndex,
                      contents: memoryview | None = None) -> dict:
    """Adds every tensor of the file to `index`; returns the __metadata__ pairs."""
    if contents is None:
        contents = handle.contents()
    size = contents.nbytes
    if size < 8:
        raise ArchiveError(f"insufficient capacity for safetensors header length (need at "
                           f"least 8 bytes but have {size})", StatusCode.OUT_OF_RANGE)
    (header_length,) = struct.unpack_from("<Q", contents, 0)
    if header_length > size - 8:
        raise ArchiveError(f"insufficient capacity for safetensors header contents "
                           f"(declared as {header_length} but only {size - 8} bytes "
                           "available)", StatusCode.OUT_OF_RANGE)
    header = _decode_header(bytes(contents[8:8 + header_length]))
    if not isinstance(header, _Object):
        raise ArchiveError("safetensors header is not a JSON object",
                           StatusCode.INVALID_ARGUMENT)
    base = 8 + header_length
    data_size = size - base
    metadata: dict = {}
    entries = []
    for key, value in header:
        if key == "__metadata__":
            if isinstance(value, _Object):
                metadata = {k: v for k, v in value}
            continue
        if not isinstance(value, _Object):
            raise ArchiveError(f"safetensors tensor `{key}` is not a JSON object",
                               StatusCode.INVALID_ARGUMENT)
        fields = dict(value)
        if "data_offsets" not in fields:
            raise ArchiveError(f"safetensors tensor `{key}` has no data_offsets",
                               StatusCode.INVALID_ARGUMENT)
        offsets = fields["data_offsets"]
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_uint(v) for v in offsets)):
            raise ArchiveError(f"failed to parse entry data offsets `{json.dumps(offsets)}` "
                               f"of tensor `{key}`", StatusCode.INVALID_ARGUMENT)
        begin, end = offsets
        if begin > end or end > data_size:
            raise ArchiveError(
                f"tensor `{key}` has data offsets outside of the available data "
                f"(begin={begin}, end={end}, available={data_size})",
                StatusCode.INVALID_ARGUMENT)
        info = {}
        if isinstance(fields.get("dtype"), str):
            info["dtype"] = fields["dtype"]
        shape = fields.get("shape")
        if isinstance(shape, list) and all(_is_uint(d) for d in shape):
            info["shape"] = tuple(shape)
        entries.append(ParameterIndexEntry(key=key, length=end - begin, file=handle,
                                           offset=base + begin, info=info))
    for entry in entries:
        index.add(entry)
    return metadata


#: numpy dtype kind -> safetensors dtype prefix; the bit count follows (F32, I8, U64, C64).
_NUMPY_KIND_PREFIXES = {"f": "F", "i": "I", "u": "U", "c": "C"}

#: Dimensions are stored as u64 in GGUF and as JSON numbers read into 64-bit integers
#: by safetensors readers; a larger one could not be written back.
_MAX_DIMENSION = (1 << 63) - 1


def is_shape(dims) -> bool:
    """True for a sequence of dimensions every archive format can store."""
    return isinstance(dims, (tuple, list)) and all(
        _is_uint(d) and d <= _MAX_DIMENSION for d in dims)


def safetensors_dtype(dtype) -> str | None:
    """The safetensors dtype of a numpy dtype, or None when safetensors has none.

    safetensors data is little-endian: big-endian arrays have no dtype here (their
    bytes are written as they are, as U8)."""
    if dtype.str.startswith(">"):
        return None
    if dtype.kind == "b":
        return "BOOL"
    prefix = _NUMPY_KIND_PREFIXES.get(dtype.kind)
    name = f"{prefix}{dtype.itemsize * 8}" if prefix else None
    return name if name in DTYPE_SIZES else None


def host_array_layout(entry) -> tuple[str, tuple[int, ...]] | None:
    """The safetensors dtype and shape of the numpy array an entry wraps whole.

    `index.add_buffer(key, array)` keeps only the array's bytes in the entry; the
    array itself is still the exporter of the wrapped buffer, so its dtype and shape
    need not be lost when the entry is written to a typed format."""
    handle = entry.file
    if handle is None or handle.kind != "host_allocation":
        return None  # a file on disk: its entries' types come from the format
    import numpy as np
    array = handle.contents().obj
    if not isinstance(array, np.ndarray):
        return None  # bytes, bytearray, mmap, ...: raw bytes
    if entry.offset != 0 or not entry.length == handle.size == array.nbytes:
        return None  # a part of the array (add_file over a wrapped handle)
    dtype = safetensors_dtype(array.dtype)
    return (dtype, tuple(array.shape)) if dtype else None


def declared_layouts(entry):
    """(safetensors dtype, shape) pairs an entry declares, most explicit first: its
    info (parsed from a safetensors file, or given to add_buffer), then the array it
    wraps. Callers check them against the entry's length."""
    info = entry.info
    if isinstance(info.get("dtype"), str) and is_shape(info.get("shape")):
        yield info["dtype"], tuple(info["shape"])
    wrapped = host_array_layout(entry)
    if wrapped is not None:
        yield wrapped


def tensor_layout(entry) -> tuple[str, list[int]]:
    """The dtype and shape to record for an entry: its own when they fit its size,
    else its bytes as a U8 vector."""
    layouts = list(declared_layouts(entry))
    if "ggml_type" in entry.info:
        from vmrt.io.formats.gguf import ggml_to_safetensors
        layouts.append(ggml_to_safetensors(entry.info))
    for dtype, shape in layouts:
        if dtype in DTYPE_SIZES and is_shape(shape) and \
                math.prod(shape) * DTYPE_SIZES[dtype] == entry.length:
            return dtype, list(shape)
    return "U8", [entry.length]


def safetensors_plan(entries, metadata: dict | None = None) -> tuple[bytes, list[int]]:
    """(header bytes including length prefix and padding, data offset of each entry)."""
    header: dict = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ArchiveError("safetensors __metadata__ must map strings to strings",
                                   StatusCode.INVALID_ARGUMENT)
        header["__metadata__"] = dict(metadata)
    offsets = []
    position = 0
    for entry in entries:
        if entry.key == "__metadata__":
            raise ArchiveError("a tensor cannot be named `__metadata__` in safetensors",
                               StatusCode.INVALID_ARGUMENT)
        if entry.key in header:
            raise ArchiveError(f"duplicate parameter `{entry.key}` cannot be stored in "
                               "safetensors", StatusCode.ALREADY_EXISTS)
        dtype, shape = tensor_layout(entry)
        header[entry.key] = {"dtype": dtype, "shape": shape,
                             "data_offsets": [position, position + entry.length]}
        offsets.append(position)
        position += entry.length
    try:
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
        raw = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ArchiveError(f"parameter name is not valid UTF-8: {error}",
                           StatusCode.INVALID_ARGUMENT) from None
    padded = len(raw) + (-(8 + len(raw)) % HEADER_ALIGNMENT)
    raw = raw.ljust(padded, b" ")
    return struct.pack("<Q", len(raw)) + raw, offsets


def write_safetensors(index, path, *, metadata: dict | None = None,
                      cache=None) -> ParameterIndex:
    """Writes `index` as a safetensors file; returns an index over the new file."""
    from vmrt.io.formats.common import ArchiveWriter

    entries = list(index)
    header, offsets = safetensors_plan(entries, metadata)
    total = len(header) + sum(entry.length for entry in entries)
    with ArchiveWriter(path, total) as writer:
        writer.write(0, header)
        for entry, offset in zip(entries, offsets):
            writer.copy_entry(len(header) + offset, entry)
    written = ParameterIndex()
    parse_safetensors(writer.reopen(cache), written)
    return written
