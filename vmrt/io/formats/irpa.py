"""IREE Parameter Archives (.irpa): read and write.

Layout (runtime/src/iree/schemas/parameter_archive.h), all little-endian and
packed, every offset relative to the header it belongs to:

    header (88 bytes, 16-aligned)   magic "IRPA", version 0.0, header_size,
                                    next_header_offset (0 = last), flags,
                                    entry_count, and three (offset, length)
                                    ranges: entry table, metadata, storage
    entry table                     entries, each 16-byte aligned:
                                    SKIP (0), SPLAT (1, 85 bytes), DATA (2, 76),
                                    EXTERNAL (3, 92; not loadable, as upstream)
    metadata segment                entry names and metadata blobs, unaligned
    storage segment                 parameter contents, aligned per entry

Writing produces the bytes IREE's builder (irpa_builder.c) writes for the same
entries: splat and data entries in index order, names and metadata interleaved
in the metadata segment, data storage aligned to 64 bytes by default, and the
file padded to 4096 bytes.
"""

from __future__ import annotations

from typing import NamedTuple

import construct as cs

from vmrt.errors import ArchiveError, StatusCode
from vmrt.io.file import FileHandle
from vmrt.io.formats.layout import FlatLayout
from vmrt.io.index import ParameterIndex, ParameterIndexEntry, key_bytes

MAGIC = 0x41505249  # "IRPA"
HEADER_ALIGNMENT = 16
ENTRY_ALIGNMENT = 16
DEFAULT_DATA_ALIGNMENT = 64
DEFAULT_FILE_ALIGNMENT = 4096

ENTRY_TYPE_SKIP = 0
ENTRY_TYPE_SPLAT = 1
ENTRY_TYPE_DATA = 2
ENTRY_TYPE_EXTERNAL = 3
ENTRY_TYPE_NAMES = {0: "skip", 1: "splat", 2: "data", 3: "external"}

# -- layouts: one declaration each, for parsing and building ----------------------------------
RANGE = cs.Struct(
    "offset" / cs.Int64ul,
    "length" / cs.Int64ul,
)

HEADER_PREFIX = cs.Struct(
    "magic" / cs.Int32ul,
    "version_major" / cs.Int16ul,
    "version_minor" / cs.Int16ul,
    "header_size" / cs.Int64ul,
    "next_header_offset" / cs.Int64ul,
    "flags" / cs.Int64ul,
)

HEADER_V0 = cs.Struct(
    "prefix" / HEADER_PREFIX,
    "entry_count" / cs.Int64ul,
    "entry_segment" / RANGE,
    "metadata_segment" / RANGE,
    "storage_segment" / RANGE,
)

ENTRY_HEADER = cs.Struct(
    "entry_size" / cs.Int64ul,
    "type" / cs.Int32ul,
    "flags" / cs.Int64ul,
    "name" / RANGE,
    "metadata" / RANGE,
    "minimum_alignment" / cs.Int64ul,
)

SPLAT_ENTRY = cs.Struct(
    "header" / ENTRY_HEADER,
    "length" / cs.Int64ul,
    "pattern" / cs.Bytes(16),
    "pattern_length" / cs.Int8ul,
)

DATA_ENTRY = cs.Struct(
    "header" / ENTRY_HEADER,
    "storage" / RANGE,
)

EXTERNAL_ENTRY = cs.Struct(
    "header" / ENTRY_HEADER,
    "path" / RANGE,
    "range" / RANGE,
)

HEADER_PREFIX_SIZE = HEADER_PREFIX.sizeof()    # 32
HEADER_V0_SIZE = HEADER_V0.sizeof()            # 88
ENTRY_HEADER_SIZE = ENTRY_HEADER.sizeof()      # 60
SPLAT_ENTRY_SIZE = SPLAT_ENTRY.sizeof()        # 85
DATA_ENTRY_SIZE = DATA_ENTRY.sizeof()          # 76
EXTERNAL_ENTRY_SIZE = EXTERNAL_ENTRY.sizeof()  # 92

# Fast codecs generated from the declarations above (see layout.py).
_HEADER_PREFIX = FlatLayout(HEADER_PREFIX, "HeaderPrefix")
_HEADER_V0 = FlatLayout(HEADER_V0, "HeaderV0")
_ENTRY_HEADER = FlatLayout(ENTRY_HEADER, "EntryHeader")
_SPLAT_ENTRY = FlatLayout(SPLAT_ENTRY, "SplatEntry")
_DATA_ENTRY = FlatLayout(DATA_ENTRY, "DataEntry")


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment if alignment > 1 else value


# -- reading ----------------------------------------------------------------------------------
def parse_irpa(handle: FileHandle, index: ParameterIndex, contents: memoryview | None = None,
               *, base_offset: int = 0) -> int:
    """Adds every parameter of the archive chain in `handle` to `index`.

    Nothing is added unless the whole chain parses. Returns the entry count.
    """
    if contents is None:
        contents = handle.contents()
    entries: list[ParameterIndexEntry] = []
    size = contents.nbytes
    visited = set()
    while True:
        if base_offset in visited:  # unreachable with unsigned offsets; be safe
            raise ArchiveError("IRPA header chain loops", StatusCode.INVALID_ARGUMENT)
        visited.add(base_offset)
        if size < base_offset + HEADER_PREFIX_SIZE:
            raise ArchiveError("not enough bytes for a valid IRPA header; file may be "
                               "empty or truncated", StatusCode.INVALID_ARGUMENT)
        prefix = _HEADER_PREFIX.parse(contents, base_offset)
        if prefix.magic != MAGIC:
            raise ArchiveError(f"IRPA file magic missing or invalid {prefix.magic:08X}; "
                               f"expected {MAGIC:08X}", StatusCode.INVALID_ARGUMENT)
        if base_offset + prefix.header_size > size:
            raise ArchiveError(
                f"file buffer underrun parsing header of reported size {prefix.header_size} "
                f"(only {size - base_offset} bytes available)", StatusCode.OUT_OF_RANGE)
        next_offset = prefix.next_header_offset
        if next_offset and size < base_offset + next_offset + HEADER_PREFIX_SIZE:
            raise ArchiveError(
                f"file buffer underrun verifying linked header at offset "
                f"{base_offset + next_offset} (only {size} bytes available)",
                StatusCode.OUT_OF_RANGE)
        if prefix.version_major != 0:
            raise ArchiveError(
                f"IRPA major version {prefix.version_major}.{prefix.version_minor} not "
                "supported by this runtime", StatusCode.UNIMPLEMENTED)
        _parse_v0(handle, contents, base_offset, prefix, entries)
        if not next_offset:
            break
        base_offset += next_offset
    for entry in entries:
        index.add(entry)
    return len(entries)


def _check_file_range(size: int, base: int, offset: int, length: int, what: str) -> None:
    if length and base + offset + length > size:
        raise ArchiveError(
            f"{what} out of range ({base + offset} to {base + offset + length - 1} for "
            f"{length}, file_size={size})", StatusCode.OUT_OF_RANGE)


def _metadata_slice(contents, start: int, segment_length: int, offset: int, length: int,
                    what: str) -> bytes:
    if not length:
        return b""
    if offset + length > segment_length:
        raise ArchiveError(
            f"{what}: metadata segment reference out of range ({offset} to "
            f"{offset + length - 1} for {length}, segment_size={segment_length})",
            StatusCode.OUT_OF_RANGE)
    return bytes(contents[start + offset:start + offset + length])


def _check_v0_prefix(prefix) -> None:
    if prefix.version_minor > 0:
        raise ArchiveError(
            f"IRPA version {prefix.version_major}.{prefix.version_minor} not supported "
            "(major supported but minor is newer than the runtime trying to parse it)",
            StatusCode.UNIMPLEMENTED)
    if prefix.header_size != HEADER_V0_SIZE:
        raise ArchiveError(f"IRPA v0 header expected to be exactly {HEADER_V0_SIZE} bytes "
                           f"but was reported as {prefix.header_size}",
                           StatusCode.INVALID_ARGUMENT)


class _Segments(NamedTuple):
    """Where a v0 archive's metadata and storage segments lie in the file."""

    metadata_start: int
    metadata_length: int
    storage_start: int
    storage_length: int


def _parse_v0(handle, contents, base, prefix, entries) -> None:
    _check_v0_prefix(prefix)
    size = contents.nbytes
    header = _HEADER_V0.parse(contents, base)
    _check_file_range(size, base, header.entry_segment_offset, header.entry_segment_length,
                      "entry table")
    _check_file_range(size, base, header.metadata_segment_offset,
                      header.metadata_segment_length, "metadata segment")
    _check_file_range(size, base, header.storage_segment_offset,
                      header.storage_segment_length, "storage segment")
    segments = _Segments(base + header.metadata_segment_offset, header.metadata_segment_length,
                         base + header.storage_segment_offset, header.storage_segment_length)
    entry_offset = base + header.entry_segment_offset
    remaining = header.entry_segment_length
    parse_entry_header = _ENTRY_HEADER.parse
    for ordinal in range(header.entry_count):
        if remaining < ENTRY_HEADER_SIZE:
            raise ArchiveError(f"entry table truncated at entry {ordinal}; insufficient "
                               "bytes for base entry header", StatusCode.OUT_OF_RANGE)
        entry = parse_entry_header(contents, entry_offset)
        if entry.entry_size < ENTRY_HEADER_SIZE or remaining < entry.entry_size:
            raise ArchiveError(f"entry table truncated at entry {ordinal}; insufficient "
                               "bytes for sized header", StatusCode.OUT_OF_RANGE)
        parsed = _parse_v0_entry(handle, contents, entry_offset, entry, ordinal, segments)
        if parsed is not None:
            entries.append(parsed)
        step = (entry.entry_size + ENTRY_ALIGNMENT - 1) // ENTRY_ALIGNMENT * ENTRY_ALIGNMENT
        entry_offset += step
        remaining = remaining - step if remaining > step else 0


def _parse_v0_entry(handle, contents, record_offset: int, entry, ordinal: int,
                    segments: _Segments) -> ParameterIndexEntry | None:
    """The index entry of the entry record at `record_offset` (None for a skip)."""
    name = _metadata_slice(contents, segments.metadata_start, segments.metadata_length,
                           entry.name_offset, entry.name_length,
                           f"resolving entry {ordinal} name")
    key = name.decode("utf-8", "surrogateescape")
    metadata = _metadata_slice(contents, segments.metadata_start, segments.metadata_length,
                               entry.metadata_offset, entry.metadata_length,
                               f"resolving entry {ordinal} `{key}` metadata")
    kind = entry.type
    if kind == ENTRY_TYPE_DATA:
        if entry.entry_size < DATA_ENTRY_SIZE:
            raise ArchiveError(f"entry {ordinal} `{key}`: data entry length underflow",
                               StatusCode.OUT_OF_RANGE)
        data = _DATA_ENTRY.parse(contents, record_offset)
        offset, length = data.storage_offset, data.storage_length
        file_offset = 0
        if length:
            if offset + length > segments.storage_length:
                raise ArchiveError(
                    f"entry {ordinal} `{key}`: storage segment reference out of range "
                    f"({offset} to {offset + length - 1} for {length}, "
                    f"segment_size={segments.storage_length})", StatusCode.OUT_OF_RANGE)
            file_offset = segments.storage_start + offset
        return ParameterIndexEntry(key=key, length=length, metadata=metadata, file=handle,
                                   offset=file_offset)
    if kind == ENTRY_TYPE_SPLAT:
        if entry.entry_size < SPLAT_ENTRY_SIZE:
            raise ArchiveError(f"entry {ordinal} `{key}`: splat entry length underflow",
                               StatusCode.OUT_OF_RANGE)
        splat = _SPLAT_ENTRY.parse(contents, record_offset)
        if not 1 <= splat.pattern_length <= 16:
            raise ArchiveError(f"entry {ordinal} `{key}`: splat pattern length "
                               f"{splat.pattern_length} out of bounds 16 (must be 1 to 16)",
                               StatusCode.INVALID_ARGUMENT)
        return ParameterIndexEntry(key=key, length=splat.length, metadata=metadata,
                                   pattern=splat.pattern[:splat.pattern_length])
    if kind != ENTRY_TYPE_SKIP:
        raise ArchiveError(f"entry {ordinal} `{key}`: parser does not support entry type "
                           f"{kind}" + (" (external file references)" if kind == 3 else ""),
                           StatusCode.UNIMPLEMENTED)
    return None


# -- writing ----------------------------------------------------------------------------------
class IrpaPlan:
    """Where every piece of an archive goes, before anything is written.

    Entries are laid out as IREE's builder lays them out; `data` holds, for
    each entry stored in the archive, (source entry, storage offset relative
    to the storage segment).
    """

    def __init__(self, entries, *, alignment: int = DEFAULT_DATA_ALIGNMENT,
                 materialize=lambda entry: False,
                 file_alignment: int = DEFAULT_FILE_ALIGNMENT):
        if alignment < 1 or alignment & (alignment - 1):
            raise ArchiveError(f"data alignment {alignment} must be a power of two",
                               StatusCode.INVALID_ARGUMENT)
        self.alignment = alignment
        self.file_alignment = file_alignment
        self.records: list[tuple] = []  # (kind, entry, name, metadata, storage_offset)
        entry_segment_size = 0
        metadata_size = 0
        storage_size = 0
        storage_alignment = 0
        for entry in entries:
            name = key_bytes(entry.key)
            if entry.pattern is not None and not materialize(entry):
                length = len(entry.pattern)
                if length not in (1, 2, 4, 8, 16):
                    raise ArchiveError(
                        f"parameter `{entry.key}`: splat pattern length {length} invalid; "
                        "must be 1, 2, 4, 8, or 16 bytes", StatusCode.INVALID_ARGUMENT)
                record_size = SPLAT_ENTRY_SIZE
                self.records.append(("splat", entry, name, entry.metadata, 0))
            else:
                record_size = DATA_ENTRY_SIZE
                offset = align(storage_size, alignment)
                storage_size = offset + entry.length
                if not storage_alignment:
                    storage_alignment = alignment
                self.records.append(("data", entry, name, entry.metadata, offset))
            entry_segment_size = align(entry_segment_size, ENTRY_ALIGNMENT) + record_size
            metadata_size += len(name) + len(entry.metadata)
        self.entry_segment = (align(HEADER_V0_SIZE, ENTRY_ALIGNMENT), entry_segment_size)
        self.metadata_segment = (self.entry_segment[0] + entry_segment_size, metadata_size)
        self.storage_segment = (
            align(self.metadata_segment[0] + metadata_size, storage_alignment or 1),
            storage_size)
        self.total_size = align(self.storage_segment[0] + storage_size, file_alignment)

    def header_bytes(self) -> bytes:
        """Header, entry table and metadata segment: everything before storage."""
        out = bytearray()
        out += _HEADER_V0.build(dict(
            prefix=dict(magic=MAGIC, version_major=0, version_minor=0,
                        header_size=HEADER_V0_SIZE, next_header_offset=0, flags=0),
            entry_count=len(self.records),
            entry_segment=dict(offset=self.entry_segment[0], length=self.entry_segment[1]),
            metadata_segment=dict(offset=self.metadata_segment[0],
                                  length=self.metadata_segment[1]),
            storage_segment=dict(offset=self.storage_segment[0],
                                 length=self.storage_segment[1])))
        metadata_offset = 0
        for kind, entry, name, metadata, storage_offset in self.records:
            out += bytes(align(len(out), ENTRY_ALIGNMENT) - len(out))
            name_ref = dict(offset=metadata_offset, length=len(name))
            metadata_offset += len(name)
            metadata_ref = dict(offset=metadata_offset if metadata else 0,
                                length=len(metadata))
            metadata_offset += len(metadata)
            if kind == "splat":
                out += _SPLAT_ENTRY.build(dict(
                    header=dict(entry_size=SPLAT_ENTRY_SIZE, type=ENTRY_TYPE_SPLAT, flags=0,
                                name=name_ref, metadata=metadata_ref, minimum_alignment=0),
                    length=entry.length,
                    pattern=entry.pattern.ljust(16, b"\0"),
                    pattern_length=len(entry.pattern)))
            else:
                out += _DATA_ENTRY.build(dict(
                    header=dict(entry_size=DATA_ENTRY_SIZE, type=ENTRY_TYPE_DATA, flags=0,
                                name=name_ref, metadata=metadata_ref,
                                minimum_alignment=self.alignment),
                    storage=dict(offset=storage_offset, length=entry.length)))
        for _, _, name, metadata, _ in self.records:
            out += name
            out += metadata
        return bytes(out)


def write_irpa(index, path, *, alignment: int = DEFAULT_DATA_ALIGNMENT,
               materialize=None, cache=None) -> ParameterIndex:
    """Writes `index` as an archive at `path`; returns an index over the new file.

    Splat entries stay splats unless `materialize(entry)` is true, in which case
    their pattern is written out as data (as `iree-create-parameters --data`).
    """
    from vmrt.io.formats.common import ArchiveWriter

    plan = IrpaPlan(list(index), alignment=alignment,
                    materialize=materialize or (lambda entry: False))
    with ArchiveWriter(path, plan.total_size) as writer:
        writer.write(0, plan.header_bytes())
        base = plan.storage_segment[0]
        for kind, entry, _, _, storage_offset in plan.records:
            if kind == "data":
                writer.copy_entry(base + storage_offset, entry)
    # The new index comes from the plan, as IREE's builder makes it (so a
    # zero-length entry keeps its planned offset, which a parse reports as 0).
    handle = writer.reopen(cache)
    written = ParameterIndex()
    for kind, entry, name, metadata, storage_offset in plan.records:
        key = name.decode("utf-8", "surrogateescape")
        if kind == "splat":
            written.add(ParameterIndexEntry(key=key, length=entry.length, metadata=metadata,
                                            pattern=entry.pattern))
        else:
            written.add(ParameterIndexEntry(key=key, length=entry.length, metadata=metadata,
                                            file=handle, offset=base + storage_offset))
    return written
