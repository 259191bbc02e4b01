"""The stream program: resources with a size and a lifetime, and asynchronous ops over them.

A program holds functions; a function takes resources as arguments, runs a list of
ops in program order and returns resources. Values are SSA: every op result is a
new value. A result *tied* to an operand names the same storage as that operand
(the op updates it in place); once a value has been updated in place it may not
be used again (its old contents are gone).

The text form and its grammar are described in vmrt/stream/README.md.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from vmrt.errors import StatusCode, StreamError


class Lifetime(str, enum.Enum):
    """How long a resource lives and who owns it."""

    #: owned by the caller: passed in as an argument or handed back as a result.
    EXTERNAL = "external"
    #: lives only inside one invocation of a function; packed into the transient slab.
    TRANSIENT = "transient"
    #: immutable once created (e.g. loaded from a parameter scope).
    CONSTANT = "constant"
    #: resident across invocations and mutable (model weights, optimizer state),
    #: typically initialized from a parameter scope.
    PARAMETER = "parameter"


@dataclass(frozen=True)
class Loc:
    """A position in stream text (1-based line and column)."""

    line: int
    col: int
    file: str | None = None

    def __str__(self) -> str:
        return f"{self.file or '<stream>'}:{self.line}:{self.col}"


@dataclass(frozen=True)
class ResourceType:
    lifetime: Lifetime
    size: int

    def __str__(self) -> str:
        return f"{self.lifetime.value}<{self.size}>"


#: element types a splat/fill pattern may have, with their byte widths.
ELEMENT_TYPES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8,
                 "f16": 2, "bf16": 2, "f32": 4, "f64": 8}


@dataclass(frozen=True)
class Pattern:
    """The value a splat or fill repeats, with its element type."""

    value: int | float
    element_type: str

    @property
    def byte_width(self) -> int:
        return ELEMENT_TYPES[self.element_type]

    def __str__(self) -> str:
        return f"{format_number(self.value)} : {self.element_type}"


def format_number(value: int | float) -> str:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return str(value)
    text = repr(float(value))
    if "." not in text and "e" not in text and "E" not in text:
        text += ".0"
    return text


class Value:
    """An SSA value naming a resource (a whole storage, possibly a later version)."""

    __slots__ = ("name", "type", "op", "index", "func")

    def __init__(self, name: str, type: ResourceType, op: "Op | None", index: int,
                 func: "Func"):
        self.name = name
        self.type = type
        #: the defining op, or None for a function argument.
        self.op = op
        #: result index in `op`, or argument index.
        self.index = index
        self.func = func

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Use:
    """An operand: a byte range [offset, offset + length) of a value."""

    value: Value
    offset: int
    length: int
    loc: Loc | None = None

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def is_whole(self) -> bool:
        return self.offset == 0 and self.length == self.value.type.size


#: op kinds, as spelled in the text form.
OP_KINDS = ("splat", "fill", "copy", "dispatch", "param.load", "param.gather")


@dataclass(eq=False)
class Op:
    """One asynchronous op.

    kind         one of OP_KINDS
    operands     the ranges read (dispatch, copy source) or written in place
                 (fill, copy target, gather targets)
    results      new SSA values
    ties         per result: the index of the operand it updates in place, or None
                 for a result with storage of its own
    pattern      splat / fill
    callee       dispatch: the kernel, e.g. ("exe", "matmul") for @exe::@matmul
    scope, keys  param.load (one key) / param.gather (one key per operand)
    """

    kind: str
    operands: list[Use]
    results: list[Value]
    ties: list[int | None]
    pattern: Pattern | None = None
    callee: tuple[str, ...] = ()
    scope: str | None = None
    keys: list[str] = field(default_factory=list)
    loc: Loc | None = None
    index: int = -1

    @property
    def is_dispatch(self) -> bool:
        return self.kind == "dispatch"

    def describe(self) -> str:
        """A short name for messages: `dispatch @exe::@fn` or `fill` (+ location)."""
        what = self.kind
        if self.callee:
            what += " " + "::".join("@" + part for part in self.callee)
        elif self.keys:
            what += f" \"{self.scope}\"::\"{self.keys[0]}\""
        where = f" at {self.loc}" if self.loc else f" (op #{self.index})"
        return what + where


@dataclass(eq=False)
class Func:
    name: str
    args: list[Value] = field(default_factory=list)
    result_types: list[ResourceType] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    returns: list[Value] = field(default_factory=list)
    attributes: dict[str, object] = field(default_factory=dict)
    loc: Loc | None = None
    return_loc: Loc | None = None

    @property
    def dispatch_count(self) -> int:
        return sum(1 for op in self.ops if op.is_dispatch)


@dataclass(eq=False)
class Program:
    name: str
    funcs: list[Func] = field(default_factory=list)
    attributes: dict[str, object] = field(default_factory=dict)
    loc: Loc | None = None

    def func(self, name: str) -> Func:
        for func in self.funcs:
            if func.name == name:
                return func
        raise StreamError(f"no function @{name} in program @{self.name}",
                          code=StatusCode.NOT_FOUND)


def enum_member(kind, value, what: str, loc: Loc | None = None):
    """`value` as a member of the enum `kind` (given a member or its text), else a
    StreamError naming `what` and the choices."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise StreamError(f"unknown {what} {value!r} (expected one of "
                          f"{', '.join(m.value for m in kind)})", loc) from None


def check_pattern(pattern: Pattern, loc: Loc | None = None) -> None:
    """Element type known, value representable in it."""
    if pattern.element_type not in ELEMENT_TYPES:
        raise StreamError(f"unknown element type '{pattern.element_type}' (expected one of "
                          f"{', '.join(ELEMENT_TYPES)})", loc)
    value = pattern.value
    if pattern.element_type.startswith("i"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise StreamError(f"pattern {format_number(value)} is not an integer but its "
                              f"element type is {pattern.element_type}", loc)
        bits = 8 * pattern.byte_width
        if not -(1 << (bits - 1)) <= value < (1 << bits):
            raise StreamError(f"pattern {value} does not fit in {pattern.element_type}", loc)
    elif not math.isfinite(float(value)):
        raise StreamError(f"pattern {value} is not a finite number", loc)
