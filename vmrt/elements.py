"""Element types, shapes, narrow floats and C numbers, as IREE spells and reads them.

One module below both the HAL and the parameter archives (it knows no VM): the HAL's
buffer views, `vmrt run --input=2x3xf32=1 2 3 4 5 6`, `vmrt params create
--data=w=4x8xf32=1.5`, the check module and the vmasm lexer all read `AxBxTYPE`,
element values and numbers through it, so they agree with each other and with
IREE's tools (runtime/src/iree/hal/string_util.c, runtime/src/iree/base/
string_view.c, runtime/src/iree/base/internal/math.h describe the rules).

- Element types are IREE's u32 encoding: numerical type in the top byte, bit count
  in the low byte (`ElementType`, `make_element_type`, `element_*`).
- Narrow floats (f16, bf16, the f8 family) convert to and from f32 rounding to
  nearest even, with each format's infinity/NaN conventions (`FloatFormat`).
- C numbers: `atoi`/`atof` read what iree_string_view_atoi_*/atof/atod read (the
  longest strtol/strtod prefix, base 0 so `0x10` is 16 and `010` is 8, bounded text
  length, `4294967295` as i32 is -1, a float underflowing to zero fails);
  `parse_c_integer`/`parse_c_float` read the whole text (the vmasm lexer).
- Text: `parse_shape_and_type("2x3xf32")`, `parse_element(text, type)` -> bytes.

Failures are ElementError (INVALID_ARGUMENT) unless said otherwise.
"""

from __future__ import annotations

import enum
import math
import re
import struct
from dataclasses import dataclass
from fractions import Fraction

from vmrt.errors import ElementError, StatusCode

# -- element types ---------------------------------------------------------------------------------
# An element type is a u32: numerical type in the top byte, bit count in the low byte.


class NumericalType(enum.IntEnum):
    UNKNOWN = 0x00
    INTEGER = 0x10
    INTEGER_SIGNED = 0x11
    INTEGER_UNSIGNED = 0x12
    BOOLEAN = 0x13
    FLOAT = 0x20
    FLOAT_IEEE = 0x21
    FLOAT_BRAIN = 0x22
    FLOAT_COMPLEX = 0x23
    FLOAT_8_E5M2 = 0x24
    FLOAT_8_E4M3FN = 0x25
    FLOAT_8_E5M2_FNUZ = 0x26
    FLOAT_8_E4M3_FNUZ = 0x27
    FLOAT_8_E8M0_FNU = 0x28


def make_element_type(numerical_type: int, bit_count: int) -> int:
    return ((int(numerical_type) & 0xFF) << 24) | (bit_count & 0xFF)


class ElementType(enum.IntEnum):
    NONE = make_element_type(NumericalType.UNKNOWN, 0)
    OPAQUE_8 = make_element_type(NumericalType.UNKNOWN, 8)
    OPAQUE_16 = make_element_type(NumericalType.UNKNOWN, 16)
    OPAQUE_32 = make_element_type(NumericalType.UNKNOWN, 32)
    OPAQUE_64 = make_element_type(NumericalType.UNKNOWN, 64)
    BOOL_8 = make_element_type(NumericalType.BOOLEAN, 8)
    INT_4 = make_element_type(NumericalType.INTEGER, 4)
    SINT_4 = make_element_type(NumericalType.INTEGER_SIGNED, 4)
    UINT_4 = make_element_type(NumericalType.INTEGER_UNSIGNED, 4)
    INT_8 = make_element_type(NumericalType.INTEGER, 8)
    SINT_8 = make_element_type(NumericalType.INTEGER_SIGNED, 8)
    UINT_8 = make_element_type(NumericalType.INTEGER_UNSIGNED, 8)
    INT_16 = make_element_type(NumericalType.INTEGER, 16)
    SINT_16 = make_element_type(NumericalType.INTEGER_SIGNED, 16)
    UINT_16 = make_element_type(NumericalType.INTEGER_UNSIGNED, 16)
    INT_32 = make_element_type(NumericalType.INTEGER, 32)
    SINT_32 = make_element_type(NumericalType.INTEGER_SIGNED, 32)
    UINT_32 = make_element_type(NumericalType.INTEGER_UNSIGNED, 32)
    INT_64 = make_element_type(NumericalType.INTEGER, 64)
    SINT_64 = make_element_type(NumericalType.INTEGER_SIGNED, 64)
    UINT_64 = make_element_type(NumericalType.INTEGER_UNSIGNED, 64)
    FLOAT_16 = make_element_type(NumericalType.FLOAT_IEEE, 16)
    FLOAT_32 = make_element_type(NumericalType.FLOAT_IEEE, 32)
    FLOAT_64 = make_element_type(NumericalType.FLOAT_IEEE, 64)
    BFLOAT_16 = make_element_type(NumericalType.FLOAT_BRAIN, 16)
    COMPLEX_FLOAT_64 = make_element_type(NumericalType.FLOAT_COMPLEX, 64)
    COMPLEX_FLOAT_128 = make_element_type(NumericalType.FLOAT_COMPLEX, 128)
    FLOAT_8_E5M2 = make_element_type(NumericalType.FLOAT_8_E5M2, 8)
    FLOAT_8_E4M3_FN = make_element_type(NumericalType.FLOAT_8_E4M3FN, 8)
    FLOAT_8_E5M2_FNUZ = make_element_type(NumericalType.FLOAT_8_E5M2_FNUZ, 8)
    FLOAT_8_E4M3_FNUZ = make_element_type(NumericalType.FLOAT_8_E4M3_FNUZ, 8)
    FLOAT_8_E8M0_FNU = make_element_type(NumericalType.FLOAT_8_E8M0_FNU, 8)


E = ElementType


def element_numerical_type(element_type: int) -> int:
    return (element_type >> 24) & 0xFF


def element_bit_count(element_type: int) -> int:
    return element_type & 0xFF


def element_byte_count(element_type: int) -> int:
    """Bytes one element takes in a dense encoding (sub-byte types round up)."""
    return (element_bit_count(element_type) + 7) // 8


def element_packed_byte_count(element_type: int, element_count: int) -> int:
    """Bytes `element_count` densely packed elements take (i4 packs two a byte)."""
    return (element_count * element_bit_count(element_type) + 7) // 8


def element_is_opaque(element_type: int) -> bool:
    return element_numerical_type(element_type) == NumericalType.UNKNOWN


def element_is_integer(element_type: int) -> bool:
    return element_numerical_type(element_type) & NumericalType.INTEGER == NumericalType.INTEGER


def element_types_compatible(actual: int, expected: int) -> bool:
    """hal.buffer_view.assert's rule: opaque data matches anything, integers
    match integers of the same width whatever their signedness, anything else
    must be equal."""
    if element_is_opaque(actual):
        return True
    if element_is_integer(actual) and element_is_integer(expected) and \
            element_bit_count(actual) == element_bit_count(expected):
        return True
    return actual == expected


# -- narrow floats ---------------------------------------------------------------------------------
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class FloatFormat:
    """A binary float narrower than f32 with a sign bit (not f8E8M0FNU, see e8m0_*)."""

    exp_bits: int
    mantissa_bits: int
    have_infinity: bool
    have_nan: bool
    bias_tweak: int = 0
    nan_as_neg_zero: bool = False  # the "FNUZ" formats: -0 encodes NaN

    @property
    def bias(self) -> int:
        return self.bias_tweak + (1 << (self.exp_bits - 1)) - 1

    @property
    def sign_mask(self) -> int:
        return 1 << (self.exp_bits + self.mantissa_bits)

    @property
    def exp_mask(self) -> int:
        return self.sign_mask - (1 << self.mantissa_bits)

    @property
    def mantissa_mask(self) -> int:
        return (1 << self.mantissa_bits) - 1


F16 = FloatFormat(5, 10, True, True)
BF16 = FloatFormat(8, 7, True, True)
F8E5M2 = FloatFormat(5, 2, True, True)
F8E4M3FN = FloatFormat(4, 3, False, True)
F8E5M2FNUZ = FloatFormat(5, 2, False, True, 1, True)
F8E4M3FNUZ = FloatFormat(4, 3, False, True, 1, True)

#: The narrow float element types: (struct code of their bits, format).
NARROW_FLOATS = {
    int(E.FLOAT_16): ("H", F16), int(E.BFLOAT_16): ("H", BF16),
    int(E.FLOAT_8_E5M2): ("B", F8E5M2), int(E.FLOAT_8_E4M3_FN): ("B", F8E4M3FN),
    int(E.FLOAT_8_E5M2_FNUZ): ("B", F8E5M2FNUZ), int(E.FLOAT_8_E4M3_FNUZ): ("B", F8E4M3FNUZ),
}


def to_f32(bits: int, fmt: FloatFormat) -> float:
    """The value encoded by `bits` (exact in f32)."""
    sign = -1.0 if bits & fmt.sign_mask else 1.0
    exp = bits & fmt.exp_mask
    mantissa = bits & fmt.mantissa_mask
    if exp == fmt.exp_mask:
        if fmt.have_infinity:
            return math.nan if fmt.have_nan and mantissa else sign * math.inf
        if fmt.have_nan and mantissa == fmt.mantissa_mask and not fmt.nan_as_neg_zero:
            return math.nan
    elif fmt.have_nan and fmt.nan_as_neg_zero and bits == fmt.sign_mask:
        return math.nan
    elif exp == 0:
        return sign * math.ldexp(mantissa, 1 - fmt.bias - fmt.mantissa_bits)
    exponent = (exp >> fmt.mantissa_bits) - fmt.bias - fmt.mantissa_bits
    return sign * math.ldexp(mantissa + (1 << fmt.mantissa_bits), exponent)


def _round_shift(value: int, shift: int) -> int:
    """value >> shift rounded to nearest, ties to even."""
    if shift <= 0:
        return value << -shift
    half = 1 << (shift - 1)
    quotient = value >> shift
    remainder = value & ((1 << shift) - 1)
    if remainder > half or (remainder == half and quotient & 1):
        quotient += 1
    return quotient


def _finite_fields(u: int, fmt: FloatFormat) -> tuple[int, int, str]:
    """(exponent field, mantissa) of the finite f32 bits `u` in `fmt`, and what
    to make instead when it does not fit ("inf", "nan" or "")."""
    f32_exp = (u >> 23) & 0xFF
    f32_mantissa = u & 0x7FFFFF
    shift = 23 - fmt.mantissa_bits
    if f32_exp == 0:
        # bf16 keeps f32 denormals; narrower exponents flush them.
        return 0, _round_shift(f32_mantissa, shift) if fmt.exp_bits == 8 else 0, ""
    exponent = f32_exp - 127
    if exponent > (1 << (fmt.exp_bits - 1)) - int(fmt.have_infinity):
        return 0, 0, "inf"
    if exponent + fmt.bias <= 0:
        # A subnormal of fmt (a rounding carry lands in the exponent field, as it
        # should); below half the smallest one, IREE flushes to zero.
        sub_shift = shift - exponent + (1 - fmt.bias)
        if 0 <= sub_shift <= 23:
            return 0, _round_shift((1 << 23) + f32_mantissa, sub_shift), ""
        return 0, 0, ""
    rounded = _round_shift(f32_mantissa, shift) << shift
    if rounded > 0x7FFFFF:
        rounded = 0
        exponent += 1
    exp_field = (exponent + fmt.bias) << fmt.mantissa_bits
    overflow = "nan" if not fmt.have_infinity and exp_field > fmt.exp_mask else ""
    return exp_field, rounded >> shift, overflow


def from_f32(value: float, fmt: FloatFormat) -> int:
    """The encoding of f32 `value` in `fmt`, rounded to nearest even."""
    sign = fmt.sign_mask if math.copysign(1.0, value) < 0 else 0
    exp_field = mantissa = 0
    if math.isnan(value):
        special = "nan"
    elif math.isinf(value):
        special = "inf"
    else:
        exp_field, mantissa, special = _finite_fields(_U32.unpack(_F32.pack(value))[0], fmt)
    if special == "inf":
        if fmt.have_infinity:
            return sign | fmt.exp_mask
        if not fmt.have_nan:
            return sign | fmt.exp_mask | fmt.mantissa_mask
        special = "nan"
    if special == "nan":
        if not fmt.have_nan:
            return 0
        if fmt.nan_as_neg_zero:
            return fmt.sign_mask
        return sign | fmt.exp_mask | fmt.mantissa_mask
    if fmt.nan_as_neg_zero and exp_field == 0 and mantissa == 0:
        return 0
    return sign | exp_field | mantissa


def e8m0_to_f32(bits: int) -> float:
    """f8E8M0FNU: a bare power of two 2**(bits - 127); 0xFF is NaN."""
    return math.nan if bits == 0xFF else math.ldexp(1.0, bits - 127)


def f32_to_e8m0(value: float) -> int:
    if math.isnan(value) or value <= 0 and not value == 0:
        return 0xFF
    if value == 0 or math.isinf(value):
        return 0xFF if math.isinf(value) else 0
    exponent = math.frexp(value)[1] - 1  # value = m * 2**exponent, 1 <= m < 2
    mantissa = value / math.ldexp(1.0, exponent)
    if mantissa > 1.5 or (mantissa == 1.5 and exponent + 127 & 1):
        exponent += 1
    return max(0, min(0xFE, exponent + 127))


# -- C numbers (strtol / strtod, "C" locale) -------------------------------------------------------
#: C isspace() in the "C" locale.
WHITESPACE = " \t\n\v\f\r"
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_HEX_DIGITS = "0123456789abcdefABCDEF"
_INT_DIGITS = {8: "01234567", 10: "0123456789", 16: _HEX_DIGITS}


def strtol(text: str) -> tuple[int, int] | None:
    """(value, end) of what strtol(text, &end, 0) converts, the value unbounded;
    None when it converts nothing."""
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
    return (-value if negative else value), i


def atoi(text: str, bits: int, signed: bool = True) -> int | None:
    """iree_string_view_atoi_{int,uint}{32,64}: what it stores (the low `bits` of
    the C long / unsigned long strtol reads), or None when it fails (nothing
    read, text of 16 bytes or more for 32 bits and 32 for 64, out of C range)."""
    if len(text.encode()) >= (16 if bits <= 32 else 32):
        return None
    parsed = strtol(text)
    if parsed is None:
        return None
    value = parsed[0]
    if signed:
        if not _LONG_MIN <= value <= _LONG_MAX:
            return None
        value &= (1 << bits) - 1
        return value - (1 << bits) if value >> (bits - 1) else value
    if abs(value) >= 1 << 64:
        return None
    return value & ((1 << bits) - 1)


def parse_c_integer(text: str) -> int | None:
    """The integer a base-0 strtol reads from the whole of `text` (trailing
    whitespace allowed), unbounded, or None."""
    parsed = strtol(text)
    if parsed is None or parsed[1] != len(text.rstrip()):
        return None
    return parsed[0]


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


def _float_token(rest: str) -> tuple[int, int, int, int] | None:
    """(mantissa, radix, power, end) of the number at the start of `rest`
    (mantissa * radix**power), or None when none is there."""
    match = _HEX_FLOAT_RE.match(rest)
    if match:
        whole, fraction, exponent = match.group(1), match.group(2) or "", match.group(3)
        power = int(exponent or 0) - 4 * len(fraction)
        return int(whole + fraction or "0", 16), 2, power, match.end()
    match = _DEC_FLOAT_RE.match(rest)
    if not match:
        return None
    whole, fraction, exponent = match.group(1), match.group(2) or "", match.group(3)
    power = int(exponent or 0) - len(fraction)
    return int(whole + fraction or "0"), 10, power, match.end()


def strtod(text: str, bits: int) -> tuple[float, int, bool] | None:
    """(value, end, erange) of what strtof (bits=32) / strtod (bits=64) converts,
    correctly rounded; `erange` when C sets ERANGE with a zero or infinite result
    (underflow to zero, overflow). None when it converts nothing."""
    i = 0
    while i < len(text) and text[i] in WHITESPACE:
        i += 1
    sign = 1.0
    if i < len(text) and text[i] in "+-":
        sign = -1.0 if text[i] == "-" else 1.0
        i += 1
    rest = text[i:]
    for special, value in ((_INF_RE, math.inf), (_NAN_RE, math.nan)):
        match = special.match(rest)
        if match:
            return math.copysign(value, sign), i + match.end(), False
    token = _float_token(rest)
    if token is None:
        return None
    mantissa, radix, power, end = token
    if mantissa == 0:
        return math.copysign(0.0, sign), i + end, False
    # Decide the far ends from the magnitude alone (value < radix**magnitude):
    # exact rounding of 1e-99999 would build a huge fraction for nothing.
    magnitude = (mantissa.bit_length() if radix == 2 else len(str(mantissa))) + power
    if magnitude > (1100 if radix == 2 else 330):
        return math.copysign(math.inf, sign), i + end, True
    if magnitude < (-1200 if radix == 2 else -360):
        return math.copysign(0.0, sign), i + end, True
    value = Fraction(mantissa) * Fraction(radix) ** power
    result, out_of_range = _round_to_binary(value.numerator, value.denominator, bits)
    return math.copysign(result, sign), i + end, out_of_range


def atof(text: str, bits: int) -> float | None:
    """iree_string_view_atof (bits=32) / atod (bits=64): strtof/strtod of the
    longest valid prefix; None on failure (nothing parsed, text of 32 bytes or
    more, or a nonzero value that underflows to zero). Overflow is infinity."""
    if len(text.encode()) >= 32:
        return None
    parsed = strtod(text, bits)
    if parsed is None or (parsed[0] == 0.0 and parsed[2]):
        return None
    return parsed[0]


def parse_c_float(text: str, bits: int) -> float | None:
    """strtof/strtod of the whole of `text` (surrounding whitespace allowed), or
    None (nothing or not all of it parsed, overflow, underflow to zero; subnormal
    results are kept)."""
    text = text.strip(WHITESPACE)
    parsed = strtod(text, bits)
    if parsed is None or parsed[1] != len(text) or parsed[2]:
        return None
    return parsed[0]


# -- shapes and element type names -----------------------------------------------------------------
#: Largest rank the tools accept (upstream's parser and VLA casts use 128).
MAX_RANK = 128

_SPECIAL_TYPE_NAMES = {
    E.FLOAT_8_E5M2: "f8E5M2", E.FLOAT_8_E4M3_FN: "f8E4M3FN",
    E.FLOAT_8_E5M2_FNUZ: "f8E5M2FNUZ", E.FLOAT_8_E4M3_FNUZ: "f8E4M3FNUZ",
    E.FLOAT_8_E8M0_FNU: "f8E8M0FNU",
}
_SPECIAL_TYPES = {name: int(t) for t, name in _SPECIAL_TYPE_NAMES.items()}
# Longest prefix first ("si" before "i", "bf" before "f").
_TYPE_PREFIXES = (("si", NumericalType.INTEGER_SIGNED), ("ui", NumericalType.INTEGER_UNSIGNED),
                  ("bf", NumericalType.FLOAT_BRAIN), ("cf", NumericalType.FLOAT_COMPLEX),
                  ("i", NumericalType.INTEGER), ("f", NumericalType.FLOAT_IEEE),
                  ("x", NumericalType.UNKNOWN), ("*", NumericalType.UNKNOWN))
_PREFIX_OF = {NumericalType.BOOLEAN: "i", NumericalType.INTEGER: "i",
              NumericalType.INTEGER_SIGNED: "si", NumericalType.INTEGER_UNSIGNED: "ui",
              NumericalType.FLOAT_IEEE: "f", NumericalType.FLOAT_BRAIN: "bf",
              NumericalType.FLOAT_COMPLEX: "cf"}


def parse_shape(text: str) -> tuple[int, ...]:
    """`2x3` -> (2, 3); the empty string is a scalar shape ()."""
    if not text:
        return ()
    dims = []
    for index, part in enumerate(text.split("x")):
        value = atoi(part, 64)
        if value is None or value < 0:
            raise ElementError(f"shape[{index}] invalid value '{part}' of '{text}'")
        dims.append(value)
    if len(dims) > MAX_RANK:
        raise ElementError(f"a shape rank of {len(dims)} is just a little bit excessive, eh?",
                           StatusCode.RESOURCE_EXHAUSTED)
    return tuple(dims)


def format_shape(shape) -> str:
    return "x".join(str(d) for d in shape)


def parse_element_type(text: str) -> int:
    """`f32`, `i8`, `si16`, `ui64`, `bf16`, `cf64`, `i1` (bool), `x8`/`*8`
    (opaque), `f8E4M3FN`... -> the IREE element type value."""
    if text == "i1":
        return int(E.BOOL_8)
    special = _SPECIAL_TYPES.get(text)
    if special is not None:
        return special
    for prefix, numerical in _TYPE_PREFIXES:
        if text.startswith(prefix):
            bits = atoi(text[len(prefix):], 32, signed=False)
            if bits is None or bits > 0xFF:
                raise ElementError(f"out of range bit count in '{text}'")
            return make_element_type(numerical, bits)
    raise ElementError(f"unhandled element type prefix in '{text}'")


def format_element_type(element_type: int) -> str:
    special = _SPECIAL_TYPE_NAMES.get(element_type)
    if special is not None:
        return special
    numerical = element_numerical_type(element_type)
    if numerical == NumericalType.BOOLEAN:
        return "i1"
    return f"{_PREFIX_OF.get(numerical, '*')}{element_bit_count(element_type)}"


def format_shape_and_type(shape, element_type: int) -> str:
    prefix = format_shape(shape) + "x" if shape else ""
    return prefix + format_element_type(element_type)


def strip_quotes(text: str) -> str:
    """`text` without surrounding whitespace and one `"` at either end (as a shell
    may leave them)."""
    text = text.strip()
    if text.startswith('"'):
        text = text[1:]
    if text.endswith('"'):
        text = text[:-1]
    return text


def parse_shape_and_type(text: str) -> tuple[tuple[int, ...], int]:
    """`2x3xf32` (anything after an `=` is ignored) -> ((2, 3), FLOAT_32)."""
    text = strip_quotes(text)
    if not text:
        raise ElementError("empty string input")
    metadata = text.split("=", 1)[0]
    shape_text, sep, type_text = metadata.rpartition("x")
    if not sep:
        shape_text, type_text = "", metadata
    return parse_shape(shape_text), parse_element_type(type_text)


# -- element values --------------------------------------------------------------------------------
#: Integer element types: (lowest, highest) value text may give, the C atoi reading it
#: (bits, signed). IREE reads 8- and 16-bit integers as 32-bit ones and range-checks
#: them (signless ones take either signedness's range; signed ones only an upper bound).
_INT_RANGES = {
    int(E.INT_8): (-128, 255, 32, True), int(E.SINT_8): (None, 127, 32, True),
    int(E.UINT_8): (None, 255, 32, False), int(E.INT_16): (-32768, 65535, 32, True),
    int(E.SINT_16): (None, 32767, 32, True), int(E.UINT_16): (None, 65535, 32, False),
    int(E.INT_32): (None, None, 32, True), int(E.SINT_32): (None, None, 32, True),
    int(E.UINT_32): (None, None, 32, False), int(E.INT_64): (None, None, 64, True),
    int(E.SINT_64): (None, None, 64, True), int(E.UINT_64): (None, None, 64, False),
}


def _parse_int_element(text: str, element_type: int) -> int | None:
    low, high, bits, signed = _INT_RANGES[element_type]
    value = atoi(text, bits, signed)
    if value is None or (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def _parse_float_element(text: str, element_type: int) -> bytes | None:
    value = atof(text, 64 if element_type == E.FLOAT_64 else 32)
    if value is None:
        return None
    if element_type == E.FLOAT_32:
        return _F32.pack(value)
    if element_type == E.FLOAT_64:
        return struct.pack("<d", value)
    if element_type == E.FLOAT_8_E8M0_FNU:
        return bytes([f32_to_e8m0(value)])
    code, fmt = NARROW_FLOATS[element_type]
    return struct.pack("<" + code, from_f32(value, fmt))


_FLOAT_ELEMENTS = frozenset([int(E.FLOAT_32), int(E.FLOAT_64), int(E.FLOAT_8_E8M0_FNU),
                             *NARROW_FLOATS])


def parse_element(text: str, element_type: int) -> bytes:
    """One element's bytes (little-endian), as iree_hal_parse_element reads it:
    integers and floats as C numbers (see atoi/atof), anything else (i1, opaque,
    complex, i4...) as exactly two hex digits a byte."""
    element_type = int(element_type)
    if element_type in _INT_RANGES:
        value = _parse_int_element(text, element_type)
        data = None if value is None else (value & ((1 << element_bit_count(element_type)) - 1)
                                           ).to_bytes(element_byte_count(element_type), "little")
    elif element_type in _FLOAT_ELEMENTS:
        data = _parse_float_element(text, element_type)
    else:
        data = _parse_hex_element(text, element_type)
    if data is None:
        raise ElementError(f"cannot parse `{text}` as {format_element_type(element_type)}")
    return data


def _parse_hex_element(text: str, element_type: int) -> bytes | None:
    size = element_byte_count(element_type)
    if len(text) != size * 2:
        raise ElementError(f"binary hex element count mismatch: buffer length={len(text)} < "
                           f"expected={size * 2}")
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None
