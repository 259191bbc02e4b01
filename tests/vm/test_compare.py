"""Comparisons, differential against iree.runtime: i32/i64 eq/ne/lt (signed and
unsigned)/nz, and every ordered and unordered f32/f64 comparison, with NaN,
signed zeros, infinities and subnormals."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings, strategies as st

from differential import (
    I32_MAX, I32_MIN, I64_MAX, I64_MIN, Pair, f32_from_bits, f64_from_bits, module_source,
    op_function,
)

INT_OPS = ["eq", "ne", "lt.s", "lt.u"]
FLOAT_OPS = ["eq.o", "eq.u", "ne.o", "ne.u", "lt.o", "lt.u", "lte.o", "lte.u"]
NAN = math.nan
INF = math.inf

F32_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.5, 3.0, INF, -INF, NAN, -NAN,
              f32_from_bits(1), f32_from_bits(0x80000001), f32_from_bits(0x00800000),
              f32_from_bits(0x7F7FFFFF), f32_from_bits(0xFF7FFFFF), f32_from_bits(0x7FC12345),
              f32_from_bits(0x3F800001)]
F64_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e300, -1e300, INF, -INF, NAN, -NAN,
              f64_from_bits(1), f64_from_bits(0x8000000000000001), 2.2250738585072014e-308,
              1.7976931348623157e308, 1.0000000000000002, 1.0000000596046448,
              f64_from_bits(0x7FF8000000000ABC)]


def _source() -> str:
    fns = []
    for ty in ("i32", "i64"):
        for op in INT_OPS:
            base, _, sign = op.partition(".")
            m = f"vm.cmp.{base}.{ty}" + (f".{sign}" if sign else "")
            fns.append(op_function(f"{base}_{sign or 'x'}_{ty}", m, [ty, ty], "i32"))
        fns.append(op_function(f"nz_{ty}", f"vm.cmp.nz.{ty}", [ty], "i32"))
    for ty in ("f32", "f64"):
        for op in FLOAT_OPS:
            base, _, order = op.partition(".")
            fns.append(op_function(f"{base}_{order}_{ty}", f"vm.cmp.{base}.{ty}.{order}",
                                   [ty, ty], "i32"))
        fns.append(op_function(f"nan_{ty}", f"vm.cmp.nan.{ty}", [ty], "i32"))
    return module_source("compare", fns)


@pytest.fixture(scope="module")
def cmp(builder):
    return Pair(builder.build(_source()))


def int_export(op, ty):
    base, _, sign = op.partition(".")
    return f"{base}_{sign or 'x'}_{ty}"


I32_VALUES = [0, 1, -1, 2, -2, I32_MAX, I32_MIN, I32_MAX - 1, I32_MIN + 1, 0x7FFF, -0x8000]
I64_VALUES = [0, 1, -1, 2, I32_MAX, I32_MIN, 1 << 32, -(1 << 32), (1 << 32) - 1, I64_MAX,
              I64_MIN, I64_MAX - 1, I64_MIN + 1]


@pytest.mark.parametrize("ty", ["i32", "i64"])
@pytest.mark.parametrize("op", INT_OPS)
def test_int_comparisons(cmp, op, ty):
    values = I32_VALUES if ty == "i32" else I64_VALUES
    for a, b in itertools.product(values, repeat=2):
        cmp.check(int_export(op, ty), a, b)


def test_int_comparison_examples(cmp):
    assert cmp.check("lt_s_i32", -1, 0).values == (1,)
    assert cmp.check("lt_u_i32", -1, 0).values == (0,)
    assert cmp.check("lt_u_i32", 0, -1).values == (1,)
    assert cmp.check("lt_s_i64", I64_MIN, I64_MAX).values == (1,)
    assert cmp.check("lt_u_i64", I64_MIN, I64_MAX).values == (0,)
    assert cmp.check("eq_x_i64", 1 << 32, 0).values == (0,)   # the high half counts
    assert cmp.check("ne_x_i64", 1 << 32, 0).values == (1,)


@pytest.mark.parametrize("ty", ["i32", "i64"])
def test_nz(cmp, ty):
    for v in (I32_VALUES if ty == "i32" else I64_VALUES):
        assert cmp.check(f"nz_{ty}", v).values == (int(v != 0),)
    assert cmp.check("nz_i64", 1 << 40).values == (1,)


@settings(max_examples=200, deadline=None)
@given(st.integers(I64_MIN, I64_MAX), st.integers(I64_MIN, I64_MAX))
def test_random_int_comparisons(cmp, a, b):
    for op in INT_OPS:
        cmp.check(int_export(op, "i64"), a, b)
        cmp.check(int_export(op, "i32"), a & 0xFFFFFFFF, b & 0xFFFFFFFF)


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("op", FLOAT_OPS)
def test_float_comparisons(cmp, op, ty):
    base, _, order = op.partition(".")
    values = F32_VALUES if ty == "f32" else F64_VALUES
    for a, b in itertools.product(values, repeat=2):
        cmp.check(f"{base}_{order}_{ty}", a, b)


@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_nan_makes_ordered_false_and_unordered_true(cmp, ty):
    for op in FLOAT_OPS:
        base, _, order = op.partition(".")
        name = f"{base}_{order}_{ty}"
        for a, b in ((NAN, 1.0), (1.0, NAN), (NAN, NAN), (-NAN, INF)):
            expected = 1 if order == "u" else 0
            if base == "ne" and order == "o":
                # C's != is true for NaN: upstream's "ordered" ne is plain `lhs != rhs`.
                expected = 1
            assert cmp.check(name, a, b).values == (expected,), (name, a, b)


@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_signed_zeros_compare_equal(cmp, ty):
    assert cmp.check(f"eq_o_{ty}", 0.0, -0.0).values == (1,)
    assert cmp.check(f"lt_o_{ty}", -0.0, 0.0).values == (0,)
    assert cmp.check(f"lte_o_{ty}", 0.0, -0.0).values == (1,)


@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_cmp_nan(cmp, ty):
    values = F32_VALUES if ty == "f32" else F64_VALUES
    for v in values:
        assert cmp.check(f"nan_{ty}", v).values == (int(v != v),)


def test_f32_arguments_round_before_comparing(cmp):
    # 1 + 2**-30 is not an f32: the argument rounds to 1.0 in both VMs.
    assert cmp.check("eq_o_f32", 1.0 + 2.0 ** -30, 1.0).values == (1,)
    assert cmp.check("eq_o_f64", 1.0 + 2.0 ** -30, 1.0).values == (0,)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFF))
def test_random_f32_comparisons(cmp, a, b):
    x, y = f32_from_bits(a), f32_from_bits(b)
    for op in FLOAT_OPS:
        base, _, order = op.partition(".")
        cmp.check(f"{base}_{order}_f32", x, y)
