"""Globals, differential against iree.runtime (program: tests/vm/vmasm/globals.vmasm):
i32/i64/f32/f64 globals loaded and stored directly and indirectly (computed and
unaligned byte offsets, overlapping views), __init initial values, state kept
across invocations, ref globals (direct and indirect, null, wrong type) and
out-of-range indirect access."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import given, settings, strategies as st

from differential import (
    I32_MIN, I64_MAX, I64_MIN, Pair, f64_bits, s32, s64, to_f32,
)

# Layout chosen by the assembler (see the program's header).
A_I32, B_F32, C_I32, PAD, D_I64, E_F64, SIZE = 0, 4, 8, 12, 16, 24, 32


@pytest.fixture
def glb(builder):
    """A fresh context (fresh globals) per test."""
    return Pair(builder.build_file("globals.vmasm"))


def test_initial_values_from_init(glb):
    out = glb.check("get_all").values
    assert out == (-81985529216486896, -2.5e-300, -17, to_f32(0.1), 0, 0)


def test_direct_store_and_load(glb):
    glb.check("set_all", I64_MIN, -0.0, 0x7FFFFFFF, 1e-45, -1)
    out = glb.check("get_all").values
    assert out[0] == I64_MIN and f64_bits(out[1]) == f64_bits(-0.0)
    assert out[2:5] == (0x7FFFFFFF, 1.401298464324817e-45, -1)
    glb.check("set_all", 1, math.nan, 2, math.inf, 3)
    glb.check("get_all")


def test_f32_global_rounds_the_stored_value(glb):
    glb.check("set_all", 0, 0.0, 0, 0.1, 0)        # the argument is already an f32
    assert glb.check("load_f32", B_F32).values == (to_f32(0.1),)


def test_indirect_matches_direct(glb):
    assert glb.check("load_i32", A_I32).values == (-17,)
    assert glb.check("load_i64", D_I64).values == (-81985529216486896,)
    assert glb.check("load_f64", E_F64).values == (-2.5e-300,)
    glb.check("store_i32", C_I32, 1234)
    glb.check("store_i64", 1 << 50, D_I64)
    glb.check("store_f32", B_F32, -3.5)
    glb.check("store_f64", 1e300, E_F64)
    assert glb.check("get_all").values == (1 << 50, 1e300, -17, -3.5, 1234, 0)


def test_views_overlap_little_endian(glb):
    glb.check("store_i64", s64(0x1122334455667788), D_I64)
    assert glb.check("load_i32", D_I64).values == (0x55667788,)
    assert glb.check("load_i32", D_I64 + 4).values == (0x11223344,)
    glb.check("store_i32", D_I64 + 4, -1)
    assert glb.check("load_i64", D_I64).values == (s64(0xFFFFFFFF55667788),)
    glb.check("store_f64", 1.0, E_F64)
    assert glb.check("load_i64", E_F64).values == (0x3FF0000000000000,)
    assert glb.check("load_f32", E_F64 + 4).values == (1.875,)   # 0x3FF00000 as f32


def test_unaligned_indirect_access(glb):
    glb.check("store_i64", s64(0x0102030405060708), 16)
    for offset in (1, 2, 3, 5, 13, 17, 22, 28):
        glb.check("load_i32", offset)
    for offset in (4, 6, 9, 20, 23, 24):
        glb.check("load_i64", offset)
        glb.check("load_f64", offset)
    glb.check("store_i64", -2, 3)
    glb.check("store_f32", 14, 2.5)
    glb.check("get_all")
    for offset in range(0, SIZE - 3):
        glb.check("load_i32", offset)


@pytest.mark.parametrize("name, width", [("i32", 4), ("i64", 8), ("f32", 4), ("f64", 8)])
def test_indirect_out_of_range(glb, name, width):
    first_bad = SIZE - 3 if name == "f64" else SIZE - width + 1   # see the f64 test below
    for offset in (first_bad, SIZE, SIZE + 100, 1 << 20, 0x7FFFFFFF):
        out = glb.check(f"load_{name}", offset)
        assert not out.ok and out.code == "OUT_OF_RANGE"
    store_args = {"i32": (SIZE, 1), "i64": (1, SIZE - 4), "f32": (SIZE - 2, 1.0),
                  "f64": (1.0, SIZE - 2)}[name]
    out = glb.check(f"store_{name}", *store_args)
    assert not out.ok and out.code == "OUT_OF_RANGE"
    # The state is unchanged and the context still works.
    assert glb.check("load_i32", A_I32).values == (-17,)


@pytest.mark.parametrize("offset", [SIZE - 7, SIZE - 5, SIZE - 4])
def test_f64_indirect_access_past_the_end(glb, offset):
    # vmrt only: upstream checks f64 indirect offsets with `offset + 4 > size`
    # (a copy of the f32 check), so these read/write 4 bytes past the globals.
    assert glb.ours("load_f64", offset).code == "OUT_OF_RANGE"
    assert glb.ours("store_f64", 1.0, offset).code == "OUT_OF_RANGE"
    assert glb.ours("load_i64", offset).code == "OUT_OF_RANGE"
    assert glb.check("load_i64", offset).code == "OUT_OF_RANGE"   # i64 is checked right


@pytest.mark.parametrize("offset", [-1, -4, -8, I32_MIN])
def test_negative_indirect_offsets_are_out_of_range(glb, offset):
    # vmrt only: upstream treats the offset as uint32 and checks `offset + 4 >
    # size` without overflow, so -1 would pass the check and read far outside
    # the globals (undefined behaviour; not sent to the reference).
    for name in ("i32", "i64", "f32", "f64"):
        out = glb.ours(f"load_{name}", offset)
        assert not out.ok and out.code == "OUT_OF_RANGE"


def test_state_persists_across_invocations(glb):
    assert [glb.check("bump", k).values[0] for k in (1, 2, 3)] == [1, 3, 6]
    assert glb.check("bump", 0x7FFFFFFF).values == (s32(6 + 0x7FFFFFFF),)


def test_contexts_do_not_share_globals(builder):
    one = Pair(builder.build_file("globals.vmasm"), reference=False)
    two = Pair(builder.build_file("globals.vmasm"), reference=False)
    one.ours("bump", 5)
    assert two.ours("bump", 1).values == (1,)
    assert one.ours("bump", 1).values == (6,)


F32_BITS = [0, 0x80000000, 1, 0x3F800000, 0x7F800000, 0x7FC00000, 0xFFC00001, 0x7F7FFFFF]
SNAN_BITS = [0x7F800001, 0xFFA00000, 0x7FBFFFFF]


def test_f32_bits_through_globals(glb):
    for bits in F32_BITS:
        assert glb.check("f32_bits_through_global", bits).values == (s32(bits),)
        assert glb.check("f32_store_bits", bits).values == (s32(bits),)


@pytest.mark.xfail(os.environ.get("VMRT_TIER", "auto") != "c", strict=True, reason=(
    "Python tier (and `auto`, which runs these small functions there): f32 globals are "
    "read and written through a memoryview of format 'f', whose float<->double "
    "conversion quiets signalling NaNs; upstream (and the C tier) copies the 4 bytes"))
def test_signalling_nan_bits_through_f32_globals(glb):
    for bits in SNAN_BITS:
        assert glb.check("f32_bits_through_global", bits).values == (s32(bits),)
        assert glb.check("f32_store_bits", bits).values == (s32(bits),)


def test_ref_globals(glb):
    assert glb.check("ref_info").values == (1, 0, 10)
    assert glb.check("ref_store", 24).values == (24, 0)       # moved in: %r0 is null after
    assert glb.check("ref_info").values == (1, 1, 10)
    assert glb.check("ref_load_indirect", 1).values == (1,)
    glb.check("ref_clear")
    assert glb.check("ref_info").values == (1, 0, 10)
    assert glb.check("ref_load_indirect", 0).values == (1,)


@pytest.mark.parametrize("ordinal", [2, 3, 1000, -1, I32_MIN])
def test_ref_global_ordinal_out_of_range(glb, ordinal):
    out = glb.check("ref_load_indirect", ordinal)
    assert not out.ok and out.code == "OUT_OF_RANGE"


def test_ref_global_of_the_wrong_type(glb):
    out = glb.check("ref_wrong_type")
    assert not out.ok and out.code == "INVALID_ARGUMENT"
    # The list stays in .refs[1]: loading it as a buffer keeps failing until cleared.
    assert glb.check("ref_info").code == "INVALID_ARGUMENT"
    glb.check("ref_clear")
    assert glb.check("ref_info").values == (1, 0, 10)


@settings(max_examples=100, deadline=None)
@given(st.integers(I64_MIN, I64_MAX), st.floats(), st.integers(-(1 << 31), (1 << 31) - 1),
       st.floats(width=32), st.integers(0, SIZE - 8))
def test_random_globals(builder, big, dbl, small, flt, offset):
    glb = Pair(builder.build_file("globals.vmasm"))
    glb.check("set_all", big, dbl, small, flt, small ^ 5)
    glb.check("get_all")
    glb.check("load_i64", offset)
    glb.check("load_f64", offset)
    glb.check("load_f32", offset + 1)
    glb.check("store_f64", dbl, offset)
    glb.check("store_i32", offset + 2, small)
    glb.check("get_all")
