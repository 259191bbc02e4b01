"""safetensors (https://huggingface.co/docs/safetensors): read and write.

Layout: u64 little-endian header length N, N bytes of UTF-8 JSON, then the
data buffer. The JSON maps each tensor name to {"dtype", "shape",
"data_offsets": [begin, end]} (offsets relative to the data buffer) plus an
optional "__metadata__" object of string pairs.

Reading follows IREE's parser (safetensors_parser.c): entries in header
order, each spanning its data_offsets, bounds-checked against the data
buffer; dtype and shape go to `entry.info`. Writing lays tensors out
back to back in index order (the format allows no holes), pads the header
with spaces to 8 bytes, and materializes splats.
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


def tensor_layout(entry) -> tuple[str, list[int]]:
    """The dtype and shape to record for an entry: its own when they fit its size."""
    info = entry.info
    dtype, shape = info.get("dtype"), info.get("shape")
    if dtype is None and "ggml_type" in info:
        from vmrt.io.formats.gguf import ggml_to_safetensors
        dtype, shape = ggml_to_safetensors(info)
    if dtype in DTYPE_SIZES and shape is not None:
        if math.prod(shape) * DTYPE_SIZES[dtype] == entry.length:
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
