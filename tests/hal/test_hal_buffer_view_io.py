"""Buffer views as text, numpy and .npy, checked against iree-run-module: what
it reads from `--input=` and prints for `result[i]: hal.buffer_view`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.hal.conftest import reference_run

from vmrt.elements import ElementType as E
from vmrt.elements import (
    format_element_type, parse_element_type, parse_shape, parse_shape_and_type,
)
from vmrt.errors import StatusCode
from vmrt.hal import HalError, HeapAllocator
from vmrt.hal.buffer_view_io import (
    InputStreams, buffer_view_from_numpy, buffer_view_to_numpy, format_buffer_view,
    format_elements, format_result, parse_buffer_view, parse_elements, parse_scalar,
    parse_tensor_input,
)

IDENTITY_TYPES = {
    "f32_6": "tensor<6xf32>", "f32_2x3": "tensor<2x3xf32>", "f32_2x2x2": "tensor<2x2x2xf32>",
    "f32_scalar": "tensor<f32>", "f64_3": "tensor<3xf64>", "f16_3": "tensor<3xf16>",
    "bf16_2": "tensor<2xbf16>", "i8_4": "tensor<4xi8>", "i16_3": "tensor<3xi16>",
    "i32_4": "tensor<4xi32>", "i64_3": "tensor<3xi64>", "i1_3": "tensor<3xi1>",
    "f32_0": "tensor<0xf32>",
}


@pytest.fixture(scope="module")
def identity(compile_mlir):
    source = "\n".join(f"func.func @{name}(%a: {t}) -> {t} {{ return %a : {t} }}"
                       for name, t in IDENTITY_TYPES.items())
    return compile_mlir(source, "--iree-input-demote-f64-to-f32=false")


# (function, --input text): iree-run-module must print what we print after parsing.
ROUND_TRIPS = [
    ("f32_6", "6xf32=1 2 3 4 5 6"),
    ("f32_6", "6xf32=1e6 1e-7 123456789 -0.0 nan -inf"),
    ("f32_6", "6xf32=0x10 1.5e3 inf +4 .5 -.5"),
    ("f32_6", "6xf32=7"),
    ("f32_6", "6xf32="),
    ("f32_6", "6xf32=[1 2][3,4] 5 6"),
    ("f32_6", "6xf32=0.1 0.2 0.3 3.14159265 2.5e-45 3.4e38"),
    ("f32_2x3", "2x3xf32=1 2 3 4 5 6"),
    ("f32_2x2x2", "2x2x2xf32=1 2 3 4 5 6 7 8"),
    ("f32_scalar", "f32=2.5"),
    ("f64_3", "3xf64=1e20 0.1 1e-300"),
    ("f16_3", "3xf16=1.5 65504 0.1"),
    ("f16_3", "3xf16=70000 -1e-8 3.14159"),
    ("bf16_2", "2xbf16=1.5 3.14159"),
    ("i8_4", "4xi8=255 -128 0x10 010"),
    ("i16_3", "3xi16=65535 -32768 12abc"),
    ("i32_4", "4xi32=4294967295 0x7fffffff -0 2147483648"),
    ("i64_3", "3xi64=-9223372036854775808 9223372036854775807 0x10"),
    ("i1_3", "3xi1=01 00 01"),
    ("f32_0", "0xf32="),
]


@pytest.mark.parametrize("function,text", ROUND_TRIPS, ids=[t for _, t in ROUND_TRIPS])
def test_round_trip_matches_iree_run_module(identity, function, text):
    code, lines, stderr = reference_run(identity, function, f"--input={text}")
    assert code == 0, stderr
    assert lines[0] == "result[0]: hal.buffer_view"
    view = parse_buffer_view(text, HeapAllocator())
    assert format_buffer_view(view) == lines[1]


REJECTED = [
    ("i8_4", "4xi8=256 0 0 0"),
    ("i32_4", "4xi32=99999999999999999999 1 2 3"),
    ("i64_3", "3xi64=18446744073709551615 -1 0"),
    ("i1_3", "3xi1=1 0 1"),
    ("f32_6", "6xf32=1 2 3"),
    ("f32_6", "6xf32=1 2 3 4 5 6 7"),
    ("f32_6", "6xf32=1e-50 1 2 3 4 5"),
    ("f32_6", "6xf32=a b c d e f"),
    ("f32_6", "6xq32=1"),
    ("f32_6", "-6xf32=1"),
]


@pytest.mark.parametrize("function,text", REJECTED, ids=[t for _, t in REJECTED])
def test_rejected_like_iree_run_module(identity, function, text):
    code, _, stderr = reference_run(identity, function, f"--input={text}")
    assert code != 0
    with pytest.raises(HalError) as info:
        parse_buffer_view(text, HeapAllocator())
    assert info.value.code.name in stderr


@pytest.mark.parametrize("count", [0, 2, 4, 7])
def test_max_element_count_matches_iree_run_module(identity, count):
    text = "2x3xf32=1 2 3 4 5 6"
    _, lines, _ = reference_run(identity, "f32_2x3", f"--input={text}",
                                f"--output_max_element_count={count}")
    assert format_buffer_view(parse_buffer_view(text, HeapAllocator()), count) == lines[1]


def test_shapes_and_element_types():
    assert parse_shape("") == () and parse_shape("2x0x5") == (2, 0, 5)
    for bad in ("2xx3", "-1", "2x3x"):
        with pytest.raises(HalError):
            parse_shape(bad)
    for name in ("f32", "f16", "bf16", "i1", "i4", "si8", "ui64", "cf64", "f8E4M3FN", "x32"):
        assert format_element_type(parse_element_type(name)) == name.replace("x32", "*32")
    assert parse_element_type("*16") == E.OPAQUE_16
    assert parse_shape_and_type("4x2xi32=1 2") == ((4, 2), E.INT_32)
    assert parse_shape_and_type("f64") == ((), E.FLOAT_64)
    with pytest.raises(HalError) as info:
        parse_element_type("z32")
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_element_parsing_rules():
    assert parse_elements("5", E.INT_16, 3) == b"\x05\x00" * 3  # splat
    assert parse_elements("", E.INT_8, 4) == bytes(4)
    assert parse_elements("[1,2],[3 4]", E.UINT_8, 4) == bytes([1, 2, 3, 4])
    assert parse_elements("0A FF", E.OPAQUE_8, 2) == b"\x0a\xff"
    with pytest.raises(HalError) as info:
        parse_elements("1 2 3", E.INT_8, 2)
    assert info.value.code == StatusCode.OUT_OF_RANGE


def test_formatting_nests_rows_and_cuts_after_the_element_budget():
    data = np.arange(12, dtype=np.int32).tobytes()
    assert format_elements(data, (2, 2, 3), E.INT_32) == "[[0 1 2][3 4 5]][[6 7 8][9 10 11]]"
    assert format_elements(data, (2, 6), E.INT_32, 8) == "[0 1 2 3 4 5][6 7...]"
    assert format_elements(np.float32([math.nan]).tobytes(), (), E.FLOAT_32) == "NAN"
    with pytest.raises(HalError) as info:
        format_elements(b"\0" * 4, (2,), E.INT_32)
    assert info.value.code == StatusCode.OUT_OF_RANGE


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint8", "int16",
                                   "int32", "uint32", "int64", "bool", "complex64"])
def test_numpy_round_trip(dtype):
    array = (np.arange(6).reshape(2, 3) % 2 if dtype == "bool" else
             np.arange(6).reshape(2, 3) * 3 - 4).astype(dtype)
    view = buffer_view_from_numpy(array, HeapAllocator())
    assert view.shape == (2, 3)
    back = buffer_view_to_numpy(view)
    assert back.dtype == array.dtype and np.array_equal(back, array)


def test_numpy_inputs_need_not_be_contiguous():
    array = np.arange(12, dtype=np.float32).reshape(3, 4).T
    view = buffer_view_from_numpy(array, HeapAllocator())
    assert format_buffer_view(view) == "4x3xf32=[0 4 8][1 5 9][2 6 10][3 7 11]"


def test_tool_inputs_from_files(tmp_path):
    allocator = HeapAllocator()
    first, second = np.float32([1, 2]), np.int8([[3], [4]])
    with open(tmp_path / "two.npy", "wb") as stream:
        np.save(stream, first)
        np.save(stream, second)
    (tmp_path / "raw.bin").write_bytes(np.int32([7, 8, 9]).tobytes())
    with InputStreams() as streams:
        (a,) = parse_tensor_input(f"@{tmp_path}/two.npy", allocator, streams)
        (b,) = parse_tensor_input(f"+{tmp_path}/two.npy", allocator, streams)
        assert format_buffer_view(a) == "2xf32=1 2" and format_buffer_view(b) == "2x1xsi8=[3][4]"
        # `*` continues where the file stopped (like `+`) and reads every array left.
        assert parse_tensor_input(f"*{tmp_path}/two.npy", allocator, streams) == []
    with InputStreams() as streams:
        both = parse_tensor_input(f"*{tmp_path}/two.npy", allocator, streams)
        assert [v.shape for v in both] == [(2,), (2, 1)]
        (raw,) = parse_tensor_input(f"2xi32=@{tmp_path}/raw.bin", allocator, streams)
        (rest,) = parse_tensor_input(f"1xi32=+{tmp_path}/raw.bin", allocator, streams)
        assert format_buffer_view(raw) == "2xi32=7 8" and format_buffer_view(rest) == "1xi32=9"
        (storage,) = parse_tensor_input("&2xi8=1 2", allocator, streams)
        assert storage.byte_length == 2
        assert parse_tensor_input("(null)", allocator, streams) == [None]
        for bad in ("@data.txt", "7"):
            with pytest.raises(HalError):
                parse_tensor_input(bad, allocator, streams)


def test_scalars_parse_like_iree_run_module():
    assert parse_scalar("0x10", "i") == 16 and parse_scalar("4294967295", "i") == -1
    assert parse_scalar("-1", "I") == -1 and parse_scalar("1e3", "F") == 1000.0
    assert parse_scalar("0.1", "f") == np.float32(0.1)
    with pytest.raises(HalError) as info:
        parse_scalar("abc", "i")
    assert info.value.message == "parsing value `abc` as i32"


def test_result_lines():
    view = parse_buffer_view("1x3xf32=0.170226 0.071629 0.758145", HeapAllocator())
    assert format_result(0, view) == \
        "result[0]: hal.buffer_view\n1x3xf32=[0.170226 0.071629 0.758145]"
    assert format_result(2, None) == "result[2]: (null)"
