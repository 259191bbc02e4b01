"""Fast codecs for fixed-size binary layouts declared with construct.

A `FlatLayout` takes a construct Struct built from little-endian integer
fields, fixed-size Bytes and nested such Structs, and reads or writes it
with one precompiled `struct.Struct` (construct itself, even compiled, is many
times slower per record; archives may hold many thousands). The
construct declaration stays the single source of truth: field order, names
and sizes all come from it, and the two agree on every byte.
"""

from __future__ import annotations

import struct
from collections import namedtuple

import construct as cs


class FlatLayout:
    """One construct Struct as a flat namedtuple of its leaf fields.

    Nested fields are named with underscores: `header.name.offset` of an
    entry becomes `header_name_offset`.
    """

    def __init__(self, declaration: cs.Struct, name: str):
        self.declaration = declaration
        self.paths: list[tuple[str, ...]] = []
        codes: list[str] = []
        self._walk(declaration, (), codes)
        self.struct = struct.Struct("<" + "".join(codes))
        if self.struct.size != declaration.sizeof():
            raise TypeError(f"{name}: flat layout disagrees with its declaration")
        self.names = ["_".join(path) for path in self.paths]
        self.record = namedtuple(name, self.names)
        self.size = self.struct.size

    def _walk(self, struct_: cs.Struct, prefix: tuple[str, ...], codes: list[str]) -> None:
        for sub in struct_.subcons:
            if not isinstance(sub, cs.Renamed) or not sub.name:
                raise TypeError(f"unnamed field in {struct_}")
            field = sub.subcon
            path = prefix + (sub.name,)
            if isinstance(field, cs.Struct):
                self._walk(field, path, codes)
            elif isinstance(field, cs.FormatField) and field.fmtstr[0] == "<":
                codes.append(field.fmtstr[1:])
                self.paths.append(path)
            elif isinstance(field, cs.Bytes) and isinstance(field.length, int):
                codes.append(f"{field.length}s")
                self.paths.append(path)
            else:
                raise TypeError(f"field {'.'.join(path)} is not a fixed-size little-endian "
                                "field")

    def parse(self, buffer, offset: int = 0):
        """The record at `offset` of `buffer` (which must hold `size` bytes there)."""
        return self.record._make(self.struct.unpack_from(buffer, offset))

    def build(self, values: dict) -> bytes:
        """Bytes of a record given as nested dicts (as construct's build takes)."""
        flat = []
        for path in self.paths:
            value = values
            for part in path:
                value = value[part]
            flat.append(value)
        return self.struct.pack(*flat)
