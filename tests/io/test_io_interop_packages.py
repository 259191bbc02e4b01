"""Interop with the `safetensors` and `gguf` packages, in both directions.

vmrt writes -> the package reads, and the package writes -> vmrt reads, with the
same bytes, dtypes and shapes; shapes are compared in each format's own dimension
order: safetensors records numpy's (outermost first), GGUF stores dims innermost
first (ggml's ne[0] is the row length), so a (3, 4) array has GGUF dims [4, 3].
Archives are made the ways users make them: `ParameterIndex.add_buffer(name,
array)` then `save` (also from .npy files), and `vmrt params create/convert`.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from tests.io.conftest import run_vmrt
from vmrt.errors import ArchiveError, StatusCode
from vmrt.io import ParameterIndex, write_file

# Arrays of every dtype both formats know, in several ranks (0-d included).
COMMON_ARRAYS = {
    "f32_3x4": np.arange(12, dtype=np.float32).reshape(3, 4),
    "f16_2x3x4": (np.arange(24) / 8).astype(np.float16).reshape(2, 3, 4),
    "f64_scalar": np.array(2.5),
    "i8_7": np.arange(-3, 4, dtype=np.int8),
    "i16_2x3": np.arange(6, dtype=np.int16).reshape(2, 3) - 3,
    "i32_1x5": np.arange(5, dtype=np.int32).reshape(1, 5) * 1000,
    "i64_4": np.arange(4, dtype=np.int64) << 40,
}
# ...and those only safetensors has.
SAFETENSORS_ARRAYS = {
    "u8_2x3": np.arange(6, dtype=np.uint8).reshape(2, 3),
    "u16_3": np.arange(3, dtype=np.uint16) + 60000,
    "u32_2x1": np.array([[1], [4000000000]], dtype=np.uint32),
    "u64_2": np.array([1, 1 << 63], dtype=np.uint64),
    "bool_2x2": np.array([[True, False], [False, True]]),
    "c64_3": np.arange(3, dtype=np.complex64) * (1 + 2j),
}
SAFETENSORS_DTYPES = {"float32": "F32", "float16": "F16", "float64": "F64", "int8": "I8",
                      "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8",
                      "uint16": "U16", "uint32": "U32", "uint64": "U64", "bool": "BOOL",
                      "complex64": "C64", "bfloat16": "BF16"}
GGML_TYPE_NAMES = {"float32": "F32", "float16": "F16", "float64": "F64", "int8": "I8",
                   "int16": "I16", "int32": "I32", "int64": "I64"}
BF16_BITS = np.array([[0x3F80, 0x4000, 0xC040], [0x0000, 0x7F80, 0x3E00]], dtype=np.uint16)


@pytest.fixture(scope="module")
def st():
    return pytest.importorskip("safetensors.numpy")


@pytest.fixture(scope="module")
def gguf():
    return pytest.importorskip("gguf")


def index_of_arrays(arrays: dict) -> ParameterIndex:
    """The way users hand numpy arrays to vmrt: add_buffer(name, array), no info."""
    index = ParameterIndex()
    for name, array in arrays.items():
        index.add_buffer(name, array)
    return index


def typed_bytes_index() -> ParameterIndex:
    """Tensors numpy cannot wrap, given as bytes plus a declared dtype and shape."""
    index = ParameterIndex()
    index.add_buffer("bf16_2x3", BF16_BITS.tobytes(), info={"dtype": "BF16", "shape": (2, 3)})
    index.add_buffer("empty_0x3", b"", info={"dtype": "F32", "shape": (0, 3)})
    return index


def safetensors_header(path) -> dict:
    raw = path.read_bytes()
    (length,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8:8 + length])


def assert_vmrt_entry_is(entry, array: np.ndarray) -> None:
    assert entry.read() == array.tobytes(), entry.key
    if "ggml_dims" in entry.info:  # GGUF: innermost first
        assert entry.info["ggml_type_name"] == GGML_TYPE_NAMES[array.dtype.name]
        assert entry.info["ggml_dims"] == tuple(reversed(array.shape)), entry.key
    else:
        assert entry.info["dtype"] == SAFETENSORS_DTYPES[array.dtype.name], entry.key
        assert entry.info["shape"] == array.shape, entry.key


def assert_gguf_tensor_is(tensor, array: np.ndarray, type_name: str) -> None:
    assert tensor.tensor_type.name == type_name, tensor.name
    assert [int(d) for d in tensor.shape] == list(reversed(array.shape)), tensor.name
    assert tensor.data.tobytes() == array.tobytes(), tensor.name
    if type_name in GGML_TYPE_NAMES.values():
        assert (tensor.data.dtype, tensor.data.shape) == (array.dtype, array.shape)


# -- safetensors --------------------------------------------------------------------------
def test_numpy_arrays_keep_dtype_and_shape_in_safetensors(st, tmp_path):
    arrays = {**COMMON_ARRAYS, **SAFETENSORS_ARRAYS}
    index = index_of_arrays(arrays)
    index.add_buffer("raw", b"\x01\x02\x03")
    path = tmp_path / "a.safetensors"
    index.save(path)
    header = safetensors_header(path)
    assert header["f32_3x4"] == {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}
    assert header["raw"]["dtype"] == "U8" and header["raw"]["shape"] == [3]
    loaded = st.load_file(str(path))
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype, name
        assert loaded[name].shape == array.shape, name
        np.testing.assert_array_equal(loaded[name], array)
    assert loaded["raw"].dtype == np.uint8 and loaded["raw"].tobytes() == b"\x01\x02\x03"


def test_declared_dtypes_load_in_safetensors(st, tmp_path):
    pytest.importorskip("ml_dtypes")  # (registers the bfloat16 numpy dtype safetensors uses)
    path = tmp_path / "b.safetensors"
    typed_bytes_index().save(path)
    loaded = st.load_file(str(path))
    assert loaded["bf16_2x3"].dtype.name == "bfloat16"
    assert loaded["bf16_2x3"].shape == (2, 3)
    assert loaded["bf16_2x3"].view(np.uint16).tobytes() == BF16_BITS.tobytes()
    assert (loaded["empty_0x3"].dtype, loaded["empty_0x3"].shape) == (np.float32, (0, 3))


def test_safetensors_written_by_the_package_load_in_vmrt(st, tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arrays = {**COMMON_ARRAYS, **SAFETENSORS_ARRAYS,
              "empty_0x3": np.zeros((0, 3), np.int16),
              "bf16_2x3": BF16_BITS.view(ml_dtypes.bfloat16)}
    path = tmp_path / "p.safetensors"
    st.save_file(arrays, str(path))
    index = ParameterIndex.load(path)
    assert sorted(index.keys()) == sorted(arrays)
    for name, array in arrays.items():
        assert_vmrt_entry_is(index.lookup(name), array)


# -- GGUF ---------------------------------------------------------------------------------
def test_numpy_arrays_written_by_vmrt_load_in_gguf(gguf, tmp_path):
    index = index_of_arrays(COMMON_ARRAYS)
    index.add_buffer("raw", b"\x01\x02\x03")
    index.merge(typed_bytes_index())
    path = tmp_path / "a.gguf"
    index.save(path)  # the default numbering
    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    assert list(tensors) == index.keys()
    for name, array in COMMON_ARRAYS.items():
        assert_gguf_tensor_is(tensors[name], array, GGML_TYPE_NAMES[array.dtype.name])
    assert_gguf_tensor_is(tensors["raw"], np.array([1, 2, 3], np.int8), "I8")
    assert_gguf_tensor_is(tensors["bf16_2x3"], BF16_BITS, "BF16")
    assert_gguf_tensor_is(tensors["empty_0x3"], np.zeros((0, 3), np.float32), "F32")


@pytest.mark.parametrize("alignment", [8, 64, 4096])
def test_gguf_alignment_is_what_the_package_reads(gguf, tmp_path, alignment):
    path = tmp_path / "a.gguf"
    written = index_of_arrays(COMMON_ARRAYS).save(path, alignment=alignment)
    reader = gguf.GGUFReader(str(path))
    assert reader.alignment == alignment
    for tensor, entry in zip(reader.tensors, written):
        assert tensor.data_offset == entry.offset and entry.offset % alignment == 0
        assert tensor.data.tobytes() == entry.read()


@pytest.mark.parametrize("alignment", [0, 4, 48, 1 << 32, True, "64", None])
def test_gguf_alignment_the_spec_forbids_is_refused(tmp_path, alignment):
    with pytest.raises(ArchiveError) as caught:
        index_of_arrays(COMMON_ARRAYS).save(tmp_path / "a.gguf", alignment=alignment)
    assert caught.value.code == StatusCode.INVALID_ARGUMENT
    assert not (tmp_path / "a.gguf").exists()


def write_with_the_gguf_package(gguf, path, alignment: int = 64) -> dict:
    """A GGUF file from gguf.GGUFWriter; returns {name: (array, ggml type name)}."""
    quantized = np.arange(2 * 34, dtype=np.uint8).reshape(2, 34)  # two Q8_0 blocks
    tensors = {name: (array, GGML_TYPE_NAMES[array.dtype.name])
               for name, array in COMMON_ARRAYS.items()}
    tensors["empty_0x3"] = (np.zeros((0, 3), np.int16), "I16")
    writer = gguf.GGUFWriter(str(path), "vmrt-test")
    writer.add_custom_alignment(alignment)
    for name, (array, _) in tensors.items():
        writer.add_tensor(name, array)
    writer.add_tensor("bf16_2x3", BF16_BITS, raw_dtype=gguf.GGMLQuantizationType.BF16)
    writer.add_tensor("q8_0", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {**tensors, "bf16_2x3": (BF16_BITS, "BF16"), "q8_0": (quantized, "Q8_0")}


def test_gguf_written_by_the_package_loads_in_vmrt(gguf, tmp_path):
    path = tmp_path / "p.gguf"
    tensors = write_with_the_gguf_package(gguf, path)
    index = ParameterIndex.load(path)
    assert index.keys() == list(tensors)
    offsets = {t.name: t.data_offset for t in gguf.GGUFReader(str(path)).tensors}
    for name, (array, type_name) in tensors.items():
        entry = index.lookup(name)
        assert entry.offset == offsets[name] and entry.read() == array.tobytes(), name
        assert entry.info["ggml_type_name"] == type_name, name
        if type_name != "Q8_0":  # (a quant's dims count elements, not bytes)
            assert entry.info["ggml_dims"] == tuple(reversed(array.shape)), name
    assert index.lookup("q8_0").info["ggml_dims"] == (32, 2)


# -- the paths users take ------------------------------------------------------------------
def test_npy_files_become_typed_tensors(st, gguf, tmp_path):
    for name, array in COMMON_ARRAYS.items():
        np.save(tmp_path / f"{name}.npy", array)
    index = ParameterIndex()
    for name in COMMON_ARRAYS:  # zero-copy: the archive is written from the mappings
        index.add_buffer(name, np.load(tmp_path / f"{name}.npy", mmap_mode="r"))
    write_file(index, tmp_path / "n.safetensors")
    write_file(index, tmp_path / "n.gguf")
    loaded = st.load_file(str(tmp_path / "n.safetensors"))
    tensors = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "n.gguf")).tensors}
    for name, array in COMMON_ARRAYS.items():
        assert (loaded[name].dtype, loaded[name].shape) == (array.dtype, array.shape)
        assert loaded[name].tobytes() == array.tobytes()
        assert_gguf_tensor_is(tensors[name], array, GGML_TYPE_NAMES[array.dtype.name])


def test_converted_archives_load_in_the_packages(st, gguf, tmp_path):
    source = tmp_path / "source.safetensors"
    st.save_file(COMMON_ARRAYS, str(source))
    as_gguf, back = tmp_path / "c.gguf", tmp_path / "c.safetensors"
    for argv in ((source, "-o", as_gguf), (as_gguf, "-o", back)):
        result = run_vmrt("params", "convert", *argv, "-q")
        assert result.returncode == 0, result.stderr
    tensors = {t.name: t for t in gguf.GGUFReader(str(as_gguf)).tensors}
    loaded = st.load_file(str(back))
    for name, array in COMMON_ARRAYS.items():
        assert_gguf_tensor_is(tensors[name], array, GGML_TYPE_NAMES[array.dtype.name])
        assert (loaded[name].dtype, loaded[name].shape) == (array.dtype, array.shape)
        assert loaded[name].tobytes() == array.tobytes()


def test_created_archives_load_in_the_packages(st, gguf, tmp_path):
    expected = {"w": np.full((3, 4), 1.5, np.float32).tobytes(),
                "b": np.full(5, -2, np.int16).tobytes(), "z": bytes(6)}
    flags = ["--data=w=3x4xf32=1.5", "--data=b=5xi16=-2", "--data=z=6xi8"]
    for name in ("c.gguf", "c.safetensors"):
        result = run_vmrt("params", "create", "-o", tmp_path / name, "-q", *flags)
        assert result.returncode == 0, result.stderr
    tensors = gguf.GGUFReader(str(tmp_path / "c.gguf")).tensors
    assert {t.name: t.data.tobytes() for t in tensors} == expected
    loaded = st.load_file(str(tmp_path / "c.safetensors"))
    assert {name: array.tobytes() for name, array in loaded.items()} == expected
    # Each --data tensor keeps the element type and shape it declares.
    assert {name: (array.dtype, array.shape) for name, array in loaded.items()} == {
        "w": (np.float32, (3, 4)), "b": (np.int16, (5,)), "z": (np.int8, (6,))}
    assert {t.name: (t.tensor_type.name, [int(d) for d in t.shape]) for t in tensors} == {
        "w": ("F32", [4, 3]), "b": ("I16", [5]), "z": ("I8", [6])}  # GGUF: innermost first


# -- what an entry declares -------------------------------------------------------------
def test_only_a_whole_little_endian_array_gives_its_dtype(tmp_path):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = ParameterIndex()
    whole = index.add_buffer("whole", array)
    index.add_file("part", whole.file, 16, 32)  # rows 1-2 of the array: bytes only
    index.add_buffer("big_endian", array.astype(">f4"))  # not safetensors' byte order
    index.add_buffer("declared", array.view(np.uint16), info={"dtype": "BF16",
                                                              "shape": (3, 8)})
    path = tmp_path / "d.safetensors"
    written = index.save(path)
    header = safetensors_header(path)
    layouts = {name: (header[name]["dtype"], header[name]["shape"]) for name in index.keys()}
    assert layouts == {"whole": ("F32", [3, 4]), "part": ("U8", [32]),
                       "big_endian": ("U8", [48]), "declared": ("BF16", [3, 8])}
    assert [entry.read() for entry in written] == [entry.read() for entry in index]


@pytest.mark.parametrize("info", [
    {"dtype": "F32", "shape": (-1, -3)},
    {"dtype": "F32", "shape": (1 << 64, 3)},
    {"dtype": ["F32"], "shape": (3,)},
    {"ggml_type": [0], "ggml_dims": (3,)},
    {"ggml_type": 0, "ggml_dims": (-1, -3)},
    {"ggml_type": 0, "ggml_dims": "abc"},
])
def test_malformed_declarations_are_written_as_bytes(tmp_path, info):
    index = ParameterIndex()
    index.add_buffer("t", np.arange(3, dtype=np.float32).tobytes(), info=info)
    st_written = index.save(tmp_path / "t.safetensors")
    gguf_written = index.save(tmp_path / "t.gguf")
    header = safetensors_header(tmp_path / "t.safetensors")
    assert (header["t"]["dtype"], header["t"]["shape"]) == ("U8", [12])
    assert gguf_written.lookup("t").info["ggml_type_name"] == "I8"
    assert gguf_written.lookup("t").info["ggml_dims"] == (12,)
    assert st_written.lookup("t").read() == gguf_written.lookup("t").read()
