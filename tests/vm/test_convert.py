"""int <-> float conversions, f32 <-> f64, and bitcasts, differential against
iree.runtime, with huge, negative, fractional (ties), NaN and infinite inputs.

Upstream converts float -> int with lroundf/llroundf/lround/llround (round half
away from zero, and the f64 -> i32 casts narrow the double to float first), so
out-of-range inputs give whatever x86 gives; the reference decides."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from differential import (
    I32_MAX, I32_MIN, I64_MAX, I64_MIN, Pair, f32_from_bits, f64_bits, f64_from_bits,
    module_source, op_function, s32, s64,
)

NAN, INF = math.nan, math.inf

INT_TO_FLOAT = [("si32", "i32"), ("ui32", "i32"), ("si64", "i64"), ("ui64", "i64")]
FLOAT_TO_INT = INT_TO_FLOAT

I32_INPUTS = [0, 1, -1, 7, -7, 1 << 24, (1 << 24) + 1, (1 << 24) + 3, -(1 << 24) - 1,
              (1 << 25) + 2, (1 << 25) + 6, 0x7FFFFFC0, 0x7FFFFF80, 0x7FFFFFBF, I32_MAX,
              I32_MIN, I32_MIN + 1, 123456789]
I64_INPUTS = I32_INPUTS + [1 << 53, (1 << 53) + 1, (1 << 53) + 3, -(1 << 53) - 1,
                           (1 << 54) + 2, I64_MAX, I64_MIN, I64_MIN + 1, I64_MAX - 511,
                           I64_MAX - 512, (1 << 63) - (1 << 39), 0x123456789ABCDEF,
                           -0x123456789ABCDEF, (1 << 32), (1 << 32) + 1]
FLOAT_INPUTS = [0.0, -0.0, 0.4, 0.5, -0.5, 0.6, 1.5, 2.5, -2.5, 3.49, -3.5, 1e-30, 100.7,
                2147483520.0, 2147483647.0, 2147483648.0, 2147483648.5, -2147483648.0,
                -2147483904.0, 4294967295.0, 4294967296.0, 4294967296.5e1, -4294967296.0,
                9.2233715e18, 9223372036854775807.0, 9223372036854775808.0,
                -9223372036854775808.0, -9.3e18, 1.8446743e19, 18446744073709551615.0,
                18446744073709551616.0, 3.6893488e19, 1e30, -1e30, 1e300, -1e300, INF, -INF,
                NAN, -NAN, 16777217.0, 4503599627370497.0, 0.49999999999999994, -1.0,
                -1.5, -0.6]


def _source() -> str:
    fns = []
    for name, it in INT_TO_FLOAT:
        for ft in ("f32", "f64"):
            fns.append(op_function(f"{name}_to_{ft}", f"vm.cast.{name}.{ft}", [it], ft))
            fns.append(op_function(f"{ft}_to_{name}", f"vm.cast.{ft}.{name}", [ft], it))
    fns.append(op_function("trunc_f64_f32", "vm.trunc.f64.f32", ["f64"], "f32"))
    fns.append(op_function("ext_f32_f64", "vm.ext.f32.f64", ["f32"], "f64"))
    fns.append(op_function("bitcast_i32_f32", "vm.bitcast.i32.f32", ["i32"], "f32"))
    fns.append(op_function("bitcast_f32_i32", "vm.bitcast.f32.i32", ["f32"], "i32"))
    fns.append(op_function("bitcast_i64_f64", "vm.bitcast.i64.f64", ["i64"], "f64"))
    fns.append(op_function("bitcast_f64_i64", "vm.bitcast.f64.i64", ["f64"], "i64"))
    fns.append("""vm.export @roundtrip32
vm.func @roundtrip32(%i0: i32) -> (i32, i32, i32) {
^bb0:
  %i1 = vm.bitcast.i32.f32 %i0
  %i2 = vm.bitcast.f32.i32 %i1
  %i3 = vm.neg.f32 %i1
  %i3 = vm.bitcast.f32.i32 %i3
  %i4 = vm.const.i32 1
  %i5 = vm.select.f32 %i4 ? %i1 : %i1
  %i5 = vm.abs.f32 %i5
  %i5 = vm.bitcast.f32.i32 %i5
  vm.return %i2, %i3, %i5
}
""")
    fns.append("""vm.export @roundtrip64
vm.func @roundtrip64(%i0:1: i64) -> (i64, i64) {
^bb0:
  %i2:3 = vm.bitcast.i64.f64 %i0:1
  %i4:5 = vm.bitcast.f64.i64 %i2:3
  %i2:3 = vm.neg.f64 %i2:3
  %i6:7 = vm.bitcast.f64.i64 %i2:3
  vm.return %i4:5, %i6:7
}
""")
    # f32 -> f64 -> f32 through the registers, returned as bits.
    fns.append("""vm.export @widen_narrow
vm.func @widen_narrow(%i0: i32) -> (i64, i32) {
^bb0:
  %i1 = vm.bitcast.i32.f32 %i0
  %i2:3 = vm.ext.f32.f64 %i1
  %i4:5 = vm.bitcast.f64.i64 %i2:3
  %i6 = vm.trunc.f64.f32 %i2:3
  %i6 = vm.bitcast.f32.i32 %i6
  vm.return %i4:5, %i6
}
""")
    return module_source("convert", fns)


@pytest.fixture(scope="module")
def conv(builder):
    return Pair(builder.build(_source()))


@pytest.mark.parametrize("ft", ["f32", "f64"])
@pytest.mark.parametrize("name, it", INT_TO_FLOAT)
def test_int_to_float(conv, name, it, ft):
    for v in (I32_INPUTS if it == "i32" else I64_INPUTS):
        conv.check(f"{name}_to_{ft}", v)


def test_int_to_float_rounds_once_to_nearest_even(conv):
    assert conv.check("si32_to_f32", (1 << 24) + 1).values == (16777216.0,)
    assert conv.check("si32_to_f32", (1 << 24) + 3).values == (16777220.0,)
    assert conv.check("si32_to_f32", I32_MAX).values == (2147483648.0,)
    assert conv.check("ui32_to_f32", -1).values == (4294967296.0,)
    assert conv.check("ui32_to_f64", -1).values == (4294967295.0,)
    assert conv.check("ui64_to_f64", -1).values == (18446744073709551616.0,)
    assert conv.check("si64_to_f64", (1 << 53) + 1).values == (9007199254740992.0,)
    assert conv.check("ui64_to_f32", I64_MIN).values == (9223372036854775808.0,)
    # 2**63 - 2**38 is the exact midpoint between two f32s: ties go to even.
    assert conv.check("si64_to_f32", (1 << 63) - (1 << 38)).values == (9223372036854775808.0,)
    assert conv.check("si64_to_f32", (1 << 63) - 3 * (1 << 38)).values == (
        float((1 << 63) - 4 * (1 << 38)),)


@pytest.mark.parametrize("ft", ["f32", "f64"])
@pytest.mark.parametrize("name, it", FLOAT_TO_INT)
def test_float_to_int(conv, name, it, ft):
    for x in FLOAT_INPUTS:
        conv.check(f"{ft}_to_{name}", x)


def test_float_to_int_rounds_half_away_from_zero(conv):
    for ft in ("f32", "f64"):
        for name in ("si32", "si64", "ui32", "ui64"):
            assert conv.check(f"{ft}_to_{name}", 2.5).values == (3,)
            assert conv.check(f"{ft}_to_{name}", 0.4).values == (0,)
        assert conv.check(f"{ft}_to_si32", -2.5).values == (-3,)
        assert conv.check(f"{ft}_to_si64", -0.5).values == (-1,)


def test_float_to_int_out_of_range(conv):
    # lround of NaN/inf/out-of-range is LONG_MIN on x86-64; truncated to 32 bits it is 0.
    assert conv.check("f32_to_si32", NAN).values == (0,)
    assert conv.check("f32_to_si64", INF).values == (I64_MIN,)
    assert conv.check("f32_to_si32", 4294967296.0).values == (0,)
    assert conv.check("f32_to_si32", 3e9).values == (s32(3000000000),)
    assert conv.check("f32_to_ui32", 3e9).values == (s32(3000000000),)
    assert conv.check("f32_to_ui32", -1.0).values == (-1,)
    # The f64 -> i32 casts go through lroundf: the double is rounded to float first.
    assert conv.check("f64_to_si32", 16777217.0).values == (16777216,)
    # 2**31 - 1 narrows to the float 2**31, which lroundf gives as a long; the
    # truncation to 32 bits makes it INT_MIN.
    assert conv.check("f64_to_si32", 2147483647.0).values == (I32_MIN,)


def test_f32_to_ui64_beyond_the_signed_range(conv):
    # (uint64_t)roundf(x): 2**63 <= x < 2**64 converts through the unsigned path.
    assert conv.check("f32_to_ui64", 9223372036854775808.0).values == (I64_MIN,)
    assert conv.check("f32_to_ui64", 1.8446743e19).values == (s64(18446742974197923840),)
    conv.check("f32_to_ui64", 18446744073709551616.0)
    conv.check("f32_to_ui64", -1.0)
    conv.check("f64_to_ui64", 18446744073709551616.0)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                 st.floats(min_value=-1e20, max_value=1e20),
                 st.integers(-(1 << 64), 1 << 64).map(float),
                 st.integers(-(1 << 20), 1 << 20).map(lambda k: k / 2)))
def test_random_float_to_int(conv, x):
    for ft in ("f32", "f64"):
        for name, _ in FLOAT_TO_INT:
            conv.check(f"{ft}_to_{name}", x)


@settings(max_examples=300, deadline=None)
@given(st.integers(I64_MIN, I64_MAX))
def test_random_int_to_float(conv, v):
    for ft in ("f32", "f64"):
        conv.check(f"si64_to_{ft}", v)
        conv.check(f"ui64_to_{ft}", v)
        conv.check(f"si32_to_{ft}", s32(v))
        conv.check(f"ui32_to_{ft}", s32(v))


def test_f32_f64(conv):
    for x in FLOAT_INPUTS + [1.0 + 2.0 ** -24, 1.0 + 3 * 2.0 ** -24, 3.4028235e38,
                             3.4028236e38, 1e-46, 7e-46, 1.401298464324817e-45]:
        conv.check("trunc_f64_f32", x)
        conv.check("ext_f32_f64", x)
    assert conv.check("trunc_f64_f32", 1.0 + 2.0 ** -24).values == (1.0,)
    assert conv.check("trunc_f64_f32", 3.5e38).values == (INF,)
    assert conv.check("trunc_f64_f32", 8e-46).values == (1.401298464324817e-45,)
    assert conv.check("trunc_f64_f32", 7e-46).values == (0.0,)      # below half the tiniest


SPECIAL_BITS32 = [0, 1, 0x80000000, 0x80000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0x7F7FFFFF,
                  0x7F800000, 0xFF800000, 0x7F800001, 0x7FA00000, 0x7FBFFFFF, 0x7FC00000,
                  0x7FC00001, 0x7FFFFFFF, 0xFF800001, 0xFFC00000, 0xFFFFFFFF]


def test_bitcasts(conv):
    for bits in SPECIAL_BITS32:
        conv.check("bitcast_i32_f32", bits)
        conv.check("bitcast_f32_i32", f32_from_bits(bits))
    for bits in (0, 1, 1 << 63, 0x7FF0000000000000, 0x7FF0000000000001, 0x7FF8000000000000,
                 0xFFFFFFFFFFFFFFFF, 0x3FF0000000000000, 0x000FFFFFFFFFFFFF):
        conv.check("bitcast_i64_f64", s64(bits))
        conv.check("bitcast_f64_i64", f64_from_bits(bits))
    assert conv.check("bitcast_i32_f32", 0x3F800000).values == (1.0,)
    assert conv.check("bitcast_f32_i32", -0.0).values == (I32_MIN,)
    assert conv.check("bitcast_i64_f64", s64(0x8000000000000000)).values[0] == 0.0
    assert f64_bits(conv.ours("bitcast_i64_f64", I64_MIN).values[0]) == 1 << 63


def test_bitcast_round_trips_keep_every_bit(conv):
    # Signalling NaNs included: bitcast, neg, abs and select must not quiet them.
    for bits in SPECIAL_BITS32:
        ours = conv.check("roundtrip32", bits).values
        assert ours[0] == s32(bits)
        assert ours[1] == s32(bits ^ 0x80000000)
        assert ours[2] == s32(bits & 0x7FFFFFFF)
    for bits in (0x7FF0000000000001, 0xFFF4000000000000, 0x7FF8000000000000, 1, 1 << 63):
        ours = conv.check("roundtrip64", s64(bits)).values
        assert ours == (s64(bits), s64(bits ^ (1 << 63)))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFFFFFFFFFF))
def test_random_bitcast_round_trips(conv, b32, b64):
    assert conv.check("roundtrip32", b32).values[0] == s32(b32)
    assert conv.check("roundtrip64", s64(b64)).values[0] == s64(b64)


def test_widening_and_narrowing_nans(conv):
    # ext.f32.f64 and trunc.f64.f32 are C conversions: they quiet signalling NaNs.
    for bits in SPECIAL_BITS32:
        conv.check("widen_narrow", bits)
