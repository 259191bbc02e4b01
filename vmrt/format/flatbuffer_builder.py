"""The FlatBuffer builder: writes tables declared in flatbuffer_schema.py."""

from __future__ import annotations

import struct
from typing import Any, Callable

from vmrt.errors import ModuleFormatError
from vmrt.format.flatbuffer_schema import BUFFER_HEADER, IDENTIFIER_SIZE, EnumDecl, \
    ScalarType, StructDecl, TableDecl, is_vector_present
from vmrt.format.flatbuffer_reader import struct_array

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
