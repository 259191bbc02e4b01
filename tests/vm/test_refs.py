"""Refs, differential against iree.runtime: select.ref / switch.ref (out-of-range
index -> default, null values), cmp.eq/ne/nz.ref, assign and move semantics
(%R operands), discard.refs, cast.any.ref, and a few buffer and list operations
(programs: tests/vm/vmasm/refs.mlir and moves.vmasm). The object semantics of
buffers and lists are tested in test_buffer.py and test_list.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from differential import I32_MAX, I32_MIN, Pair


@pytest.fixture(scope="module")
def refs(builder):
    return Pair(builder.build_file("refs.mlir"))


@pytest.fixture(scope="module")
def moves(builder):
    return Pair(builder.build_file("moves.vmasm"))


def test_select_ref(refs):
    assert refs.check("select_ref", 1, 0).values == (10,)
    assert refs.check("select_ref", 0, 0).values == (20,)
    assert refs.check("select_ref", -5, 0).values == (10,)
    assert refs.check("select_ref", 1, 1).values == (-1,)     # the null was chosen
    assert refs.check("select_ref", 0, 1).values == (20,)


@pytest.mark.parametrize("index, expected", [(0, 1), (1, 2), (2, -1), (3, 3), (4, 9), (5, 9),
                                             (-1, 9), (I32_MAX, 9), (I32_MIN, 9)])
def test_switch_ref(refs, index, expected):
    assert refs.check("switch_ref", index).values == (expected,)


@pytest.mark.parametrize("which, expected", [
    (0, (1, 1, 0, 1)),    # a: equal to a, not b, not null
    (1, (0, 0, 0, 1)),    # b: a distinct buffer of the same contents
    (2, (0, 1, 1, 0)),    # null
    (7, (1, 1, 0, 1)),    # default: a
])
def test_ref_comparisons(refs, which, expected):
    assert refs.check("compare", which).values == expected


def test_refs_in_lists(refs):
    assert refs.check("list_of_refs", 7).values == (1, 7, 0)
    assert refs.check("list_of_refs", 0).values == (1, 0, 0)


@pytest.mark.parametrize("size, index", [(1, 0), (4, 3), (4, 4), (0, 0), (3, -1), (2, 100)])
def test_list_i32_bounds(refs, size, index):
    out = refs.check("list_i32", size, index, -12345)
    if 0 <= index < size:
        assert out.values == (-12345, size)
    else:
        assert out.code == "OUT_OF_RANGE"


# (No negative offsets: upstream's bounds check overflows and the reference would
# write before the buffer; test_vm_errors.py checks them in vmrt.)
@pytest.mark.parametrize("length, offset", [(8, 0), (8, 1), (8, 2), (7, 1), (16, 3), (4, 1),
                                            (0, 0), (8, 1 << 40)])
def test_buffer_io_bounds(refs, length, offset):
    refs.check("buffer_io", length, offset, -0x12345678)


def test_cast_any_ref(refs):
    assert refs.check("cast_any", 0).values == (5,)
    out = refs.check("cast_any", 1)
    assert not out.ok and out.code == "INVALID_ARGUMENT"


# -- moves ---------------------------------------------------------------------------------
def test_assign_ref_retains_or_moves(moves):
    assert moves.check("assign", 0).values == (1, 1, 1)
    assert moves.check("assign", 1).values == (0, 1, 0)


def test_moved_call_argument(moves):
    assert moves.check("call_move", 0).values == (1, 16)
    assert moves.check("call_move", 1).values == (0, 16)


def test_select_ref_moves(moves):
    # Both moved operands are gone afterwards, the chosen one is in the result.
    assert moves.check("select_moves", 1).values == (0, 0, 1, 16)
    assert moves.check("select_moves", 0).values == (0, 0, 1, 4)
    assert moves.check("select_retain", 1).values == (1, 1, 1)
    assert moves.check("select_retain", 0).values == (1, 0, 0)


def test_discard_refs_reference_behaviour(moves):
    # Upstream's DiscardRefs releases every listed register, move bit or not.
    assert moves.theirs("discard").values == (0, 0)


def test_discard_refs(moves):
    # Upstream releases every listed register, with or without the move bit.
    assert moves.check("discard").values == (0, 0)


def test_cast_through_any(moves):
    assert moves.check("cast_round_trip").values == (16, 0)
    assert moves.check("cast_wrong").code == "INVALID_ARGUMENT"


def test_rodata_is_read_only(moves):
    assert moves.check("store_rodata").code == "PERMISSION_DENIED"


@pytest.mark.parametrize("src, length, fill", [(0, 4, 0), (2, 8, 0xAB), (0, 16, 1), (15, 1, 7),
                                               (8, 9, 0), (17, 0, 0), (0, 0, 0x1FF)])
def test_buffer_mix(moves, src, length, fill):
    moves.check("buffer_mix", src, length, fill)


@pytest.mark.parametrize("size, index", [(3, 0), (3, 2), (3, 3), (0, 0), (5, -1)])
def test_list_ops(moves, size, index):
    moves.check("list_ops", size, index, 99)


def test_null_ref_operands(moves):
    assert moves.check("null_buffer_length").code == "INVALID_ARGUMENT"
    assert moves.check("null_list_size").code == "INVALID_ARGUMENT"


@settings(max_examples=100, deadline=None)
@given(st.integers(-2, 6), st.integers(0, 20), st.integers(0, 20), st.integers(-300, 300))
def test_random_refs(refs, moves, index, length, offset, value):
    refs.check("switch_ref", index)
    refs.check("compare", index)
    refs.check("list_i32", length % 8, offset % 10 - 1, value)
    refs.check("buffer_io", length, offset % 8, value)
    moves.check("buffer_mix", offset % 20, length, value)
