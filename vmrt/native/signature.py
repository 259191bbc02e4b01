"""Export signatures of native modules: cconv strings parsed strictly, and the
argument/result struct layout C exports use.

A cconv is '0', the argument types, '_', the result types. Types: i (i32),
I (i64), f (f32), F (f64), r (ref), v (none); arguments may hold spans `C..D`
(variadic: the caller passes any number of tuples of the span's types).
Results have no spans. Python receives one value per element, a span as a list
of tuples.

Struct layout (upstream vm/module.c iree_vm_function_call_compute_cconv_fragment_size,
vm/bytecode/dispatch.c iree_vm_bytecode_populate_import_cconv_arguments, and the
structs of vm/shims.h):

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

from vmrt.errors import StatusCode, VmrtError

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


class CConvError(VmrtError):
    default_code = StatusCode.INVALID_ARGUMENT


class Signature:
    """A parsed cconv.

    `arguments`: one entry per Python argument, a type character or, for a
    span, a tuple of its members' type characters. `results`: type characters.
    """

    __slots__ = ("cconv", "arguments", "results", "has_spans", "has_refs", "_layouts",
                 "_fixed_arguments", "_results_layout")

    def __init__(self, cconv: str, arguments: tuple, results: tuple[str, ...]):
        self.cconv = cconv
        self.arguments = arguments
        self.results = results
        self.has_spans = any(isinstance(a, tuple) for a in arguments)
        self.has_refs = "r" in cconv
        self._layouts: dict[tuple[int, ...], Layout] = {}
        self._fixed_arguments = None if self.has_spans else Layout(arguments, ())
        self._results_layout = Layout(results, ())

    def __repr__(self) -> str:
        return f"Signature({self.cconv!r})"

    def arguments_layout(self, span_counts: tuple[int, ...] = ()) -> "Layout":
        if self._fixed_arguments is not None:
            return self._fixed_arguments
        layout = self._layouts.get(span_counts)
        if layout is None:
            if len(self._layouts) > 64:
                self._layouts.clear()
            layout = self._layouts[span_counts] = Layout(self.arguments, span_counts)
        return layout

    @property
    def results_layout(self) -> "Layout":
        return self._results_layout


class Layout:
    """The struct for one fragment (with given span counts).

    `struct` packs the flat value list: one value per scalar, two (pointer,
    type) per ref, a count before each span's elements. `ref_slots` are the
    indices of the ref pointers in that list.
    """

    __slots__ = ("struct", "size", "ref_slots", "value_count")

    def __init__(self, elements, span_counts: tuple[int, ...]):
        codes = ["<"]
        position = 0
        max_align = 4
        ref_slots = []
        value_index = 0
        counts = iter(span_counts)

        def place(size, align, code):
            nonlocal position
            pad = -position % align
            if pad:
                codes.append(f"{pad}x")
            codes.append(code)
            position += pad + size

        for element in elements:
            if isinstance(element, tuple):
                count = next(counts)
                place(4, 4, "i")
                value_index += 1
                size, align, member_codes, member_refs, member_values = _element_struct(element)
                max_align = max(max_align, align)
                if count:
                    pad = -position % align
                    if pad:
                        codes.append(f"{pad}x")
                    position += pad
                    for k in range(count):
                        codes.append(member_codes)
                        ref_slots.extend(value_index + k * member_values + r for r in member_refs)
                    position += size * count
                    value_index += member_values * count
            else:
                size, align, code = _SCALARS[element]
                max_align = max(max_align, align)
                if element == "r":
                    ref_slots.append(value_index)
                    value_index += 2
                else:
                    value_index += 1
                place(size, align, code)
        pad = -position % max_align
        if position == 0:
            pad = 4  # the `{ int unused; }` of an empty fragment
        if pad:
            codes.append(f"{pad}x")
        self.struct = struct.Struct("".join(codes))
        self.size = self.struct.size
        self.ref_slots = tuple(ref_slots)
        self.value_count = value_index


_ELEMENT_STRUCTS: dict[tuple, tuple] = {}


def _element_struct(members: tuple[str, ...]):
    """(size, alignment, struct codes, ref value indices, value count) of one span element."""
    cached = _ELEMENT_STRUCTS.get(members)
    if cached is not None:
        return cached
    codes = []
    position = 0
    align_max = 4
    refs = []
    values = 0
    for member in members:
        size, align, code = _SCALARS[member]
        align_max = max(align_max, align)
        pad = -position % align
        if pad:
            codes.append(f"{pad}x")
        codes.append(code)
        position += pad + size
        if member == "r":
            refs.append(values)
            values += 2
        else:
            values += 1
    tail = -position % align_max
    if tail:
        codes.append(f"{tail}x")
    result = (position + tail, align_max, "".join(codes), tuple(refs), values)
    _ELEMENT_STRUCTS[members] = result
    return result


_PARSED: dict[str, Signature] = {}
_ARGUMENT_TYPES = frozenset("iIfFrv")
_RESULT_TYPES = frozenset("iIfFrv")


def parse(cconv) -> Signature:
    """The Signature of `cconv`; CConvError saying what is wrong otherwise."""
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
    arguments = []
    i = 0
    while i < len(argument_text):
        ch = argument_text[i]
        if ch == "C":
            end = argument_text.find("D", i + 1)
            if end < 0:
                raise CConvError(f"span at argument position {i} has no closing 'D'")
            members = argument_text[i + 1:end]
            if "C" in members:
                raise CConvError("spans do not nest")
            bad = [c for c in members if c not in _ARGUMENT_TYPES]
            if bad:
                raise CConvError(f"unknown type {bad[0]!r} in a span")
            members = tuple(c for c in members if c != "v")
            if not members:
                raise CConvError("a span needs at least one type")
            arguments.append(members)
            i = end + 1
            continue
        if ch == "D":
            raise CConvError("span end 'D' without 'C'")
        if ch not in _ARGUMENT_TYPES:
            raise CConvError(f"unknown argument type {ch!r}")
        if ch != "v":
            arguments.append(ch)
        i += 1
    for ch in result_text:
        if ch in "CD":
            raise CConvError("results cannot be variadic (no spans)")
        if ch not in _RESULT_TYPES:
            raise CConvError(f"unknown result type {ch!r}")
    results = tuple(c for c in result_text if c != "v")
    signature = Signature(cconv, tuple(arguments), results)
    _PARSED[cconv] = signature
    return signature
