"""vm.list: a resizable list of values, refs or variants (upstream list.c).

The element type decides the storage mode:

- a value type (i8, i16, i32, i64, f32, f64): values stored as that type.
  Reading or writing with another type converts by upstream's rule
  (`vmrt.vm.value.convert_value`): integers are truncated / sign-extended,
  f32 <-> f64 convert, and integer <-> float gives ZERO (not a numeric
  conversion). Refs cannot be stored.
- a ref type (`!vm.buffer`, `!vm.list<...>`, `!hal.buffer`, ...): only null or
  refs of exactly that type (every list type is the one "vm.list" type, so a
  `!vm.list<!vm.list<i32>>` takes any list). Values cannot be stored.
- variant (`!vm.opaque`, written `!vm.list<?>` in the compiler): each element
  is empty, a typed value, or a ref. Reading a value with another type
  converts as above; reading a value from an empty or ref element fails.

`VMList(element_type, initial_capacity)` returns an instance of a subclass
specialized for the storage mode, so each get/set is one index check and (at
most) one conversion. Indices and sizes come from i32 registers and, as
upstream casts them to uint32, negative values mean huge ones.

Failures (all VMError): OUT_OF_RANGE for an index >= size (checked first),
FAILED_PRECONDITION for a value access on a ref list or a ref access on a
value list or a value read of a non-value variant element, INVALID_ARGUMENT
for a ref of the wrong type set into a ref list (and for list copies between
incompatible lists), RESOURCE_EXHAUSTED for capacities the host will not
allocate.

Capacity follows upstream: reserve(n) with n above the capacity grows it to
max(n rounded up to 64, 2 * capacity); alloc(0) has capacity 0.
"""

from __future__ import annotations

from vmrt.errors import StatusCode, VMError
from vmrt.vm.error_kinds import ErrorKind, vm_error
from vmrt.vm.ref import (
    ANY_REF_TYPE, RefObject, TypeDef, as_type_def,
    register_ref_type, value_type_def,
)
from vmrt.vm.value import (
    CONVERT, F32, F64, FLOAT_TYPES, I8, I16, I32, I64, NONE, VALUE_TYPE_NAME,
    VALUE_TYPE_SIZE, ValueType, normalize_value, zero_of,
)

__all__ = ["VMList", "MAX_LIST_CAPACITY", "list_alloc"]

#: Largest capacity (in elements) a list may reserve; beyond it
#: RESOURCE_EXHAUSTED (upstream fails when its allocator does).
MAX_LIST_CAPACITY = 1 << 28

# Variant element tags in VMList._types: 0 empty, 1..6 the ValueType, 7 ref.
_EMPTY = 0
_REF = 7
_NONE_TYPE = type(None)


def _as_count(value: int) -> int:
    """An i32 register read as upstream's uint32 cast."""
    return value & 0xFFFFFFFF if value < 0 else value


class VMList(RefObject):
    """A vm.list. Construct with `VMList(element_type, initial_capacity)` or
    `VMList.alloc(...)`; `element_type` is a TypeDef (or anything
    `as_type_def` accepts: "i32", "!vm.buffer", "?", a ValueType, ...)."""

    __slots__ = ("element_type", "_values", "_types", "_capacity", "_ref_type")

    #: Bytes per element upstream stores (reported in RESOURCE_EXHAUSTED errors).
    _element_size = 24

    def __new__(cls, element_type=None, initial_capacity: int = 0):
        if cls is VMList:
            cls = _class_for(as_type_def(element_type))
        return object.__new__(cls)

    def __init__(self, element_type=None, initial_capacity: int = 0):
        type_def = as_type_def(element_type)
        self.element_type = type_def
        self._values = []
        self._types = [] if type_def.is_variant else None
        self._ref_type = type_def.ref_type
        self._capacity = 0
        if initial_capacity:
            self.reserve(initial_capacity)

    @staticmethod
    def alloc(element_type, initial_capacity: int = 0) -> "VMList":
        """vm.list.alloc."""
        return VMList(element_type, initial_capacity)

    # ----------------------------------------------------------------------
    # Size and capacity
    # ----------------------------------------------------------------------

    @property
    def size(self) -> int:
        """vm.list.size: the number of elements (an attribute, like
        VMBuffer.length)."""
        return len(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def capacity(self) -> int:
        """Elements the list can hold before growing (as upstream counts)."""
        return self._capacity

    def reserve(self, minimum_capacity: int) -> None:
        """vm.list.reserve: grows the capacity to at least
        `minimum_capacity`; never shrinks."""
        minimum_capacity = _as_count(minimum_capacity)
        if self._capacity >= minimum_capacity:
            return
        new_capacity = max((minimum_capacity + 63) & ~63, self._capacity * 2)
        if new_capacity > MAX_LIST_CAPACITY:
            raise VMError(
                f"cannot reserve {minimum_capacity} list elements "
                f"({new_capacity} x {self._element_size} bytes)",
                StatusCode.RESOURCE_EXHAUSTED)
        self._capacity = new_capacity

    def resize(self, new_size: int) -> None:
        """vm.list.resize: truncates (dropping the elements) or extends with
        zero values / null refs / empty variants."""
        new_size = _as_count(new_size)
        values = self._values
        count = len(values)
        if new_size == count:
            return
        if new_size < count:
            del values[new_size:]
            if self._types is not None:
                del self._types[new_size:]
            return
        if new_size > self._capacity:
            self.reserve(new_size)
        try:
            values.extend([self._fill_value] * (new_size - count))
            if self._types is not None:
                self._types.extend([_EMPTY] * (new_size - count))
        except MemoryError:
            del values[count:]
            if self._types is not None:
                del self._types[count:]
            raise VMError(f"cannot grow a list to {new_size} elements",
                          StatusCode.RESOURCE_EXHAUSTED) from None

    def clear(self) -> None:
        self.resize(0)

    # ----------------------------------------------------------------------
    # Errors
    # ----------------------------------------------------------------------

    def _index_error(self, index: int) -> VMError:
        return vm_error(ErrorKind.LIST_INDEX, index=_as_count(index), count=len(self._values))

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self._values):
            raise self._index_error(index)

    def _mode_error(self, message: str) -> VMError:
        return VMError(f"{message} ({self._type_name()})", StatusCode.FAILED_PRECONDITION)

    def _type_name(self) -> str:
        return f"!vm.list<{self.element_type.name}>"

    def __repr__(self) -> str:
        return f"<VMList {self._type_name()} size={len(self._values)}>"

    # ----------------------------------------------------------------------
    # Host (Python) API shared by every storage mode
    # ----------------------------------------------------------------------

    _fill_value = None

    def get_value(self, index: int) -> tuple[ValueType, int | float]:
        """(value type, value) of a value element (iree_vm_list_get_value)."""
        raise NotImplementedError

    def get_value_as(self, index: int, value_type: ValueType):
        """The element converted to `value_type` (iree_vm_list_get_value_as)."""
        stored_type, value = self.get_value(index)
        fn = CONVERT[(stored_type, ValueType(value_type))]
        return value if fn is None else fn(value)

    def set_value(self, index: int, value, value_type: ValueType) -> None:
        """Sets a value given as `value_type` (normalized first: integers
        wrapped, f32 rounded), converting to the element type as upstream's
        iree_vm_list_set_value does."""
        raise NotImplementedError

    def _push(self, set_element, *value) -> None:
        """Grows the list by one element set by `set_element(index, *value)`; a value
        that cannot be set leaves the list as it was."""
        index = len(self._values)
        self.resize(index + 1)
        try:
            set_element(index, *value)
        except VMError:
            self.resize(index)
            raise

    def push_value(self, value, value_type: ValueType) -> None:
        self._push(self.set_value, value, value_type)

    def push_ref(self, obj) -> None:
        self._push(self.set_ref, obj)

    def pop_front_ref(self):
        """Removes and returns element 0 as a ref (iree_vm_list_pop_front_ref_move)."""
        if not self._values:
            raise VMError("cannot pop from an empty list", StatusCode.OUT_OF_RANGE)
        obj = self.get_ref(0)
        del self._values[0]
        if self._types is not None:
            del self._types[0]
        return obj

    def get_item(self, index: int):
        """The element as Python sees it: a number, a RefObject, or None
        (null ref / empty variant)."""
        raise NotImplementedError

    def set_item(self, index: int, item) -> None:
        """Sets from a Python object: RefObject or None sets a ref; a number
        is converted to the element type (value lists) or stored as i64 /
        f64 (variant lists; use set_value to choose the type)."""
        if item is None or isinstance(item, RefObject):
            self.set_ref(index, item)
        elif isinstance(item, float):
            self.set_value(index, item, self._default_float_type)
        else:
            self.set_value(index, int(item), self._default_int_type)

    def append(self, item) -> None:
        self._push(self.set_item, item)

    _default_int_type = I64
    _default_float_type = F64

    def __iter__(self):
        for index in range(len(self._values)):
            yield self.get_item(index)

    @classmethod
    def from_values(cls, values, element_type=None) -> "VMList":
        """A list holding `values` (numbers, RefObjects, None). Without an
        element type the list is a variant list (ints stored as i64, floats
        as f64)."""
        values = list(values)
        result = VMList(element_type, len(values))
        if not result._take_values(values):
            result.resize(len(values))
            for index, item in enumerate(values):
                result.set_item(index, item)
        return result

    def _take_values(self, values: list) -> bool:
        """Takes `values` (a list of its own) as the elements of this empty list when
        set_item would store each as it is; False (nothing done) when it cannot tell."""
        return False

    def to_python(self) -> list:
        """The elements as a Python list; nested lists are converted too,
        other refs are kept as objects."""
        out = []
        for index in range(len(self._values)):
            item = self.get_item(index)
            out.append(item.to_python() if isinstance(item, VMList) else item)
        return out

    def clone_list(self) -> "VMList":
        """A new list of the same element type holding the same elements
        (refs are shared, as upstream retains them)."""
        target = VMList(self.element_type, len(self._values))
        target._values = list(self._values)
        if self._types is not None:
            target._types = list(self._types)
        return target

    def swap_storage(self, other: "VMList") -> None:
        """Exchanges the contents and element types of two lists."""
        if other is self:
            return
        for name in ("element_type", "_values", "_types", "_capacity", "_ref_type"):
            mine = getattr(self, name)
            setattr(self, name, getattr(other, name))
            setattr(other, name, mine)
        self.__class__, other.__class__ = other.__class__, self.__class__

    def copy_elements(self, src_index: int, target: "VMList", dst_index: int,
                      count: int) -> None:
        """Copies `count` elements from this list at `src_index` into
        `target` at `dst_index` (iree_vm_list_copy): both ranges must exist,
        ranges of one list must not overlap, and the element types must be
        compatible (anything into a variant list; from a variant list only
        elements of exactly the target's element type; otherwise equal
        element types)."""
        if count == 0:
            return
        src_count = len(self._values)
        if src_index < 0 or count < 0 or src_index + count > src_count:
            raise VMError(
                f"source range [{src_index}, {src_index + count}) of {count} elements "
                f"out of range of source list with size {src_count}",
                StatusCode.OUT_OF_RANGE)
        dst_count = len(target._values)
        if dst_index < 0 or dst_index + count > dst_count:
            raise VMError(
                f"destination range [{dst_index}, {dst_index + count}) of {count} elements "
                f"out of range of destination list with size {dst_count}",
                StatusCode.OUT_OF_RANGE)
        if (target is self and src_index + count > dst_index
                and dst_index + count > src_index):
            raise VMError(
                f"overlapping copy of range [{src_index}, {src_index + count}) to "
                f"[{dst_index}, {dst_index + count}) of {count} elements not supported",
                StatusCode.INVALID_ARGUMENT)
        src_end = src_index + count
        dst_end = dst_index + count
        if target._types is not None:
            target._values[dst_index:dst_end] = self._values[src_index:src_end]
            target._types[dst_index:dst_end] = self._variant_tags(src_index, src_end)
            return
        if self._types is not None:
            want_value = target.element_type.value_type
            want_ref = target._ref_type
            tags = self._types[src_index:src_end]
            items = self._values[src_index:src_end]
            for offset, (tag, item) in enumerate(zip(tags, items)):
                if want_value != NONE:
                    ok = tag == want_value
                else:
                    ok = tag == _REF and getattr(item, "ref_type", None) is want_ref
                if not ok:
                    raise VMError(
                        "destination list element type does not match the source "
                        f"element {src_index + offset}", StatusCode.INVALID_ARGUMENT)
            target._values[dst_index:dst_end] = items
            return
        if _storage_class(self) is not _storage_class(target) \
                or self.element_type != target.element_type:
            raise VMError("src/dst element type mismatch", StatusCode.INVALID_ARGUMENT)
        target._values[dst_index:dst_end] = self._values[src_index:src_end]

    def _variant_tags(self, start: int, end: int) -> list[int]:
        raise NotImplementedError


# ---------------------------------------------------------------------------
# Value lists
# ---------------------------------------------------------------------------

class _ValueList(VMList):
    __slots__ = ()
    value_type = NONE

    def get_ref(self, index):
        self._check_index(index)
        raise self._mode_error("list does not store refs")

    take_ref = get_ref

    def set_ref(self, index, obj):
        self._check_index(index)
        raise self._mode_error("list cannot store refs")

    def get_value(self, index):
        self._check_index(index)
        return self.value_type, self._values[index]

    def set_value(self, index, value, value_type):
        self._check_index(index)
        value_type = ValueType(value_type)
        fn = CONVERT[(value_type, self.value_type)]
        value = normalize_value(value, value_type)
        self._values[index] = value if fn is None else fn(value)

    def get_item(self, index):
        self._check_index(index)
        return self._values[index]

    def set_item(self, index, item):
        if item is None or isinstance(item, RefObject):
            self.set_ref(index, item)
        else:
            self._check_index(index)
            self._values[index] = normalize_value(item, self.value_type)

    def _variant_tags(self, start, end):
        return [int(self.value_type)] * (end - start)


def _named(function, name: str, doc: str):
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    return function


def _getter_direct():
    def get(self, index):
        if index >= 0:
            try:
                return self._values[index]
            except IndexError:
                pass
        raise self._index_error(index)
    return get


def _getter_converting(fn):
    def get(self, index):
        if index >= 0:
            try:
                value = self._values[index]
            except IndexError:
                pass
            else:
                return fn(value)
        raise self._index_error(index)
    return get


def _setter_direct():
    def set_(self, index, value):
        if index >= 0:
            try:
                self._values[index] = value
                return
            except IndexError:
                pass
        raise self._index_error(index)
    return set_


def _setter_converting(fn):
    def set_(self, index, value):
        if index >= 0 and index < len(self._values):
            self._values[index] = fn(value)
            return
        raise self._index_error(index)
    return set_


_ACCESS_TYPES = {"i32": I32, "i64": I64, "f32": F32, "f64": F64}


def _make_value_list_class(value_type: ValueType) -> type:
    namespace = {
        "__slots__": (),
        "value_type": value_type,
        "_element_size": VALUE_TYPE_SIZE[value_type],
        "_fill_value": zero_of(value_type),
        "_default_int_type": value_type if value_type not in FLOAT_TYPES else I64,
        "_default_float_type": value_type if value_type in FLOAT_TYPES else F64,
    }
    for suffix, access_type in _ACCESS_TYPES.items():
        read = CONVERT[(value_type, access_type)]
        write = CONVERT[(access_type, value_type)]
        get = _getter_direct() if read is None else _getter_converting(read)
        set_ = _setter_direct() if write is None else _setter_converting(write)
        namespace[f"get_{suffix}"] = _named(get, f"get_{suffix}", f"vm.list.get.{suffix}")
        namespace[f"set_{suffix}"] = _named(set_, f"set_{suffix}", f"vm.list.set.{suffix}")
    name = f"VMList_{VALUE_TYPE_NAME[value_type]}"
    return type(name, (_ValueList,), namespace)


_VALUE_LIST_CLASSES = {vt: _make_value_list_class(vt) for vt in (I8, I16, I32, I64, F32, F64)}


# ---------------------------------------------------------------------------
# Ref lists
# ---------------------------------------------------------------------------

class _RefList(VMList):
    __slots__ = ()
    _element_size = 16

    def _no_values(self, index, value=None):
        self._check_index(index)
        raise self._mode_error("list does not store values")

    def _no_value_stores(self, index, value=None):
        self._check_index(index)
        raise self._mode_error("list cannot store values")

    get_i32 = get_i64 = get_f32 = get_f64 = _no_values
    set_i32 = set_i64 = set_f32 = set_f64 = _no_value_stores

    def get_value(self, index):
        self._no_values(index)

    def set_value(self, index, value, value_type):
        self._no_value_stores(index)

    get_ref = _named(_getter_direct(), "get_ref",
                     "vm.list.get.ref (retain): the element, or None.")

    def take_ref(self, index):
        """vm.list.get.ref with a MOVE result: the element, leaving null."""
        if index >= 0 and index < len(self._values):
            values = self._values
            obj = values[index]
            values[index] = None
            return obj
        raise self._index_error(index)

    def set_ref(self, index, obj):
        """vm.list.set.ref: null or a ref of exactly the element type."""
        if not 0 <= index < len(self._values):
            raise self._index_error(index)
        if obj is not None:
            ref_type = self._ref_type
            if ref_type is not ANY_REF_TYPE and getattr(obj, "ref_type", None) is not ref_type:
                raise VMError(
                    f"source ref type mismatch ({_ref_label(obj)} set into "
                    f"{self._type_name()})", StatusCode.INVALID_ARGUMENT)
        self._values[index] = obj

    def get_item(self, index):
        return self.get_ref(index)

    def _take_values(self, values):
        # One check per class of the values, not per value (a parameter load makes a
        # list of hundreds of buffers): set_item takes null and a RefObject whose
        # ref_type is the element type's (any, for ANY_REF_TYPE). A class whose
        # instances have a __dict__ could override ref_type per object: set_item
        # checks those one by one.
        ref_type = self._ref_type
        for cls in set(map(type, values)):
            if cls is not _NONE_TYPE and not (
                    issubclass(cls, RefObject) and not cls.__dictoffset__
                    and (ref_type is ANY_REF_TYPE or cls.ref_type is ref_type)):
                return False
        self._values = values
        return True

    def _variant_tags(self, start, end):
        return [_EMPTY if obj is None else _REF for obj in self._values[start:end]]


def _ref_label(obj) -> str:
    ref_type = getattr(obj, "ref_type", None)
    return f"!{ref_type.name}" if ref_type is not None else type(obj).__name__


# ---------------------------------------------------------------------------
# Variant lists
# ---------------------------------------------------------------------------

def _not_a_value(list_, index):
    tag = list_._types[index]
    what = "a ref" if tag == _REF else "empty"
    return VMError(f"variant at index {index} is not a value type ({what})",
                   StatusCode.FAILED_PRECONDITION)


def _variant_getter(access_type: ValueType):
    # Per stored tag: None = pass through, a function = convert,
    # False = not a value.
    table = tuple(False if tag in (_EMPTY, _REF) else CONVERT[(ValueType(tag), access_type)]
                  for tag in range(8))
    access_tag = int(access_type)

    def get(self, index):
        if index >= 0:
            try:
                tag = self._types[index]
            except IndexError:
                pass
            else:
                if tag == access_tag:
                    return self._values[index]
                fn = table[tag]
                if fn is None:
                    return self._values[index]
                if fn is False:
                    raise _not_a_value(self, index)
                return fn(self._values[index])
        raise self._index_error(index)
    return get


def _variant_setter(access_type: ValueType):
    access_tag = int(access_type)

    def set_(self, index, value):
        if index >= 0 and index < len(self._values):
            self._types[index] = access_tag
            self._values[index] = value
            return
        raise self._index_error(index)
    return set_


class _VariantList(VMList):
    __slots__ = ()
    _element_size = 24

    def get_ref(self, index):
        """vm.list.get.ref (retain): the ref, None for an empty element;
        FAILED_PRECONDITION for a value element."""
        if index >= 0:
            try:
                tag = self._types[index]
            except IndexError:
                pass
            else:
                if tag == _REF or tag == _EMPTY:
                    return self._values[index]
                raise VMError(f"variant at index {index} is a value, not a ref",
                              StatusCode.FAILED_PRECONDITION)
        raise self._index_error(index)

    def take_ref(self, index):
        """vm.list.get.ref with a MOVE result: the element becomes empty."""
        obj = self.get_ref(index)
        self._types[index] = _EMPTY
        self._values[index] = None
        return obj

    def set_ref(self, index, obj):
        """vm.list.set.ref: any ref; null makes the element empty."""
        if index >= 0 and index < len(self._values):
            self._types[index] = _EMPTY if obj is None else _REF
            self._values[index] = obj
            return
        raise self._index_error(index)

    def get_value(self, index):
        self._check_index(index)
        tag = self._types[index]
        if tag == _EMPTY or tag == _REF:
            raise _not_a_value(self, index)
        return ValueType(tag), self._values[index]

    def set_value(self, index, value, value_type):
        self._check_index(index)
        value_type = ValueType(value_type)
        self._values[index] = normalize_value(value, value_type)
        self._types[index] = int(value_type)

    def get_item(self, index):
        self._check_index(index)
        return self._values[index]

    def get_variant_type(self, index) -> TypeDef | None:
        """The element's type: a value TypeDef, the ref's type, or None for
        an empty element."""
        self._check_index(index)
        tag = self._types[index]
        if tag == _EMPTY:
            return None
        if tag == _REF:
            obj = self._values[index]
            ref_type = getattr(obj, "ref_type", None)
            return TypeDef(f"!{ref_type.name}" if ref_type else "?", NONE, ref_type)
        return value_type_def(ValueType(tag))

    def _variant_tags(self, start, end):
        return self._types[start:end]


for _suffix, _access_type in _ACCESS_TYPES.items():
    _get = _variant_getter(_access_type)
    _set = _variant_setter(_access_type)
    _get.__name__ = _get.__qualname__ = f"get_{_suffix}"
    _set.__name__ = _set.__qualname__ = f"set_{_suffix}"
    setattr(_VariantList, f"get_{_suffix}", _get)
    setattr(_VariantList, f"set_{_suffix}", _set)
del _suffix, _access_type, _get, _set


def _class_for(type_def: TypeDef) -> type:
    if type_def.value_type != NONE:
        return _VALUE_LIST_CLASSES[type_def.value_type]
    if type_def.ref_type is not None:
        return _RefList
    return _VariantList


register_ref_type("vm.list", VMList)


def list_alloc(element_type, initial_capacity: int) -> VMList:
    """vm.list.alloc (the interpreter's LIST_ALLOC)."""
    return VMList(element_type, initial_capacity)


# -- memory accounting (context limits) ------------------------------------------------------------
def _storage_class(lst: VMList) -> type:
    return getattr(type(lst), "_unmetered", type(lst))


class _MeteredList:
    """Mixed into each list class for contexts with limits: the list's capacity
    (`_element_size` bytes per element, as upstream stores them) stays charged
    to the context's meter while the list lives."""

    __slots__ = ()

    def reserve(self, minimum_capacity: int) -> None:
        before = self._capacity
        super().reserve(minimum_capacity)
        grown = (self._capacity - before) * self._element_size
        if grown:
            try:
                self._meter.charge_memory(grown)
            except BaseException:
                self._capacity = before
                raise
            self._charged += grown

    def on_release(self) -> None:
        meter = getattr(self, "_meter", None)
        if meter is not None:
            self._meter = None
            meter.release_memory(self._charged)
            if not isinstance(self, _ValueList):
                meter.track_container(-1)


_METERED_CLASSES: dict[type, type] = {}


def metered_list_alloc(meter, element_type, initial_capacity: int) -> VMList:
    """vm.list.alloc charged to `meter`."""
    base = _class_for(as_type_def(element_type))
    cls = _METERED_CLASSES.get(base)
    if cls is None:
        cls = _METERED_CLASSES[base] = type(f"Metered{base.__name__}", (_MeteredList, base),
                                            {"__slots__": ("_meter", "_charged"),
                                             "_unmetered": base})
    lst = object.__new__(cls)
    lst._meter, lst._charged = meter, 0
    if not issubclass(base, _ValueList):  # it can hold refs, so it can be part of a cycle
        meter.track_container(1)            # (on_release counts it out, as it does the bytes)
    lst.__init__(element_type, initial_capacity)
    return lst
