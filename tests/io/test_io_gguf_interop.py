"""GGUF type numbering: files vmrt writes load in ggml's tools and the gguf package
by default (the spec's numbers), and in IREE 3.13 with --gguf-types=iree.

IREE's parser numbers I8/I16/I32 16-18 (ggml's old table); current ggml uses
24-26 and gives 16-18 to IQ quant types.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tests.io.conftest import iree_dump, run_vmrt
from vmrt.errors import ArchiveError, StatusCode
from vmrt.io import ParameterIndex
from vmrt.io.formats import gguf as vmrt_gguf

# name -> (numpy dtype, safetensors dtype); the last three are missing from IREE's table.
TYPED = {
    "f32": (np.float32, "F32"), "f16": (np.float16, "F16"),
    "i8": (np.int8, "I8"), "i16": (np.int16, "I16"), "i32": (np.int32, "I32"),
    "i64": (np.int64, "I64"), "f64": (np.float64, "F64"), "bf16": (np.uint16, "BF16"),
}
IREE_TYPES = {"f32": 0, "f16": 1, "i8": 16, "i16": 17, "i32": 18, "i64": 16, "f64": 16,
              "bf16": 16, "raw256": 16}
GGML_TYPES = {"f32": 0, "f16": 1, "i8": 24, "i16": 25, "i32": 26, "i64": 27, "f64": 28,
              "bf16": 30, "raw256": 24}


def typed_index() -> ParameterIndex:
    index = ParameterIndex()
    for ordinal, (name, (dtype, st_dtype)) in enumerate(TYPED.items()):
        values = (np.arange(6) * (ordinal + 1)).astype(dtype).reshape(2, 3)
        index.add_buffer(name, values.tobytes(), info={"dtype": st_dtype, "shape": (2, 3)})
    # 256 bytes: one IQ2_XXS block (66 bytes) if 16 were read in ggml's sense.
    index.add_buffer("raw256", bytes(range(256)))
    return index


#: GGUF metadata value types of a fixed size (the spec's numbering): bytes each.
FIXED_VALUE_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def stored_types(path) -> dict[str, int]:
    """Tensor name -> type number exactly as stored in the file (read here by the
    spec, not by vmrt's reader)."""
    data = path.read_bytes()
    at = 8  # magic, version

    def take(fmt: str):
        nonlocal at
        values = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def text() -> str:
        nonlocal at
        size = take("<Q")
        at += size
        return data[at - size:at].decode()

    def skip_value(kind: int) -> None:
        nonlocal at
        if kind == 8:  # string
            text()
        elif kind == 9:  # array: element type, count, elements
            element, count = take("<IQ")
            for _ in range(count):
                skip_value(element)
        else:
            at += FIXED_VALUE_SIZES[kind]

    tensors, kvs = take("<QQ")
    for _ in range(kvs):
        text()
        skip_value(take("<I"))
    types = {}
    for _ in range(tensors):
        name = text()
        dimensions = take("<I")
        at += 8 * dimensions
        types[name] = take("<I")
        take("<Q")  # data offset
    return types


def gguf_bytes(ggml_type: int, count: int, metadata: dict[str, str] = {}) -> bytes:
    """One rank-1 tensor `t` of `count` elements at data offset 0, plus string metadata."""
    def string(text):
        return struct.pack("<Q", len(text)) + text.encode()
    out = struct.pack("<IIQQ", vmrt_gguf.MAGIC, 3, 1, len(metadata))
    for key, value in metadata.items():
        out += string(key) + struct.pack("<I", vmrt_gguf.VALUE_STRING) + string(value)
    out += string("t") + struct.pack("<IQIQ", 1, count, ggml_type, 0)
    out += bytes(-len(out) % 32)
    return out + bytes(range(256)) * 4


@pytest.fixture
def irpa_from_iree(tmp_path, rt):
    """An IRPA written by iree.runtime: raw byte entries, as in the reported failure."""
    index = rt.ParameterIndex()
    index.add_buffer("a", b"abc")
    index.add_buffer("b", bytes(range(256)) * 2)
    index.add_buffer("c", np.arange(5, dtype=np.int32).tobytes())
    path = tmp_path / "x.irpa"
    index.create_archive_file(str(path))
    return path


def test_converted_gguf_loads_in_iree_dump_parameters(irpa_from_iree, dump_tool, tmp_path):
    out = tmp_path / "x.gguf"
    result = run_vmrt("params", "convert", irpa_from_iree, "-o", out, "-q",
                      "--gguf-types=iree")
    assert result.returncode == 0, result.stderr
    assert set(stored_types(out).values()) == {16}
    theirs = iree_dump(dump_tool, out)
    assert theirs.returncode == 0, theirs.stderr
    ours = run_vmrt("params", "dump", out)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout


def test_iree_numbering_reads_back_in_iree_runtime(rt, tmp_path):
    path = tmp_path / "t.gguf"
    written = typed_index().save(path, types="iree")
    assert stored_types(path) == IREE_TYPES
    theirs = rt.ParameterIndex()
    theirs.load(str(path))
    expected = {entry.key: entry.read() for entry in typed_index()}
    assert {key: bytes(entry.file_view) for key, entry in theirs.items()} == expected
    # vmrt reads its own file back with ggml's current type names.
    again = ParameterIndex.load(path)
    assert {entry.key: entry.read() for entry in again} == expected
    names = {entry.key: entry.info["ggml_type_name"] for entry in written}
    assert names == {"f32": "F32", "f16": "F16", "i8": "I8", "i16": "I16", "i32": "I32",
                     "i64": "I8", "f64": "I8", "bf16": "I8", "raw256": "I8"}
    assert again.lookup("i16").info["ggml_type"] == 25
    assert again.lookup("i16").info["ggml_dims"] == (3, 2)


def test_iree_numbering_loads_in_iree_dump_parameters(dump_tool, tmp_path):
    path = tmp_path / "t.gguf"
    written = typed_index().save(path, alignment=64, types="iree")
    result = iree_dump(dump_tool, path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == written.dump()


def test_ggml_numbering_is_read_by_the_gguf_package(tmp_path):
    gguf = pytest.importorskip("gguf")
    source = ParameterIndex()  # safetensors entries carry the dtypes GGUF records
    source.add_buffer("a", np.full(4, 1, np.int8).tobytes(), info={"dtype": "I8", "shape": (4,)})
    source.add_buffer("b", np.full(3, 2, np.int16).tobytes(),
                      info={"dtype": "I16", "shape": (3,)})
    source.add_buffer("c", np.full(6, 3, np.int32).tobytes(),
                      info={"dtype": "I32", "shape": (2, 3)})
    source.save(tmp_path / "s.safetensors")
    path = tmp_path / "t.gguf"
    result = run_vmrt("params", "convert", tmp_path / "s.safetensors", "-o", path, "-q",
                      "--gguf-types=ggml")
    assert result.returncode == 0, result.stderr
    assert stored_types(path) == {"a": 24, "b": 25, "c": 26}
    reader = gguf.GGUFReader(str(path))
    assert [(t.name, t.tensor_type.name) for t in reader.tensors] == [
        ("a", "I8"), ("b", "I16"), ("c", "I32")]
    assert reader.tensors[1].data.tobytes() == np.full(3, 2, np.int16).tobytes()
    assert reader.tensors[2].data.tobytes() == np.full(6, 3, np.int32).tobytes()
    # ...and is the default, which IREE 3.13 cannot read (hence --gguf-types=iree).
    index = typed_index()
    index.save(path)
    assert stored_types(path) == GGML_TYPES
    again = ParameterIndex.load(path)
    assert [entry.read() for entry in again] == [entry.read() for entry in typed_index()]
    assert again.lookup("bf16").info["ggml_type_name"] == "BF16"


def test_ggml_numbering_is_rejected_by_iree(dump_tool, irpa_from_iree, tmp_path):
    out = tmp_path / "x.gguf"
    result = run_vmrt("params", "convert", irpa_from_iree, "-o", out, "-q",
                      "--gguf-types=ggml")
    assert result.returncode == 0, result.stderr
    theirs = iree_dump(dump_tool, out)
    assert theirs.returncode != 0 and "type 24 not supported" in theirs.stderr


def test_float_only_files_are_the_same_in_both_numberings(tmp_path):
    index = ParameterIndex()
    index.add_buffer("w", np.ones(8, np.float32).tobytes(), info={"dtype": "F32", "shape": (8,)})
    index.add_buffer("h", np.ones(4, np.float16).tobytes(), info={"dtype": "F16", "shape": (4,)})
    index.save(tmp_path / "a.gguf", types="iree")
    index.save(tmp_path / "b.gguf", types="ggml")
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


@pytest.mark.parametrize("ggml_type, count, metadata, name, length", [
    # Marked as IREE-numbered: 16-18 are the integer types whatever the element count.
    (16, 256, {"vmrt.ggml_type_numbering": "iree"}, "I8", 256),
    (18, 256, {"vmrt.ggml_type_numbering": "iree"}, "I32", 1024),
    # Unmarked: ggml's meaning when the shape allows it...
    (16, 256, {}, "IQ2_XXS", 66),
    (17, 512, {}, "IQ2_XS", 148),
    # ...IREE's when it cannot be an IQ tensor (a partial block).
    (16, 10, {}, "I8", 10),
    (17, 10, {}, "I16", 20),
    (18, 3, {"other": "x"}, "I32", 12),
    # Current ggml numbers are read as such either way.
    (25, 6, {"vmrt.ggml_type_numbering": "iree"}, "I16", 12),
])
def test_reader_disambiguates_16_to_18(tmp_path, ggml_type, count, metadata, name, length):
    path = tmp_path / "t.gguf"
    path.write_bytes(gguf_bytes(ggml_type, count, metadata))
    entry = ParameterIndex.load(path).lookup("t")
    assert (entry.info["ggml_type_name"], entry.length) == (name, length)
    assert entry.read() == (bytes(range(256)) * 4)[:length]


def test_unknown_numbering_is_rejected(tmp_path):
    with pytest.raises(ArchiveError) as caught:
        typed_index().save(tmp_path / "t.gguf", types="llama")
    assert caught.value.code == StatusCode.INVALID_ARGUMENT
    result = run_vmrt("params", "create", "-o", tmp_path / "u.gguf", "--data=a=4xi8",
                      "--gguf-types=llama")
    assert result.returncode != 0 and "--gguf-types" in result.stderr
