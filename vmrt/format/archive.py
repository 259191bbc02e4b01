"""The .vmfb container around the module FlatBuffer.

Layout (runtime/src/iree/vm/bytecode/archive.c):

    [optional ZIP local file header][u32 size prefix][FlatBuffer]
    [zero padding to a multiple of 64][external rodata ...]

Offsets of external rodata segments are relative to the 64-byte aligned end of
the FlatBuffer (IREE_VM_ARCHIVE_SEGMENT_ALIGNMENT).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Iterable

from vmrt.errors import ModuleFormatError

#: IREE_VM_ARCHIVE_SEGMENT_ALIGNMENT.
SEGMENT_ALIGNMENT = 64

ZIP_LOCAL_FILE_SIGNATURE = b"PK\x03\x04"

#: A ZIP local file header (APPNOTE 4.3.7), as a polyglot .vmfb may start with:
#: signature, version, general purpose flag, compression method, last modified
#: time and date, crc32, compressed and uncompressed sizes, file name length,
#: extra field length (little-endian).
ZIP_LOCAL_FILE_HEADER = struct.Struct("<4s5H3I2H")
ZIP_LOCAL_FILE_HEADER_SIZE = ZIP_LOCAL_FILE_HEADER.size  # 30

#: The 4-byte length prefix in front of the FlatBuffer (u32).
SIZE_PREFIX = struct.Struct("<I")

#: Fewer bytes than this after the ZIP header cannot hold a module (archive.c).
MIN_MODULE_BYTES = 16


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclasses.dataclass(frozen=True)
class ArchiveInfo:
    """Where the pieces of a module file are (all offsets from the file start)."""

    #: Total size of the input in bytes.
    total_size: int
    #: Size of the ZIP local file header skipped in front of the module (0 if none).
    zip_header_size: int
    #: Offset of the FlatBuffer (just after its 4-byte size prefix).
    flatbuffer_offset: int
    #: Length of the FlatBuffer as given by the size prefix.
    flatbuffer_length: int
    #: Base of external rodata: the FlatBuffer end rounded up to 64 bytes.
    rodata_offset: int

    def external_in_range(self, offset: int, length: int) -> bool:
        """Whether [rodata_offset + offset, + length) lies inside the file.

        Uses the non-overflowing comparisons of IREE's verifier (summing the
        three values could wrap in C; Python ints do not, but the order of the
        tests is kept so the accepted set is the same).
        """
        avail = self.total_size
        if self.rodata_offset > avail:
            return False
        if offset > avail - self.rodata_offset:
            return False
        if length > avail - self.rodata_offset - offset:
            return False
        return True


def parse_archive(data: memoryview) -> ArchiveInfo:
    """Finds the FlatBuffer in ``data`` (a byte memoryview); checks the prefix."""
    n = len(data)
    start = 0
    if n >= ZIP_LOCAL_FILE_HEADER_SIZE and data[:4] == ZIP_LOCAL_FILE_SIGNATURE:
        *_, file_name_length, extra_field_length = ZIP_LOCAL_FILE_HEADER.unpack_from(data)
        start = ZIP_LOCAL_FILE_HEADER_SIZE + file_name_length + extra_field_length
        if start > n:
            raise ModuleFormatError(
                "archive self-reports as a zip but does not have enough data to "
                "contain a module")
    remaining = n - start
    if remaining < MIN_MODULE_BYTES:
        raise ModuleFormatError(
            f"FlatBuffer data is not present or less than {MIN_MODULE_BYTES} bytes "
            f"({remaining} total)")
    (length,) = SIZE_PREFIX.unpack_from(data, start)
    available = remaining - 4
    if length > available:
        raise ModuleFormatError(
            f"FlatBuffer length prefix out of bounds (prefix is {length} but only "
            f"{available} available)")
    fb_offset = start + 4
    return ArchiveInfo(
        total_size=n,
        zip_header_size=start,
        flatbuffer_offset=fb_offset,
        flatbuffer_length=length,
        rodata_offset=align_up(fb_offset + length, SEGMENT_ALIGNMENT),
    )


def plan_external(segments: Iterable[tuple[int | None, int]]) -> list[int]:
    """Chooses offsets for external segments given as (wanted offset, length).

    A wanted offset (as read from a module) is kept when it does not overlap
    one already placed; the others go after everything placed, 64-aligned.
    """
    items = list(segments)
    placed: list[tuple[int, int]] = []
    result: list[int | None] = [None] * len(items)
    for i, (want, length) in enumerate(items):
        if want is None:
            continue
        if any(want < e and s < want + length for s, e in placed):
            continue
        if length == 0 and any(s <= want < e for s, e in placed):
            continue
        placed.append((want, want + length))
        result[i] = want
    tail = max((e for _, e in placed), default=0)
    for i, (want, length) in enumerate(items):
        if result[i] is None:
            tail = align_up(tail, SEGMENT_ALIGNMENT)
            result[i] = tail
            tail += length
    return result  # type: ignore[return-value]


def assemble_archive(flatbuffer_with_prefix: bytes | bytearray,
                     external: Iterable[tuple[int, bytes | memoryview]]) -> bytes:
    """Concatenates a size-prefixed FlatBuffer and its external rodata.

    The FlatBuffer is always padded to the 64-byte rodata base (as IREE's
    archive writer does), so even empty external segments are in range.
    """
    out = bytearray(flatbuffer_with_prefix)
    base = align_up(len(out), SEGMENT_ALIGNMENT)
    items = [(offset, memoryview(data).cast("B")) for offset, data in external]
    end = max([base] + [base + offset + len(data) for offset, data in items])
    out += bytes(end - len(out))
    for offset, data in items:
        out[base + offset:base + offset + len(data)] = data
    return bytes(out)
