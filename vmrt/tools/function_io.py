"""Function I/O as iree-run-module does it: `--input=` parsing, result printing,
`--output=` files and `--expected_output=` checks, for values vmrt has today
(i32/i64/f32/f64, null refs, vm.buffer and vm.list results).

The rules follow IREE 3.13.0's runtime/src/iree/tooling/function_io.c and
runtime/src/iree/base/string_view.c:

- Each `--input` is trimmed (C `isspace`), then: empty is an error; `(null)`
  and `(ignored)` give a zero of the expected type (a null ref for `r`);
  `@`, `+` or `*` name a .npy file; `&` is an output storage buffer; anything
  else is parsed by the *function's* next cconv type: a primitive for
  i/I/f/F, a tensor for r. Too many inputs fail ("function expected fewer
  input values").
- Primitives are parsed by C's strtol / strtoll (base 0: `0x10` is hex and
  `010` octal!) and strtof / strtod, taking the longest valid prefix
  (`12abc` is 12, `1e` is 1). The text must be shorter than 16 bytes for
  i32 and 32 bytes otherwise; a value out of the C `long` range fails; i32
  keeps the low 32 bits of the parsed long (`4294967295` is -1). A float
  that underflows to zero fails (`1e-50` as f32); one that overflows is
  infinity.
- Results print as `result[N]: i32=7`: integers in decimal, floats with
  printf `%g` (f32 promoted to double), so `nan`, `-nan`, `inf`, `-0`,
  `1e+06`, `3.33333e+299`. A null ref prints `(null)`; a ref prints its type
  name then a new line, then for a list one `child_list[N]: ...` line per
  element (so a blank line follows it) and for other refs `(no printer)`.

vmrt additionally accepts a typed scalar `TYPE=VALUE` (`i64=5`, `f32=nan`)
when TYPE is what the function expects (iree-run-module rejects those).
Tensors (!hal.buffer_view) come with the HAL module; until then every path
that would need one fails with UNIMPLEMENTED.
"""

from __future__ import annotations

import math
import re
import struct
from fractions import Fraction

from vmrt.errors import StatusCode, VMError, VmrtError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.list import VMList
from vmrt.vm.value import VALUE_TYPE_NAME

__all__ = [
    "IGNORED", "UnsupportedError", "c_parse_float", "c_parse_int", "format_g",
    "format_value", "npy_bytes", "output_payload", "parse_values", "result_kinds",
]

#: C isspace() in the "C" locale.
WHITESPACE = " \t\n\v\f\r"

#: The scalar cconv types and the names iree-run-module prints for them.
TYPE_NAMES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64"}
_TYPE_CHARS = {name: char for char, name in TYPE_NAMES.items()}

_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1

HAL_PENDING = "which is unsupported until the HAL module lands in vmrt"


class UnsupportedError(VmrtError):
    """Something iree-run-module does with the HAL that vmrt cannot do yet."""

    default_code = StatusCode.UNIMPLEMENTED


class _Ignored:
    """`(ignored)` in an --expected_output list: that result is not compared."""

    def __repr__(self) -> str:
        return "IGNORED"


IGNORED = _Ignored()


# ---------------------------------------------------------------------------
# C number parsing (strtol / strtod semantics, "C" locale)
# ---------------------------------------------------------------------------
_HEX_DIGITS = "0123456789abcdefABCDEF"
_INT_DIGITS = {8: "01234567", 10: "0123456789", 16: _HEX_DIGITS}


def _strtol(text: str) -> int | None:
    """The value strtol(text, &end, 0) converts (unbounded), or None when it
    converts nothing."""
    i, n = 0, len(text)
    while i < n and text[i] in WHITESPACE:
        i += 1
    negative = False
    if i < n and text[i] in "+-":
        negative = text[i] == "-"
        i += 1
    if text[i:i + 2] in ("0x", "0X") and i + 2 < n and text[i + 2] in _HEX_DIGITS:
        base, i = 16, i + 2
    elif i < n and text[i] == "0":
        base = 8
    else:
        base = 10
    start = i
    while i < n and text[i] in _INT_DIGITS[base]:
        i += 1
    if i == start:
        return None
    value = int(text[start:i], base)
    return -value if negative else value


def c_parse_int(text: str, bits: int) -> int | None:
    """iree_string_view_atoi_int32/int64: the signed value, or None on failure."""
    if len(text.encode()) >= (16 if bits == 32 else 32):
        return None
    value = _strtol(text)
    if value is None or not _LONG_MIN <= value <= _LONG_MAX:
        return None
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


_INF_RE = re.compile(r"inf(?:inity)?", re.IGNORECASE)
_NAN_RE = re.compile(r"nan(?:\([0-9A-Za-z_]*\))?", re.IGNORECASE)
_HEX_FLOAT_RE = re.compile(
    r"0[xX](?=[0-9a-fA-F]|\.[0-9a-fA-F])([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?(?:[pP]([+-]?[0-9]+))?")
_DEC_FLOAT_RE = re.compile(r"(?=[0-9]|\.[0-9])([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")

# (mantissa bits including the implicit one, minimum normal exponent, maximum exponent)
_FORMATS = {32: (24, -126, 127), 64: (53, -1022, 1023)}


def _round_to_binary(num: int, den: int, bits: int) -> tuple[float, bool]:
    """num/den (> 0) rounded to nearest-even in binary32/64 (returned as a
    Python float holding that value) and whether C would set ERANGE to
    zero/infinity (underflow to zero, overflow to infinity)."""
    precision, emin, emax = _FORMATS[bits]
    exponent = num.bit_length() - den.bit_length()
    if (num << max(0, -exponent)) < (den << max(0, exponent)):
        exponent -= 1
    quantum = max(exponent, emin) - (precision - 1)
    if quantum >= 0:
        den <<= quantum
    else:
        num <<= -quantum
    mantissa, remainder = divmod(num, den)
    twice = 2 * remainder
    if twice > den or (twice == den and mantissa & 1):
        mantissa += 1
    if mantissa == 0:
        return 0.0, True
    if mantissa.bit_length() + quantum - 1 > emax:
        return math.inf, True
    return math.ldexp(mantissa, quantum), False


def c_parse_float(text: str, bits: int) -> float | None:
    """iree_string_view_atof (bits=32) / atod (bits=64): strtof/strtod of the
    longest valid prefix, correctly rounded; None on failure (nothing parsed,
    text of 32 bytes or more, or a nonzero value that underflows to zero)."""
    if len(text.encode()) >= 32:
        return None
    i = 0
    while i < len(text) and text[i] in WHITESPACE:
        i += 1
    sign = 1.0
    if i < len(text) and text[i] in "+-":
        sign = -1.0 if text[i] == "-" else 1.0
        i += 1
    rest = text[i:]
    if _INF_RE.match(rest):
        return math.copysign(math.inf, sign)
    if _NAN_RE.match(rest):
        return math.copysign(math.nan, sign)
    match = _HEX_FLOAT_RE.match(rest)
    if match:
        whole, fraction, exponent = match.group(1), match.group(2) or "", match.group(3)
        mantissa = int(whole + fraction or "0", 16)
        power, radix = int(exponent or 0) - 4 * len(fraction), 2
        magnitude = mantissa.bit_length() + power  # value < 2**magnitude
        too_big, too_small = magnitude > 1100, magnitude < -1200
    else:
        match = _DEC_FLOAT_RE.match(rest)
        if not match:
            return None
        whole, fraction, exponent = match.group(1), match.group(2) or "", match.group(3)
        mantissa = int(whole + fraction or "0")
        power, radix = int(exponent or 0) - len(fraction), 10
        magnitude = len(str(mantissa)) + power  # value < 10**magnitude
        too_big, too_small = magnitude > 330, magnitude < -360
    if mantissa == 0:
        return math.copysign(0.0, sign)
    if too_big:
        return math.copysign(math.inf, sign)
    if too_small:
        return None  # underflows to zero: ERANGE with a zero result
    value = Fraction(mantissa) * Fraction(radix) ** power
    result, out_of_range = _round_to_binary(value.numerator, value.denominator, bits)
    if result == 0.0 and out_of_range:
        return None
    return math.copysign(result, sign)


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
        value = c_parse_int(value_text, 32 if kind == "i" else 64)
    else:
        value = c_parse_float(value_text, 32 if kind == "f" else 64)
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
                               f"{HAL_PENDING}")
    if text[0] == "&":
        cursor.take_ref()
        raise UnsupportedError(f"output storage inputs (`{text}`) are HAL buffers, "
                               f"{HAL_PENDING}")
    if cursor.peek() != "r":
        return [_parse_primitive(cursor.take(), text)]
    cursor.take_ref()
    if "=" not in text and "x" not in text:
        raise VmrtError("invalid tensor specification, requires at least a shape/type "
                        "(`4x2xf32=...`)", StatusCode.INVALID_ARGUMENT)
    raise UnsupportedError(f"tensor inputs (`{text}`) become !hal.buffer_view values, "
                           f"{HAL_PENDING}")


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
    if ref_type_name(value) == "hal.buffer_view":
        raise UnsupportedError(f"writing hal.buffer_view results {HAL_PENDING}")
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
