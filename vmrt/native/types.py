"""Annotations that spell a cconv, for exports declared without one.

    from vmrt.native.types import i32, i64, f32, f64, Ref, Span

    class Host(vmrt.NativeModule, name="host", version=1):
        @vmrt.export
        def scale(self, x: i64, factor: f32) -> tuple[f32, i64]: ...    # "0If_fI"
        @vmrt.export
        def total(self, items: Span[i32, Ref]) -> i32: ...              # "0CirD_i"

Accepted: i32/i64/f32/f64 (plain `int` is i32 and `float` is f32, the VM's
32-bit types), Ref or any RefObject subclass (or `X | None`) for r,
`Span[...]` or `list[tuple[...]]` / `list[T]` for a span; results `None`
(none), one type, or `tuple[...]`. A generator export takes its result from
`Generator[..., ..., R]`.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from typing import Annotated, Optional

from vmrt.native.signature import CConvError
from vmrt.vm.ref import RefObject


class _Code:
    __slots__ = ("code",)

    def __init__(self, code: str):
        self.code = code

    def __repr__(self) -> str:
        return f"cconv {self.code!r}"


i32 = Annotated[int, _Code("i")]
i64 = Annotated[int, _Code("I")]
f32 = Annotated[float, _Code("f")]
f64 = Annotated[float, _Code("F")]
Ref = Annotated[Optional[RefObject], _Code("r")]


class Span:
    """`Span[i32, Ref]`: a variadic argument of (i32, ref) tuples."""

    def __class_getitem__(cls, members):
        if not isinstance(members, tuple):
            members = (members,)
        codes = "".join(_scalar_code(m) for m in members)
        return Annotated[list, _Code("C" + codes + "D")]


def _scalar_code(annotation) -> str:
    code = _code(annotation, allow_span=False)
    if code is None:
        raise CConvError(f"cannot derive a cconv type from {annotation!r}")
    return code


def _code(annotation, allow_span: bool) -> str | None:
    if annotation is int:
        return "i"
    if annotation is float:
        return "f"
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, _Code):
                if meta.code.startswith("C") and not allow_span:
                    raise CConvError("spans do not nest")
                return meta.code
        return _code(typing.get_args(annotation)[0], allow_span)
    if isinstance(annotation, type) and issubclass(annotation, RefObject):
        return "r"
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if members and all(_code(m, False) == "r" for m in members):
            return "r"
        return None
    if origin is list and allow_span:
        (item,) = typing.get_args(annotation) or (None,)
        if item is None:
            return None
        if typing.get_origin(item) is tuple:
            members = typing.get_args(item)
        else:
            members = (item,)
        return "C" + "".join(_scalar_code(m) for m in members) + "D"
    return None


def derive_cconv(fn, with_state: bool = False) -> str:
    """The cconv of `fn` from its annotations; CConvError when one is missing."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as error:  # unresolvable forward references
        raise CConvError(f"cannot read the annotations: {error}") from None
    parameters = list(inspect.signature(fn).parameters.values())[1 + int(with_state):]
    arguments = []
    for p in parameters:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise CConvError(f"parameter '{p.name}' is not positional")
        if p.name not in hints:
            raise CConvError(f"parameter '{p.name}' has no annotation (or pass a cconv)")
        code = _code(hints[p.name], allow_span=True)
        if code is None:
            raise CConvError(f"parameter '{p.name}': cannot derive a cconv type from "
                             f"{hints[p.name]!r}")
        arguments.append(code)
    if "return" not in hints:
        raise CConvError("the return has no annotation (use -> None for no results)")
    result = hints["return"]
    if inspect.isgeneratorfunction(fn):
        origin = typing.get_origin(result)
        if origin in (collections.abc.Generator, typing.Generator):
            result = typing.get_args(result)[2]
        else:
            raise CConvError("a generator export is annotated -> Generator[Y, S, Result]")
    results = _result_codes(result)
    return "0" + ("".join(arguments) or "v") + "_" + (results or "v")


def _result_codes(result) -> str:
    if result is None or result is type(None):
        return ""
    if typing.get_origin(result) is tuple:
        return "".join(_scalar_code(r) for r in typing.get_args(result))
    return _scalar_code(result)
