"""Calling conventions (`0ii_r`, `0rIiCiD_v`): the one `Signature` object.

The string is a version character ('0'), the argument types, '_', the result
types. Types: i (i32), I (i64), f (f32), F (f64), r (ref), v (none); a span
C...D repeats its contents a variadic number of times (imports only).

Everything that reads a cconv reads it through a Signature: the verifier and
code generator (register slots of a fragment), contexts (argument conversion),
native modules (the C argument/result struct layout) and the hal host adapter.

Two entry points parse, because bytecode and native modules differ in what they
accept: `signature_of` is as lenient as upstream's bytecode loader (an absent
cconv is `() -> ()`, a missing '_' means no results; well-formedness is the
verifier's job), `parse` is strict (native module declarations, where a typo
should fail at class creation with a message naming it).

Struct layout of a fragment (upstream vm/module.c
iree_vm_function_call_compute_cconv_fragment_size and the structs of
vm/shims.h):

- i, f: 4 bytes aligned to 4; I, F: 8 bytes aligned to 8;
- r: two pointer-sized words (ptr, type) aligned to a pointer;
- a span: an int32 count, then the elements, each the C struct of the span's
  types (aligned to, and padded to a multiple of, its largest member), the
  first aligned to that struct;
- the whole struct is padded to its largest alignment (at least 4); an empty
  fragment is the 4-byte `{ int unused; }`.
"""

from __future__ import annotations

import struct

from vmrt.errors import CConvError, StatusCode
from vmrt.isa.registers import pair_start

VOID, I32, I64, F32, F64, REF, SPAN_START, SPAN_END = "v", "i", "I", "f", "F", "r", "C", "D"
SCALAR_TYPES = frozenset("iIfFr")
ALL_TYPES = frozenset("viIfFrCD")

POINTER_SIZE = struct.calcsize("P")
_POINTER_CODE = "Q" if POINTER_SIZE == 8 else "I"

#: (size, alignment, struct codes) of each scalar cconv type.
_SCALARS = {
    "i": (4, 4, "i"),
    "f": (4, 4, "f"),
    "I": (8, 8, "q"),
    "F": (8, 8, "d"),
    "r": (2 * POINTER_SIZE, POINTER_SIZE, 2 * _POINTER_CODE),
}


class Signature:
    """A parsed cconv.

    `argument_fragment`/`result_fragment`: the text of each side ('v' alone is
    empty). `arguments`: one entry per Python argument, a type character or, for
    a span, a tuple of its members' type characters. `results`: likewise.
    `argument_steps`/`result_steps`: the same with the segment index of each
    (walk_fragment), as a variadic call's segment sizes are indexed.
    """

    __slots__ = ("cconv", "argument_fragment", "result_fragment", "arguments", "results",
                 "argument_steps", "result_steps", "has_spans", "has_refs", "_layouts",
                 "_fixed_arguments", "_results_layout")

    def __init__(self, cconv: str, argument_fragment: str, result_fragment: str):
        self.cconv = cconv
        self.argument_fragment = argument_fragment
        self.result_fragment = result_fragment
        self.argument_steps = tuple(walk_fragment(argument_fragment))
        self.result_steps = tuple(walk_fragment(result_fragment))
        self.arguments = tuple(element for _, element in self.argument_steps)
        self.results = tuple(element for _, element in self.result_steps)
        self.has_spans = any(isinstance(a, tuple) for a in self.arguments)
        self.has_refs = "r" in cconv
        # C struct layouts, built on first use (only native modules need them).
        self._layouts: dict[tuple[int, ...], Layout] = {}
        self._fixed_arguments = None
        self._results_layout = None

    def __repr__(self) -> str:
        return f"Signature({self.cconv!r})"

    @property
    def fragments(self) -> tuple[str, str]:
        return self.argument_fragment, self.result_fragment

    def arguments_layout(self, span_counts: tuple[int, ...] = ()) -> "Layout":
        """The C struct of the arguments (with `span_counts` elements in each span)."""
        if not self.has_spans:
            if self._fixed_arguments is None:
                self._fixed_arguments = Layout(self.arguments, ())
            return self._fixed_arguments
        layout = self._layouts.get(span_counts)
        if layout is None:
            if len(self._layouts) > 64:
                self._layouts.clear()
            layout = self._layouts[span_counts] = Layout(self.arguments, span_counts)
        return layout

    @property
    def results_layout(self) -> "Layout":
        if self._results_layout is None:
            self._results_layout = Layout(self.results, ())
        return self._results_layout


def walk_fragment(fragment: str):
    """Yields (segment index, element) per value of a fragment: a type character, or
    a span as the tuple of its types ('v' dropped everywhere).

    The segment index counts every step of the walk, 'v' included, as the
    segment sizes of variadic calls are indexed. Lenient like the bytecode
    loader: an unterminated span runs to the end."""
    i = step = 0
    while i < len(fragment):
        ch = fragment[i]
        if ch == SPAN_START:
            end = fragment.find(SPAN_END, i + 1)
            end = len(fragment) if end < 0 else end
            yield step, tuple(c for c in fragment[i + 1:end] if c != VOID)
            i = end
        elif ch != VOID:
            yield step, ch
        i += 1
        step += 1


_SIGNATURES: dict[str, Signature] = {}


def signature_of(cconv: str | None) -> Signature:
    """The Signature of a bytecode cconv (lenient; see the module docstring).

    An absent or empty string means `() -> ()` as upstream treats it."""
    key = cconv or ""
    signature = _SIGNATURES.get(key)
    if signature is None:
        if len(_SIGNATURES) > 4096:  # (untrusted modules could name any number)
            _SIGNATURES.clear()
        signature = _SIGNATURES[key] = Signature(key, *_split(key))
    return signature


def _split(cconv: str) -> tuple[str, str]:
    if not cconv:
        return "", ""
    if cconv[0] != "0":
        raise CConvError(f"unsupported cconv version {cconv[0]!r}", StatusCode.UNIMPLEMENTED)
    arguments, _, results = cconv[1:].partition("_")
    return ("" if arguments == "v" else arguments), ("" if results == "v" else results)


def split_fragments(cconv: str | None) -> tuple[str, str]:
    """(arguments, results) fragments of a cconv string; 'v' fragments become empty."""
    return signature_of(cconv).fragments


def check_well_formed(cconv: str | None) -> None:
    """Raises CConvError unless every character is a known type and spans nest."""
    for fragment in split_fragments(cconv):
        depth = 0
        for ch in fragment:
            if ch not in ALL_TYPES:
                raise CConvError(f"unsupported cconv fragment char {ch!r} in {cconv!r}")
            if ch == SPAN_START:
                depth += 1
                if depth > 1:
                    raise CConvError(f"nested spans are not supported in {cconv!r}")
            elif ch == SPAN_END:
                depth -= 1
                if depth < 0:
                    raise CConvError(f"unbalanced span end in {cconv!r}")
        if depth:
            raise CConvError(f"unterminated span in {cconv!r}")


def register_names(fragment: str) -> list[str]:
    """Registers a non-variadic fragment occupies in a frame, in order (`i0`, `r0`, ...)."""
    return _register_slots(fragment)[0]


def count_registers(fragment: str) -> tuple[int, int]:
    """(i32 registers, ref registers) a non-variadic fragment occupies in a frame."""
    _, i32_count, ref_count = _register_slots(fragment)
    return i32_count, ref_count


def _register_slots(fragment: str) -> tuple[list[str], int, int]:
    """(register names, i32 count, ref count) of a non-variadic fragment.

    i64/f64 values take an aligned pair (named by its first register), padding
    one i32 register when needed."""
    names, i32_count, ref_count = [], 0, 0
    for ch in fragment:
        if ch in "if":
            names.append(f"i{i32_count}")
            i32_count += 1
        elif ch in "IF":
            i32_count = pair_start(i32_count)
            names.append(f"i{i32_count}")
            i32_count += 2
        elif ch == "r":
            names.append(f"r{ref_count}")
            ref_count += 1
        elif ch == "C":
            raise CConvError("internal functions cannot accept variadic arguments")
        elif ch != "v":
            raise CConvError(f"unsupported cconv fragment char {ch!r}")
    return names, i32_count, ref_count


# -- strict parsing (native module declarations) ----------------------------------------------------
_PARSED: dict[str, Signature] = {}
_VALUE_TYPES = frozenset("iIfFrv")


def parse(cconv) -> Signature:
    """The Signature of `cconv`, strictly checked; CConvError saying what is wrong otherwise."""
    if not isinstance(cconv, str):
        raise CConvError(f"cconv must be a string, not {type(cconv).__name__}")
    signature = _PARSED.get(cconv)
    if signature is not None:
        return signature
    if not cconv.startswith("0"):
        raise CConvError("a cconv starts with the version '0'")
    body = cconv[1:]
    if body.count("_") != 1:
        raise CConvError("a cconv has exactly one '_' between arguments and results")
    argument_text, result_text = body.split("_")
    _check_arguments(argument_text)
    for ch in result_text:
        if ch in "CD":
            raise CConvError("results cannot be variadic (no spans)")
        if ch not in _VALUE_TYPES:
            raise CConvError(f"unknown result type {ch!r}")
    signature = _PARSED[cconv] = signature_of(cconv)
    return signature


def _check_arguments(text: str) -> None:
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "C":
            end = text.find("D", i + 1)
            if end < 0:
                raise CConvError(f"span at argument position {i} has no closing 'D'")
            members = text[i + 1:end]
            if "C" in members:
                raise CConvError("spans do not nest")
            bad = [c for c in members if c not in _VALUE_TYPES]
            if bad:
                raise CConvError(f"unknown type {bad[0]!r} in a span")
            if not members.replace("v", ""):
                raise CConvError("a span needs at least one type")
            i = end + 1
            continue
        if ch == "D":
            raise CConvError("span end 'D' without 'C'")
        if ch not in _VALUE_TYPES:
            raise CConvError(f"unknown argument type {ch!r}")
        i += 1


# -- C struct layout ---------------------------------------------------------------------------------
class Layout:
    """The struct for one fragment (with given span counts).

    `struct` packs the flat value list: one value per scalar, two (pointer,
    type) per ref, a count before each span's elements. `ref_slots` are the
    indices of the ref pointers in that list.
    """

    __slots__ = ("struct", "size", "ref_slots", "value_count")

    def __init__(self, elements, span_counts: tuple[int, ...]):
        builder = _StructBuilder()
        counts = iter(span_counts)
        for element in elements:
            if isinstance(element, tuple):
                builder.span(element, next(counts))
            else:
                builder.scalar(element)
        self.struct = struct.Struct(builder.finish())
        self.size = self.struct.size
        self.ref_slots = tuple(builder.ref_slots)
        self.value_count = builder.value_index


class _StructBuilder:
    """Accumulates struct codes, the byte position and ref value indices of a Layout."""

    def __init__(self):
        self.codes = ["<"]
        self.position = 0
        self.max_align = 4
        self.ref_slots: list[int] = []
        self.value_index = 0

    def _pad_to(self, align: int) -> None:
        pad = -self.position % align
        if pad:
            self.codes.append(f"{pad}x")
            self.position += pad

    def scalar(self, element: str) -> None:
        size, align, code = _SCALARS[element]
        self.max_align = max(self.max_align, align)
        if element == "r":
            self.ref_slots.append(self.value_index)
            self.value_index += 2
        else:
            self.value_index += 1
        self._pad_to(align)
        self.codes.append(code)
        self.position += size

    def span(self, members: tuple[str, ...], count: int) -> None:
        self._pad_to(4)
        self.codes.append("i")
        self.position += 4
        self.value_index += 1
        size, align, member_codes, member_refs, member_values = _element_struct(members)
        self.max_align = max(self.max_align, align)
        if not count:
            return
        self._pad_to(align)
        for k in range(count):
            self.codes.append(member_codes)
            self.ref_slots.extend(self.value_index + k * member_values + r for r in member_refs)
        self.position += size * count
        self.value_index += member_values * count

    def finish(self) -> str:
        pad = 4 if self.position == 0 else -self.position % self.max_align  # `{ int unused; }`
        if pad:
            self.codes.append(f"{pad}x")
        return "".join(self.codes)


_ELEMENT_STRUCTS: dict[tuple, tuple] = {}


def _element_struct(members: tuple[str, ...]):
    """(size, alignment, struct codes, ref value indices, value count) of one span element."""
    cached = _ELEMENT_STRUCTS.get(members)
    if cached is None:
        builder = _StructBuilder()
        builder.codes = []
        for member in members:
            builder.scalar(member)
        tail = -builder.position % builder.max_align
        if tail:
            builder.codes.append(f"{tail}x")
        cached = _ELEMENT_STRUCTS[members] = (
            builder.position + tail, builder.max_align, "".join(builder.codes),
            tuple(builder.ref_slots), builder.value_index)
    return cached
