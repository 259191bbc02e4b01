"""Function I/O as iree-run-module does it: `--input=` parsing, result printing,
`--output=` files and `--expected_output=` checks, for the values of the VM itself
(i32/i64/f32/f64, null refs, vm.buffer and vm.list results).

The rules follow IREE 3.13.0's runtime/src/iree/tooling/function_io.c:

- Each `--input` is trimmed (C `isspace`), then: empty is an error; `(null)`
  and `(ignored)` give a zero of the expected type (a null ref for `r`);
  `@`, `+` or `*` name a .npy file; `&` is an output storage buffer; anything
  else is parsed by the *function's* next cconv type: a primitive for
  i/I/f/F, a tensor for r. Too many inputs fail ("function expected fewer
  input values").
- Primitives are C numbers as iree_string_view_atoi/atof read them
  (vmrt.elements.atoi, atof: `0x10` is hex and `010` octal, the longest valid
  prefix, `4294967295` as i32 is -1, `1e-50` as f32 fails).
- Results print as `result[N]: i32=7`: integers in decimal, floats with
  printf `%g` (f32 promoted to double), so `nan`, `-nan`, `inf`, `-0`,
  `1e+06`, `3.33333e+299`. A null ref prints `(null)`; a ref prints its type
  name then a new line, then for a list one `child_list[N]: ...` line per
  element (so a blank line follows it) and for other refs `(no printer)`.

vmrt additionally accepts a typed scalar `TYPE=VALUE` (`i64=5`, `f32=nan`)
when TYPE is what the function expects (iree-run-module rejects those).
Tensors (!hal.buffer_view) need a HAL device: vmrt.tools.run reads and writes them
with vmrt.hal.buffer_view_io when the program imports the hal module; without it,
every path here that would need one fails with UNIMPLEMENTED.
"""

from __future__ import annotations

import math
import re
import struct

from vmrt.elements import WHITESPACE, atof, atoi
from vmrt.errors import StatusCode, UnsupportedError, VMError, VmrtError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.list import VMList
from vmrt.vm.value import VALUE_TYPE_NAME

__all__ = [
    "IGNORED", "UnsupportedError", "format_g", "format_value", "npy_bytes", "output_payload",
    "parse_values", "result_kinds",
]

#: The scalar cconv types and the names iree-run-module prints for them.
TYPE_NAMES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64"}
_TYPE_CHARS = {name: char for char, name in TYPE_NAMES.items()}

#: Why a tensor value fails here: only a program importing the hal module has a
#: HAL device to hold it (vmrt.tools.run parses tensors for those).
NO_HAL = "which need a HAL device, and the program does not import the hal module"


class _Ignored:
    """`(ignored)` in an --expected_output list: that result is not compared."""

    def __repr__(self) -> str:
        return "IGNORED"


IGNORED = _Ignored()


# ---------------------------------------------------------------------------
# Parsing --input= (and --expected_output=) lists against a cconv fragment
# ---------------------------------------------------------------------------
_TYPED_SCALAR_RE = re.compile(r"(i32|i64|f32|f64)=(.*)", re.DOTALL)


class _Cursor:
    """The cconv types still to be filled, consumed front to back."""

    def __init__(self, fragment: str):
        if "C" in fragment:
            raise UnsupportedError(f"variadic cconv fragment '{fragment}' cannot be "
                                   "given on the command line")
        self.types = [c for c in fragment if c != "v"]
        self.index = 0

    def peek(self) -> str | None:
        return self.types[self.index] if self.index < len(self.types) else None

    def take(self) -> str:
        if self.index >= len(self.types):
            raise VmrtError("function expected fewer input values", StatusCode.INVALID_ARGUMENT)
        self.index += 1
        return self.types[self.index - 1]

    def take_ref(self) -> None:
        actual = self.take()
        if actual != "r":
            raise VmrtError(f"function signature mismatch: expected cconv type `r` but "
                            f"provided type `{actual}`", StatusCode.INVALID_ARGUMENT)


def _zero_of(kind: str):
    return {"i": 0, "I": 0, "f": 0.0, "F": 0.0, "r": None}[kind]


def _parse_primitive(kind: str, text: str):
    if kind not in TYPE_NAMES:
        raise UnsupportedError(f"unimplemented cconv type `{kind}`")
    typed = _TYPED_SCALAR_RE.fullmatch(text)
    value_text = text
    if typed:
        if _TYPE_CHARS[typed.group(1)] != kind:
            raise VmrtError(f"input `{text}` is typed {typed.group(1)} but the function "
                            f"expects {TYPE_NAMES[kind]}", StatusCode.INVALID_ARGUMENT)
        value_text = typed.group(2)
    if kind in "iI":
        value = atoi(value_text, 32 if kind == "i" else 64)
    else:
        value = atof(value_text, 32 if kind == "f" else 64)
    if value is None:
        raise VmrtError(f"parsing value `{value_text}` as {TYPE_NAMES[kind]}",
                        StatusCode.INVALID_ARGUMENT)
    return value


def _parse_one(cursor: _Cursor, text: str, expected: bool) -> list:
    if not text:
        raise VmrtError("no value specified for input", StatusCode.INVALID_ARGUMENT)
    if text in ("(null)", "(ignored)"):
        kind = cursor.take()
        if kind not in "iIfFr":
            raise UnsupportedError(f"unimplemented cconv type `{kind}`")
        return [IGNORED if expected and text == "(ignored)" else _zero_of(kind)]
    if text[0] in "@+*":
        if not text[1:].endswith(".npy"):
            raise VmrtError("only numpy (.npy) files are supported for metadata-less "
                            "variant I/O", StatusCode.UNIMPLEMENTED)
        cursor.take_ref()
        raise UnsupportedError(f"numpy inputs (`{text}`) become !hal.buffer_view values, "
                               f"{NO_HAL}")
    if text[0] == "&":
        cursor.take_ref()
        raise UnsupportedError(f"output storage inputs (`{text}`) are HAL buffers, "
                               f"{NO_HAL}")
    if cursor.peek() != "r":
        return [_parse_primitive(cursor.take(), text)]
    cursor.take_ref()
    if "=" not in text and "x" not in text:
        raise VmrtError("invalid tensor specification, requires at least a shape/type "
                        "(`4x2xf32=...`)", StatusCode.INVALID_ARGUMENT)
    raise UnsupportedError(f"tensor inputs (`{text}`) become !hal.buffer_view values, "
                           f"{NO_HAL}")


def parse_values(fragment: str, specs, *, expected: bool = False) -> list:
    """Python values for a function's argument (or result) cconv fragment,
    one or more per spec; errors are annotated as iree-run-module does."""
    cursor = _Cursor(fragment)
    values: list = []
    for spec in specs:
        text = spec.strip(WHITESPACE)
        try:
            values.extend(_parse_one(cursor, text, expected))
        except VmrtError as error:
            raise error.annotate(f"parsing input `{text}`")
    return values


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------
def format_g(value: float, upper: bool = False) -> str:
    """printf("%g") (or "%G") of a double as glibc prints it, `-nan` included."""
    if math.isnan(value):
        text = "-nan" if math.copysign(1.0, value) < 0 else "nan"
        return text.upper() if upper else text
    return ("%G" if upper else "%g") % value


def result_kinds(fragment: str) -> list[str]:
    if "C" in fragment:
        raise UnsupportedError(f"variadic results ('{fragment}') are not supported")
    return [c for c in fragment if c != "v"]


def ref_type_name(obj) -> str:
    ref_type = getattr(type(obj), "ref_type", None)
    return ref_type.name if ref_type is not None else type(obj).__name__


def _format_number(type_name: str, value) -> str:
    if type_name in ("f32", "f64"):
        return f"{type_name}={format_g(value)}"
    return f"{type_name}={int(value)}"


def is_buffer_view(obj) -> bool:
    from vmrt.hal.buffer_view import BufferView  # (the HAL loads only for ref values)
    return isinstance(obj, BufferView)


def _format_ref(obj, max_element_count: int) -> str:
    if obj is None:
        return "(null)"
    if is_buffer_view(obj):
        from vmrt.hal.buffer_view_io import format_buffer_view
        return "hal.buffer_view\n" + format_buffer_view(obj, max_element_count)
    name = ref_type_name(obj)
    if isinstance(obj, VMList):
        lines = [name, "\n"]
        for index in range(len(obj)):
            element = _format_list_element(obj, index, max_element_count)
            lines.append(f"child_list[{index}]: {element}\n")
        return "".join(lines)
    return f"{name}\n(no printer)"


def _format_list_element(lst: VMList, index: int, max_element_count: int) -> str:
    try:
        value_type, value = lst.get_value(index)
    except VMError:
        return _format_ref(lst.get_item(index), max_element_count)
    return _format_number(VALUE_TYPE_NAME[value_type], value)


def format_value(kind: str, value, max_element_count: int = 1024) -> str:
    """One value as iree-run-module prints it after `result[N]: ` and for `--output=-`
    (may span lines; a buffer view shows at most `max_element_count` elements)."""
    if kind == "r":
        return _format_ref(value, max_element_count)
    return _format_number(TYPE_NAMES[kind], value)


# ---------------------------------------------------------------------------
# --output=@file.npy / +file.bin
# ---------------------------------------------------------------------------
_NPY_SCALARS = {"i": ("<i4", "<i"), "I": ("<i8", "<q"), "f": ("<f4", "<f"), "F": ("<f8", "<d")}


def output_payload(kind: str, value) -> tuple[str, tuple[int, ...], bytes]:
    """(npy descr, shape, little-endian bytes) iree-run-module writes for a result."""
    if kind in _NPY_SCALARS:
        descr, fmt = _NPY_SCALARS[kind]
        return descr, (), struct.pack(fmt, value)
    if value is None:
        return "|i1", (0,), b""
    if isinstance(value, VMBuffer):
        data = value.to_bytes()
        return "|i1", (len(data),), data
    raise VmrtError("unsupported output source type; expected: !hal.buffer, "
                    "!hal.buffer_view, !vm.buffer", StatusCode.INVALID_ARGUMENT)


def npy_bytes(descr: str, shape: tuple[int, ...], data: bytes) -> bytes:
    """A version 1.0 .npy array as iree-run-module writes it: the header dict,
    space padding and a new line up to a multiple of 64 bytes, then data."""
    if not shape:
        dims = ""
    elif len(shape) == 1:
        dims = f"{shape[0]},"
    else:
        dims = ", ".join(str(d) for d in shape)
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}".encode()
    used = 6 + 2 + 2 + len(header) + 1
    padding = -used % 64
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + padding + 1) + header
            + b" " * padding + b"\n" + data)
