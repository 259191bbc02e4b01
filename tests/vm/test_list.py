"""vm.list: storage modes, conversions between value widths, type rules,
variant lists, resize/reserve semantics, copies and the host API; and
differential checks against the reference VM (a vmasm module assembled with
iree-as-module, run in-process with iree.runtime), which also cover the ref
type checks of vm.cast.any.ref and vm.list.get.ref."""

import math
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from vmrt.errors import StatusCode, VMError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.list import MAX_LIST_CAPACITY, VMList, list_alloc
from vmrt.vm.ref import (
    ANY_REF_TYPE, check_ref_type, ref_or_null, resolve_type,
)
from vmrt.vm.value import ValueType, round_f32


def code_of(fn, *args):
    with pytest.raises(VMError) as e:
        fn(*args)
    return e.value.code


def sized(element_type, n):
    lst = VMList(element_type, n)
    lst.resize(n)
    return lst


# ---------------------------------------------------------------------------
# Allocation, capacity, resize
# ---------------------------------------------------------------------------

def test_alloc_picks_storage_mode():
    assert isinstance(VMList("i32"), VMList)
    assert VMList("i32").element_type == resolve_type("i32")
    assert VMList.alloc(resolve_type("!vm.buffer")).element_type.is_ref
    assert VMList("?").element_type.is_variant
    assert VMList(resolve_type("!vm.opaque")).element_type.is_variant
    assert VMList.ref_type.name == "vm.list"
    assert list_alloc(resolve_type("f32"), 3).capacity == 64


def test_capacity_growth_follows_upstream():
    assert VMList("i32").capacity == 0
    assert VMList("i32", 1).capacity == 64
    lst = VMList("i32", 64)
    assert lst.capacity == 64
    lst.reserve(10)
    assert lst.capacity == 64        # never shrinks
    lst.resize(65)
    assert lst.capacity == 128       # max(align(65, 64), 2 * 64)
    lst.reserve(300)
    assert lst.capacity == 320
    lst.reserve(321)
    assert lst.capacity == 640       # doubling wins
    assert lst.size == 65            # reserve does not change the size


def test_huge_or_negative_capacity_is_resource_exhausted():
    # i32 operands are read as uint32: -1 asks for 4G elements.
    assert code_of(VMList, "i32", -1) == StatusCode.RESOURCE_EXHAUSTED
    lst = VMList("?")
    assert code_of(lst.reserve, MAX_LIST_CAPACITY + 1) == StatusCode.RESOURCE_EXHAUSTED
    assert code_of(lst.resize, -5) == StatusCode.RESOURCE_EXHAUSTED
    assert lst.size == 0 and lst.capacity == 0


@pytest.mark.parametrize("element_type,zero", [("i8", 0), ("i64", 0), ("f32", 0.0),
                                               ("f64", 0.0), ("!vm.buffer", None), ("?", None)])
def test_resize_fills_with_zero_and_truncation_forgets(element_type, zero):
    lst = sized(element_type, 3)
    assert lst.to_python() == [zero] * 3
    if zero is None:
        lst.set_ref(1, VMBuffer.alloc(1))
    else:
        lst.set_i32(1, 7)
    lst.resize(1)
    lst.resize(3)
    assert lst.to_python() == [zero] * 3
    lst.resize(3)
    assert lst.size == 3
    lst.clear()
    assert lst.size == 0 and len(lst) == 0


# ---------------------------------------------------------------------------
# Index checks
# ---------------------------------------------------------------------------

ACCESSORS = [("get_i32", ()), ("get_i64", ()), ("get_f32", ()), ("get_f64", ()),
             ("set_i32", (1,)), ("set_i64", (1,)), ("set_f32", (1.0,)), ("set_f64", (1.0,)),
             ("get_ref", ()), ("take_ref", ()), ("set_ref", (None,))]


@pytest.mark.parametrize("element_type", ["i8", "i16", "i32", "i64", "f32", "f64",
                                          "!vm.buffer", "?"])
@pytest.mark.parametrize("name,extra", ACCESSORS)
def test_index_is_checked_before_anything_else(element_type, name, extra):
    lst = sized(element_type, 2)
    for index in (2, 3, -1, -(1 << 31)):
        assert code_of(getattr(lst, name), index, *extra) == StatusCode.OUT_OF_RANGE


def test_negative_index_message_is_unsigned():
    with pytest.raises(VMError) as e:
        sized("i32", 2).get_i32(-1)
    assert e.value.message == "index 4294967295 out of bounds (2)"


# ---------------------------------------------------------------------------
# Value lists
# ---------------------------------------------------------------------------

def test_narrow_lists_wrap_stored_values():
    lst = sized("i8", 3)
    lst.set_i32(0, 300)
    lst.set_i32(1, 200)
    lst.set_i64(2, -129)
    assert lst.to_python() == [44, -56, 127]
    assert lst.get_i32(1) == -56 and lst.get_i64(1) == -56
    lst16 = sized("i16", 1)
    lst16.set_i64(0, 0x12345678)
    assert lst16.get_i32(0) == 0x5678
    lst16.set_i32(0, 0xFFFF)
    assert lst16.get_i32(0) == -1


def test_i64_list_truncates_for_i32_reads():
    lst = sized("i64", 1)
    lst.set_i64(0, -5000000000)
    assert lst.get_i64(0) == -5000000000
    assert lst.get_i32(0) == ((-5000000000 + (1 << 31)) % (1 << 32)) - (1 << 31)
    lst.set_i32(0, -7)
    assert lst.get_i64(0) == -7        # sign extended


def test_float_lists_convert_between_widths():
    f32 = sized("f32", 1)
    f32.set_f64(0, 0.1)
    assert f32.get_f32(0) == round_f32(0.1) == f32.get_f64(0)
    f32.set_f64(0, 1e300)
    assert f32.get_f32(0) == math.inf
    f64 = sized("f64", 1)
    f64.set_f64(0, 0.1)
    assert f64.get_f64(0) == 0.1 and f64.get_f32(0) == round_f32(0.1)
    f64.set_f32(0, 2.5)
    assert f64.get_f64(0) == 2.5


def test_int_float_conversions_give_zero():
    # Upstream's list conversion zeroes instead of converting numerically.
    ints = sized("i32", 1)
    ints.set_i32(0, 42)
    assert ints.get_f32(0) == 0.0 and ints.get_f64(0) == 0.0
    ints.set_f64(0, 42.0)
    assert ints.get_i32(0) == 0
    floats = sized("f64", 1)
    floats.set_f64(0, 3.5)
    assert floats.get_i32(0) == 0 and floats.get_i64(0) == 0
    floats.set_i32(0, 3)
    assert floats.get_f64(0) == 0.0


def test_value_lists_reject_refs():
    lst = sized("i32", 1)
    assert code_of(lst.get_ref, 0) == StatusCode.FAILED_PRECONDITION
    assert code_of(lst.take_ref, 0) == StatusCode.FAILED_PRECONDITION
    assert code_of(lst.set_ref, 0, VMBuffer.alloc(1)) == StatusCode.FAILED_PRECONDITION
    assert code_of(lst.set_ref, 0, None) == StatusCode.FAILED_PRECONDITION


# ---------------------------------------------------------------------------
# Ref lists
# ---------------------------------------------------------------------------

def test_ref_lists_hold_only_their_type():
    buffers = sized("!vm.buffer", 2)
    buf = VMBuffer.alloc(4)
    buffers.set_ref(0, buf)
    assert buffers.get_ref(0) is buf and buffers.get_ref(1) is None
    assert code_of(buffers.set_ref, 1, VMList("i32")) == StatusCode.INVALID_ARGUMENT
    assert buffers.get_ref(1) is None  # no change on failure
    buffers.set_ref(0, None)
    assert buffers.get_ref(0) is None
    for name in ("get_i32", "get_i64", "get_f32", "get_f64"):
        assert code_of(getattr(buffers, name), 0) == StatusCode.FAILED_PRECONDITION
    for name, value in (("set_i32", 1), ("set_i64", 1), ("set_f32", 1.0), ("set_f64", 1.0)):
        assert code_of(getattr(buffers, name), 0, value) == StatusCode.FAILED_PRECONDITION


def test_list_of_lists_takes_any_list():
    outer = sized(resolve_type("!vm.list<i32>"), 2)
    inner_f32 = VMList("f32")
    outer.set_ref(0, inner_f32)        # element types are not part of a ref's type
    outer.set_ref(1, VMList("?"))
    assert outer.get_ref(0) is inner_f32
    assert code_of(outer.set_ref, 0, VMBuffer.alloc(1)) == StatusCode.INVALID_ARGUMENT


def test_any_ref_list_takes_every_ref():
    lst = sized(ANY_REF_TYPE, 2)
    lst.set_ref(0, VMBuffer.alloc(1))
    lst.set_ref(1, VMList("i32"))
    assert [type(x).__name__ for x in lst.to_python()] == ["VMBuffer", "list"]


def test_take_ref_leaves_null():
    lst = sized("!vm.buffer", 1)
    buf = VMBuffer.alloc(1)
    lst.set_ref(0, buf)
    assert lst.take_ref(0) is buf
    assert lst.get_ref(0) is None


# ---------------------------------------------------------------------------
# Variant lists
# ---------------------------------------------------------------------------

def test_variant_list_holds_values_and_refs():
    lst = sized("?", 5)
    buf, inner = VMBuffer.alloc(16), VMList.from_values([1, 2], "i32")
    lst.set_i32(0, 77)
    lst.set_f64(1, -0.5)
    lst.set_ref(2, buf)
    lst.set_ref(3, inner)
    assert lst.get_i32(0) == 77 and lst.get_f64(1) == -0.5
    assert lst.get_ref(2) is buf and lst.get_ref(3) is inner
    assert lst.get_ref(4) is None      # empty element reads as a null ref
    assert lst.to_python() == [77, -0.5, buf, [1, 2], None]
    assert lst.get_variant_type(0) == resolve_type("i32")
    assert lst.get_variant_type(2).ref_type is VMBuffer.ref_type
    assert lst.get_variant_type(4) is None


def test_variant_value_conversions_follow_the_stored_type():
    lst = sized("?", 1)
    lst.set_i64(0, (1 << 40) + 5)
    assert lst.get_i32(0) == 5 and lst.get_i64(0) == (1 << 40) + 5
    assert lst.get_f64(0) == 0.0       # int -> float gives zero
    lst.set_f64(0, 0.1)
    assert lst.get_f32(0) == round_f32(0.1) and lst.get_i32(0) == 0
    assert lst.get_value(0) == (ValueType.F64, 0.1)


def test_variant_type_errors():
    lst = sized("?", 3)
    lst.set_ref(0, VMBuffer.alloc(1))
    lst.set_i32(1, 5)
    # Reading a value from a ref or an empty element fails.
    assert code_of(lst.get_i32, 0) == StatusCode.FAILED_PRECONDITION
    assert code_of(lst.get_f64, 2) == StatusCode.FAILED_PRECONDITION
    # Reading a ref from a value element fails.
    assert code_of(lst.get_ref, 1) == StatusCode.FAILED_PRECONDITION
    # Overwriting changes the element's kind; a null ref empties it.
    lst.set_i32(0, 9)
    assert lst.get_i32(0) == 9
    lst.set_ref(1, None)
    assert lst.get_ref(1) is None
    assert code_of(lst.get_i32, 1) == StatusCode.FAILED_PRECONDITION


def test_variant_take_ref_empties_the_element():
    lst = sized("?", 1)
    buf = VMBuffer.alloc(1)
    lst.set_ref(0, buf)
    assert lst.take_ref(0) is buf
    assert lst.get_variant_type(0) is None


# ---------------------------------------------------------------------------
# Host API: push/pop, from_values/to_python, clone, swap, copy
# ---------------------------------------------------------------------------

def test_from_values_and_to_python():
    assert VMList.from_values([1, 300, -1], "i8").to_python() == [1, 44, -1]
    assert VMList.from_values([0.1], "f32").to_python() == [round_f32(0.1)]
    mixed = VMList.from_values([1, 2.5, None, VMList.from_values([3])])
    assert mixed.to_python() == [1, 2.5, None, [3]]
    assert mixed.get_value(0) == (ValueType.I64, 1)
    assert list(VMList.from_values([4, 5], "i32")) == [4, 5]
    with pytest.raises(VMError):
        VMList.from_values([VMBuffer.alloc(1)], "i32")


def test_from_values_of_a_ref_list_takes_refs_of_its_type_only():
    bufs = [VMBuffer.alloc(1), None, VMBuffer.alloc(2)]
    refs = VMList.from_values(bufs, "!vm.buffer")
    bufs[1] = VMBuffer.alloc(3)  # the list does not share the caller's list
    assert refs.to_python()[1] is None and refs.get_ref(2) is bufs[2]
    assert refs.size == 3 and refs.capacity == 64
    for bad, code in (([VMBuffer.alloc(1), VMList("i32")], StatusCode.INVALID_ARGUMENT),
                      ([None, 1], StatusCode.FAILED_PRECONDITION),
                      ([2.5], StatusCode.FAILED_PRECONDITION)):
        assert code_of(VMList.from_values, bad, "!vm.buffer") == code
    anything = VMList.from_values([VMList("i32"), VMBuffer.alloc(1), None], ANY_REF_TYPE)
    assert [type(x) for x in anything.to_python()[:2]] == [list, VMBuffer]
    assert code_of(VMList.from_values, [VMBuffer.alloc(1), 3], ANY_REF_TYPE) == \
        StatusCode.FAILED_PRECONDITION


def test_from_values_checks_refs_that_may_override_their_type_one_by_one():
    class Disguised(VMBuffer):  # no __slots__: each object may carry its own ref_type
        pass

    honest, disguised = Disguised(b"a"), Disguised(b"b")
    disguised.ref_type = VMList.ref_type
    assert VMList.from_values([honest], "!vm.buffer").get_ref(0) is honest
    assert code_of(VMList.from_values, [honest, disguised], "!vm.buffer") == \
        StatusCode.INVALID_ARGUMENT


def test_push_and_pop():
    lst = VMList("?")
    lst.push_value(3, ValueType.I32)
    lst.push_value(1.5, ValueType.F32)
    buf = VMBuffer.alloc(1)
    lst.push_ref(buf)
    lst.append(7)
    assert lst.to_python() == [3, 1.5, buf, 7]
    ints = VMList("i16")
    ints.push_value(70000, ValueType.I32)
    assert ints.to_python() == [70000 - 65536]
    with pytest.raises(VMError):
        ints.push_ref(buf)
    assert ints.size == 1            # a failed push leaves the size alone
    refs = VMList("!vm.buffer")
    refs.push_ref(buf)
    refs.push_ref(None)
    assert refs.pop_front_ref() is buf and refs.size == 1
    assert refs.pop_front_ref() is None
    assert code_of(refs.pop_front_ref) == StatusCode.OUT_OF_RANGE


def test_set_value_and_get_value_as():
    lst = sized("i8", 1)
    lst.set_value(0, 255, ValueType.I32)
    assert lst.get_value(0) == (ValueType.I8, -1)
    assert lst.get_value_as(0, ValueType.I64) == -1
    assert lst.get_value_as(0, ValueType.F32) == 0.0
    assert code_of(sized("!vm.buffer", 1).get_value, 0) == StatusCode.FAILED_PRECONDITION


def test_clone_shares_refs():
    buf = VMBuffer.alloc(1)
    src = VMList.from_values([1, buf])
    copy = src.clone_list()
    assert copy is not src and copy.to_python() == [1, buf]
    copy.set_i32(0, 2)
    assert src.get_i64(0) == 1 and copy.get_ref(1) is buf


def test_swap_storage_swaps_types_too():
    a = VMList.from_values([1, 2], "i32")
    b = VMList.from_values([2.5])
    a.swap_storage(b)
    assert a.to_python() == [2.5] and a.element_type.is_variant
    assert b.to_python() == [1, 2] and b.get_i32(1) == 2
    b.swap_storage(b)
    assert b.to_python() == [1, 2]


def test_copy_rules():
    src = VMList.from_values([1, 2, 3, 4], "i32")
    dst = sized("i32", 4)
    src.copy_elements(1, dst, 0, 3)
    assert dst.to_python() == [2, 3, 4, 0]
    src.copy_elements(0, dst, 0, 0)             # empty copies never fail
    src.copy_elements(9, dst, 9, 0)
    assert code_of(src.copy_elements, 2, dst, 0, 3) == StatusCode.OUT_OF_RANGE
    assert code_of(src.copy_elements, 0, dst, 2, 3) == StatusCode.OUT_OF_RANGE
    # Overlapping ranges of one list are refused; disjoint ones are fine.
    assert code_of(src.copy_elements, 0, src, 1, 2) == StatusCode.INVALID_ARGUMENT
    src.copy_elements(0, src, 2, 2)
    assert src.to_python() == [1, 2, 1, 2]
    # Typed lists must match exactly.
    assert code_of(src.copy_elements, 0, sized("i64", 4), 0, 1) == StatusCode.INVALID_ARGUMENT
    assert code_of(src.copy_elements, 0, sized("!vm.buffer", 4), 0, 1) == StatusCode.INVALID_ARGUMENT
    # Anything goes into a variant list, keeping each element's type.
    var = sized("?", 4)
    src.copy_elements(0, var, 0, 2)
    assert var.get_value(0) == (ValueType.I32, 1)
    buf = VMBuffer.alloc(1)
    refs = VMList.from_values([buf, None], "!vm.buffer")
    refs.copy_elements(0, var, 2, 2)
    assert var.to_python() == [1, 2, buf, None]
    # From a variant list only elements of exactly the target type.
    var.copy_elements(0, dst, 0, 2)
    assert dst.to_python()[:2] == [1, 2]
    assert code_of(var.copy_elements, 1, dst, 0, 2) == StatusCode.INVALID_ARGUMENT
    out = sized("!vm.buffer", 2)
    var.copy_elements(2, out, 0, 1)
    assert out.get_ref(0) is buf
    assert code_of(var.copy_elements, 2, out, 0, 2) == StatusCode.INVALID_ARGUMENT  # empty != buffer
    ints64 = sized("i64", 1)
    assert code_of(var.copy_elements, 0, ints64, 0, 1) == StatusCode.INVALID_ARGUMENT


def test_repr_and_len():
    lst = VMList.from_values([1], "i32")
    assert "!vm.list<i32>" in repr(lst) and len(lst) == 1


# ---------------------------------------------------------------------------
# Differential checks against the reference VM
# ---------------------------------------------------------------------------

ELEMENTS = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f32": "f32",
            "f64": "f64", "var": "!vm.opaque"}
SETTERS = ("i32", "i64", "f32", "f64")


def _wide(kind):
    return kind in ("i64", "f64")


def _reference_source():
    lines = ["vm.module @listref version 1"]
    lines += [f"vm.type {t}" for t in ("i8", "i16", "i32", "i64", "f32", "f64",
                                       "!vm.buffer", "!vm.opaque")]
    lines += [f"vm.type !vm.list<{t}>" for t in ELEMENTS.values()]
    lines += ["vm.type !vm.list<!vm.buffer>", "vm.type !vm.list<!vm.list<i32>>",
              "vm.rodata[0] = 0001020304"]
    for short, element in ELEMENTS.items():
        for setter in SETTERS:
            arg = "%i0:1" if _wide(setter) else "%i0"
            lines += [
                f"vm.export @conv_{short}_{setter}",
                f"vm.func @conv_{short}_{setter}({arg}: {setter}) -> (i32, i64, f32, f64) {{",
                "^bb0:",
                "  %i2 = vm.const.i32 1",
                "  %i3 = vm.const.i32.zero",
                f"  %r0 = vm.list.alloc %i2 : !vm.list<{element}>",
                "  vm.list.resize %r0, %i2",
                f"  vm.list.set.{setter} %r0, %i3, {arg}",
                "  %i4 = vm.list.get.i32 %r0, %i3",
                "  %i6:7 = vm.list.get.i64 %r0, %i3",
                "  %i8 = vm.list.get.f32 %r0, %i3",
                "  %i10:11 = vm.list.get.f64 %r0, %i3",
                "  vm.discard.refs %r0",
                "  vm.return %i4, %i6:7, %i8, %i10:11",
                "}"]
    lines += """
vm.export @index_get
vm.func @index_get(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %r0 = vm.list.alloc %i0 : !vm.list<i32>
  vm.list.resize %r0, %i0
  %i2 = vm.list.get.i32 %r0, %i1
  vm.discard.refs %r0
  vm.return %i2
}
vm.export @index_set
vm.func @index_set(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  %r1 = vm.const.ref.rodata 0
  vm.list.set.ref %r0, %i1, %r1
  %i2 = vm.list.size %r0
  vm.discard.refs %r0, %r1
  vm.return %i2
}
vm.export @resize_again
vm.func @resize_again(%i0: i32, %i1: i32) -> (i32, i32, i32) {
^bb0:
  %i2 = vm.const.i32 3
  %i3 = vm.const.i32 7
  %i4 = vm.const.i32.zero
  %i5 = vm.const.i32 1
  %i6 = vm.const.i32 2
  %r0 = vm.list.alloc %i4 : !vm.list<i32>
  vm.list.resize %r0, %i2
  vm.list.set.i32 %r0, %i4, %i3
  vm.list.set.i32 %r0, %i5, %i3
  vm.list.set.i32 %r0, %i6, %i3
  vm.list.resize %r0, %i0
  vm.list.reserve %r0, %i1
  vm.list.resize %r0, %i2
  %i7 = vm.list.get.i32 %r0, %i4
  %i8 = vm.list.get.i32 %r0, %i5
  %i9 = vm.list.get.i32 %r0, %i6
  vm.discard.refs %r0
  vm.return %i7, %i8, %i9
}
vm.export @reserve_keeps_size
vm.func @reserve_keeps_size(%i0: i32) -> (i32) {
^bb0:
  %r0 = vm.list.alloc %i0 : !vm.list<i32>
  vm.list.reserve %r0, %i0
  %i1 = vm.list.size %r0
  vm.discard.refs %r0
  vm.return %i1
}
vm.export @empty_variant_value
vm.func @empty_variant_value() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  %i2 = vm.list.get.i32 %r0, %i1
  vm.discard.refs %r0
  vm.return %i2
}
vm.export @empty_variant_ref
vm.func @empty_variant_ref() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  %r1 = vm.list.get.ref %r0, %i1 : !vm.buffer
  %i2 = vm.cmp.nz.ref %r1
  vm.discard.refs %r0, %r1
  vm.return %i2
}
vm.export @variant_ref_as_value
vm.func @variant_ref_as_value() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  %r1 = vm.const.ref.rodata 0
  vm.list.set.ref %r0, %i1, %r1
  %i2 = vm.list.get.i32 %r0, %i1
  vm.discard.refs %r0, %r1
  vm.return %i2
}
vm.export @variant_value_as_ref
vm.func @variant_value_as_ref() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  vm.list.set.i32 %r0, %i1, %i0
  %r1 = vm.list.get.ref %r0, %i1 : !vm.buffer
  %i2 = vm.cmp.nz.ref %r1
  vm.discard.refs %r0, %r1
  vm.return %i2
}
vm.export @variant_null_ref_empties
vm.func @variant_null_ref_empties() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  vm.list.set.i32 %r0, %i1, %i0
  %r1 = vm.const.ref.zero
  vm.list.set.ref %r0, %i1, %r1
  %i2 = vm.list.get.i32 %r0, %i1
  vm.discard.refs %r0
  vm.return %i2
}
vm.export @value_list_get_ref
vm.func @value_list_get_ref() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<i32>
  vm.list.resize %r0, %i0
  %r1 = vm.list.get.ref %r0, %i1 : !vm.buffer
  %i2 = vm.cmp.nz.ref %r1
  vm.discard.refs %r0, %r1
  vm.return %i2
}
vm.export @value_list_set_ref
vm.func @value_list_set_ref() -> () {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<i32>
  vm.list.resize %r0, %i0
  %r1 = vm.const.ref.rodata 0
  vm.list.set.ref %r0, %i1, %r1
  vm.discard.refs %r0, %r1
  vm.return
}
vm.export @ref_list_get_value
vm.func @ref_list_get_value() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.buffer>
  vm.list.resize %r0, %i0
  %i2 = vm.list.get.i32 %r0, %i1
  vm.discard.refs %r0
  vm.return %i2
}
vm.export @ref_list_set_value
vm.func @ref_list_set_value() -> () {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.buffer>
  vm.list.resize %r0, %i0
  vm.list.set.i32 %r0, %i1, %i0
  vm.discard.refs %r0
  vm.return
}
vm.export @ref_list_wrong_type
vm.func @ref_list_wrong_type() -> () {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.buffer>
  vm.list.resize %r0, %i0
  %r1 = vm.list.alloc %i0 : !vm.list<i32>
  vm.list.set.ref %r0, %i1, %r1
  vm.discard.refs %r0, %r1
  vm.return
}
vm.export @list_of_lists_any_list
vm.func @list_of_lists_any_list() -> (i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.list<i32>>
  vm.list.resize %r0, %i0
  %r1 = vm.list.alloc %i0 : !vm.list<f64>
  vm.list.set.ref %r0, %i1, %r1
  %r2 = vm.list.get.ref %r0, %i1 : !vm.list<i32>
  %i2 = vm.cmp.eq.ref %r1, %r2
  vm.discard.refs %r0, %r1, %r2
  vm.return %i2
}
vm.export @get_ref_checks
vm.func @get_ref_checks() -> (i32, i32, i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  %r1 = vm.const.ref.rodata 0
  vm.list.set.ref %r0, %i1, %r1
  %r2 = vm.list.get.ref %r0, %i1 : !vm.buffer
  %i2 = vm.cmp.nz.ref %r2
  %r3 = vm.list.get.ref %r0, %i1 : !vm.list<i32>
  %i3 = vm.cmp.nz.ref %r3
  %r4 = vm.list.get.ref %r0, %i1 : !vm.opaque
  %i4 = vm.cmp.nz.ref %r4
  vm.discard.refs %r0, %r1, %r2, %r3, %r4
  vm.return %i2, %i3, %i4
}
vm.export @get_ref_move
vm.func @get_ref_move() -> (i32, i32) {
^bb0:
  %i0 = vm.const.i32 1
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i0 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i0
  %r1 = vm.const.ref.rodata 0
  vm.list.set.ref %r0, %i1, %r1
  %R2 = vm.list.get.ref %r0, %i1 : !vm.list<i32>
  %i2 = vm.cmp.nz.ref %r2
  %r3 = vm.list.get.ref %r0, %i1 : !vm.buffer
  %i3 = vm.cmp.nz.ref %r3
  vm.discard.refs %r0, %r1, %r2, %r3
  vm.return %i2, %i3
}
vm.export @cast_to_buffer
vm.func @cast_to_buffer(%i0: i32) -> (i32) {
^bb0:
  %r0 = vm.const.ref.rodata 0
  %r1 = vm.const.ref.zero
  %r2 = vm.select.ref %i0 ? %r0 : %r1 -> !vm.buffer
  %r3 = vm.cast.any.ref %r2 : !vm.ref<?> -> !vm.buffer
  %i1 = vm.cmp.eq.ref %r2, %r3
  vm.discard.refs %r0, %r2, %r3
  vm.return %i1
}
vm.export @cast_to_list
vm.func @cast_to_list(%i0: i32) -> (i32) {
^bb0:
  %r0 = vm.const.ref.rodata 0
  %r1 = vm.const.ref.zero
  %r2 = vm.select.ref %i0 ? %r0 : %r1 -> !vm.buffer
  %r3 = vm.cast.any.ref %r2 : !vm.ref<?> -> !vm.list<i32>
  %i1 = vm.cmp.nz.ref %r3
  vm.discard.refs %r0, %r2, %r3
  vm.return %i1
}
vm.export @cast_to_opaque
vm.func @cast_to_opaque(%i0: i32) -> (i32) {
^bb0:
  %r0 = vm.const.ref.rodata 0
  %r1 = vm.const.ref.zero
  %r2 = vm.select.ref %i0 ? %r0 : %r1 -> !vm.buffer
  %r3 = vm.cast.any.ref %r2 : !vm.ref<?> -> !vm.opaque
  %i1 = vm.cmp.nz.ref %r3
  vm.discard.refs %r0, %r2, %r3
  vm.return %i1
}
""".splitlines()
    return "\n".join(lines) + "\n"


class Reference:
    """Runs exported functions of a vmasm module in the reference VM."""

    def __init__(self, rt, vmfb: bytes):
        self.rt = rt
        self.instance = rt.VmInstance()
        self.module = rt.VmModule.copy_buffer(self.instance, vmfb)
        self.context = rt.VmContext(self.instance, modules=[self.module])

    def __call__(self, name, *args):
        rt = self.rt
        inputs = rt.VmVariantList(len(args))
        for arg in args:
            if isinstance(arg, float):
                inputs.push_float(arg)
            else:
                inputs.push_int(arg)
        outputs = rt.VmVariantList(4)
        try:
            self.context.invoke(self.module.lookup_function(name), inputs, outputs)
        except Exception as e:  # the bindings map status codes to several types
            return "error", _status_name(str(e))
        return "ok", tuple(outputs.get_variant(i) for i in range(outputs.size))


def _status_name(message):
    """The status name in a reference error ("...c:219: INVALID_ARGUMENT; ...")."""
    for word in re.findall(r"\b([A-Z][A-Z_]+);", message):
        if word in StatusCode.__members__:
            return word
    return message


def outcome(fn, *args):
    try:
        result = fn(*args)
    except VMError as e:
        return "error", e.code.name
    return "ok", result if isinstance(result, tuple) else (() if result is None else (result,))


def same(a, b):
    if a[0] != b[0] or len(a[1]) != len(b[1]):
        return False
    if a[0] == "error":
        return a[1] == b[1]
    for x, y in zip(a[1], b[1]):
        if isinstance(x, float) or isinstance(y, float):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return False
        elif x != y:
            return False
    return True


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    rt = pytest.importorskip("iree.runtime")
    if shutil.which("iree-as-module") is None:
        pytest.skip("iree-as-module is not installed")
    work = tmp_path_factory.mktemp("listref")
    (work / "m.vmasm").write_text(_reference_source())
    subprocess.run(["iree-as-module", str(work / "m.vmasm"), f"--output={work / 'm.vmfb'}"],
                   check=True, capture_output=True)
    return Reference(rt, (work / "m.vmfb").read_bytes())


RODATA = VMBuffer.wrap_rodata(bytes(range(5)))
BUFFER_T = resolve_type("!vm.buffer").ref_type
LIST_T = resolve_type("!vm.list<i32>").ref_type
OPAQUE_T = resolve_type("!vm.opaque").ref_type   # None: not a ref type


def ours_conv(short, setter, value):
    lst = VMList(resolve_type(ELEMENTS[short]), 1)
    lst.resize(1)
    getattr(lst, f"set_{setter}")(0, value)
    return lst.get_i32(0), lst.get_i64(0), lst.get_f32(0), lst.get_f64(0)


def ours_index_get(size, index):
    lst = VMList(resolve_type("i32"), size)
    lst.resize(size)
    return lst.get_i32(index)


def ours_index_set(size, index):
    lst = VMList(resolve_type("!vm.opaque"), size)
    lst.resize(size)
    lst.set_ref(index, RODATA)
    return lst.size


def ours_resize_again(size, reserve):
    lst = VMList(resolve_type("i32"), 0)
    lst.resize(3)
    for k in range(3):
        lst.set_i32(k, 7)
    lst.resize(size)
    lst.reserve(reserve)
    lst.resize(3)
    return lst.get_i32(0), lst.get_i32(1), lst.get_i32(2)


def ours_get_ref_checks():
    lst = sized(resolve_type("!vm.opaque"), 1)
    lst.set_ref(0, RODATA)
    return tuple(int(ref_or_null(t, lst.get_ref(0)) is not None)
                 for t in (BUFFER_T, LIST_T, OPAQUE_T))


def ours_get_ref_move():
    lst = sized(resolve_type("!vm.opaque"), 1)
    lst.set_ref(0, RODATA)
    first = ref_or_null(LIST_T, lst.take_ref(0))
    second = ref_or_null(BUFFER_T, lst.get_ref(0))
    return int(first is not None), int(second is not None)


def ours_cast(target, which):
    operand = RODATA if which else None
    return check_ref_type(target, operand)


INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
SETTER_VALUES = {"i32": INT32, "i64": INT64, "f32": st.floats(width=32),
                 "f64": st.floats()}
DIFF = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@DIFF
@given(data=st.data(), short=st.sampled_from(sorted(ELEMENTS)), setter=st.sampled_from(SETTERS))
def test_reference_conversions(ref, data, short, setter):
    value = data.draw(SETTER_VALUES[setter])
    expected = ref(f"conv_{short}_{setter}", value)
    assert same(expected, outcome(ours_conv, short, setter, value)), (expected, value)


@pytest.mark.parametrize("short", sorted(ELEMENTS))
@pytest.mark.parametrize("setter,value", [("i32", 300), ("i32", -1), ("i32", 200),
                                          ("i64", (1 << 40) + 0x8081), ("f32", 2.5),
                                          ("f64", 1e300), ("f64", -0.1), ("f32", math.inf)])
def test_reference_conversion_edges(ref, short, setter, value):
    assert same(ref(f"conv_{short}_{setter}", value), outcome(ours_conv, short, setter, value))


@DIFF
@given(size=st.integers(0, 5), index=st.integers(-3, 7))
def test_reference_index_checks(ref, size, index):
    assert same(ref("index_get", size, index), outcome(ours_index_get, size, index))
    assert same(ref("index_set", size, index), outcome(ours_index_set, size, index))


@DIFF
@given(size=st.integers(0, 4), reserve=st.integers(0, 200))
def test_reference_resize_zeroes(ref, size, reserve):
    assert same(ref("resize_again", size, reserve), outcome(ours_resize_again, size, reserve))


def test_reference_type_rules(ref):
    def variant_one():
        return sized(resolve_type("!vm.opaque"), 1)

    def empty_variant_value():
        return variant_one().get_i32(0)

    def empty_variant_ref():
        return int(ref_or_null(BUFFER_T, variant_one().get_ref(0)) is not None)

    def variant_ref_as_value():
        lst = variant_one()
        lst.set_ref(0, RODATA)
        return lst.get_i32(0)

    def variant_value_as_ref():
        lst = variant_one()
        lst.set_i32(0, 1)
        return int(lst.get_ref(0) is not None)

    def variant_null_ref_empties():
        lst = variant_one()
        lst.set_i32(0, 1)
        lst.set_ref(0, None)
        return lst.get_i32(0)

    def value_list_get_ref():
        return int(sized(resolve_type("i32"), 1).get_ref(0) is not None)

    def value_list_set_ref():
        sized(resolve_type("i32"), 1).set_ref(0, RODATA)

    def ref_list_get_value():
        return sized(resolve_type("!vm.buffer"), 1).get_i32(0)

    def ref_list_set_value():
        sized(resolve_type("!vm.buffer"), 1).set_i32(0, 1)

    def ref_list_wrong_type():
        sized(resolve_type("!vm.buffer"), 1).set_ref(0, VMList(resolve_type("i32"), 1))

    def list_of_lists_any_list():
        outer = sized(resolve_type("!vm.list<i32>"), 1)
        inner = VMList(resolve_type("f64"), 1)
        outer.set_ref(0, inner)
        return int(ref_or_null(LIST_T, outer.get_ref(0)) is inner)

    cases = {
        "reserve_keeps_size": (lambda n: VMList("i32", n).size, (5,)),
        "empty_variant_value": (empty_variant_value, ()),
        "empty_variant_ref": (empty_variant_ref, ()),
        "variant_ref_as_value": (variant_ref_as_value, ()),
        "variant_value_as_ref": (variant_value_as_ref, ()),
        "variant_null_ref_empties": (variant_null_ref_empties, ()),
        "value_list_get_ref": (value_list_get_ref, ()),
        "value_list_set_ref": (value_list_set_ref, ()),
        "ref_list_get_value": (ref_list_get_value, ()),
        "ref_list_set_value": (ref_list_set_value, ()),
        "ref_list_wrong_type": (ref_list_wrong_type, ()),
        "list_of_lists_any_list": (list_of_lists_any_list, ()),
        "get_ref_checks": (ours_get_ref_checks, ()),
        "get_ref_move": (ours_get_ref_move, ()),
    }
    for name, (fn, args) in cases.items():
        expected, got = ref(name, *args), outcome(fn, *args)
        assert same(expected, got), (name, expected, got)


@pytest.mark.parametrize("which", [0, 1])
def test_reference_casts(ref, which):
    def cast(target):
        def run():
            result = ours_cast(target, which)
            return int(result is not None)
        return run

    def cast_same():
        operand = RODATA if which else None
        return int(check_ref_type(BUFFER_T, operand) is operand)

    assert same(ref("cast_to_buffer", which), outcome(cast_same))
    assert same(ref("cast_to_list", which), outcome(cast(LIST_T)))
    assert same(ref("cast_to_opaque", which), outcome(cast(OPAQUE_T)))
