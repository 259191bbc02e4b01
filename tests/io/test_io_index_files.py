"""The index (order, lookup, merging, scopes) and file handles (cache, mappings)."""

import gc
import os

import numpy as np
import pytest

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import (FileAccess, FileCache, FileHandle, FileMode, ParameterIndex,
                     ParameterIndexEntry, ParameterScopes, split_scope)


def make_archive(path, **buffers):
    index = ParameterIndex()
    for key, data in buffers.items():
        index.add_buffer(key, data)
    index.save(path)
    return path


# -- index ------------------------------------------------------------------------------------
def test_entries_keep_order_and_lookup_finds_the_first():
    index = ParameterIndex()
    index.add_buffer("b", b"1")
    index.add_splat("a", b"\x00", 4)
    index.add_buffer("b", b"2")
    assert index.keys() == ["b", "a", "b"]
    assert index.lookup("b").read() == b"1"
    assert index["a"].is_splat and index[2].read() == b"2"
    assert "a" in index and "zz" not in index and len(index) == 3
    assert index.total_bytes == 6
    with pytest.raises(VmrtError) as info:
        index.lookup("zz")
    assert info.value.code == StatusCode.NOT_FOUND
    assert index.lookup(b"a") is index.lookup("a")  # bytes keys work too


def test_splat_patterns_are_1_to_16_bytes():
    index = ParameterIndex()
    for n in (1, 3, 16):
        index.add_splat(f"p{n}", bytes(range(n)), 2 * n)
    for bad in (b"", bytes(17)):
        with pytest.raises(VmrtError) as info:
            index.add_splat("bad", bad, 4)
        assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_entries_need_storage_inside_their_file():
    handle = FileHandle.wrap(bytes(10))
    index = ParameterIndex()
    index.add_file("ok", handle, 2, 8)
    for offset, length in ((3, 8), (11, 0), (-1, 2)):
        with pytest.raises(VmrtError) as info:
            index.add_file("bad", handle, offset, length)
        assert info.value.code == StatusCode.OUT_OF_RANGE
    with pytest.raises(VmrtError):
        index.add(ParameterIndexEntry(key="neither", length=1))


def test_merge_several_files_into_one_index(tmp_path):
    a = make_archive(tmp_path / "a.irpa", x=b"xa", y=b"ya")
    b = make_archive(tmp_path / "b.irpa", z=b"zb", x=b"xb")
    index = ParameterIndex.load(a, b)
    assert index.keys() == ["x", "y", "z", "x"]
    assert index.lookup("x").read() == b"xa"
    merged = ParameterIndex.load(a).merge(ParameterIndex.load(b))
    assert merged.keys() == index.keys()
    assert len(index.file_handles()) == 2


def test_scopes_from_flags(tmp_path):
    a = make_archive(tmp_path / "a.irpa", x=b"1")
    b = make_archive(tmp_path / "b.irpa", y=b"2")
    scopes = ParameterScopes.from_specs([str(a), f"model={b}", f"model={a}"])
    assert list(scopes) == ["", "model"]
    assert scopes[""].keys() == ["x"] and scopes["model"].keys() == ["y", "x"]
    assert split_scope("s=p=q") == ("s", "p=q") and split_scope("p") == ("", "p")
    text = scopes.dump()
    assert "// Parameter scope <global> (1 entries, 1 total bytes)" in text
    assert "// Parameter scope `model` (2 entries, 2 total bytes)" in text
    with pytest.raises(VmrtError):
        scopes["nope"]


# -- files ------------------------------------------------------------------------------------
def test_cache_shares_one_handle_and_one_mapping(tmp_path):
    path = make_archive(tmp_path / "a.irpa", x=b"x" * 100, y=b"y" * 50)
    cache = FileCache()
    one = ParameterIndex.load(path, cache=cache)
    two = ParameterIndex.load(str(path), cache=cache)
    assert one.lookup("x").file is two.lookup("x").file is one.lookup("y").file
    handle = one.lookup("x").file
    contents = handle.contents()
    assert handle.contents().obj is contents.obj  # one mapping
    assert len(cache.handles()) == 1


def test_cache_forgets_unused_handles_and_notices_replaced_files(tmp_path):
    path = make_archive(tmp_path / "a.irpa", x=b"old")
    cache = FileCache()
    old = ParameterIndex.load(path, cache=cache)
    old_view = old.lookup("x").view()
    make_archive(path, x=b"new!")  # replaced by rename: a new inode
    new = ParameterIndex.load(path, cache=cache)
    assert new.lookup("x").file is not old.lookup("x").file
    assert new.lookup("x").read() == b"new!"
    assert bytes(old_view) == b"old"  # the old mapping stays valid
    del old, old_view, new
    gc.collect()
    assert cache.handles() == []


def test_views_are_zero_copy_over_the_mapping(tmp_path):
    data = np.arange(1024, dtype=np.float32)
    path = make_archive(tmp_path / "a.irpa", w=data.tobytes())
    entry = ParameterIndex.load(path).lookup("w")
    view = entry.view()
    assert view.readonly and view.nbytes == data.nbytes
    array = np.frombuffer(view, dtype=np.float32)
    np.testing.assert_array_equal(array, data)
    mapping = entry.file.contents()
    base = np.frombuffer(mapping, dtype=np.uint8)
    assert np.shares_memory(array, base)


def test_read_only_views_cannot_write(tmp_path):
    path = make_archive(tmp_path / "a.irpa", w=b"abcd")
    view = ParameterIndex.load(path).lookup("w").view()
    with pytest.raises(TypeError):
        view[0] = 1


def test_writable_load_upgrades_the_shared_handle(tmp_path):
    path = make_archive(tmp_path / "a.irpa", w=b"abcd")
    cache = FileCache()
    reader = ParameterIndex.load(path, cache=cache)
    writer = ParameterIndex.load(path, cache=cache, writable=True)
    handle = writer.lookup("w").file
    assert handle is reader.lookup("w").file and handle.writable
    view = writer.lookup("w").view()
    view[0:2] = b"XY"
    handle.flush()
    assert ParameterIndex.load(path, cache=FileCache()).lookup("w").read() == b"XYcd"


@pytest.mark.parametrize("mode", list(FileMode))
def test_modes_read_the_same(tmp_path, mode):
    path = make_archive(tmp_path / "a.irpa", w=bytes(range(256)) * 3)
    index = ParameterIndex.load(path, mode=mode, cache=FileCache())
    entry = index.lookup("w")
    assert entry.read() == bytes(range(256)) * 3
    assert entry.read(250, 10) == bytes(range(250, 256)) + bytes(range(4))
    assert entry.file.kind == ("host_allocation" if mode is FileMode.PRELOAD else "fd")
    if mode is FileMode.FILE:
        assert not entry.file.mapped  # parsed through a mapping, then let go


def test_trim_drops_the_mapping_but_views_survive(tmp_path):
    path = make_archive(tmp_path / "a.irpa", w=b"abcdef")
    entry = ParameterIndex.load(path, cache=FileCache()).lookup("w")
    view = entry.view()
    assert entry.file.mapped
    assert entry.file.trim()
    assert not entry.file.mapped
    assert bytes(view) == b"abcdef"
    assert entry.read() == b"abcdef"  # maps again on demand


def test_wrap_host_memory():
    buffer = bytearray(b"hello")
    handle = FileHandle.wrap(buffer)
    assert handle.writable and handle.size == 5
    handle.write(1, b"EL")
    assert buffer == bytearray(b"hELlo")
    assert FileHandle.wrap(b"ro").access == FileAccess.READ
    with pytest.raises(VmrtError) as info:
        FileHandle.wrap(b"ro", FileAccess.READ | FileAccess.WRITE)
    assert info.value.code == StatusCode.PERMISSION_DENIED
    with pytest.raises(VmrtError):
        FileHandle.wrap(12)


def test_handle_reads_and_writes_stay_inside_the_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"0123456789")
    handle = FileHandle.open(path, FileAccess.READ | FileAccess.WRITE, FileMode.FILE)
    assert handle.read(2, 3) == b"234"
    handle.write(8, b"XY")
    with pytest.raises(VmrtError) as info:
        handle.write(9, b"XY")
    assert info.value.code == StatusCode.OUT_OF_RANGE
    with pytest.raises(VmrtError):
        handle.read(8, 5)
    handle.close()
    assert path.read_bytes() == b"01234567XY"
    assert os.path.getsize(path) == 10


def test_non_regular_files_are_refused(tmp_path):
    with pytest.raises(VmrtError) as info:
        FileHandle.open(tmp_path)
    assert info.value.code in (StatusCode.INVALID_ARGUMENT, StatusCode.UNAVAILABLE)
