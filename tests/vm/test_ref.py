"""Ref objects, the ref type registry, type-table resolution and ref type checks.

(The checks as the reference runs them, cast.any.ref and list.get.ref, are
compared with iree.runtime in test_list.py.)
"""

import gc

import pytest

from vmrt.errors import StatusCode, VMError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.list import VMList
from vmrt.vm.ref import (
    ANY_REF_TYPE, VARIANT_TYPE, RefObject, TypeDef, as_type_def, check_ref_type,
    lookup_ref_type, null_ref_error, ref_or_null, register_placeholder_ref_type,
    register_ref_type, resolve_type, type_matches, unregister_ref_type,
)
from vmrt.vm.value import ValueType


class Thing(RefObject):
    __slots__ = ("tag",)

    def __init__(self, tag=0):
        self.tag = tag


@pytest.fixture
def thing_type():
    ref_type = register_ref_type("test.thing", Thing)
    yield ref_type
    unregister_ref_type("test.thing")


def test_builtin_types_are_registered():
    assert lookup_ref_type("vm.buffer").cls is VMBuffer
    assert lookup_ref_type("!vm.buffer") is VMBuffer.ref_type
    assert lookup_ref_type("vm.list").cls is VMList
    assert VMList.ref_type.name == "vm.list"


@pytest.mark.parametrize("name", ["!vm.list<i32>", "!vm.list<?>", "!vm.list<!vm.opaque>",
                                  "!vm.list<!vm.list<f32>>"])
def test_every_list_spelling_is_the_one_list_type(name):
    assert lookup_ref_type(name) is VMList.ref_type
    assert lookup_ref_type(name[1:]) is VMList.ref_type
    assert resolve_type(name).ref_type is VMList.ref_type


@pytest.mark.parametrize("name", ["!nope.buffer", "!nope", "i32", "f64", "!vm.opaque", "?", ""])
def test_unknown_or_non_ref_names_look_up_none(name):
    assert lookup_ref_type(name) is None


def test_register_lookup_unregister(thing_type):
    assert thing_type.name == "test.thing"
    assert Thing.ref_type is thing_type
    assert lookup_ref_type("!test.thing") is thing_type
    # Registering again with the same class is idempotent.
    assert register_ref_type("!test.thing", Thing) is thing_type
    unregister_ref_type("test.thing")
    assert lookup_ref_type("test.thing") is None
    assert Thing.ref_type is None


def test_register_conflicts_and_bad_classes(thing_type):
    class Other(RefObject):
        __slots__ = ()

    with pytest.raises(VMError) as e:
        register_ref_type("test.thing", Other)
    assert e.value.code == StatusCode.ALREADY_EXISTS
    with pytest.raises(VMError) as e:
        register_ref_type("test.notref", int)
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(VMError) as e:
        register_ref_type("!", Other)
    assert e.value.code == StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("name,value_type", [("i8", ValueType.I8), ("i16", ValueType.I16),
                                             ("i32", ValueType.I32), ("i64", ValueType.I64),
                                             ("f32", ValueType.F32), ("f64", ValueType.F64)])
def test_resolve_value_types(name, value_type):
    type_def = resolve_type(name)
    assert type_def.is_value and not type_def.is_ref and not type_def.is_variant
    assert type_def.value_type == value_type


def test_resolve_opaque_is_variant_not_a_ref():
    type_def = resolve_type("!vm.opaque")
    assert type_def is VARIANT_TYPE
    assert type_def.is_variant and not type_def.is_ref and type_def.ref_type is None


@pytest.mark.parametrize("name,code", [("", StatusCode.INVALID_ARGUMENT),
                                       ("?", StatusCode.NOT_FOUND),
                                       ("i1", StatusCode.NOT_FOUND),
                                       ("!nope.buffer", StatusCode.NOT_FOUND),
                                       ("vm.buffer", StatusCode.NOT_FOUND)])
def test_resolve_failures(name, code):
    # Without the '!' a ref type name is not found, as upstream's loader only
    # looks names starting with '!' up in the registry.
    with pytest.raises(VMError) as e:
        resolve_type(name)
    assert e.value.code == code


def test_placeholders_only_when_allowed():
    with pytest.raises(VMError):
        resolve_type("!test.placeholder")
    type_def = resolve_type("!test.placeholder", allow_placeholders=True)
    assert type_def.is_ref and type_def.ref_type.placeholder
    assert lookup_ref_type("!test.placeholder") is None
    assert lookup_ref_type("!test.placeholder", include_placeholders=True) is type_def.ref_type
    # A real registration wins over the placeholder.
    assert register_placeholder_ref_type("vm.buffer") is VMBuffer.ref_type


def test_type_def_equality_is_upstreams():
    assert resolve_type("!vm.list<i32>") == resolve_type("!vm.list<f32>")
    assert resolve_type("!vm.list<i32>") != resolve_type("!vm.buffer")
    assert resolve_type("i32") != resolve_type("i64")
    assert resolve_type("i32") == as_type_def(ValueType.I32)
    assert as_type_def("?") is VARIANT_TYPE and as_type_def(None) is VARIANT_TYPE
    assert as_type_def(VMBuffer.ref_type) == resolve_type("!vm.buffer")
    assert len({resolve_type("!vm.list<i8>"), resolve_type("!vm.list<i64>")}) == 1


def test_type_matches_rules(thing_type):
    buffer, lst, thing = VMBuffer.alloc(4), VMList("i32"), Thing()
    buffer_type, list_type = VMBuffer.ref_type, VMList.ref_type
    # Null matches everything, including the variant/value "no ref type".
    for ref_type in (buffer_type, list_type, thing_type, ANY_REF_TYPE, None):
        assert type_matches(ref_type, None)
    assert type_matches(buffer_type, buffer) and not type_matches(buffer_type, lst)
    assert type_matches(list_type, lst) and not type_matches(list_type, thing)
    assert type_matches(thing_type, thing)
    assert all(type_matches(ANY_REF_TYPE, obj) for obj in (buffer, lst, thing))
    # !vm.opaque (ref_type None) accepts no non-null ref, as upstream.
    assert not any(type_matches(None, obj) for obj in (buffer, lst, thing))


def test_unregistered_class_never_matches():
    class Loose(RefObject):
        __slots__ = ()

    obj = Loose()
    assert Loose.ref_type is None
    assert not type_matches(None, obj)
    assert not type_matches(VMBuffer.ref_type, obj)
    assert type_matches(ANY_REF_TYPE, obj)


def test_check_ref_type_and_ref_or_null():
    buffer, lst = VMBuffer.alloc(4), VMList("i32")
    assert check_ref_type(VMBuffer.ref_type, buffer) is buffer
    assert check_ref_type(VMBuffer.ref_type, None) is None
    with pytest.raises(VMError) as e:
        check_ref_type(VMBuffer.ref_type, lst)
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert "mismatch" in e.value.message
    with pytest.raises(VMError):
        check_ref_type(None, buffer)
    assert ref_or_null(VMBuffer.ref_type, buffer) is buffer
    assert ref_or_null(VMList.ref_type, buffer) is None
    assert ref_or_null(None, buffer) is None
    assert ref_or_null(VMBuffer.ref_type, None) is None


def test_null_ref_error():
    err = null_ref_error("buffer")
    assert err.code == StatusCode.INVALID_ARGUMENT and err.message == "buffer is null"
    err = null_ref_error("list", VMBuffer.alloc(1))
    assert "list is null" in err.message and "!vm.buffer" in err.message


def test_refs_are_truthy_and_compare_by_identity():
    empty_buffer, empty_list = VMBuffer.alloc(0), VMList("i32")
    assert bool(empty_buffer) and bool(empty_list)
    assert len(empty_buffer) == 0 and len(empty_list) == 0
    a, b = VMBuffer.from_bytes(b"xy"), VMBuffer.from_bytes(b"xy")
    assert a != b and a == a
    assert len({a, b}) == 2


def test_on_release_runs_once_when_last_reference_dies():
    released = []

    class Resource(RefObject):
        __slots__ = ("name",)

        def __init__(self, name):
            self.name = name

        def on_release(self):
            released.append(self.name)

    reg = Resource("a")
    alias = reg          # retain
    reg = None           # release one
    assert released == []
    lst = VMList("?", 1)
    lst.resize(1)
    lst.set_ref(0, alias)
    alias = None         # the list still holds it
    assert released == []
    lst.resize(0)        # truncation releases
    assert released == ["a"]

    # Moving out of a list hands over the one reference.
    lst.resize(1)
    lst.set_ref(0, Resource("b"))
    moved = lst.take_ref(0)
    assert lst.get_ref(0) is None and released == ["a"]
    del moved
    assert released == ["a", "b"]

    # Objects in a cycle are released by the collector.
    cyc = VMList("?", 1)
    cyc.resize(2)
    cyc.set_ref(0, cyc)
    cyc.set_ref(1, Resource("c"))
    del cyc
    gc.collect()
    assert released == ["a", "b", "c"]


def test_types_without_on_release_have_no_finalizer():
    assert "__del__" not in vars(VMBuffer) and not hasattr(VMBuffer, "__del__")
    assert not hasattr(VMList, "__del__")


def test_type_def_repr_and_flags():
    type_def = TypeDef("!vm.buffer", ValueType.NONE, VMBuffer.ref_type)
    assert type_def.is_ref and "vm.buffer" in repr(type_def)
