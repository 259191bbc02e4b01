"""safetensors read/write, GGUF read/write, and conversions between all three formats."""

import json
import struct

import numpy as np
import pytest

from vmrt.errors import ArchiveError, StatusCode
from vmrt.io import FileCache, ParameterIndex
from vmrt.io.formats import format_from_name, sniff_format

from tests.io.conftest import iree_dump


def tensors_index():
    index = ParameterIndex()
    index.add_buffer("tensor0", np.ones((2, 2), np.float32).tobytes(),
                     info={"dtype": "F32", "shape": (2, 2)})
    index.add_buffer("tensor1", np.arange(2, dtype=np.float32).tobytes(),
                     info={"dtype": "F32", "shape": (1, 2)})
    index.add_buffer("tensor2", np.full((4, 3), 7, np.int16).tobytes(),
                     info={"dtype": "I16", "shape": (4, 3)})
    index.add_buffer("raw", b"\x01\x02\x03")
    index.add_splat("zeros", b"\0\0\0\0", 8)
    return index


def test_format_names():
    assert format_from_name("a/b.IRPA") == "irpa"
    assert format_from_name("x.safetensors") == "safetensors"
    assert format_from_name("gguf") == "gguf"
    assert format_from_name("x.bin") is None
    assert sniff_format(memoryview(b"GGUF\x03")) == "gguf"


# -- safetensors ------------------------------------------------------------------------------
def test_safetensors_round_trip(tmp_path):
    path = tmp_path / "t.safetensors"
    written = tensors_index().save(path, metadata={"format": "pt"})
    raw = path.read_bytes()
    (length,) = struct.unpack_from("<Q", raw)
    assert (8 + length) % 8 == 0
    header = json.loads(raw[8:8 + length])
    assert header["__metadata__"] == {"format": "pt"}
    assert header["tensor0"] == {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
    assert header["tensor2"]["dtype"] == "I16" and header["tensor2"]["shape"] == [4, 3]
    assert header["raw"] == {"dtype": "U8", "shape": [3], "data_offsets": [48, 51]}
    assert header["zeros"]["data_offsets"] == [51, 59]  # splats are written out
    again = ParameterIndex.load(path)
    assert again.keys() == written.keys() == ["tensor0", "tensor1", "tensor2", "raw", "zeros"]
    for source, entry in zip(tensors_index(), again):
        assert entry.read() == source.read()
        assert entry.offset == 8 + length + header[entry.key]["data_offsets"][0]
    assert again.lookup("tensor2").info["shape"] == (4, 3)


def test_safetensors_inconsistent_dtype_falls_back_to_bytes(tmp_path):
    index = ParameterIndex()
    index.add_buffer("t", bytes(6), info={"dtype": "F32", "shape": (2,)})
    index.save(tmp_path / "t.safetensors")
    assert ParameterIndex.load(tmp_path / "t.safetensors").lookup("t").info == {
        "dtype": "U8", "shape": (6,)}


def test_safetensors_refuses_what_it_cannot_hold(tmp_path):
    index = ParameterIndex()
    index.add_buffer("d", b"1")
    index.add_buffer("d", b"2")
    with pytest.raises(ArchiveError) as info:
        index.save(tmp_path / "dup.safetensors")
    assert info.value.code == StatusCode.ALREADY_EXISTS
    meta = ParameterIndex()
    meta.add_buffer("__metadata__", b"1")
    with pytest.raises(ArchiveError):
        meta.save(tmp_path / "m.safetensors")
    assert not list(tmp_path.iterdir())  # no partial files left behind


def test_iree_runtime_reads_our_safetensors(rt, tmp_path):
    path = tmp_path / "t.safetensors"
    written = tensors_index().save(path)
    theirs = rt.ParameterIndex()
    theirs.load(str(path))
    assert [k for k, _ in theirs.items()] == written.keys()
    for entry, (_, other) in zip(written, theirs.items()):
        assert other.file_storage[1] == entry.offset and other.length == entry.length
        assert bytes(other.file_view) == entry.read()


def test_iree_dump_parameters_reads_our_safetensors(dump_tool, tmp_path):
    path = tmp_path / "t.safetensors"
    written = tensors_index().save(path)
    result = iree_dump(dump_tool, path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == written.dump()


# -- GGUF -------------------------------------------------------------------------------------
def test_gguf_round_trip_keeps_types_and_dims(tmp_path):
    path = tmp_path / "t.gguf"
    written = tensors_index().save(path, alignment=64)
    again = ParameterIndex.load(path)
    assert again.keys() == written.keys()
    for source, entry in zip(tensors_index(), again):
        assert entry.read() == source.read()
        assert entry.offset % 64 == 0
    assert again.lookup("tensor0").info["ggml_type_name"] == "F32"
    assert again.lookup("tensor2").info["ggml_type_name"] == "I16"
    assert again.lookup("tensor2").info["ggml_dims"] == (3, 4)  # ggml order: innermost first
    assert again.lookup("raw").info["ggml_type_name"] == "I8"


def test_gguf_package_reads_our_files(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "t.gguf"
    written = tensors_index().save(path, types="ggml")  # the default is IREE's numbering
    reader = gguf.GGUFReader(str(path))
    assert [t.name for t in reader.tensors] == written.keys()
    for tensor, entry in zip(reader.tensors, written):
        assert tensor.data_offset == entry.offset
        assert int(tensor.n_bytes) == entry.length
        assert tensor.data.tobytes() == entry.read()
    assert reader.tensors[2].tensor_type.name == "I16"
    assert list(reader.tensors[2].shape) == [3, 4]


def test_gguf_written_by_the_gguf_package(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "w.gguf"
    writer = gguf.GGUFWriter(str(path), "test")
    writer.add_uint32("answer", 42)
    writer.add_array("names", ["a", "bc"])
    writer.add_tensor("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.add_tensor("h", np.arange(6, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    index = ParameterIndex.load(path)
    np.testing.assert_array_equal(np.frombuffer(index.lookup("w").view(), np.float32),
                                  np.arange(12, dtype=np.float32))
    assert index.lookup("h").read() == np.arange(6, dtype=np.float16).tobytes()
    assert index.lookup("w").info["ggml_dims"] == (4, 3)


def test_iree_reads_our_f32_gguf(dump_tool, tmp_path):
    index = ParameterIndex()
    index.add_buffer("t", np.ones(4, np.float32).tobytes(), info={"dtype": "F32", "shape": (4,)})
    written = index.save(tmp_path / "t.gguf")
    result = iree_dump(dump_tool, tmp_path / "t.gguf")
    assert result.returncode == 0, result.stderr
    assert result.stdout == written.dump()


# -- conversions ------------------------------------------------------------------------------
@pytest.mark.parametrize("chain", [
    ("irpa", "safetensors", "gguf", "irpa"),
    ("gguf", "irpa", "safetensors", "gguf"),
    ("safetensors", "gguf", "safetensors"),
])
def test_conversions_keep_contents(tmp_path, chain):
    index = tensors_index()
    expected = {entry.key: entry.read() for entry in index}
    for step, fmt in enumerate(chain):
        index = index.save(tmp_path / f"{step}.{fmt}", cache=FileCache())
        assert {entry.key: entry.read() for entry in index} == expected, fmt
    assert index.lookup("tensor2").read() == np.full((4, 3), 7, np.int16).tobytes()


def test_testdata_converts_to_every_format(testdata, tmp_path, rt):
    for source in sorted(testdata.glob("*/*")):
        index = ParameterIndex.load(source)
        expected = [(entry.key, entry.read()) for entry in index]
        for fmt in ("irpa", "safetensors", "gguf"):
            out = tmp_path / f"{source.stem}.{fmt}"
            written = index.save(out)
            assert [(e.key, e.read()) for e in written] == expected, (source, fmt)
            if fmt != "gguf":  # IREE's GGUF table lacks current ggml type numbers
                theirs = rt.ParameterIndex()
                theirs.load(str(out))
                assert len(theirs.items()) == len(expected)


def test_rewriting_a_file_from_itself(tmp_path):
    path = tmp_path / "self.irpa"
    tensors_index().save(path)
    index = ParameterIndex.load(path)
    index.save(path)  # written beside, then renamed over: the sources stay readable
    assert [e.read() for e in ParameterIndex.load(path)] == [e.read() for e in tensors_index()]
