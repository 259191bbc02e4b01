"""vmrt.elements: `SHAPExTYPE=VALUE` parsing, value encoding and narrow floats, as
IREE's tools read them (the HAL, `vmrt run` and `vmrt params` share them)."""

import math
import struct

import numpy as np
import pytest

from vmrt.elements import NumericalType as N
from vmrt.elements import (
    FloatFormat, element_bit_count, element_numerical_type, from_f32, parse_element,
    parse_element_type, parse_shape_and_type,
)
from vmrt.errors import StatusCode, VmrtError
from vmrt.tools.params import parse_parameter_decl, parse_splat_value


def f32_to_small_float(value, *params):
    return from_f32(value, FloatFormat(*params))


def encode_element(text, element_type):
    return parse_element(text, element_type)


@pytest.mark.parametrize("text, kind, bits", [
    ("i1", N.BOOLEAN, 8), ("i8", N.INTEGER, 8), ("si16", N.INTEGER_SIGNED, 16),
    ("ui32", N.INTEGER_UNSIGNED, 32), ("f16", N.FLOAT_IEEE, 16), ("bf16", N.FLOAT_BRAIN, 16),
    ("f64", N.FLOAT_IEEE, 64), ("cf64", N.FLOAT_COMPLEX, 64), ("x32", N.UNKNOWN, 32),
    ("*8", N.UNKNOWN, 8), ("f8E4M3FN", N.FLOAT_8_E4M3FN, 8),
])
def test_element_types(text, kind, bits):
    element_type = parse_element_type(text)
    assert (element_numerical_type(element_type), element_bit_count(element_type)) == \
        (kind, bits)


@pytest.mark.parametrize("text", ["q8", "i", "f1000", "ix", ""])
def test_bad_element_types(text):
    with pytest.raises(VmrtError) as info:
        parse_element_type(text)
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_shapes():
    assert parse_shape_and_type("4096x1024xi64") == ((4096, 1024),
                                                     parse_element_type("i64"))
    assert parse_shape_and_type("f32")[0] == ()
    assert parse_shape_and_type(' "2x0xi8" ')[0] == (2, 0)
    for bad in ("", "2xxi8", "-1xi8", "axi8", "2x"):
        with pytest.raises(VmrtError):
            parse_shape_and_type(bad)


@pytest.mark.parametrize("text, etype, expected", [
    ("102", "i8", b"\x66"), ("-1", "i8", b"\xff"), ("255", "i8", b"\xff"),
    ("0x2A", "i16", b"\x2a\x00"), ("052", "i32", struct.pack("<i", 42)),
    ("-7", "si64", struct.pack("<q", -7)), ("65535", "ui16", b"\xff\xff"),
    ("9223372036854775807", "i64", struct.pack("<q", 2 ** 63 - 1)),
    ("18446744073709551615", "ui64", b"\xff" * 8),
    ("100.1", "f32", struct.pack("<f", 100.1)), ("2.5", "f64", struct.pack("<d", 2.5)),
    ("1e39", "f32", struct.pack("<f", math.inf)),
    ("1.5", "f16", np.float16(1.5).tobytes()), ("1.5", "bf16", b"\xc0\x3f"),
    ("CAFEF00D", "x32", b"\xca\xfe\xf0\x0d"), ("01", "i1", b"\x01"),
    ("2", "f8E8M0FNU", bytes([128])),
])
def test_values(text, etype, expected):
    assert encode_element(text, parse_element_type(etype)) == expected


@pytest.mark.parametrize("text, etype", [
    ("256", "i8"), ("-129", "i8"), ("128", "si8"), ("-1", "ui8"), ("one", "f32"),
    ("CAFE", "x32"), ("zz", "x8"), ("0x1FFFFFFFFFFFFFFFF", "i64"), ("", "i32"),
])
def test_bad_values(text, etype):
    with pytest.raises(VmrtError) as info:
        encode_element(text, parse_element_type(etype))
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_values_are_c_numbers_as_iree_reads_them():
    # iree_string_view_atoi_int32 keeps the low 32 bits of a C long and reads the
    # longest number at the start of the text (strtol), as iree-run-module does.
    assert encode_element("2147483648", parse_element_type("i32")) == struct.pack("<i", -2 ** 31)
    assert encode_element("12abc", parse_element_type("i32")) == struct.pack("<i", 12)


def test_narrow_floats_round_like_ieee_round_to_nearest_even():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.normal(0, 4, 2000), rng.normal(0, 1e-3, 500),
                             [0.0, -0.0, 1.0, -2.5, 0.0625, 65504.0, 1e-7]]).astype(np.float32)
    cases = [
        ((5, 10, True, True, 0, False), np.float16, 16, 60000),
        ((8, 7, True, True, 0, False), ml_dtypes.bfloat16, 16, 1e30),
        ((5, 2, True, True, 0, False), ml_dtypes.float8_e5m2, 8, 57000),
        ((4, 3, False, True, 0, False), ml_dtypes.float8_e4m3fn, 8, 440),
        ((5, 2, False, True, 1, True), ml_dtypes.float8_e5m2fnuz, 8, 57000),
        ((4, 3, False, True, 1, True), ml_dtypes.float8_e4m3fnuz, 8, 240),
    ]
    for params, dtype, bits, limit in cases:
        exp_bits, mantissa_bits, _, _, bias_tweak, _ = params
        smallest = 2.0 ** (2 - (1 << (exp_bits - 1)) - bias_tweak - mantissa_bits)
        # Below half the smallest subnormal IREE flushes to zero without rounding
        # (see test_iree_flushes_below_the_smallest_subnormal); compare above it.
        finite = values[(np.abs(values) < limit) & ((np.abs(values) >= smallest) | (values == 0))]
        expected = finite.astype(dtype).view(np.uint16 if bits == 16 else np.uint8)
        ours = [f32_to_small_float(float(v), *params) for v in finite]
        # -0 -> +0 in the FNUZ types (which have no negative zero).
        assert ours == [int(e) for e in expected], dtype


def test_parameter_declarations():
    decl = parse_parameter_decl("key3=4096x1024xi64=103")
    assert decl.name == "key3" and decl.length == 33554432
    assert decl.pattern == struct.pack("<q", 103)
    zero = parse_parameter_decl("z=3x5xf16")
    assert zero.length == 30 and zero.pattern == b"\0"
    assert parse_parameter_decl("s=i8=5").length == 1
    for bad in ("noshape", "w=4xi4=1", "w=4xcf256=00", "w=4xf32=x"):
        with pytest.raises(VmrtError):
            parse_parameter_decl(bad)


def test_splat_values():
    assert parse_splat_value("") == b"\0"
    assert parse_splat_value("f32=4.5") == struct.pack("<f", 4.5)
    assert parse_splat_value("x32=CAFEF00D") == b"\xca\xfe\xf0\x0d"
    with pytest.raises(VmrtError):
        parse_splat_value("f32")


def test_iree_flushes_below_the_smallest_subnormal():
    # 1.26e-5 lies between half the smallest f8E5M2 subnormal (2^-17) and it (2^-16):
    # IEEE rounds it up to the subnormal; IREE's converter (and so vmrt) gives zero.
    assert f32_to_small_float(1.2643744e-05, 5, 2, True, True, 0, False) == 0
    assert f32_to_small_float(-1.2643744e-05, 5, 2, True, True, 0, False) == 0x80
    assert f32_to_small_float(2.0 ** -16, 5, 2, True, True, 0, False) == 1


def test_special_values_follow_iree():
    inf, nan = float("inf"), float("nan")
    assert f32_to_small_float(inf, 5, 10, True, True, 0, False) == 0x7C00
    assert f32_to_small_float(nan, 5, 10, True, True, 0, False) == 0x7FFF
    assert f32_to_small_float(1e6, 4, 3, False, True, 0, False) == 0x7F    # overflow -> NaN
    assert f32_to_small_float(nan, 4, 3, False, True, 1, True) == 0x80     # NaN is -0
    assert f32_to_small_float(-0.0, 4, 3, False, True, 1, True) == 0       # no -0
