"""Generic FlatBuffer primitives: schema declarations, a verifying reader, a builder.

A schema is declared once, in Python, with the pieces defined here:

* ``ScalarType`` constants (``INT32``, ``UINT64``, ...) and ``EnumDecl`` for enums
  (``bit_flags`` enums included);
* ``StructDecl`` for fixed-layout structs, declared as (name, scalar or enum) members;
* ``@table`` classes whose attributes are field specs (``Scalar``, ``String``,
  ``Vector``, ``TableField``, ``UnionField``, ``UnionVector``) giving name, id, type
  and default; the decorator turns the class into a dataclass (so tables can be
  built from plain Python objects) and attaches the declaration as ``__fb__``;
* ``UnionDecl`` for unions of tables.

The one declaration drives three consumers: ``FlatBufferReader`` (verify + read),
``FlatBufferBuilder`` (write) and the flatcc-style JSON printer in json_dump.py.

Reading is columnar and vectorized.  All tables reached through the same schema
path (say every ``function_signatures[*].attrs[*]``) form one *group* that is
verified at once with numpy: the checks are the ones flatcc's verifier makes
(flatcc/src/runtime/verifier.c: header/vtable/field ranges and alignment, string
termination, vector sizes, union consistency) plus two it leaves out: strings must
be UTF-8 and union types must name a declared member.  The verified groups keep
per-field columns (lists of Python values) from which table objects are made
lazily, so a module with 10,000 functions costs a few dozen numpy calls to verify
and nothing to read until its tables are touched.  Every failure is a
``ModuleFormatError`` naming the schema path of the offending table.

Positions are absolute offsets into the input buffer (the whole archive), not
relative to the FlatBuffer: flatcc checks the alignment of scalar fields against
real addresses, and the archive is loaded aligned, so alignment is checked
relative to the start of the archive.

Start-up: this module imports neither numpy nor construct. numpy (tens of
milliseconds to import) is imported by the first ``FlatBufferReader``; layouts
are ``struct`` formats.
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import struct
from collections.abc import Sequence
from typing import Any, Callable

from vmrt.errors import ModuleFormatError

#: numpy, once _numpy() has imported it: the reader's vectorized checks need it, the
#: declarations and the builder do not, and importing it costs tens of milliseconds.
np: Any = None

UOFFSET_MAX = 0xFFFFFFFF
#: flatcc's FLATBUFFERS_IDENTIFIER_SIZE.
IDENTIFIER_SIZE = 4

#: The start of every FlatBuffer: the root table offset (u32), then the file
#: identifier (all zero when the schema has none).
BUFFER_HEADER = struct.Struct(f"<I{IDENTIFIER_SIZE}s")


def _numpy():
    """numpy, imported on first use (see ``np``), with the reader's shared constants."""
    global np, _EMPTY
    if np is None:
        import numpy

        _EMPTY = numpy.zeros(0, numpy.int64)
        np = numpy
    return np


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
        return _numpy().dtype(self._np_fields)

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


# --------------------------------------------------------------------------
# Lazy sequences over verified data
# --------------------------------------------------------------------------


class _LazySeq(Sequence):
    """Base of the read-only-shaped sequences; elements may be replaced."""

    __slots__ = ()

    def __eq__(self, other):
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        if len(self) != len(other):
            return False
        return all(a == b for a, b in zip(self, other))

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None

    def __repr__(self):
        return f"[{', '.join(repr(x) for x in self)}]"

    def _index(self, i):
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index out of range")
        return i


class LazyTableVector(_LazySeq):
    """A vector of tables from a verified group; tables are made on first access."""

    __slots__ = ("_group", "_start", "_count")

    def __init__(self, group: "_Group", start: int, count: int):
        self._group = group
        self._start = start
        self._count = count

    def __len__(self):
        return self._count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        return self._group.get(self._start + self._index(i))

    def __setitem__(self, i, value):
        self._group.put(self._start + self._index(i), value)

    def __iter__(self):
        get = self._group.get
        for j in range(self._start, self._start + self._count):
            yield get(j)

    def column(self, name: str) -> list:
        """The values of one scalar/string field for every element, in order.

        Elements already materialized (and possibly modified) are honored.
        """
        if not self._count:
            return []
        g = self._group
        kind, *rest = g.cols[name]
        if kind != "v":  # tables, vectors...: make the elements
            return [getattr(x, name) for x in self]
        col = rest[0]
        values = col[self._start:self._start + self._count]
        cache = g.cache
        if cache is not None:
            for j in range(self._count):
                obj = cache[self._start + j]
                if obj is not None:
                    values[j] = getattr(obj, name)
        return values


class _FilledSeq(_LazySeq):
    """A sequence whose elements are all made at once, by the subclass's `_fill`, into
    `_cache` on first use; replaced elements are kept there."""

    __slots__ = ("_cache",)

    def __setitem__(self, i, value):
        if self._cache is None:
            self._fill()
        self._cache[self._index(i)] = value

    def __iter__(self):
        if self._cache is None:
            self._fill()
        return iter(self._cache)


class LazyStructVector(_FilledSeq):
    """A vector of structs over the buffer; ``numpy()`` views it zero-copy."""

    __slots__ = ("_decl", "_mv", "_start", "_count")

    def __init__(self, decl: StructDecl, mv: memoryview, start: int, count: int):
        self._decl = decl
        self._mv = mv
        self._start = start
        self._count = count
        self._cache: list | None = None

    def __len__(self):
        return self._count

    def _fill(self):
        cls = self._decl.cls
        size = self._decl.size
        end = self._start + self._count * size
        # Hot path: unpack every element at once with struct (see StructDecl).
        self._cache = [cls(*t) for t in
                       self._decl.codec.iter_unpack(self._mv[self._start:end])]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if self._cache is None:
            self._fill()
        return self._cache[self._index(i)]

    def numpy(self) -> np.ndarray:
        """A structured array viewing the buffer (ignores replaced elements)."""
        return _numpy().frombuffer(self._mv, self._decl.np_dtype, self._count, self._start)


class LazyUnionVector(_FilledSeq):
    """A vector of union values (tables or None for NONE)."""

    __slots__ = ("_items",)

    def __init__(self, items: list):
        # items: list of (group or None, index)
        self._items = items
        self._cache: list | None = None

    def __len__(self):
        return len(self._items)

    def _fill(self):
        self._cache = [g.get(i) if g is not None else None for g, i in self._items]

    def __getitem__(self, i):
        if self._cache is None:
            self._fill()
        return self._cache[i]


def struct_array(seq) -> np.ndarray | None:
    """A numpy structured array for a struct vector, or None if not viewable."""
    if isinstance(seq, LazyStructVector) and seq._cache is None:
        return seq.numpy()
    return None


def column(seq, name: str) -> list:
    """Field ``name`` of every table in ``seq`` (cheap for lazily read vectors)."""
    if isinstance(seq, LazyTableVector):
        return seq.column(name)
    return [getattr(x, name) if x is not None else None for x in seq]


# --------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------

#: An empty int64 array (set by _numpy()).
_EMPTY: Any = None


#: Shared ``_present`` sets (few distinct ones exist).
_PRESENT_SETS: dict[tuple, frozenset] = {}


@dataclasses.dataclass(slots=True, eq=False)
class _Group:
    """All tables reached through one schema path, verified together: table i is
    element elem_idx[i] (None: the field itself) of `field` of table parent_idx[i] of
    the parent group (None: the root)."""

    reader: Any
    decl: Any
    parent: _Group | None
    field: str | None
    parent_idx: Any
    elem_idx: Any
    n: int = 0
    cols: dict[str, tuple] = dataclasses.field(default_factory=dict)
    cache: list | None = None
    bytes_pos: dict[str, list] = dataclasses.field(default_factory=dict)
    make: Any = None
    positions: Any = None

    def __post_init__(self):
        self.n = len(self.parent_idx)
        self.positions = _EMPTY

    def path(self, i: int) -> str:
        if self.parent is None:
            return self.decl.name
        text = f"{self.parent.path(int(self.parent_idx[i]))}.{self.field}"
        if self.elem_idx is not None:
            text += f"[{int(self.elem_idx[i])}]"
        return text

    def put(self, i, value):
        if self.cache is None:
            self.cache = [None] * self.n
        self.cache[i] = value

    def get(self, i: int):
        cache = self.cache
        if cache is None:
            cache = self.cache = [None] * self.n
        obj = cache[i]
        if obj is None:
            make = self.make
            if make is None:
                make = self.make = _compile_maker(self)
            obj = cache[i] = make(i)
        return obj


def _present_set(names: tuple, mask: int) -> frozenset:
    key = tuple(n for j, n in enumerate(names) if mask >> j & 1)
    frozen = _PRESENT_SETS.get(key)
    if frozen is None:
        frozen = _PRESENT_SETS.setdefault(key, frozenset(key))
    return frozen


_BINDERS: dict[tuple, Callable[..., Callable[[int], Any]]] = {}


def _compile_maker(group: _Group) -> Callable[[int], Any]:
    """The function making table ``i`` of a verified group.

    Its code is generated from the group's columns (hence from the
    declaration), once per table type and column layout, and bound to the
    group's columns; this keeps reading a table to about half a microsecond,
    several times less than interpreting the column kinds for every table.
    """
    decl = group.decl
    hook = getattr(decl.cls, "__fb_after_read__", None)
    kinds = tuple((name, col[0]) for name, col in group.cols.items())
    key = (decl.cls, kinds)
    binder = _BINDERS.get(key)
    if binder is None:
        binder = _BINDERS[key] = _make_binder(decl, kinds, hook is not None,
                                              group.reader.compile_source)
    args: list[Any] = [group.reader.mv]
    for name, col in group.cols.items():
        args.extend(col[1:])
    if hook is not None:
        args += [hook, group.reader, list(group.bytes_pos.items())]
    return binder(*args)


#: How a binder (see _make_binder) sets a field of each column kind read whole: the
#: parameters (suffixed by the column's number j) and the lines, for field `key`.
_BINDER_FIELDS = {
    "v": (("c",), ["        d[{key}] = c{j}[i]"]),
    "t": (("g", "c"), ["        k = c{j}[i]",
                       "        d[{key}] = g{j}.get(k) if k >= 0 else None"]),
    "u": (("t", "c", "gs"), ["        k = c{j}[i]",
                             "        d[{key}] = gs{j}[t{j}[i]].get(k) if k >= 0 else None"]),
}
#: The vector kinds: parameters, the test of a present vector (start `s`), and the
#: expression making it; an absent one reads as [] and clears its presence bit.
_BINDER_VECTORS = {
    "tv": (("g", "s", "n"), "s >= 0", "LTV(g{j}, s, n{j}[i])"),
    "b": (("s", "n"), "s >= 0", "mv[s:s + n{j}[i]]"),
    "s": (("e", "s", "n"), "s >= 0", "LSV(e{j}, mv, s, n{j}[i])"),
    "n": (("e", "s", "n"), "s >= 0", "list(unpack_from('<%d' % n{j}[i] + e{j}.fmt[1:], mv, s))"),
    "uv": (("s",), "s is not None", "LUV(s)"),
}


def _compile_source(make_source: Callable[[], str], filename: str, key: str):
    return compile(make_source(), filename, "exec")


#: compile_source(make_source, filename, key): the code of the source make_source()
#: gives, which `key` tells apart from the others of that file name (a cache of
#: generated code may have it without making the source).
CompileSource = Callable[[Callable[[], str], str, str], Any]


def _make_binder(decl: TableDecl, kinds: tuple, has_hook: bool,
                 compile_source: CompileSource = _compile_source):
    """bind(columns...) -> make(i), making row i's object of `decl` from the
    columns a group read (generated, so each field costs one line, no dispatch);
    `compile_source` compiles its code (the caller's cache of generated code)."""
    ns: dict[str, Any] = {
        "new": object.__new__, "cls": decl.cls, "LTV": LazyTableVector,
        "LSV": LazyStructVector, "LUV": LazyUnionVector,
        "unpack_from": struct.unpack_from, "PS": {}, "present_set": _present_set,
        "VN": tuple(name for name, kind in kinds if kind not in _BINDER_FIELDS),
    }
    for j, factory in enumerate(decl.extra_defaults.values()):
        ns[f"x{j}"] = factory
    key = repr((kinds, has_hook, tuple(decl.extra_defaults)))  # all the source depends on
    exec(compile_source(lambda: _binder_source(decl, kinds, has_hook),
                        f"<vmrt binder {decl.name}>", key), ns)
    return ns["bind"]


def _binder_source(decl: TableDecl, kinds: tuple, has_hook: bool) -> str:
    """The source of _make_binder's bind (its namespace binds the capitalized names)."""
    params = ["mv"]
    body = ["    def make(i):", "        obj = new(cls)", "        d = obj.__dict__",
            "        m = 0"]
    vectors = 0
    for j, (name, kind) in enumerate(kinds):
        key = repr(name)
        if kind in _BINDER_FIELDS:
            names, lines = _BINDER_FIELDS[kind]
            body += [line.format(j=j, key=key) for line in lines]
        else:
            names, present, make = _BINDER_VECTORS[kind]
            body += [f"        s = s{j}[i]",
                     f"        if {present}:",
                     f"            d[{key}] = {make.format(j=j)}",
                     f"            m |= {1 << vectors}",
                     "        else:",
                     f"            d[{key}] = []"]
            vectors += 1
        params += [f"{prefix}{j}" for prefix in names]
    for j, name in enumerate(decl.extra_defaults):
        body.append(f"        d[{name!r}] = x{j}()")
    body += ["        p = PS.get(m)",
             "        if p is None:",
             "            p = PS[m] = present_set(VN, m)",
             "        d['_present'] = p"]
    if has_hook:
        params += ["hook", "reader", "BP"]
        body.append("        hook(obj, reader, {k: v[i] for k, v in BP})")
    body += ["        return obj", "    return make"]
    return f"def bind({', '.join(params)}):\n" + "\n".join(body)


class FlatBufferReader:
    """Verifies a FlatBuffer (as flatcc's verifier does) and reads its tables.

    ``buf`` is the whole input (an archive); the FlatBuffer occupies
    ``[start, end)`` (without its size prefix).
    """

    def __init__(self, buf, start: int, end: int, *, budget: int | None = None,
                 compile_source: CompileSource | None = None):
        _numpy()
        #: How the binders of this read's tables are compiled (see _make_binder).
        self.compile_source = compile_source or _compile_source
        mv = memoryview(buf)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        self.mv = mv
        n = len(mv)
        if not (0 <= start <= end <= n):
            raise ModuleFormatError("FlatBuffer range outside of the input")
        self.start = start
        self.end = end
        self.u8 = np.frombuffer(mv, np.uint8)
        u16 = np.frombuffer(mv, "<u2", n // 2)
        u32 = np.frombuffer(mv, "<u4", n // 4)
        u64 = np.frombuffer(mv, "<u8", n // 8)
        self.views = {
            ("u", 1): self.u8, ("i", 1): self.u8.view(np.int8),
            ("u", 2): u16, ("i", 2): u16.view("<i2"),
            ("u", 4): u32, ("i", 4): u32.view("<i4"),
            ("u", 8): u64, ("i", 8): u64.view("<i8"),
        }
        self.u16 = u16
        self.u32 = u32
        self.i32 = u32.view("<i4")
        # Bound on table/union elements across all groups: each element of a
        # table vector takes 4 bytes unless vectors alias; this keeps aliased
        # vectors from making us allocate without bound.
        self.budget = budget if budget is not None else (end - start) // 2 + 4096
        self.string_budget = 2 * (end - start) + (1 << 20)

    # -- helpers -----------------------------------------------------------

    @staticmethod
    def _fail(where: str, message: str):
        raise ModuleFormatError(f"FlatBuffer verification failed: {message} (at {where})")

    def _check(self, group: _Group, bad: np.ndarray, message: str, suffix: str = "",
               idx: np.ndarray | None = None):
        if bad.any():
            k = int(np.argmax(bad))
            i = int(idx[k]) if idx is not None else k
            self._fail(group.path(i) + suffix, message)

    def _spend(self, count: int, group: _Group, suffix: str):
        self.budget -= count
        if self.budget < 0:
            where = (group.path(0) if group.n else group.decl.name) + suffix
            self._fail(where, "too many table references for the buffer size "
                              "(aliased vectors?)")

    def _vte(self, vb, vsize, fid):
        vo = 4 + 2 * fid
        has = vsize > vo
        idx = np.where(has, vb + vo, vb) >> 1
        return np.where(has, self.u16[idx], 0).astype(np.int64)

    # -- entry point -------------------------------------------------------

    def read_root(self, cls, file_identifier: str | None):
        start, end = self.start, self.end
        size = end - start
        if start & 3:
            raise ModuleFormatError(
                "FlatBuffer verification failed: buffer header not aligned "
                f"(FlatBuffer starts at offset {start})")
        if size > UOFFSET_MAX - 8:
            raise ModuleFormatError("FlatBuffer verification failed: buffer size too large")
        if size < 4 + IDENTIFIER_SIZE:
            raise ModuleFormatError(
                f"FlatBuffer verification failed: buffer header too small ({size} bytes)")
        if file_identifier is not None:
            _, fid = BUFFER_HEADER.unpack_from(self.mv, start)
            want = file_identifier.encode()
            if fid != want:
                raise ModuleFormatError(
                    "FlatBuffer verification failed: identifier mismatch "
                    f"(expected {want!r}, found {fid!r})")
        root = _Group(self, cls.__fb__, None, None, np.zeros(1, np.int64), None)
        queue = [(root, np.array([start], np.int64))]
        done = []
        while queue:
            group, slots = queue.pop(0)
            queue.extend(self._verify_tables(group, slots))
            done.append(group)
        #: (table name, absolute table positions) of every verified group.
        self.visited = [(g.decl.name, g.positions) for g in done]
        #: The verified groups as plain data (see root_from_snapshot).
        self.snapshot = _groups_snapshot(done)
        # Parent links only serve error paths; dropping them leaves the read
        # objects without reference cycles, so they are freed promptly.
        for group in done:
            group.parent = group.parent_idx = group.elem_idx = None
        return root.get(0)

    # -- tables ------------------------------------------------------------

    def _verify_tables(self, g: _Group, slots: np.ndarray):
        """Verifies the tables referenced from uoffsets at ``slots``.

        ``slots`` are 4-aligned positions inside the buffer (checked by the
        caller).  Returns the child groups still to verify.
        """
        if not len(slots):
            return ()  # nothing to verify, and no table will be made
        end, start = self.end, self.start
        off = self.u32[slots >> 2].astype(np.int64)
        T = slots + off
        self._check(g, (off == 0) | (T + 4 > end) | ((T & 3) != 0),
                    "table header out of range or unaligned")
        vb = T - self.i32[T >> 2].astype(np.int64)
        self._check(g, (vb < start) | ((vb & 1) != 0),
                    "vtable offset out of range or unaligned")
        self._check(g, vb + 2 > end, "vtable header out of range")
        vsize = self.u16[vb >> 1].astype(np.int64)
        self._check(g, (vb + vsize > end) | ((vsize & 1) != 0),
                    "vtable size out of range or unaligned")
        self._check(g, vsize < 4, "vtable header too small")
        tsize = self.u16[(vb + 2) >> 1].astype(np.int64)
        self._check(g, end - T < tsize, "table size out of range")
        g.positions = T
        children = []
        for f in g.decl.fields:
            kind = f.kind
            if kind == "scalar":
                self._scalar_field(g, f, T, vb, vsize, tsize)
            elif kind in ("union", "union_vector"):
                children.extend(self._union_field(g, f, T, vb, vsize, tsize))
            else:
                children.extend(self._offset_field(g, f, T, vb, vsize, tsize))
        return children

    def _scalar_field(self, g, f, T, vb, vsize, tsize):
        vte = self._vte(vb, vsize, f.id)
        present = vte != 0
        size = f.type.size
        addr = T + vte
        self._check(g, present & (vte + size > tsize), "table field out of range",
                    f".{f.name}")
        self._check(g, present & ((addr & (size - 1)) != 0), "table field not aligned",
                    f".{f.name}")
        view = self.views[(f.type.np_kind, size)]
        if present.all():
            values = view[addr // size].tolist()
        elif not present.any():
            values = [f.default] * g.n
        else:
            values = view[np.where(present, addr, 0) // size].tolist()
            default = f.default
            for i in np.nonzero(~present)[0].tolist():
                values[i] = default
        g.cols[f.name] = ("v", values)

    def _offset_slots(self, g, f, T, vb, vsize, tsize, field_id=None, suffix=""):
        """Present mask and uoffset slot positions of an offset field (or of the field
        `field_id` that goes with it, named by `suffix`: a union's types)."""
        vte = self._vte(vb, vsize, f.id if field_id is None else field_id)
        present = vte != 0
        slot = T + vte
        self._check(g, present & (vte + 4 > tsize), "table field out of range",
                    f".{f.name}{suffix}")
        self._check(g, present & ((slot & 3) != 0), "table field not aligned",
                    f".{f.name}{suffix}")
        return present, slot

    def _vector_headers(self, g, name, idx, slot, elem_size, align):
        """Verifies vector headers; returns (data start, count) arrays."""
        end = self.end
        off = self.u32[slot >> 2].astype(np.int64)
        k = slot + off
        mask = 3 | (max(align, 4) - 1)
        self._check(g, (off == 0) | (k + 4 > end) | (((k + 4) & mask) != 0),
                    "vector header out of range or unaligned", f".{name}", idx)
        n = self.u32[k >> 2].astype(np.int64)
        self._check(g, n > UOFFSET_MAX // elem_size,
                    "vector count exceeds representable vector size", f".{name}", idx)
        self._check(g, end - (k + 4) < n * elem_size, "vector out of range",
                    f".{name}", idx)
        return k + 4, n

    def _offset_field(self, g, f, T, vb, vsize, tsize):
        present, slot = self._offset_slots(g, f, T, vb, vsize, tsize)
        if getattr(f, "required", False):
            self._check(g, ~present, "required field missing", f".{f.name}")
        idx = np.nonzero(present)[0]
        slot = slot[idx]
        n_all = g.n
        if f.kind == "string":
            self._strings(g, f, idx, slot)
            return ()
        if f.kind == "table":
            child = _Group(self, f.table_cls.__fb__, g, f.name, idx, None)
            self._spend(len(idx), g, f".{f.name}")
            ci = np.full(n_all, -1, np.int64)
            ci[idx] = np.arange(len(idx))
            g.cols[f.name] = ("t", child, ci.tolist())
            return [(child, slot)]
        # vectors
        ek = f.elem_kind
        data, count = self._vector_headers(g, f.name, idx, slot, f.elem_size, f.elem_align)
        starts = np.full(n_all, -1, np.int64)
        counts = np.zeros(n_all, np.int64)
        if ek == "table":
            total = int(count.sum())
            self._spend(total, g, f".{f.name}")
            elem_slots, within, parents = _expand(data, count, 4, idx)
            child = _Group(self, f.elem.__fb__, g, f.name, parents, within)
            first = np.cumsum(count) - count
            starts[idx] = first
            counts[idx] = count
            g.cols[f.name] = ("tv", child, starts.tolist(), counts.tolist())
            return [(child, elem_slots)]
        starts[idx] = data
        counts[idx] = count
        if ek == "bytes":
            g.cols[f.name] = ("b", starts.tolist(), counts.tolist())
            g.bytes_pos[f.name] = g.cols[f.name][1]
        elif ek == "struct":
            g.cols[f.name] = ("s", f.elem, starts.tolist(), counts.tolist())
        else:
            g.cols[f.name] = ("n", f.elem, starts.tolist(), counts.tolist())
        return ()

    def _strings(self, g, f, idx, slot):
        end = self.end
        values: list = [None] * g.n
        if len(idx):
            off = self.u32[slot >> 2].astype(np.int64)
            k = slot + off
            self._check(g, (off == 0) | (k + 4 > end) | ((k & 3) != 0),
                        "string header out of range or unaligned", f".{f.name}", idx)
            n = self.u32[k >> 2].astype(np.int64)
            b = k + 4
            self._check(g, end - b <= n, "string out of range", f".{f.name}", idx)
            self._check(g, self.u8[b + n] != 0, "string not zero terminated",
                        f".{f.name}", idx)
            mv = self.mv
            seen: dict[int, str] = {}
            for i, s, ln in zip(idx.tolist(), b.tolist(), n.tolist()):
                text = seen.get(s)
                if text is None:
                    # UTF-8 checking is linear in the string length (flatcc
                    # only checks the terminator), so aliased strings are
                    # decoded once and the total is bounded.
                    self.string_budget -= ln
                    if self.string_budget < 0:
                        self._fail(g.path(i) + f".{f.name}",
                                   "string data exceeds the buffer size (aliased strings?)")
                    try:
                        text = str(mv[s:s + ln], "utf-8")
                    except UnicodeDecodeError as error:
                        self._fail(g.path(i) + f".{f.name}",
                                   f"string is not valid UTF-8 ({error.reason} at byte "
                                   f"{error.start})")
                    seen[s] = text
                values[i] = text
        g.cols[f.name] = ("v", values)

    def _union_field(self, g, f, T, vb, vsize, tsize):
        if f.kind == "union":
            return self._single_union_field(g, f, T, vb, vsize, tsize)
        return self._union_vector_field(g, f, T, vb, vsize, tsize)

    def _single_union_field(self, g, f, T, vb, vsize, tsize):
        """A union: its type byte at id - 1, its table at id."""
        members = f.union.members
        nmembers = len(members)
        vte_t = self._vte(vb, vsize, f.id - 1)
        vte_v = self._vte(vb, vsize, f.id)
        has_t = vte_t != 0
        self._check(g, ~has_t & (vte_v != 0), "union cannot have a table without a type",
                    f".{f.name}")
        self._check(g, has_t & (vte_t + 1 > tsize), "table field out of range",
                    f".{f.name}_type")
        types = np.where(has_t, self.u8[np.where(has_t, T + vte_t, 0)], 0).astype(np.int64)
        self._check(g, (types == 0) & (vte_v != 0),
                    "union type NONE cannot have a value", f".{f.name}")
        self._check(g, types > nmembers, f"union type out of range (> {nmembers})",
                    f".{f.name}_type")
        present, slot = self._offset_slots(g, f, T, vb, vsize, tsize)
        ci = np.full(g.n, -1, np.int64)
        groups: dict[int, _Group | None] = {0: None}
        children = []
        for code in range(1, nmembers + 1):
            idx = np.nonzero(present & (types == code))[0]
            child = _Group(self, members[code - 1].__fb__, g, f.name, idx, None)
            self._spend(len(idx), g, f".{f.name}")
            groups[code] = child
            ci[idx] = np.arange(len(idx))
            if len(idx):
                children.append((child, slot[idx]))
        g.cols[f.name] = ("u", types.tolist(), ci.tolist(), groups)
        return children

    def _union_vector_field(self, g, f, T, vb, vsize, tsize):
        """A union vector: its types vector at id - 1, its values vector at id."""
        n_all = g.n
        has_t, slot_t = self._offset_slots(g, f, T, vb, vsize, tsize, f.id - 1, "_type")
        idx_t = np.nonzero(has_t)[0]
        tdata, tcount = self._vector_headers(g, f.name + "_type", idx_t, slot_t[idx_t], 1, 1)
        # Values are only verified (and only read) when the types are present,
        # as flatcc does; without types the field reads as absent.
        vte_v = self._vte(vb, vsize, f.id)
        both = has_t & (vte_v != 0)
        slot_v = T + vte_v
        self._check(g, both & (vte_v + 4 > tsize), "table field out of range", f".{f.name}")
        self._check(g, both & ((slot_v & 3) != 0), "table field not aligned", f".{f.name}")
        idx = np.nonzero(both)[0]
        tpos = np.full(n_all, -1, np.int64)
        tpos[idx_t] = tdata
        tcnt = np.zeros(n_all, np.int64)
        tcnt[idx_t] = tcount
        vdata, vcount = self._vector_headers(g, f.name, idx, slot_v[idx], 4, 4)
        self._check(g, vcount != tcnt[idx], "union vector length mismatch", f".{f.name}",
                    idx)
        self._spend(int(vcount.sum()), g, f".{f.name}")
        elem_slots, within, parents = _expand(vdata, vcount, 4, idx)
        type_pos, _, _ = _expand(tpos[idx], vcount, 1, idx)
        types = self.u8[type_pos].astype(np.int64)
        return self._union_vector_elements(g, f, idx, vcount, types, elem_slots, within,
                                           parents)

    def _union_vector_elements(self, g, f, idx, vcount, types, elem_slots, within, parents):
        """Checks the elements of union vectors (their types read) and groups them by
        member; the column holds, per row, its elements' (member group, index)."""
        members = f.union.members
        nmembers = len(members)
        total = len(types)
        elem_off = self.u32[elem_slots >> 2].astype(np.int64)
        elems = _Group(self, g.decl, g, f.name, parents, within)
        self._check(elems, (elem_off == 0) & (types != 0),
                    "union element absent without type NONE")
        self._check(elems, (elem_off != 0) & (types == 0),
                    "union element present with type NONE")
        self._check(elems, types > nmembers, f"union type out of range (> {nmembers})")
        # Per member: a group of the elements of that type.
        local = np.zeros(total, np.int64)
        member_groups: list[_Group | None] = [None]
        children = []
        for code in range(1, nmembers + 1):
            sel = np.nonzero(types == code)[0]
            child = _Group(self, members[code - 1].__fb__, g, f.name, parents[sel],
                           within[sel])
            member_groups.append(child)
            local[sel] = np.arange(len(sel))
            if len(sel):
                children.append((child, elem_slots[sel]))
        items_col: list = [None] * g.n
        pairs = [(member_groups[t], li) for t, li in zip(types.tolist(), local.tolist())] \
            if total else []
        pos = 0
        for i, c in zip(idx.tolist(), vcount.tolist()):
            items_col[i] = pairs[pos:pos + c]
            pos += c
        g.cols[f.name] = ("uv", items_col)
        return children


def _expand(starts: np.ndarray, counts: np.ndarray, stride: int, parent_idx: np.ndarray):
    """Element positions of several vectors: (positions, index within, parent)."""
    total = int(counts.sum()) if len(counts) else 0
    if total == 0:
        return _EMPTY, _EMPTY, _EMPTY
    first = np.cumsum(counts) - counts
    within = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
    positions = np.repeat(starts, counts) + stride * within
    parents = np.repeat(parent_idx, counts)
    return positions, within, parents


# --------------------------------------------------------------------------
# Snapshots: a verified read as plain data, read again without verifying
# --------------------------------------------------------------------------
#: The layout of snapshots (callers keying stored snapshots include it).
SNAPSHOT_VERSION = 1


def _groups_snapshot(groups: list[_Group]) -> list:
    """The columns of verified groups as marshal-able data: groups by their index
    (the root first), element types left to the declaration."""
    index = {id(g): i for i, g in enumerate(groups)}

    def ref(group):
        return None if group is None else index.get(id(group))

    snapshot = []
    for g in groups:
        cols = []
        for name, (kind, *rest) in g.cols.items():
            if kind in ("t", "tv"):
                rest[0] = index[id(rest[0])]
            elif kind in ("s", "n"):
                del rest[0]
            elif kind == "u":
                rest[2] = {code: ref(member) for code, member in rest[2].items()}
            elif kind == "uv":
                rest[0] = [None if items is None else [(ref(member), i) for member, i in items]
                           for items in rest[0]]
            cols.append((name, kind, *rest))
        snapshot.append((g.decl.name, g.n, cols))
    return snapshot


class _ReadBuffer:
    """What the tables of a snapshot read refer to (a FlatBufferReader's part of it)."""

    def __init__(self, mv: memoryview, archive, compile_source):
        self.mv = mv
        self.archive = archive
        self.compile_source = compile_source or _compile_source


def _table_decls(decl: TableDecl, found: dict | None = None) -> dict[str, TableDecl]:
    """The tables reachable from `decl`, by name."""
    found = {} if found is None else found
    if decl.name not in found:
        found[decl.name] = decl
        for f in decl.fields:
            if f.kind == "table":
                _table_decls(f.table_cls.__fb__, found)
            elif f.kind == "vector" and f.elem_kind == "table":
                _table_decls(f.elem.__fb__, found)
            elif f.kind in ("union", "union_vector"):
                for member in f.union.members:
                    _table_decls(member.__fb__, found)
    return found


def root_from_snapshot(snapshot: list, cls, buf, archive=None, compile_source=None):
    """The root table of `buf`, of class `cls`, from the snapshot of a verified read
    of the same bytes (FlatBufferReader.snapshot): no verification, no numpy."""
    mv = memoryview(buf)
    source = _ReadBuffer(mv, archive, compile_source)
    decls = _table_decls(cls.__fb__)
    groups = [_Group(source, decls[name], None, None, range(n), None)
              for name, n, _ in snapshot]

    def group(i):
        return None if i is None else groups[i]

    for g, (_, _, cols) in zip(groups, snapshot):
        g.parent_idx = None
        for name, kind, *rest in cols:
            if kind in ("t", "tv"):
                rest[0] = groups[rest[0]]
            elif kind in ("s", "n"):
                rest.insert(0, g.decl.by_name[name].elem)
            elif kind == "u":
                rest[2] = {code: group(i) for code, i in rest[2].items()}
            elif kind == "uv":
                rest[0] = [None if items is None else [(group(m), i) for m, i in items]
                           for items in rest[0]]
            elif kind == "b":
                g.bytes_pos[name] = rest[0]
            g.cols[name] = (kind, *rest)
    return groups[0].get(0)


# --------------------------------------------------------------------------
# Builder
# --------------------------------------------------------------------------


class FlatBufferBuilder:
    """Writes tables front to back: a table, then what it references.

    Positions are absolute in the output, which starts with the 4-byte size
    prefix, so alignment holds relative to the start of the file (where the
    loader puts an aligned base).  Vtables are shared.  Scalars equal to their
    default are omitted, as flatcc's builder does.
    """

    def __init__(self, byte_vector_alignment: Callable[[Any, str], int] | None = None,
                 *, force_defaults: bool = False):
        self.buf = bytearray()
        self._vtables: dict[bytes, int] = {}
        self._byte_alignment = byte_vector_alignment or (lambda obj, name: 16)
        #: Write scalars even when equal to their default (flatcc's force_add).
        self.force_defaults = force_defaults

    # -- low level ---------------------------------------------------------

    def pad_to(self, align: int, extra: int = 0):
        """Pads so that ``len(buf) + extra`` is a multiple of ``align``."""
        pad = (-(len(self.buf) + extra)) % align
        if pad:
            self.buf += bytes(pad)

    def patch_uoffset(self, slot: int, target: int):
        struct.pack_into("<I", self.buf, slot, target - slot)

    # -- public ------------------------------------------------------------

    def finish(self, root, file_identifier: str | None) -> bytearray:
        """Builds ``[size prefix][root offset][identifier][tables...]``."""
        ident = file_identifier.encode() if file_identifier is not None else bytes(4)
        if len(ident) != IDENTIFIER_SIZE:
            raise ModuleFormatError("file identifier must be 4 bytes")
        self.buf = bytearray(4)  # size prefix, set at the end
        self.buf += BUFFER_HEADER.pack(0, ident)
        root_pos = self.table(root)
        self.patch_uoffset(4, root_pos)
        self.pad_to(8)
        struct.pack_into("<I", self.buf, 0, len(self.buf) - 4)
        return self.buf

    def table(self, obj) -> int:
        decl = getattr(type(obj), "__fb__", None)
        if not isinstance(decl, TableDecl):
            raise ModuleFormatError(f"cannot write {type(obj).__name__} as a table")
        # (size, id, payload bytes for scalars, deferred child for offsets)
        inline: list[tuple[int, int, bytes | None, Any]] = []
        for f in decl.fields:
            inline += self._inline_fields(obj, decl, f)
        # Largest first keeps every field naturally aligned after the soffset:
        # with 8-byte fields the table goes at 4 mod 8 so that offset 4 (just
        # after the soffset) is 8-aligned, and offsets then only grow.
        inline.sort(key=lambda e: (-e[0], e[1]))
        offsets: dict[int, int] = {}
        pos = 4
        for size, fid, _, _ in inline:
            pos = (pos + size - 1) // size * size if size < 8 else pos
            offsets[fid] = pos
            pos += size
        t_pos = self._table_start(offsets, pos, bool(inline) and inline[0][0] == 8)
        deferred = []
        for size, fid, payload, child in inline:
            at = t_pos + offsets[fid]
            if payload is not None:
                self.buf[at:at + len(payload)] = payload
            else:
                deferred.append((at, child))
        for at, (what, f, value) in deferred:
            self.patch_uoffset(at, self._child(obj, what, f, value))
        return t_pos

    def _inline_fields(self, obj, decl: TableDecl, f) -> list:
        """The inline slots field `f` of `obj` takes (none when absent or a default):
        (size, id, payload bytes of a scalar, or the child to write and point to)."""
        value = getattr(obj, f.name)
        kind = f.kind
        if kind == "scalar":
            return self._scalar_field(decl, f, value)
        if kind == "string":
            if value is None and f.required:
                raise ModuleFormatError(f"{decl.name}.{f.name} is required")
            return [] if value is None else [(4, f.id, None, ("string", f, value))]
        if kind == "table":
            return [] if value is None else [(4, f.id, None, ("table", f, value))]
        if kind == "vector":
            return [(4, f.id, None, ("vector", f, value))] \
                if is_vector_present(obj, f.name) else []
        if kind == "union":
            if value is None:
                return []
            return [(1, f.id - 1, bytes([f.union.type_of(value)]), None),
                    (4, f.id, None, ("table", f, value))]
        if kind == "union_vector" and is_vector_present(obj, f.name):
            items = list(value)
            codes = bytes(f.union.type_of(v) if v is not None else 0 for v in items)
            return [(4, f.id - 1, None, ("bytes", f, codes)),
                    (4, f.id, None, ("union_values", f, items))]
        return []

    def _scalar_field(self, decl: TableDecl, f, value) -> list:
        if value is None:
            value = f.default
        if not isinstance(value, int):
            raise ModuleFormatError(f"{decl.name}.{f.name} must be an int, "
                                    f"not {type(value).__name__}")
        if value == f.default and not self.force_defaults:
            return []
        st = f.type.base if isinstance(f.type, EnumDecl) else f.type
        if not st.lo <= value <= st.hi:
            raise ModuleFormatError(
                f"{decl.name}.{f.name} = {value} out of range for {st.name}")
        return [(st.size, f.id, struct.pack(st.fmt, value), None)]

    def _table_start(self, offsets: dict[int, int], tsize: int, has8: bool) -> int:
        """Writes the vtable of a table with fields at `offsets` (shared with an equal
        one already written) and the table's zeroed bytes pointing at it; the table's
        position."""
        max_id = max(offsets) if offsets else -1
        entries = [0] * (max_id + 1)
        for fid, o in offsets.items():
            entries[fid] = o
        vt_bytes = _vtable_bytes((tuple(entries), tsize))
        vt_pos = self._vtables.get(vt_bytes)
        if vt_pos is None:
            self.pad_to(2)
            vt_pos = len(self.buf)
            self.buf += vt_bytes
            self._vtables[vt_bytes] = vt_pos
        if has8:
            self.pad_to(8, 4)
        else:
            self.pad_to(4)
        t_pos = len(self.buf)
        self.buf += bytes(tsize)
        struct.pack_into("<i", self.buf, t_pos, t_pos - vt_pos)
        return t_pos

    def _child(self, owner, what, f, value) -> int:
        if what == "string":
            return self.string(value, f"{type(owner).__name__}.{f.name}")
        if what == "table":
            return self.table(value)
        if what == "bytes":
            return self.byte_vector(value, 1)
        if what == "union_values":
            return self.table_vector(value, allow_none=True)
        ek = f.elem_kind
        if ek == "table":
            return self.table_vector(value)
        if ek == "bytes":
            return self.byte_vector(value, self._byte_alignment(owner, f.name))
        if ek == "struct":
            return self.struct_vector(f.elem, value)
        return self.scalar_vector(f.elem, value)

    def _vector(self, count: int, data, align: int) -> int:
        """Writes a vector (a u32 count, then `data` aligned to `align`); its position."""
        self.pad_to(max(align, 4), 4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", count)
        self.buf += data
        return pos

    def string(self, value, where: str) -> int:
        if not isinstance(value, str):
            raise ModuleFormatError(f"{where} must be a str, not {type(value).__name__}")
        data = value.encode("utf-8")
        return self._vector(len(data), data + b"\0", 1)

    def byte_vector(self, value, align: int) -> int:
        if isinstance(value, (list, tuple)):
            try:
                data = bytes(value)
            except (TypeError, ValueError) as error:
                raise ModuleFormatError(f"cannot write byte vector: {error}") from None
        else:
            try:
                data = memoryview(value).cast("B")
            except TypeError:
                raise ModuleFormatError(
                    f"cannot write {type(value).__name__} as a byte vector") from None
        return self._vector(len(data), data, align)

    def scalar_vector(self, elem: ScalarType, values) -> int:
        values = list(values)
        try:
            data = struct.pack(f"<{len(values)}{elem.fmt[1:]}", *values)
        except struct.error as error:
            raise ModuleFormatError(f"cannot write {elem.name} vector: {error}") from None
        return self._vector(len(values), data, elem.size)

    def struct_vector(self, decl: StructDecl, values) -> int:
        arr = struct_array(values)
        if arr is not None:
            return self._vector(len(arr), arr.tobytes(), decl.align)
        values = list(values)
        return self._vector(len(values), b"".join(decl.pack(v) for v in values), decl.align)

    def table_vector(self, values, allow_none: bool = False) -> int:
        values = list(values)
        self.pad_to(4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(values)) + bytes(4 * len(values))
        for i, v in enumerate(values):
            if v is None:
                if not allow_none:
                    raise ModuleFormatError("a table vector element cannot be None")
                continue
            self.patch_uoffset(pos + 4 + 4 * i, self.table(v))
        return pos


_VT_CACHE: dict = {}


def _vtable_bytes(key) -> bytes:
    """A vtable (u16s: vtable size, table size, one voffset per field id), built once
    per distinct shape (vtables are shared)."""
    data = _VT_CACHE.get(key)
    if data is None:
        entries, tsize = key
        if tsize > 0xFFFF:
            raise ModuleFormatError("table too large")
        data = struct.pack(f"<HH{len(entries)}H", 4 + 2 * len(entries), tsize, *entries)
        _VT_CACHE[key] = data
    return data
