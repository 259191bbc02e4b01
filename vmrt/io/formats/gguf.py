"""GGUF (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): read, and write.

Layout (versions 2 and 3): magic "GGUF", u32 version, u64 tensor count, u64
metadata count, the metadata key/value pairs, the tensor infos (name, u32
rank, u64 dims, u32 ggml type, u64 offset), padding to `general.alignment`
(default 32), then the tensor data; tensor offsets are relative to its start.

Reading follows IREE's parser (gguf_parser.c): a file without tensors is
accepted as is; the tensor data begins at the aligned end of the tensor
infos; each tensor's size comes from its ggml type's block size and bytes
per block and must lie inside the data. Every read is bounds-checked here;
the type table comes from the `gguf` package when it is installed (it tracks
ggml's current type numbers), else from a built-in copy of the common types.

Dimensions are stored innermost first (ggml's ne[0] is the row length), the
reverse of numpy's and safetensors' order: a (3, 4) array has dims (4, 3).

Type numbering: ggml renumbered I8/I16/I32 from 16-18 to 24-26 (16-18 are
now the IQ2_XXS/IQ2_XS/IQ3_XXS quant types), but IREE 3.13's parser still
has the old table, which ends at I32 = 18 and has no I64, F64 or BF16.
Types 0-15 (F32, F16 and the Q* quants) mean the same in both. Writing
produces version 3 files in either numbering (`types="ggml"`, the default
and the spec's, which the gguf package and llama.cpp read, or `"iree"`,
which IREE 3.13's tools read): entries keep their ggml type and dims when
they carry them, else take the ggml type of the dtype and shape they
declare (their safetensors info, or the numpy array they wrap), and are
stored as I8 vectors otherwise, including every type IREE's table lacks
when writing for IREE. The two numberings cannot meet in one file: a
tensor of type 16-18 is an integer tensor to IREE 3.13 and an IQ quant to
everyone else. A file written for IREE that uses 16-18 carries the metadata key
`vmrt.ggml_type_numbering = "iree"`, which tells our reader that 16-18 are
I8/I16/I32. Without that key the reader takes ggml's meaning (IQ quants),
except where the IQ reading is impossible (a partial 256-element block):
then the tensor is read as IREE numbers it, so integer tensors from older
writers still load unless their element count happens to be a multiple of
256. Entries read back always report the current ggml type number.
"""

from __future__ import annotations

import dataclasses
import math
import struct

from vmrt.errors import ArchiveError, StatusCode
from vmrt.io.file import FileHandle
from vmrt.io.formats.safetensors import declared_layouts, is_shape
from vmrt.io.index import ParameterIndex, ParameterIndexEntry, key_bytes

MAGIC = 0x46554747  # "GGUF"
MIN_VERSION = 2
MAX_VERSION = 3
DEFAULT_ALIGNMENT = 32
# The spec asks general.alignment to be a multiple of 8; ggml and the gguf package
# also refuse any that is not a power of two. It is stored as a u32.
MIN_WRITE_ALIGNMENT = 8
MAX_WRITE_ALIGNMENT = 1 << 31
MAX_ARRAY_NESTING = 8

# ggml type -> (name, elements per block, bytes per block).
_BUILTIN_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 30: ("BF16", 1, 2),
}


def _load_types() -> dict[int, tuple[str, int, int]]:
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except Exception:  # not installed, or an incompatible version
        return dict(_BUILTIN_TYPES)
    types = dict(_BUILTIN_TYPES)
    for kind in GGMLQuantizationType:
        sizes = GGML_QUANT_SIZES.get(kind)
        if sizes:
            types[int(kind)] = (kind.name, int(sizes[0]), int(sizes[1]))
    return types


GGML_TYPES = _load_types()
GGML_TYPE_BY_NAME = {name: number for number, (name, _, _) in GGML_TYPES.items()}

# IREE 3.13's table: 0-15 as ggml, then its own numbers (16-18) for the integer types.
_IREE_TO_GGML = {16: 24, 17: 25, 18: 26}
_GGML_TO_IREE = {ggml: iree for iree, ggml in _IREE_TO_GGML.items()}
TYPE_NUMBERING_KEY = "vmrt.ggml_type_numbering"
TYPE_NUMBERINGS = ("iree", "ggml")
# By default a .gguf file is what the GGUF spec says it is, so that the gguf package,
# llama.cpp and every other GGUF reader load it as written. "iree" is for IREE 3.13's
# own tools (iree-run-module --parameters=x.gguf), whose table predates ggml's
# renumbering; the two differ only for files holding integer/raw-byte (or BF16, F64,
# I64) tensors.
DEFAULT_TYPE_NUMBERING = "ggml"

# Metadata value types.
VALUE_UINT8, VALUE_INT8, VALUE_UINT16, VALUE_INT16 = 0, 1, 2, 3
VALUE_UINT32, VALUE_INT32, VALUE_FLOAT32, VALUE_BOOL = 4, 5, 6, 7
VALUE_STRING, VALUE_ARRAY, VALUE_UINT64, VALUE_INT64, VALUE_FLOAT64 = 8, 9, 10, 11, 12
_SCALAR_FORMATS = {
    VALUE_UINT8: "B", VALUE_INT8: "b", VALUE_UINT16: "H", VALUE_INT16: "h",
    VALUE_UINT32: "I", VALUE_INT32: "i", VALUE_FLOAT32: "f", VALUE_BOOL: "?",
    VALUE_UINT64: "Q", VALUE_INT64: "q", VALUE_FLOAT64: "d",
}

# safetensors dtype <-> ggml type, for conversions.
_SAFETENSORS_TO_GGML = {"F32": "F32", "F16": "F16", "BF16": "BF16", "F64": "F64",
                        "I8": "I8", "I16": "I16", "I32": "I32", "I64": "I64",
                        "U8": "I8", "BOOL": "I8"}
_GGML_TO_SAFETENSORS = {"F32": "F32", "F16": "F16", "BF16": "BF16", "F64": "F64",
                        "I8": "I8", "I16": "I16", "I32": "I32", "I64": "I64"}


@dataclasses.dataclass
class GgufInfo:
    """What a GGUF file says besides its tensors."""

    version: int
    alignment: int
    metadata: dict
    tensor_data_offset: int


class _Cursor:
    """Bounds-checked little-endian reads over a memoryview."""

    def __init__(self, view: memoryview, pos: int = 0):
        self.view = view
        self.pos = pos
        self.size = view.nbytes

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or n > self.size - self.pos:
            raise ArchiveError(f"file buffer underrun parsing {what} at offset {self.pos} "
                               f"({n} bytes needed, {self.size - self.pos} available)",
                               StatusCode.OUT_OF_RANGE)
        start = self.pos
        self.pos += n
        return self.view[start:self.pos]

    def scalar(self, fmt: str, what: str):
        size = struct.calcsize("<" + fmt)
        return struct.unpack("<" + fmt, self.take(size, what))[0]

    def u32(self, what: str) -> int:
        return self.scalar("I", what)

    def u64(self, what: str) -> int:
        return self.scalar("Q", what)

    def string(self, what: str) -> str:
        length = self.u64(f"{what} length")
        return bytes(self.take(length, what)).decode("utf-8", "surrogateescape")

    def value(self, value_type: int, what: str, depth: int = 0):
        if value_type in _SCALAR_FORMATS:
            return self.scalar(_SCALAR_FORMATS[value_type], what)
        if value_type == VALUE_STRING:
            return self.string(what)
        if value_type == VALUE_ARRAY:
            if depth >= MAX_ARRAY_NESTING:
                raise ArchiveError(f"{what}: arrays nested deeper than {MAX_ARRAY_NESTING}",
                                   StatusCode.INVALID_ARGUMENT)
            element_type = self.u32(f"{what} array type")
            count = self.u64(f"{what} array length")
            if element_type in _SCALAR_FORMATS:
                fmt = _SCALAR_FORMATS[element_type]
                size = struct.calcsize("<" + fmt)
                if count > (self.size - self.pos) // size:
                    raise ArchiveError(f"file buffer underrun parsing {what} array of "
                                       f"{count} elements", StatusCode.OUT_OF_RANGE)
                return list(struct.unpack(f"<{count}{fmt}", self.take(count * size, what)))
            if element_type not in (VALUE_STRING, VALUE_ARRAY):
                raise ArchiveError(f"{what}: unsupported metadata value type {element_type}",
                                   StatusCode.INVALID_ARGUMENT)
            # Every string or array element takes at least 8 bytes.
            if count > (self.size - self.pos) // 8:
                raise ArchiveError(f"file buffer underrun parsing {what} array of "
                                   f"{count} elements", StatusCode.OUT_OF_RANGE)
            return [self.value(element_type, what, depth + 1) for _ in range(count)]
        raise ArchiveError(f"{what}: unsupported metadata value type {value_type}",
                           StatusCode.INVALID_ARGUMENT)


def _tensor_infos(cursor: _Cursor, count: int):
    for ordinal in range(count):
        what = f"tensor info {ordinal}"
        name = cursor.string(f"{what} name")
        rank = cursor.u32(f"{what} rank")
        dims_view = cursor.take(rank * 8, f"{what} dimensions")
        dims = struct.unpack(f"<{rank}Q", dims_view)
        ggml_type = cursor.u32(f"{what} type")
        offset = cursor.u64(f"{what} offset")
        yield name, dims, ggml_type, offset


def tensor_size(name: str, dims, ggml_type: int) -> int:
    traits = GGML_TYPES.get(ggml_type)
    if traits is None:
        raise ArchiveError(f"tensor `{name}`: GGML tensor type {ggml_type} not supported",
                           StatusCode.UNIMPLEMENTED)
    type_name, block, block_bytes = traits
    elements = math.prod(dims)
    if elements % block:
        raise ArchiveError(f"tensor `{name}`: {elements} elements are not a whole number "
                           f"of {type_name} blocks of {block}", StatusCode.INVALID_ARGUMENT)
    return elements // block * block_bytes


def parse_gguf(handle: FileHandle, index: ParameterIndex,
               contents: memoryview | None = None) -> GgufInfo:
    """Adds every tensor of the file to `index`; returns the file's metadata."""
    if contents is None:
        contents = handle.contents()
    cursor = _Cursor(contents)
    magic = cursor.u32("magic")
    if magic != MAGIC:
        raise ArchiveError(f"GGUF file magic missing or invalid {magic:08X}; expected "
                           f"{MAGIC:08X}", StatusCode.INVALID_ARGUMENT)
    version = cursor.u32("version")
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ArchiveError(f"GGUF format version {version} is unsupported; expected "
                           f"version {MIN_VERSION}-{MAX_VERSION}", StatusCode.UNIMPLEMENTED)
    tensor_count = cursor.u64("tensor count")
    metadata_count = cursor.u64("metadata count")
    if tensor_count == 0:
        # As IREE: a file without tensors is legal and nothing more is read.
        return GgufInfo(version, DEFAULT_ALIGNMENT, {}, cursor.pos)

    metadata: dict = {}
    alignment = DEFAULT_ALIGNMENT
    for ordinal in range(metadata_count):
        key = cursor.string(f"metadata key {ordinal}")
        value_type = cursor.u32(f"metadata `{key}` type")
        value = cursor.value(value_type, f"metadata `{key}`")
        metadata[key] = value
        if key == "general.alignment":
            if value_type != VALUE_UINT32:
                raise ArchiveError("general.alignment metadata value must be uint32",
                                   StatusCode.INVALID_ARGUMENT)
            if value == 0:
                raise ArchiveError("general.alignment must not be 0",
                                   StatusCode.INVALID_ARGUMENT)
            alignment = value

    # The data offset is only known once every (variable-length) tensor info is read.
    infos = list(_tensor_infos(cursor, tensor_count))
    data_offset = -(-cursor.pos // alignment) * alignment
    available = max(0, contents.nbytes - data_offset)
    iree_numbered = metadata.get(TYPE_NUMBERING_KEY) == "iree"
    entries = []
    for name, dims, stored_type, offset in infos:
        ggml_type = _ggml_type_of(stored_type, dims, iree_numbered)
        size = tensor_size(name, dims, ggml_type)
        if offset + size > available:
            raise ArchiveError(
                f"tensor `{name}` has data offsets outside of the available data "
                f"(begin={offset}, end={offset + size}, available={available})",
                StatusCode.INVALID_ARGUMENT)
        entries.append(ParameterIndexEntry(
            key=name, length=size, file=handle, offset=data_offset + offset,
            info={"ggml_type": ggml_type, "ggml_type_name": GGML_TYPES[ggml_type][0],
                  "ggml_dims": tuple(dims)}))
    for entry in entries:
        index.add(entry)
    return GgufInfo(version, alignment, metadata, data_offset)


def _ggml_type_of(stored_type: int, dims, iree_numbered: bool) -> int:
    if stored_type not in _IREE_TO_GGML:
        return stored_type
    if iree_numbered or math.prod(dims) % GGML_TYPES[stored_type][1]:
        return _IREE_TO_GGML[stored_type]
    return stored_type


# -- conversions ------------------------------------------------------------------------------
def ggml_to_safetensors(info) -> tuple[str | None, list[int] | None]:
    """safetensors dtype and row-major shape for a GGUF tensor (None if quantized)."""
    ggml_type = info.get("ggml_type")
    traits = GGML_TYPES.get(ggml_type) if isinstance(ggml_type, int) else None
    dtype = _GGML_TO_SAFETENSORS.get(traits[0]) if traits else None
    dims = info.get("ggml_dims", ())
    if dtype is None or not is_shape(dims):
        return None, None
    return dtype, list(reversed(dims))


def _declared_ggml_layouts(entry):
    """(ggml type, dims) pairs an entry declares: its own GGUF ones, then the ggml
    type of each safetensors dtype and shape it declares, with the dims reversed
    (GGUF stores them innermost first)."""
    info = entry.info
    if info.get("ggml_type") is not None:
        yield info["ggml_type"], info.get("ggml_dims")
    for dtype, shape in declared_layouts(entry):
        if dtype in _SAFETENSORS_TO_GGML:
            yield GGML_TYPE_BY_NAME[_SAFETENSORS_TO_GGML[dtype]], tuple(reversed(shape))


def tensor_layout(entry) -> tuple[int, tuple[int, ...]]:
    """The ggml type and dims to record for an entry: the first it declares that fits
    its size, else its bytes as an I8 vector."""
    for ggml_type, dims in _declared_ggml_layouts(entry):
        if not isinstance(ggml_type, int) or ggml_type not in GGML_TYPES \
                or not is_shape(dims):
            continue
        try:
            if tensor_size(entry.key, dims, ggml_type) == entry.length:
                return ggml_type, tuple(dims)
        except ArchiveError:
            pass
    return GGML_TYPE_BY_NAME["I8"], (entry.length,)


def _string(value: str) -> bytes:
    raw = key_bytes(value)
    return struct.pack("<Q", len(raw)) + raw


def _iree_layout(entry, ggml_type: int, dims) -> tuple[int, tuple[int, ...]]:
    if ggml_type < min(_IREE_TO_GGML):
        return ggml_type, dims
    if ggml_type in _GGML_TO_IREE:
        return _GGML_TO_IREE[ggml_type], dims
    return _GGML_TO_IREE[GGML_TYPE_BY_NAME["I8"]], (entry.length,)


def _check_alignment(alignment) -> None:
    valid = (isinstance(alignment, int) and not isinstance(alignment, bool)
             and MIN_WRITE_ALIGNMENT <= alignment <= MAX_WRITE_ALIGNMENT
             and alignment & (alignment - 1) == 0)
    if not valid:
        raise ArchiveError(f"GGUF alignment {alignment!r} must be a power of two from "
                           f"{MIN_WRITE_ALIGNMENT} to {MAX_WRITE_ALIGNMENT}",
                           StatusCode.INVALID_ARGUMENT)


def write_gguf(index, path, *, alignment: int = DEFAULT_ALIGNMENT,
               types: str = DEFAULT_TYPE_NUMBERING, cache=None) -> ParameterIndex:
    """Writes `index` as a version 3 GGUF file; returns an index over the new file.

    `types` picks the tensor type numbers: "ggml" (the spec's) or "iree" (what
    IREE 3.13 reads); `alignment` is a power of two, at least 8.
    """
    from vmrt.io.formats.common import ArchiveWriter

    _check_alignment(alignment)
    if types not in TYPE_NUMBERINGS:
        raise ArchiveError(f"GGUF type numbering '{types}' is not one of "
                           f"{', '.join(TYPE_NUMBERINGS)}", StatusCode.INVALID_ARGUMENT)
    entries = list(index)
    seen = set()
    for entry in entries:
        if entry.key in seen:
            raise ArchiveError(f"duplicate parameter `{entry.key}` cannot be stored in GGUF",
                               StatusCode.ALREADY_EXISTS)
        seen.add(entry.key)
    layouts = [tensor_layout(entry) for entry in entries]
    if types == "iree":
        layouts = [_iree_layout(entry, *layout) for entry, layout in zip(entries, layouts)]
    kv = bytearray()
    kv_count = 0
    if alignment != DEFAULT_ALIGNMENT:
        kv += _string("general.alignment") + struct.pack("<II", VALUE_UINT32, alignment)
        kv_count += 1
    # Only files whose numbers differ between the two tables need saying which they use.
    if types == "iree" and any(ggml_type in _IREE_TO_GGML for ggml_type, _ in layouts):
        kv += _string(TYPE_NUMBERING_KEY) + struct.pack("<I", VALUE_STRING) + _string("iree")
        kv_count += 1
    header = bytearray(struct.pack("<IIQQ", MAGIC, 3, len(entries), kv_count)) + kv
    offsets = []
    position = 0
    for entry, (ggml_type, dims) in zip(entries, layouts):
        header += _string(entry.key)
        header += struct.pack(f"<I{len(dims)}Q", len(dims), *dims)
        header += struct.pack("<IQ", ggml_type, position)
        offsets.append(position)
        position = -(-(position + entry.length) // alignment) * alignment
    data_offset = -(-len(header) // alignment) * alignment
    with ArchiveWriter(path, data_offset + position) as writer:
        writer.write(0, header)
        for entry, offset in zip(entries, offsets):
            writer.copy_entry(data_offset + offset, entry)
    written = ParameterIndex()
    parse_gguf(writer.reopen(cache), written)
    return written
