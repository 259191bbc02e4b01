"""The value types of scripts: how each is written in an annotation, held in VM
registers and spelt in a calling convention."""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Type:
    """A script type: `name` as a script writes it, `bank` its register bank
    (i32, i64, f64 or ref), `cconv` its calling-convention character and `vm` the
    VM type of a ref (`!vm.buffer`, `!vm.list<i64>`)."""

    name: str
    bank: str
    cconv: str
    vm: str = ""
    #: The script type a boundary width stands for inside a function (i32 -> int).
    inner: str = ""

    def __str__(self) -> str:
        return self.name

    @property
    def is_number(self) -> bool:
        return self.name in ("int", "float", "bool")

    @property
    def is_list(self) -> bool:
        return self.name.startswith("list[")


INT = Type("int", "i64", "I")
FLOAT = Type("float", "f64", "F")
BOOL = Type("bool", "i32", "i")
BYTES = Type("bytearray", "ref", "r", "!vm.buffer")
LIST_INT = Type("list[int]", "ref", "r", "!vm.list<i64>")
LIST_FLOAT = Type("list[float]", "ref", "r", "!vm.list<f64>")
#: Explicit widths for a host's boundary (parameters, results, host imports):
#: inside a function an i32 is an int and an f32 a float.
I32 = Type("i32", "i32", "i", inner="int")
F32 = Type("f32", "f32", "f", inner="float")
#: What calls give that are not values: nothing, or several results to unpack.
NONE = Type("None", "none", "v")
TUPLE = Type("tuple", "none", "")

BY_NAME = {t.name: t for t in (INT, FLOAT, BOOL, BYTES, LIST_INT, LIST_FLOAT, I32, F32)}
ELEMENT = {LIST_INT: INT, LIST_FLOAT: FLOAT}
LIST_OF = {INT: LIST_INT, FLOAT: LIST_FLOAT}


def annotation_type(node: ast.expr | None) -> Type | None:
    """The Type an annotation names: None for `None`, False when it names no
    script type (callers turn that into an error at the annotation)."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return None
    text = ast.unparse(node).replace(" ", "")
    for prefix in ("vmrt.script.", "script."):
        text = text.removeprefix(prefix)
    text = text.replace("List[", "list[")
    found = BY_NAME.get(text)
    return found if found is not None else False  # type: ignore[return-value]


def result_types(node: ast.expr | None) -> tuple[Type, ...] | bool:
    """The result types of a return annotation: () for None, several for
    `tuple[int, float]`; False when some part is not a script type."""
    if node is None:
        return ()
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("tuple", "Tuple"):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        found = [annotation_type(p) for p in parts]
        return False if any(not t for t in found) else tuple(found)  # type: ignore
    single = annotation_type(node)
    if single is False:
        return False
    return () if single is None else (single,)


def inner(t: Type) -> Type:
    """The type a value of `t` has inside a function (i32 -> int, f32 -> float)."""
    return BY_NAME[t.inner] if t.inner else t


def from_python(annotation) -> Type | None | bool:
    """The Type of a Python annotation object (host import methods): int, float,
    bool, bytearray, list[int], list[float]; None for None; False otherwise."""
    if annotation is None or annotation is type(None):
        return None
    if isinstance(annotation, str):
        return annotation_type(ast.parse(annotation, mode="eval").body)
    name = getattr(annotation, "__name__", None)
    args = getattr(annotation, "__args__", None)
    if args and name in ("list", "List"):
        return BY_NAME.get(f"list[{getattr(args[0], '__name__', '')}]", False)
    if isinstance(annotation, type):
        return BY_NAME.get(name or "", False)
    return False
