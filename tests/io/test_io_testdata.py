"""The upstream-written archives parse to what IREE's parser tests expect.

Expectations from runtime/src/iree/io/formats/irpa/irpa_parser_test.cc and
runtime/src/iree/io/formats/gguf/gguf_parser_test.cc; the splat values come
from the archives themselves (written with other values than the generator
script names).
"""

import struct

import pytest

from vmrt.io import ParameterIndex


def load(testdata, name):
    return ParameterIndex.load(testdata / name.split(".")[-1] / name)


def check_file(entry, key, offset, length):
    assert entry.key == key
    assert entry.metadata == b""
    assert entry.is_file and not entry.is_splat
    assert entry.offset == offset
    assert entry.length == length


def test_irpa_empty(testdata):
    assert len(load(testdata, "empty.irpa")) == 0


def test_irpa_single(testdata):
    index = load(testdata, "single.irpa")
    assert len(index) == 1
    entry = index.lookup("key0")
    check_file(entry, "key0", 192, 16)
    assert struct.unpack("<4f", entry.view()) == (100.0,) * 4


def test_irpa_multiple(testdata):
    index = load(testdata, "multiple.irpa")
    assert len(index) == 2
    check_file(index.lookup("key0"), "key0", 320, 16)
    check_file(index.lookup("key1"), "key1", 384, 5)
    assert bytes(index.lookup("key1").view()) == bytes([101]) * 5


def test_irpa_mixed(testdata):
    index = load(testdata, "mixed.irpa")
    assert len(index) == 4
    check_file(index.lookup("key0"), "key0", 512, 16)
    check_file(index.lookup("key1"), "key1", 576, 5)
    key2 = index.lookup("key2")
    assert key2.is_splat and not key2.is_file and key2.metadata == b""
    assert key2.pattern == struct.pack("<b", 102) and key2.length == 1
    key3 = index.lookup("key3")
    assert key3.is_splat and key3.metadata == b""
    assert key3.pattern == struct.pack("<q", 9223372036854775807)
    assert key3.length == 33554432
    # Index order is archive order: splats first, as iree-create-parameters writes.
    assert index.keys() == ["key2", "key3", "key0", "key1"]
    assert struct.unpack("<4f", index.lookup("key0").view()) == pytest.approx((100.1,) * 4)


def test_gguf_empty(testdata):
    assert len(load(testdata, "empty.gguf")) == 0


@pytest.mark.parametrize("name", ["single.gguf", "single_v2.gguf"])
def test_gguf_single(testdata, name):
    index = load(testdata, name)
    entry = index.lookup("tensor0")
    check_file(entry, "tensor0", 384, 16)
    assert entry.info["ggml_type_name"] == "F32" and entry.info["ggml_dims"] == (2, 2)
    assert struct.unpack("<4f", entry.view()) == (1.0,) * 4


def test_gguf_multiple(testdata):
    index = load(testdata, "multiple.gguf")
    assert len(index) == 3
    check_file(index.lookup("tensor0"), "tensor0", 448, 16)
    check_file(index.lookup("tensor1"), "tensor1", 512, 8)
    check_file(index.lookup("tensor2"), "tensor2", 576, 48)
    assert index.lookup("tensor2").info["ggml_dims"] == (3, 4)


def test_gguf_metadata(testdata):
    from vmrt.io.file import FileHandle
    from vmrt.io.formats.gguf import parse_gguf
    index = ParameterIndex()
    info = parse_gguf(FileHandle.open(testdata / "gguf" / "multiple.gguf"), index)
    assert info.version == 3 and info.alignment == 64
    assert info.metadata["metadata_uint32"] == 42
    assert info.metadata["metadata_str"] == "hello"
    assert info.metadata["metadata_strs"] == ["a", "b", "c"]


def test_all_testdata_match_iree_runtime(testdata, rt):
    """iree.runtime reads every archive to the same entries."""
    for path in sorted(testdata.glob("*/*")):
        ours = ParameterIndex.load(path)
        theirs = rt.ParameterIndex()
        theirs.load(str(path))
        assert len(ours) == len(theirs.items()), path
        for entry, (key, other) in zip(ours, theirs.items()):
            assert entry.key == key and entry.length == other.length
            assert entry.metadata == bytes(other.metadata)
            assert entry.is_splat == other.is_splat
            if entry.is_splat:
                assert entry.pattern == bytes(other.splat_pattern)
            else:
                assert entry.offset == other.file_storage[1]
                assert bytes(entry.view()) == bytes(other.file_view)
