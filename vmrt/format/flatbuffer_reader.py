"""The verifying FlatBuffer reader: checks a buffer as flatcc's verifier does, then reads
its tables lazily, by the declarations of flatbuffer_schema.py.

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

numpy (tens of milliseconds to import) is imported by the first ``FlatBufferReader``.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from typing import Any, Callable

from vmrt.errors import ModuleFormatError
from vmrt.format.flatbuffer_schema import BUFFER_HEADER, IDENTIFIER_SIZE, UOFFSET_MAX, \
    StructDecl

#: numpy, once _numpy() has imported it: the reader's vectorized checks need it, the
#: declarations and the builder do not, and importing it costs tens of milliseconds.
np: Any = None


def _numpy():
    """numpy, imported on first use (see ``np``), with the reader's shared constants."""
    global np, _EMPTY
    if np is None:
        import numpy

        _EMPTY = numpy.zeros(0, numpy.int64)
        np = numpy
    return np


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
                make = self.make = _table_maker(self)
            obj = cache[i] = make(i)
        return obj


def _present_set(names: tuple, mask: int) -> frozenset:
    key = tuple(n for j, n in enumerate(names) if mask >> j & 1)
    frozen = _PRESENT_SETS.get(key)
    if frozen is None:
        frozen = _PRESENT_SETS.setdefault(key, frozenset(key))
    return frozen


def _table_maker(group: _Group) -> Callable[[int], Any]:
    """The function making table ``i`` of a verified group from the group's columns."""
    decl, reader = group.decl, group.reader
    new, cls = object.__new__, decl.cls
    fields, vectors = [], []
    for name, (kind, *rest) in group.cols.items():
        if kind == "v":
            fields.append((name, rest[0].__getitem__))
        elif kind in ("t", "u"):
            fields.append((name, _linked_table(kind, *rest)))
        else:
            vectors.append((name, _vector_getter(kind, rest, reader.mv)))
    vector_names = tuple(name for name, _ in vectors)
    extra_defaults = tuple(decl.extra_defaults.items())
    hook = getattr(cls, "__fb_after_read__", None)
    bytes_positions = list(group.bytes_pos.items())
    present_sets: dict[int, frozenset] = {}

    def make(i):
        obj = new(cls)
        fill = obj.__dict__
        for name, get in fields:
            fill[name] = get(i)
        mask = 0
        for bit, (name, get) in enumerate(vectors):
            value = get(i)
            if value is None:
                fill[name] = []
            else:
                fill[name] = value
                mask |= 1 << bit
        for name, factory in extra_defaults:
            fill[name] = factory()
        present = present_sets.get(mask)
        if present is None:
            present = present_sets[mask] = _present_set(vector_names, mask)
        fill["_present"] = present
        if hook is not None:
            hook(obj, reader, {name: starts[i] for name, starts in bytes_positions})
        return obj

    return make


def _linked_table(kind: str, *column) -> Callable[[int], Any]:
    """Row i's table of a table ("t": child group, indices) or union ("u": types,
    indices, groups by type) column; None when absent."""
    if kind == "t":
        child, indices = column

        def table_at(i):
            k = indices[i]
            return child.get(k) if k >= 0 else None
        return table_at
    types, indices, groups = column

    def union_at(i):
        k = indices[i]
        return groups[types[i]].get(k) if k >= 0 else None
    return union_at


def _vector_getter(kind: str, column: list, mv: memoryview) -> Callable[[int], Any]:
    """Row i's vector of a vector column (None: absent): of tables ("tv"), bytes
    ("b", a view of the buffer), structs ("s"), scalars ("n") or unions ("uv")."""
    if kind == "uv":
        items = column[0]
        return lambda i: None if items[i] is None else LazyUnionVector(items[i])
    *elem, starts, counts = column
    if kind == "tv":
        return lambda i: None if starts[i] < 0 else LazyTableVector(elem[0], starts[i], counts[i])
    if kind == "b":
        return lambda i: None if starts[i] < 0 else mv[starts[i]:starts[i] + counts[i]]
    if kind == "s":
        return lambda i: None if starts[i] < 0 else LazyStructVector(elem[0], mv, starts[i],
                                                                     counts[i])
    codes = elem[0].fmt[1:]
    return lambda i: None if starts[i] < 0 else list(
        struct.unpack_from(f"<{counts[i]}{codes}", mv, starts[i]))


class FlatBufferReader:
    """Verifies a FlatBuffer (as flatcc's verifier does) and reads its tables.

    ``buf`` is the whole input (an archive); the FlatBuffer occupies
    ``[start, end)`` (without its size prefix).
    """

    def __init__(self, buf, start: int, end: int, *, budget: int | None = None):
        _numpy()
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
