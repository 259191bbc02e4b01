"""FlatBuffer schema declarations: scalar, enum and struct types, and ``@table`` classes.

A schema is declared once, in Python, with the pieces defined here:

* ``ScalarType`` constants (``INT32``, ``UINT64``, ...) and ``EnumDecl`` for enums
  (``bit_flags`` enums included);
* ``StructDecl`` for fixed-layout structs, declared as (name, scalar or enum) members;
* ``@table`` classes whose attributes are field specs (``Scalar``, ``String``,
  ``Vector``, ``TableField``, ``UnionField``, ``UnionVector``) giving name, id, type
  and default; the decorator turns the class into a dataclass (so tables can be
  built from plain Python objects) and attaches the declaration as ``__fb__``;
* ``UnionDecl`` for unions of tables.

The one declaration drives three consumers: the verifying reader
(flatbuffer_reader.py), the builder (flatbuffer_builder.py) and the flatcc-style
JSON printer (json_dump.py). Layouts are ``struct`` formats; numpy is imported only
by ``StructDecl.np_dtype``.
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import struct
from collections.abc import Sequence
from typing import Any, Callable

from vmrt.errors import ModuleFormatError

UOFFSET_MAX = 0xFFFFFFFF
#: flatcc's FLATBUFFERS_IDENTIFIER_SIZE.
IDENTIFIER_SIZE = 4

#: The start of every FlatBuffer: the root table offset (u32), then the file
#: identifier (all zero when the schema has none).
BUFFER_HEADER = struct.Struct(f"<I{IDENTIFIER_SIZE}s")

# --------------------------------------------------------------------------
# Scalar and enum types
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScalarType:
    """A FlatBuffer scalar: its schema name, struct format (little-endian), numpy kind."""

    name: str
    fmt: str  # "<i", "<Q", ...
    np_kind: str  # 'i' or 'u'

    @property
    def size(self) -> int:
        return struct.calcsize(self.fmt)

    @property
    def signed(self) -> bool:
        return self.np_kind == "i"

    @property
    def lo(self) -> int:
        return -(1 << (8 * self.size - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        bits = 8 * self.size - (1 if self.signed else 0)
        return (1 << bits) - 1


INT8 = ScalarType("int8", "<b", "i")
UINT8 = ScalarType("uint8", "<B", "u")
INT16 = ScalarType("int16", "<h", "i")
UINT16 = ScalarType("uint16", "<H", "u")
INT32 = ScalarType("int32", "<i", "i")
UINT32 = ScalarType("uint32", "<I", "u")
INT64 = ScalarType("int64", "<q", "i")
UINT64 = ScalarType("uint64", "<Q", "u")
#: The type of union discriminators.
UTYPE = UINT8


class EnumDecl:
    """An enum over a scalar type. ``bit_flags`` enums declare bit positions."""

    def __init__(self, name: str, base: ScalarType, members: dict[str, int], *,
                 bit_flags: bool = False):
        self.name = name
        self.base = base
        self.bit_flags = bit_flags
        self.members = {k: (1 << v) if bit_flags else v for k, v in members.items()}
        for key, value in self.members.items():
            setattr(self, key, value)
        self.known_mask = 0
        for value in self.members.values():
            self.known_mask |= value

    @property
    def size(self) -> int:
        return self.base.size

    @property
    def np_kind(self) -> str:
        return self.base.np_kind

    def names(self, value: int) -> list[str]:
        """The member names whose bits are set (bit_flags) or that equal value."""
        if self.bit_flags:
            return [k for k, v in self.members.items() if value & v]
        return [k for k, v in self.members.items() if v == value]

    def __repr__(self) -> str:
        return f"EnumDecl({self.name})"


# --------------------------------------------------------------------------
# Structs
# --------------------------------------------------------------------------


class StructDecl:
    """A FlatBuffer struct: its members in order, each a ``ScalarType`` or an ``EnumDecl``.

    Elements are read and written with a ``struct.Struct`` of the members'
    formats (reading thousands of descriptors costs well under a microsecond
    each that way); members typed by an enum keep it for printing.
    """

    def __init__(self, name: str, members: Sequence[tuple[str, ScalarType | EnumDecl]]):
        self.name = name
        self.members = tuple(members)
        self.enums = {n: t for n, t in self.members if isinstance(t, EnumDecl)}
        scalars = [(n, t.base if isinstance(t, EnumDecl) else t) for n, t in self.members]
        self.codec = struct.Struct("<" + "".join(t.fmt[1:] for _, t in scalars))
        align = max((t.size for _, t in scalars), default=1)
        if self.codec.size % align:
            raise TypeError(f"{name}: struct size is not a multiple of its alignment")
        self.size = self.codec.size
        self.align = align
        self.field_names = tuple(n for n, _ in scalars)
        self._np_fields = [(n, f"<{t.np_kind}{t.size}") for n, t in scalars]
        self.cls = _with_record_methods(dataclasses.make_dataclass(
            name, [(n, int, dataclasses.field(default=0)) for n in self.field_names],
            repr=False, eq=False))
        self.cls.__fb__ = self
        self.cls.__module__ = __name__

    @functools.cached_property
    def np_dtype(self):
        """The numpy structured dtype of one element (imports numpy)."""
        import numpy

        return numpy.dtype(self._np_fields)

    def pack(self, obj) -> bytes:
        values = [getattr(obj, n) for n in self.field_names]
        try:
            return self.codec.pack(*values)
        except struct.error as error:
            raise ModuleFormatError(f"cannot write {self.name} {values}: {error}") from None

    def __repr__(self) -> str:
        return f"StructDecl({self.name})"


# --------------------------------------------------------------------------
# Record methods
# --------------------------------------------------------------------------


@reprlib.recursive_repr()
def _record_repr(self) -> str:
    names = type(self).__record_fields__[0]
    return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"


def _record_eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self.__record_fields__[1]
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _with_record_methods(cls):
    """A dataclass made with repr=False, eq=False given the __repr__, __eq__ and
    __hash__ (None) that dataclass would have made: shared here, because generating
    and compiling them for each of the schema's classes took half of its import."""
    fields = dataclasses.fields(cls)
    cls.__record_fields__ = (tuple(f.name for f in fields if f.repr),
                             tuple(f.name for f in fields if f.compare))
    cls.__repr__ = _record_repr
    cls.__eq__ = _record_eq
    cls.__hash__ = None
    return cls


# --------------------------------------------------------------------------
# Tables and unions
# --------------------------------------------------------------------------


class FieldSpec:
    """One table field: its name (set by @table), id and kind."""

    kind = ""
    name = ""

    def __init__(self, id: int):
        self.id = id

    def default_field(self) -> dataclasses.Field:
        # Strings, tables and unions are offsets to other objects: an absent one reads as
        # None. Scalars and vectors override this.
        return dataclasses.field(default=None)

    def ids(self) -> tuple[int, ...]:
        return (self.id,)


class Scalar(FieldSpec):
    kind = "scalar"

    def __init__(self, id: int, type: ScalarType | EnumDecl, default: int = 0):
        super().__init__(id)
        self.type = type
        self.default = default

    def default_field(self):
        return dataclasses.field(default=self.default)


class String(FieldSpec):
    kind = "string"

    def __init__(self, id: int, required: bool = False):
        super().__init__(id)
        self.required = required


class Vector(FieldSpec):
    """A vector of scalars (``UINT8`` vectors read as memoryviews), structs or tables."""

    kind = "vector"

    def __init__(self, id: int, elem):
        super().__init__(id)
        self.elem = elem

    @property
    def elem_kind(self) -> str:
        if isinstance(self.elem, StructDecl):
            return "struct"
        if isinstance(self.elem, ScalarType):
            return "bytes" if self.elem.size == 1 else "scalar"
        return "table"

    @property
    def elem_size(self) -> int:
        return self.elem.size if self.elem_kind != "table" else 4

    @property
    def elem_align(self) -> int:
        if isinstance(self.elem, StructDecl):
            return self.elem.align
        return self.elem_size

    def default_field(self):
        return dataclasses.field(default_factory=list)


class TableField(FieldSpec):
    kind = "table"

    def __init__(self, id: int, table_cls):
        super().__init__(id)
        self.table_cls = table_cls


class UnionDecl:
    """A union of tables; member i (0-based) has type code i + 1 (0 is NONE)."""

    def __init__(self, name: str, members: list):
        self.name = name
        self.members = list(members)

    def type_of(self, obj) -> int:
        for code, cls in enumerate(self.members, 1):
            if type(obj) is cls:
                return code
        raise ModuleFormatError(
            f"{type(obj).__name__} is not a member of union {self.name}")

    def type_name(self, code: int) -> str:
        if 1 <= code <= len(self.members):
            return self.members[code - 1].__fb__.name
        return "NONE"


class UnionField(FieldSpec):
    """A union field: the value at ``id`` and its ``<name>_type`` at ``id - 1``."""

    kind = "union"

    def __init__(self, id: int, union: UnionDecl):
        super().__init__(id)
        self.union = union

    def ids(self):
        return (self.id - 1, self.id)


class UnionVector(UnionField):
    kind = "union_vector"

    def default_field(self):
        return dataclasses.field(default_factory=list)


class TableDecl:
    def __init__(self, cls, name: str, fields: list[FieldSpec], file_identifier):
        self.cls = cls
        self.name = name
        self.fields = fields
        self.file_identifier = file_identifier
        self.by_name = {f.name: f for f in fields}
        #: Non-schema dataclass fields and their default factories.
        self.extra_defaults: dict[str, Callable[[], Any]] = {}

    def __repr__(self) -> str:
        return f"TableDecl({self.name})"


def table(cls=None, *, file_identifier: str | None = None):
    """Class decorator: a FlatBuffer table declared by its field specs.

    Field specs become dataclass fields (scalars default to the schema default,
    strings/tables/unions to None, vectors to empty lists).  Other annotated
    attributes stay ordinary dataclass fields (non-schema helpers, not written).
    Read tables also carry ``_present``: the names of vector fields present in
    the buffer, so a present-but-empty vector survives a round trip.
    """

    def wrap(cls):
        specs: list[FieldSpec] = []
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        new_annotations: dict[str, Any] = {}
        for key, value in list(cls.__dict__.items()):
            if isinstance(value, FieldSpec):
                value.name = key
                specs.append(value)
                new_annotations[key] = annotations.pop(key, Any)
                setattr(cls, key, value.default_field())
        for key, value in annotations.items():
            new_annotations[key] = value
        used: dict[int, str] = {}
        for spec in specs:
            for i in spec.ids():
                if i in used:
                    raise TypeError(f"{cls.__name__}: field id {i} used twice")
                used[i] = spec.name
        if sorted(used) != list(range(len(used))):
            raise TypeError(f"{cls.__name__}: field ids are not contiguous")
        specs.sort(key=lambda s: s.id)
        new_annotations["_present"] = Any
        cls._present = dataclasses.field(default=None, init=False, repr=False,
                                          compare=False)
        cls.__annotations__ = new_annotations
        dc = _with_record_methods(dataclasses.dataclass(cls, repr=False, eq=False))
        decl = TableDecl(dc, cls.__name__, specs, file_identifier)
        schema_names = {s.name for s in specs} | {"_present"}
        for f in dataclasses.fields(dc):
            if f.name in schema_names:
                continue
            if f.default is not dataclasses.MISSING:
                decl.extra_defaults[f.name] = (lambda v=f.default: v)
            elif f.default_factory is not dataclasses.MISSING:
                decl.extra_defaults[f.name] = f.default_factory
        dc.__fb__ = decl
        return dc

    return wrap if cls is None else wrap(cls)


def is_vector_present(obj, name: str) -> bool:
    """Whether a vector field is written/printed: as read, else when non-empty."""
    present = obj._present
    if present is not None and name in present:
        return True
    return len(getattr(obj, name)) > 0
