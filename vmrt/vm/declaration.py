"""A function's inputs and outputs as its `iree.abi.declaration` reflection states them.

iree-compile writes each public function's source signature beside its export,
`sync func @predict(%input0: tensor<1x4xf32>) -> (%output0: tensor<1x3xf32>)`
(names are `iree.abi.name` or `inputN`/`outputN`; other argument attributes
follow a type in braces). `parse_declaration` reads it into `ValueInfo`s: name,
type text, and for tensors the shape (None for a dynamic `?` dimension) and
element type; `dtype` names the numpy dtype of an element type, so a host can
make an array of it without this layer importing numpy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

__all__ = ["ValueInfo", "parse_declaration"]

#: MLIR element types -> numpy dtype names (types numpy lacks, bf16 and f8, are absent).
_DTYPES = {
    "i1": "bool", "i8": "int8", "si8": "int8", "ui8": "uint8", "i16": "int16",
    "si16": "int16", "ui16": "uint16", "i32": "int32", "si32": "int32", "ui32": "uint32",
    "i64": "int64", "si64": "int64", "ui64": "uint64", "f16": "float16",
    "f32": "float32", "f64": "float64", "complex<f32>": "complex64",
    "complex<f64>": "complex128", "index": "int64",
}

_DECLARATION = re.compile(r"\s*(?:sync|async)\s+func\s+@(?P<name>\S+?)\((?P<args>.*)\)\s*"
                          r"->\s*\((?P<results>.*)\)\s*", re.DOTALL)
_SHAPED = re.compile(r"(?P<dims>(?:(?:\?|\d+)x)*)(?P<element>.*)", re.DOTALL)


@dataclass(frozen=True)
class ValueInfo:
    """One input or output of a function: `name` (`input0`, or its iree.abi.name),
    `type` as declared (`tensor<?x4xf32>`, `i32`, `!hal.buffer_view`), and for
    tensors `shape` (None for a dynamic dimension) and `element_type` (`f32`)."""

    name: str
    type: str
    shape: Optional[tuple[Optional[int], ...]] = None
    element_type: Optional[str] = None

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    @property
    def dtype(self) -> Optional[str]:
        """The numpy dtype name of the value's elements (a scalar's own type), or None."""
        return _DTYPES.get(self.element_type or self.type)

    def __str__(self) -> str:
        return f"%{self.name}: {self.type}"


def _split_top_level(text: str) -> list[str]:
    """`text` split at commas outside <>, (), [], {} and quotes."""
    parts, depth, start, quoted = [], 0, 0, False
    for index, char in enumerate(text):
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        elif quoted:
            continue
        elif char in "<([{":
            depth += 1
        elif char in ">)]}" and not (char == ">" and text[index - 1:index] == "-"):
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _tensor(type_text: str):
    """(shape, element type) of `tensor<AxBxT>` / `tensor<T>` (an encoding dropped)."""
    body = _split_top_level(type_text[len("tensor<"):-1])[0]  # (`tensor<4xf32, #enc>`)
    match = _SHAPED.fullmatch(body)
    dims = [d for d in match["dims"].split("x") if d]
    return tuple(None if d == "?" else int(d) for d in dims), match["element"]


def _type_end(text: str) -> int:
    """Where the type at the start of `text` ends: before ` {attributes}` (at depth 0)."""
    depth = 0
    for index, char in enumerate(text):
        if char in "<([":
            depth += 1
        elif char in ">)]" and text[index - 1:index] != "-":
            depth -= 1
        elif char == "{" and depth == 0:
            return index
    return len(text)


def _value(text: str) -> Optional[ValueInfo]:
    if not text.startswith("%") or ":" not in text:
        return None
    name, _, type_text = text[1:].partition(":")
    type_text = type_text.strip()
    type_text = type_text[:_type_end(type_text)].strip()
    if type_text.startswith("tensor<") and type_text.endswith(">"):
        shape, element = _tensor(type_text)
        return ValueInfo(name.strip(), type_text, shape, element)
    return ValueInfo(name.strip(), type_text)


def parse_declaration(text: str) -> Optional[tuple[list[ValueInfo], list[ValueInfo]]]:
    """(inputs, outputs) of an `iree.abi.declaration`; None for text not of that form."""
    match = _DECLARATION.fullmatch(text or "")
    if match is None:
        return None
    sides = []
    for part in (match["args"], match["results"]):
        values = [_value(item) for item in _split_top_level(part)]
        if any(value is None for value in values):
            return None
        sides.append(values)
    return sides[0], sides[1]
