"""The IREE bytecode module schema (bytecode_module_def.fbs), its reader and writer.

The tables below mirror runtime/src/iree/schemas/bytecode_module_def.fbs field
for field (name, id, type, default); the same declarations drive verification
and reading (flatbuffer_reader.FlatBufferReader), writing
(flatbuffer_builder.FlatBufferBuilder) and JSON printing (json_dump).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import struct
from typing import Any

from vmrt.errors import ModuleFormatError, StatusCode, file_error
from vmrt.format import archive as _archive
from vmrt.format.archive import ArchiveInfo
from vmrt.format.mapped import MappedFile
from vmrt.format.flatbuffer_builder import FlatBufferBuilder
from vmrt.format.flatbuffer_reader import FlatBufferReader, LazyTableVector, column, \
    struct_array
from vmrt.format.flatbuffer_schema import (
    INT16,
    INT32,
    UINT8,
    UINT32,
    UINT64,
    EnumDecl,
    Scalar,
    String,
    StructDecl,
    TableField,
    UnionDecl,
    UnionField,
    UnionVector,
    Vector,
    table,
)

FILE_IDENTIFIER = "IREE"

from vmrt.isa import BYTECODE_VERSION_MAJOR, BYTECODE_VERSION_MINOR  # noqa: E402
from vmrt.isa.registers import (  # noqa: E402
    MAX_I32_REGISTERS as I32_REGISTER_COUNT,
    MAX_REF_REGISTERS as REF_REGISTER_COUNT,
)

# --------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------

FeatureBits = EnumDecl("FeatureBits", UINT32, {
    "EXT_F32": 0,
    "EXT_F64": 1,
    "YIELD": 2,
    "UNWIND": 3,
}, bit_flags=True)


@table
class AttrDef:
    key: str | None = String(0)
    value: str | None = String(1)


@table
class TypeDef:
    full_name: str | None = String(0)


@table
class FunctionSignatureDef:
    calling_convention: str | None = String(0)
    attrs: list = Vector(1, AttrDef)


def _required_or_optional(name: str) -> EnumDecl:
    """The schema's two enums of this shape (a dependency's and an import's flags)."""
    return EnumDecl(name, UINT32, {"REQUIRED": 0, "OPTIONAL": 1}, bit_flags=True)


ModuleDependencyFlagBits = _required_or_optional("ModuleDependencyFlagBits")
ImportFlagBits = _required_or_optional("ImportFlagBits")


@table
class ModuleDependencyDef:
    name: str | None = String(0)
    minimum_version: int = Scalar(1, UINT32)
    flags: int = Scalar(2, ModuleDependencyFlagBits,
                        default=ModuleDependencyFlagBits.REQUIRED)


@table
class ImportFunctionDef:
    full_name: str | None = String(0)
    signature: FunctionSignatureDef | None = TableField(1, FunctionSignatureDef)
    flags: int = Scalar(2, ImportFlagBits, default=ImportFlagBits.REQUIRED)


@table
class ExportFunctionDef:
    local_name: str | None = String(0)
    internal_ordinal: int = Scalar(1, INT32)


@table
class UncompressedDataDef:
    pass


CompressionTypeDef = UnionDecl("CompressionTypeDef", [UncompressedDataDef])


def _alignment_of(position: int) -> int:
    """Alignment to keep for embedded data read at ``position`` (16..64)."""
    if position == 0:
        return 64
    return max(16, min(64, position & -position))


@table
class RodataSegmentDef:
    compression_type: Any = UnionField(1, CompressionTypeDef)
    embedded_data: Any = Vector(2, UINT8)
    external_data_offset: int = Scalar(3, UINT64)
    external_data_length: int = Scalar(4, UINT64)
    # Not in the schema: how the writer lays the segment out.
    #: The bytes live after the FlatBuffer (external_data_* are then computed).
    external: bool = False
    #: The external bytes (a memoryview into the file when read).
    external_data: Any = None
    #: Alignment of embedded_data in the output (kept from the input when read).
    alignment: int = dataclasses.field(default=16, compare=False)
    #: Where the contents start in the bytes the segment was read from (None: not read).
    data_offset: int | None = dataclasses.field(default=None, compare=False)

    @property
    def data(self) -> memoryview:
        """The segment contents, embedded or external."""
        if self.external and self.external_data is not None:
            return memoryview(self.external_data).cast("B")
        value = self.embedded_data
        if isinstance(value, list):
            value = bytes(value)
        return memoryview(value).cast("B")

    def __fb_after_read__(self, reader, byte_positions):
        pos = byte_positions.get("embedded_data", -1)
        if pos >= 0:
            self.alignment = _alignment_of(pos)
            self.data_offset = pos
            return
        self.external = True
        info: ArchiveInfo | None = getattr(reader, "archive", None)
        if info is not None and info.external_in_range(self.external_data_offset,
                                                       self.external_data_length):
            start = info.rodata_offset + self.external_data_offset
            self.external_data = reader.mv[start:start + self.external_data_length]
            self.data_offset = start


@table
class RwdataSegmentDef:
    byte_size: int = Scalar(0, INT32)


@table
class ModuleStateDef:
    global_bytes_capacity: int = Scalar(0, INT32)
    global_ref_count: int = Scalar(1, INT32)


FunctionDescriptorDecl = StructDecl("FunctionDescriptor", [
    ("bytecode_offset", INT32),
    ("bytecode_length", INT32),
    ("requirements", FeatureBits),
    ("reserved", INT16),
    ("block_count", INT16),
    ("i32_register_count", INT16),
    ("ref_register_count", INT16),
])
FunctionDescriptor = FunctionDescriptorDecl.cls


@table
class CallSiteLocDef:
    callee: int = Scalar(0, INT32)
    caller: int = Scalar(1, INT32)


@table
class FileLineColLocDef:
    filename: str | None = String(0)
    line: int = Scalar(1, INT32)
    column: int = Scalar(2, INT32)


@table
class FusedLocDef:
    metadata: str | None = String(0)
    locations: list = Vector(1, INT32)


@table
class NameLocDef:
    name: str | None = String(0)
    child_location: int = Scalar(1, INT32)


LocationTypeDef = UnionDecl("LocationTypeDef", [
    CallSiteLocDef,
    FileLineColLocDef,
    FusedLocDef,
    NameLocDef,
])

BytecodeLocationDefDecl = StructDecl("BytecodeLocationDef", [
    ("bytecode_offset", INT32),
    ("location", INT32),
])
BytecodeLocationDef = BytecodeLocationDefDecl.cls


@table
class FunctionSourceMapDef:
    local_name: str | None = String(0)
    locations: list = Vector(1, BytecodeLocationDefDecl)


@table
class DebugDatabaseDef:
    location_table: list = UnionVector(1, LocationTypeDef)
    functions: list = Vector(2, FunctionSourceMapDef)


@table(file_identifier=FILE_IDENTIFIER)
class BytecodeModuleDef:
    name: str | None = String(0, required=True)
    version: int = Scalar(1, UINT32)
    requirements: int = Scalar(2, FeatureBits)
    attrs: list = Vector(3, AttrDef)
    types: list = Vector(4, TypeDef)
    dependencies: list = Vector(5, ModuleDependencyDef)
    imported_functions: list = Vector(6, ImportFunctionDef)
    exported_functions: list = Vector(7, ExportFunctionDef)
    function_signatures: list = Vector(8, FunctionSignatureDef)
    rodata_segments: list = Vector(9, RodataSegmentDef)
    rwdata_segments: list = Vector(10, RwdataSegmentDef)
    module_state: ModuleStateDef | None = TableField(11, ModuleStateDef)
    function_descriptors: list = Vector(12, FunctionDescriptorDecl)
    bytecode_version: int = Scalar(13, UINT32)
    bytecode_data: Any = Vector(14, UINT8)
    debug_database: DebugDatabaseDef | None = TableField(15, DebugDatabaseDef)
    #: Where the pieces were in the file (None for modules built in Python).
    archive: ArchiveInfo | None = dataclasses.field(default=None, compare=False,
                                                     repr=False)
    #: Where bytecode_data starts in the bytes read (None for modules built in Python).
    bytecode_data_offset: int | None = dataclasses.field(default=None, compare=False,
                                                         repr=False)

    def __fb_after_read__(self, reader, byte_positions):
        position = byte_positions.get("bytecode_data", -1)
        self.bytecode_data_offset = position if position >= 0 else None


#: The module object model is the root table.
ModuleDef = BytecodeModuleDef

# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------

#: Exceptions that must never leave read_module: if one shows up it is a bug in
#: the reader, reported as a ModuleFormatError rather than crashing the caller.
_UNEXPECTED = (IndexError, KeyError, ValueError, TypeError, OverflowError, struct.error,
               MemoryError, UnicodeError, RecursionError)


def open_module_buffer(data) -> memoryview:
    """The bytes of a module: a path's file mapped, or bytes-like ``data`` viewed
    (the errors read_module raises for a file that cannot be read)."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            try:
                info = os.fstat(fd)
                if stat.S_ISDIR(info.st_mode):  # (as open() says of a directory)
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
                if info.st_size == 0:
                    return memoryview(b"")
                return memoryview(MappedFile.open(path, fd, info))
            finally:
                os.close(fd)
        except OSError as error:  # also the matching OSError: `except FileNotFoundError`
            raise file_error(error, f"cannot read module file '{path}'",
                             base=ModuleFormatError) from None
        except ValueError as error:  # a NUL in the path, ...
            raise ModuleFormatError(f"cannot read module file {path!r}: {error}",
                                    StatusCode.INVALID_ARGUMENT) from None
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"read_module expects bytes-like data or a path, not "
                        f"{type(data).__name__}") from None
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def read_module(data, *, check: bool = True) -> BytecodeModuleDef:
    """Reads a .vmfb from bytes-like ``data`` or a file path (mapped, not read).

    The FlatBuffer is fully verified (as flatcc's verifier does, plus UTF-8
    strings and known union types) and external rodata ranges are checked;
    with ``check`` the module-level table checks run too (check_module_tables).
    Byte vectors and rodata are memoryviews into the input.  Raises
    ModuleFormatError for anything malformed.
    """
    buf = open_module_buffer(data)
    try:
        info = _archive.parse_archive(buf)
        start = info.flatbuffer_offset
        reader = FlatBufferReader(buf, start, start + info.flatbuffer_length)
        reader.archive = info
        module = reader.read_root(BytecodeModuleDef, FILE_IDENTIFIER)
        module.archive = info
        for i, segment in enumerate(module.rodata_segments):
            if segment.external and segment.external_data is None:
                raise ModuleFormatError(f"rodata[{i}] external reference out of range")
        if check:
            check_module_tables(module)
        return module
    except _UNEXPECTED as error:
        raise ModuleFormatError(
            f"malformed module (reader error {type(error).__name__}: {error})") from None


def check_module_tables(module: BytecodeModuleDef) -> None:
    """The module-level checks of iree_vm_bytecode_module_flatbuffer_verify.

    (runtime/src/iree/vm/bytecode/verifier.c) minus the feature check, which
    depends on the runtime. Also rejects negative counts and lengths that the
    C code would only catch later.  Raises ModuleFormatError.
    """

    def fail(message):
        raise ModuleFormatError(message)

    if not module.name:
        fail("module missing name field")
    for i, type_def in enumerate(module.types):
        if type_def is None:
            fail(f"types[{i}] missing body")
        if not type_def.full_name:
            fail(f"types[{i}] missing name")
    for i, dependency in enumerate(module.dependencies):
        if dependency is None or not dependency.name:
            fail(f"dependencies[{i}] has no module name")
    signatures = module.function_signatures
    if not isinstance(signatures, LazyTableVector):  # read ones are never null
        for i, signature in enumerate(signatures):
            if signature is None:
                fail(f"function_signatures[{i}] missing body")
    for i, import_def in enumerate(module.imported_functions):
        if import_def is None:
            fail(f"imports[{i}] missing body")
        if not import_def.full_name:
            fail(f"imports[{i}] missing full_name")
    descriptors = module.function_descriptors
    n_signatures = len(module.function_signatures)
    n_descriptors = len(descriptors)
    if n_signatures != n_descriptors:
        fail("function signature and descriptor table length mismatch "
             f"({n_signatures} vs {n_descriptors})")
    exports = module.exported_functions
    names = column(exports, "local_name")
    ordinals = column(exports, "internal_ordinal")
    for i, (name, ordinal) in enumerate(zip(names, ordinals)):
        if not name:
            fail(f"exports[{i}] missing local_name")
        if not 0 <= ordinal < n_descriptors:
            fail(f"exports[{i}] internal_ordinal out of bounds (0 < {ordinal} < "
                 f"{n_descriptors})")
    version = module.bytecode_version
    major, minor = version >> 16, version & 0xFFFF
    if major != BYTECODE_VERSION_MAJOR or minor > BYTECODE_VERSION_MINOR:
        fail(f"bytecode version mismatch; runtime supports {BYTECODE_VERSION_MAJOR}."
             f"{BYTECODE_VERSION_MINOR}, module has {major}.{minor}")
    if n_descriptors:
        import numpy as np  # late: a module read with numpy has it loaded already

        arr = struct_array(descriptors)
        if arr is None:
            names = FunctionDescriptorDecl.field_names
            arr = np.array([tuple(int(getattr(d, n)) for n in names) for d in descriptors],
                           [(n, np.int64) for n in names])
        _check_descriptors(arr, len(module.bytecode_data), fail)


def _check_descriptors(arr, bytecode_size: int, fail) -> None:
    import numpy as np

    offset = arr["bytecode_offset"].astype(np.int64)
    length = arr["bytecode_length"].astype(np.int64)
    blocks = arr["block_count"]
    i32 = arr["i32_register_count"]
    ref = arr["ref_register_count"]

    def first(mask):
        return int(np.argmax(mask)) if mask.any() else None

    checks = [
        (blocks <= 0, lambda i: f"functions[{i}] descriptor block count is {blocks[i]}; "
                                "functions must have at least 1 block, expected 1"),
        (length <= 0, lambda i: f"functions[{i}] descriptor bytecode reports "
                                f"{length[i]} length; functions must have at least "
                                "one block"),
        ((offset < 0) | (offset + length > bytecode_size),
         lambda i: f"functions[{i}] descriptor bytecode span out of range "
                   f"(0 < {offset[i]} < {bytecode_size})"),
        ((i32 > I32_REGISTER_COUNT) | (ref > REF_REGISTER_COUNT) | (i32 < 0) | (ref < 0),
         lambda i: f"functions[{i}] descriptor register count out of range"),
    ]
    found = [(first(mask), message) for mask, message in checks]
    found = [(i, message) for i, message in found if i is not None]
    if found:
        # Report the lowest function, checks in upstream order within it.
        i, message = min(found, key=lambda item: item[0])
        fail(message(i))


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _byte_alignment(owner, name: str) -> int:
    if isinstance(owner, RodataSegmentDef):
        return max(4, int(owner.alignment))
    return 16


def write_module(module: BytecodeModuleDef, *, force_defaults: bool = False) -> bytes:
    """Serializes ``module`` to a .vmfb (size prefix, FlatBuffer, external rodata).

    Segments with ``external`` set get their bytes (``external_data``, else
    ``embedded_data``) after the FlatBuffer, 64-byte aligned; their recorded
    offsets are kept when possible.  Scalars equal to their default are left
    out unless ``force_defaults``.  The input objects are not modified.
    """
    segments = list(module.rodata_segments)
    external = [(i, s) for i, s in enumerate(segments) if s.external]
    payloads = [s.data for _, s in external]
    wanted = [(s.external_data_offset if s.external_data_length == len(p) else None, len(p))
              for (_, s), p in zip(external, payloads)]
    offsets = _archive.plan_external(wanted)
    for (i, s), p, off in zip(external, payloads, offsets):
        copy = dataclasses.replace(s, embedded_data=[], external_data_offset=off,
                                   external_data_length=len(p))
        segments[i] = copy
    root = module
    if external:
        root = dataclasses.replace(module, rodata_segments=segments)
        root._present = module._present
    builder = FlatBufferBuilder(_byte_alignment, force_defaults=force_defaults)
    flatbuffer = builder.finish(root, FILE_IDENTIFIER)
    return _archive.assemble_archive(flatbuffer, zip(offsets, payloads))
