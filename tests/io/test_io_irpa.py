"""IRPA archives: vmrt writes what IREE writes, and each reads the other's."""

import struct

import numpy as np
import pytest

from vmrt.errors import ArchiveError, StatusCode
from vmrt.io import FileHandle, ParameterIndex
from vmrt.io.formats import irpa
from vmrt.io.formats.irpa import (DATA_ENTRY, HEADER_V0, SPLAT_ENTRY, IrpaPlan, parse_irpa,
                                  write_irpa)

from tests.io.conftest import run_vmrt


def test_written_archive_has_upstreams_packed_layout(tmp_path):
    """Read with struct at parameter_archive.h's offsets (packed structs, ranges
    relative to their segment), not with vmrt's own declarations."""
    index = ParameterIndex()
    index.add_splat("s", b"\x01\x02\x03\x04", 4096)
    index.add_buffer("d", b"abcdefgh")
    index.save(tmp_path / "a.irpa")
    data = (tmp_path / "a.irpa").read_bytes()
    (magic, major, minor, header_size, next_header, flags, count, entries, entries_size,
     metadata, _, storage, _) = struct.unpack_from("<IHHQQQQ6Q", data, 0)
    assert (magic, major, minor, next_header, flags) == (0x41505249, 0, 0, 0, 0)
    assert header_size == 88 and count == 2
    found = {}
    at = entries
    for _ in range(count):
        at = -(-at // 16) * 16  # entries start 16-byte aligned
        size, kind, _, name_at, name_size = struct.unpack_from("<QIQQQ", data, at)
        name = data[metadata + name_at:metadata + name_at + name_size].decode()
        if kind == 1:  # splat: length, 16 pattern bytes, their count
            length, pattern, pattern_size = struct.unpack_from("<Q16sB", data, at + 60)
            found[name] = (size, length, pattern[:pattern_size])
        else:  # data: its storage range
            assert kind == 2
            offset, length = struct.unpack_from("<QQ", data, at + 60)
            found[name] = (size, data[storage + offset:storage + offset + length])
        at += size
    assert at == entries + entries_size
    assert found == {"s": (85, 4096, b"\x01\x02\x03\x04"), "d": (76, b"abcdefgh")}


@pytest.mark.parametrize("name, flags", [
    ("empty", []),
    ("single", ["--data=key0=4xf32=100"]),
    ("multiple", ["--data=key0=4xf32=100.1", "--data=key1=5xi8=101"]),
    ("mixed", ["--data=key0=4xf32=100.1", "--data=key1=5xi8=101", "--splat=key2=i8=102",
               "--splat=key3=4096x1024xi64=9223372036854775807"]),
])
def test_create_is_byte_identical_to_upstream_archives(testdata, tmp_path, name, flags):
    out = tmp_path / f"{name}.irpa"
    result = run_vmrt("params", "create", "--quiet", f"--output={out}", *flags)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == (testdata / "irpa" / f"{name}.irpa").read_bytes()


def _reference_index(rt):
    index = rt.ParameterIndex()
    index.add_splat("a", np.array([1.5], dtype=np.float32), 64, metadata="hello")
    index.add_buffer("b", np.arange(10, dtype=np.int16).tobytes(), metadata="m")
    index.add_buffer("c", b"xyz")
    index.add_splat("d", b"\x01\x02", 6)
    index.add_buffer("e", b"")
    return index


def _our_index():
    index = ParameterIndex()
    index.add_splat("a", np.array([1.5], dtype=np.float32).tobytes(), 64, metadata=b"hello")
    index.add_buffer("b", np.arange(10, dtype=np.int16).tobytes(), metadata=b"m")
    index.add_buffer("c", b"xyz")
    index.add_splat("d", b"\x01\x02", 6)
    index.add_buffer("e", b"")
    return index


def test_writer_is_byte_identical_to_iree_runtime(rt, tmp_path):
    theirs = tmp_path / "theirs.irpa"
    _reference_index(rt).create_archive_file(str(theirs))
    ours = tmp_path / "ours.irpa"
    _our_index().save(ours)
    assert ours.read_bytes() == theirs.read_bytes()


def test_iree_runtime_reads_our_archives(rt, tmp_path):
    path = tmp_path / "ours.irpa"
    written = _our_index().save(path)
    theirs = rt.ParameterIndex()
    theirs.load(str(path))
    items = theirs.items()
    parsed = ParameterIndex.load(path)
    assert [k for k, _ in items] == written.keys() == parsed.keys() == ["a", "b", "c", "d", "e"]
    # The index a write returns is the builder's (a zero-length entry keeps its
    # planned offset); a parse reports zero-length storage at offset 0, as IREE's.
    assert written.lookup("e").offset == 704 and parsed.lookup("e").offset == 0
    for entry, (_, other) in zip(parsed, items):
        assert entry.length == other.length
        assert entry.metadata == bytes(other.metadata)
        if entry.is_splat:
            assert other.is_splat and bytes(other.splat_pattern) == entry.pattern
        else:
            assert other.file_storage[1] == entry.offset
            assert bytes(other.file_view) == entry.read()
    assert written.lookup("b").read() == np.arange(10, dtype=np.int16).tobytes()


def test_we_read_iree_runtime_archives(rt, tmp_path):
    path = tmp_path / "theirs.irpa"
    _reference_index(rt).create_archive_file(str(path))
    index = ParameterIndex.load(path)
    assert index.keys() == ["a", "b", "c", "d", "e"]
    assert index.lookup("a").metadata == b"hello"
    assert index.lookup("a").pattern == struct.pack("<f", 1.5)
    assert index.lookup("b").metadata == b"m"
    assert index.lookup("b").read() == np.arange(10, dtype=np.int16).tobytes()
    assert index.lookup("c").read() == b"xyz"
    assert index.lookup("d").read() == b"\x01\x02" * 3
    assert index.lookup("e").length == 0 and index.lookup("e").offset == 0


def test_round_trip_preserves_everything(tmp_path):
    index = ParameterIndex()
    index.add_buffer("w", bytes(range(200)), metadata=b"\x00meta\xff")
    index.add_splat("s16", bytes(range(16)), 160, metadata=b"x")
    index.add_buffer("dup", b"first")
    index.add_buffer("dup", b"second")
    index.add_buffer("\u00fcnicode/\u540d\u524d", b"u")
    written = index.save(tmp_path / "rt.irpa")
    again = ParameterIndex.load(tmp_path / "rt.irpa")
    for source, a, b in zip(index, written, again):
        assert source.key == a.key == b.key
        assert source.metadata == a.metadata == b.metadata
        assert source.read() == a.read() == b.read()
        assert a.offset == b.offset
    # Duplicate keys are kept; lookup finds the first (as upstream).
    assert again.lookup("dup").read() == b"first"
    assert [e.key for e in again].count("dup") == 2
    # Data is 64-byte aligned and the file a multiple of 4096.
    assert all(e.offset % 64 == 0 for e in again if e.is_file)
    assert (tmp_path / "rt.irpa").stat().st_size % 4096 == 0


def test_data_alignment_option(tmp_path):
    index = ParameterIndex()
    index.add_buffer("a", b"1")
    index.add_buffer("b", b"2")
    written = index.save(tmp_path / "a.irpa", alignment=256)
    assert [e.offset % 256 for e in written] == [0, 0]
    with pytest.raises(ArchiveError) as info:
        index.save(tmp_path / "b.irpa", alignment=48)
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_non_power_of_two_splat_is_rejected_by_the_writer(tmp_path):
    index = ParameterIndex()
    index.add_splat("odd", b"abc", 9)  # fine in an index ...
    assert index.lookup("odd").read() == b"abcabcabc"
    with pytest.raises(ArchiveError) as info:  # ... but IRPA only stores 1/2/4/8/16
        index.save(tmp_path / "odd.irpa")
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert not (tmp_path / "odd.irpa").exists()


def test_materialized_splats_become_data(tmp_path):
    index = ParameterIndex()
    splat = index.add_splat("z", b"\x07\x08", 10)
    written = write_irpa(index, tmp_path / "m.irpa", materialize=lambda e: e is splat)
    entry = written.lookup("z")
    assert entry.is_file and entry.read() == b"\x07\x08" * 5


def test_linked_headers_chain(tmp_path):
    """Two archives concatenated and linked through next_header_offset."""
    first = ParameterIndex()
    first.add_buffer("a", b"AAAA")
    second = ParameterIndex()
    second.add_splat("b", b"\x05", 3)
    second.add_buffer("c", b"CC")
    one = IrpaPlan(list(first))
    two = IrpaPlan(list(second))
    blob_one = bytearray(one.total_size)
    blob_one[:len(one.header_bytes())] = one.header_bytes()
    blob_one[one.storage_segment[0]:one.storage_segment[0] + 4] = b"AAAA"
    blob_two = bytearray(two.total_size)
    blob_two[:len(two.header_bytes())] = two.header_bytes()
    start = two.storage_segment[0]
    blob_two[start:start + 2] = b"CC"
    # Link: header one's next_header_offset points at header two.
    header = HEADER_V0.parse(bytes(blob_one[:88]))
    header.prefix.next_header_offset = len(blob_one)
    blob_one[:88] = HEADER_V0.build(header)
    path = tmp_path / "chain.irpa"
    path.write_bytes(bytes(blob_one + blob_two))
    index = ParameterIndex.load(path)
    assert index.keys() == ["a", "b", "c"]
    assert index.lookup("a").read() == b"AAAA"
    assert index.lookup("b").read() == b"\x05\x05\x05"
    assert index.lookup("c").read() == b"CC"
    assert index.lookup("c").offset == len(blob_one) + start


def test_skip_entries_are_ignored(tmp_path):
    index = ParameterIndex()
    index.add_buffer("keep", b"k")
    index.add_buffer("drop", b"d")
    path = tmp_path / "skip.irpa"
    index.save(path)
    data = bytearray(path.read_bytes())
    # Erase the second entry by changing its type to SKIP (as tools may).
    second = 96 + 80  # entry table start + aligned size of the first data entry
    struct.pack_into("<I", data, second + 8, irpa.ENTRY_TYPE_SKIP)
    path.write_bytes(bytes(data))
    assert ParameterIndex.load(path).keys() == ["keep"]


def test_external_entries_are_unimplemented(tmp_path):
    index = ParameterIndex()
    index.add_buffer("x", b"x")
    path = tmp_path / "ext.irpa"
    index.save(path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 96 + 8, irpa.ENTRY_TYPE_EXTERNAL)
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError) as info:
        ParameterIndex.load(path)
    assert info.value.code == StatusCode.UNIMPLEMENTED


def test_one_declaration_reads_and_writes_entries():
    record = dict(header=dict(entry_size=85, type=1, flags=0,
                              name=dict(offset=3, length=4), metadata=dict(offset=0, length=0),
                              minimum_alignment=0),
                  length=33, pattern=b"\x01" + bytes(15), pattern_length=1)
    raw = SPLAT_ENTRY.build(record)
    assert len(raw) == 85
    parsed = SPLAT_ENTRY.parse(raw)
    assert parsed.header.name.offset == 3 and parsed.length == 33
    assert DATA_ENTRY.build(DATA_ENTRY.parse(bytes(76))) == bytes(76)


def test_parse_from_host_allocation():
    index = ParameterIndex()
    index.add_buffer("p", b"payload")
    plan = IrpaPlan(list(index))
    blob = bytearray(plan.total_size)
    blob[:len(plan.header_bytes())] = plan.header_bytes()
    blob[plan.storage_segment[0]:plan.storage_segment[0] + 7] = b"payload"
    parsed = ParameterIndex()
    parse_irpa(FileHandle.wrap(bytes(blob)), parsed)
    assert parsed.lookup("p").read() == b"payload"
    assert parsed.lookup("p").file.kind == "host_allocation"


@pytest.mark.parametrize("declaration", [irpa.HEADER_PREFIX, irpa.HEADER_V0, irpa.ENTRY_HEADER,
                                         SPLAT_ENTRY, DATA_ENTRY, irpa.EXTERNAL_ENTRY])
def test_fast_codecs_agree_with_the_construct_declarations(declaration):
    import random
    from vmrt.io.formats.layout import FlatLayout
    layout = FlatLayout(declaration, "Record")
    rng = random.Random(5)
    for _ in range(50):
        raw = bytes(rng.randrange(256) for _ in range(declaration.sizeof()))
        parsed = declaration.parse(raw)
        fast = layout.parse(raw)
        for path, value in zip(layout.paths, fast):
            expected = parsed
            for part in path:
                expected = expected[part]
            assert value == expected
        assert layout.build(parsed) == raw == declaration.build(parsed)
