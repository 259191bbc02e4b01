"""Ref objects, the ref type registry and type definitions.

Everything a ref register can hold is a `RefObject` (vm.buffer, vm.list, HAL
objects, user types) or None for the null ref.

Lifetime: how upstream's reference counting maps onto Python
-----------------------------------------------------------
CPython's own reference count does the work of iree_vm_ref_t's counter:

- retain (an operand without the MOVE bit copied into another register, a
  list slot, a global): plain assignment, `dst = src`; both names now hold
  the object.
- release (vm.discard.refs, overwriting a register, a list slot being
  truncated away): drop the name, `r = None`.
- move (an operand with the MOVE bit): `dst = src; src = None`, unless dst and
  src are the same register. The source register must become None so the
  object is not kept alive longer than upstream would keep it.
- destroy: when the last Python reference goes away the object is freed. A
  type owning something outside Python (a device allocation, a file) overrides
  `on_release()`; it is then called exactly once, when CPython frees the
  object (for objects caught in a reference cycle, when the cycle collector
  frees them). Types that do not override it pay nothing.

Identity is the ref's identity: vm.cmp.eq.ref is `a is b`. RefObject never
defines `__eq__`, and is always truthy (`__bool__`), so `if ref:` means "not
null" even for an empty buffer or list; generated code should still prefer
`ref is not None`.

Type registry
-------------
Upstream registers ref types per instance by name ("vm.buffer", "vm.list",
"hal.buffer", ...). Modules spell them in their type table with a `!` prefix;
every `!vm.list<...>` resolves to the one "vm.list" type (list element types
are not part of a ref's type), and `!vm.opaque` (also how `!vm.ref<?>` is
written) is not a ref type at all but the variant type. `resolve_type` turns a
type-table name into a `TypeDef` exactly as the bytecode module loader does.
The registry here is process-wide.
"""

from __future__ import annotations

from vmrt.errors import StatusCode, VMError
from vmrt.vm.error_kinds import ErrorKind, vm_error
from vmrt.vm.value import VALUE_TYPE_BY_NAME, VALUE_TYPE_NAME, ValueType

__all__ = [
    "RefObject", "RefType", "TypeDef", "ANY_REF_TYPE", "VARIANT_TYPE",
    "register_ref_type", "unregister_ref_type", "lookup_ref_type",
    "register_placeholder_ref_type", "resolve_type", "value_type_def",
    "ref_type_def", "as_type_def", "type_matches", "check_ref_type",
    "ref_or_null", "null_ref_error", "canonical_ref_type_name",
]


class RefObject:
    """Base class of every value a ref register can hold.

    `ref_type` is set on the class by `register_ref_type`. Subclasses should
    declare `__slots__`.
    """

    __slots__ = ()

    #: The registered RefType of this class (None until registered).
    ref_type: "RefType | None" = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Only types that override on_release get a finalizer: the others
        # cost nothing extra when freed.
        if cls.on_release is not RefObject.on_release and "__del__" not in cls.__dict__:
            cls.__del__ = _call_on_release

    def on_release(self) -> None:
        """Called once when the last reference to the object goes away.

        Override to free resources held outside Python. Must not raise (an
        exception here is reported by Python as unraisable and ignored, as a
        destroy callback upstream cannot fail).
        """

    def __bool__(self) -> bool:
        return True


def _call_on_release(self) -> None:
    self.on_release()


class RefType:
    """A registered ref type: its name (without '!') and Python class.

    Placeholder types (tooling only: a module naming a type nobody
    registered) have `cls` None and are skipped by normal lookups.
    """

    __slots__ = ("name", "cls", "placeholder")

    def __init__(self, name: str, cls: type | None, placeholder: bool = False):
        self.name = name
        self.cls = cls
        self.placeholder = placeholder

    def __repr__(self) -> str:
        kind = " placeholder" if self.placeholder else ""
        return f"<RefType !{self.name}{kind}>"


#: Wildcard ref type (upstream IREE_VM_REF_TYPE_ANY): accepts every ref. It is
#: never produced from a module's type table; host code can use it for lists of
#: arbitrary refs.
ANY_REF_TYPE = RefType("?", None)

_registry: dict[str, RefType] = {}
_placeholders: dict[str, RefType] = {}


def canonical_ref_type_name(name: str) -> str:
    """The registry name for a type-table spelling: the '!' dropped, and
    every `vm.list...` folded to "vm.list" (as upstream's loader does)."""
    if name.startswith("!"):
        name = name[1:]
    if name.startswith("vm.list"):
        return "vm.list"
    return name


def register_ref_type(name: str, cls: type) -> RefType:
    """Registers `cls` (a RefObject subclass) as ref type `name` and returns
    its RefType; `cls.ref_type` is set to it.

    Registering the same class under the same name again returns the existing
    type. A different class under a taken name fails with ALREADY_EXISTS.
    """
    name = canonical_ref_type_name(name)
    if not name:
        raise VMError("ref type name is empty", StatusCode.INVALID_ARGUMENT)
    if not (isinstance(cls, type) and issubclass(cls, RefObject)):
        raise VMError(f"ref type !{name}: {cls!r} is not a RefObject subclass",
                      StatusCode.INVALID_ARGUMENT)
    existing = _registry.get(name)
    if existing is not None:
        if existing.cls is cls:
            return existing
        raise VMError(
            f"ref type !{name} is already registered to {existing.cls.__qualname__}",
            StatusCode.ALREADY_EXISTS)
    # A module loaded before the registration holds a placeholder for this
    # name: the placeholder becomes the real type, so those modules see it too.
    ref_type = _placeholders.pop(name, None)
    if ref_type is None:
        ref_type = RefType(name, cls)
    else:
        ref_type.cls, ref_type.placeholder = cls, False
    _registry[name] = ref_type
    cls.ref_type = ref_type
    return ref_type


def unregister_ref_type(name: str) -> None:
    """Removes a registered type (test and plugin teardown). Objects of the
    class keep their `ref_type`; a later registration gets a new RefType."""
    name = canonical_ref_type_name(name)
    ref_type = _registry.pop(name, None)
    if ref_type is not None and ref_type.cls is not None and ref_type.cls.ref_type is ref_type:
        ref_type.cls.ref_type = None


def register_placeholder_ref_type(name: str) -> RefType:
    """A placeholder for a type nobody registered (for tools that inspect
    modules without their runtime modules, like upstream's
    ALLOW_PLACEHOLDER_TYPES flag). Returns the real type if one exists."""
    name = canonical_ref_type_name(name)
    real = _registry.get(name)
    if real is not None:
        return real
    placeholder = _placeholders.get(name)
    if placeholder is None:
        placeholder = _placeholders[name] = RefType(name, None, placeholder=True)
    return placeholder


def lookup_ref_type(name: str, *, include_placeholders: bool = False) -> RefType | None:
    """The RefType for a name as modules or hosts spell it ("!vm.buffer",
    "vm.buffer", "!vm.list<i32>", "!hal.buffer"), or None when unknown.

    Value type names and "!vm.opaque" are not ref types and give None.
    """
    key = canonical_ref_type_name(name)
    ref_type = _registry.get(key)
    if ref_type is None and include_placeholders:
        ref_type = _placeholders.get(key)
    return ref_type


class TypeDef:
    """One entry of a module type table (upstream iree_vm_type_def_t).

    Exactly one of: a value type (`value_type` != NONE), a ref type
    (`ref_type` set), or the variant type (neither; spelled `!vm.opaque`).
    Equality is upstream's: the value type and the ref type, not the name,
    so `!vm.list<i32>` equals `!vm.list<f32>` (both are vm.list).
    """

    __slots__ = ("name", "value_type", "ref_type")

    def __init__(self, name: str, value_type: ValueType = ValueType.NONE,
                 ref_type: RefType | None = None):
        self.name = name
        self.value_type = ValueType(value_type)
        self.ref_type = ref_type

    @property
    def is_value(self) -> bool:
        return self.value_type != ValueType.NONE

    @property
    def is_ref(self) -> bool:
        return self.ref_type is not None

    @property
    def is_variant(self) -> bool:
        return self.value_type == ValueType.NONE and self.ref_type is None

    def __eq__(self, other) -> bool:
        if not isinstance(other, TypeDef):
            return NotImplemented
        return self.value_type == other.value_type and self.ref_type is other.ref_type

    def __hash__(self) -> int:
        return hash((int(self.value_type), id(self.ref_type)))

    def __repr__(self) -> str:
        return f"TypeDef({self.name!r})"


#: The variant type (`!vm.opaque`, `?`): a list of it holds anything.
VARIANT_TYPE = TypeDef("!vm.opaque")

_VALUE_TYPE_DEFS = {vt: TypeDef(VALUE_TYPE_NAME[vt], vt)
                    for vt in ValueType if vt != ValueType.NONE}


def value_type_def(value_type: ValueType) -> TypeDef:
    """The TypeDef of a value type."""
    return _VALUE_TYPE_DEFS[ValueType(value_type)]


def ref_type_def(ref_type: RefType, name: str | None = None) -> TypeDef:
    """A TypeDef for a ref type (the name is only for display)."""
    return TypeDef(name or f"!{ref_type.name}", ValueType.NONE, ref_type)


def resolve_type(full_name: str, *, allow_placeholders: bool = False) -> TypeDef:
    """Resolves a module type-table name to a TypeDef, as upstream's bytecode
    module loader does.

    "i8".."f64" are value types, "!vm.opaque" the variant type, any other
    "!name" a registered ref type ("!vm.list<...>" is vm.list). Fails with
    INVALID_ARGUMENT for an empty name and NOT_FOUND for anything else
    unknown (including "?", which is what `iree-as-module` writes for
    `!vm.list<?>`'s element type).
    """
    if not full_name:
        raise VMError("type definition has no name", StatusCode.INVALID_ARGUMENT)
    value_type = VALUE_TYPE_BY_NAME.get(full_name)
    if value_type is not None:
        return _VALUE_TYPE_DEFS[value_type]
    if full_name == "!vm.opaque":
        return VARIANT_TYPE
    if full_name.startswith("!"):
        ref_type = lookup_ref_type(full_name, include_placeholders=allow_placeholders)
        if ref_type is None and allow_placeholders:
            ref_type = register_placeholder_ref_type(full_name)
        if ref_type is not None:
            return TypeDef(full_name, ValueType.NONE, ref_type)
    raise VMError(f"no type registered with name '{full_name}'", StatusCode.NOT_FOUND)


def as_type_def(spec) -> TypeDef:
    """Host convenience: a TypeDef from a TypeDef, ValueType, RefType, a
    type name ("i32", "!vm.buffer", "?" or "!vm.opaque" for variant) or None
    (variant)."""
    if isinstance(spec, TypeDef):
        return spec
    if spec is None:
        return VARIANT_TYPE
    if isinstance(spec, ValueType):
        return value_type_def(spec)
    if isinstance(spec, RefType):
        return ref_type_def(spec)
    if isinstance(spec, str):
        if spec in ("?", "!vm.ref<?>", "any"):
            return VARIANT_TYPE
        return resolve_type(spec)
    raise TypeError(f"cannot make a type from {spec!r}")


# ---------------------------------------------------------------------------
# Type checks used by the interpreter.
# ---------------------------------------------------------------------------

def type_matches(ref_type: RefType | None, obj) -> bool:
    """Whether `obj` may be stored where `ref_type` is expected, by upstream's
    iree_vm_ref_retain_or_move_checked rule: null always matches, ANY matches
    everything, otherwise the object's type must be exactly `ref_type`.

    `ref_type` is a TypeDef's `ref_type`; None (a value or variant TypeDef,
    e.g. `!vm.opaque`) matches only null: upstream fails
    `vm.cast.any.ref %r : !vm.ref<?> -> !vm.opaque` for any non-null ref.
    """
    if obj is None:
        return True
    if ref_type is None:
        return False
    return ref_type is ANY_REF_TYPE or getattr(obj, "ref_type", None) is ref_type


def check_ref_type(ref_type: RefType | None, obj):
    """Returns `obj` if `type_matches(ref_type, obj)`, else raises
    INVALID_ARGUMENT "source ref type mismatch" (vm.cast.any.ref,
    vm.select.ref, vm.switch.ref, vm.global.load/store.ref, and setting a ref
    into a typed list)."""
    if obj is None or ref_type is ANY_REF_TYPE or (
            ref_type is not None and getattr(obj, "ref_type", None) is ref_type):
        return obj
    raise VMError(_mismatch_message(ref_type, obj), StatusCode.INVALID_ARGUMENT)


def ref_or_null(ref_type: RefType | None, obj):
    """vm.list.get.ref's result check: `obj` when it is null or of exactly
    `ref_type`, else None (upstream puts null in the register instead of
    failing). With `ref_type` None (`!vm.opaque`) every ref becomes null."""
    if obj is None:
        return None
    if ref_type is not None and (ref_type is ANY_REF_TYPE
                                 or getattr(obj, "ref_type", None) is ref_type):
        return obj
    return None


def type_label(obj) -> str:
    ref_type = getattr(obj, "ref_type", None)
    return f"!{ref_type.name}" if ref_type is not None else type(obj).__name__


def _mismatch_message(ref_type: RefType | None, obj) -> str:
    want = f"!{ref_type.name}" if ref_type is not None else "a value/variant type"
    return f"source ref type mismatch ({type_label(obj)} is not {want})"


def null_ref_error(what: str, obj=None) -> VMError:
    """The INVALID_ARGUMENT error upstream returns when an operand that must
    be a buffer/list is null or of another type ("buffer is null"): a
    wrong-typed ref derefs to NULL upstream, so both read "... is null"."""
    got = "" if obj is None else f" (got {type_label(obj)})"
    return vm_error(ErrorKind.NULL_NAMED, what=what, got=got)
