"""Element types and typed values as IREE's tools spell them (`4x8xf32=1.5`).

Used by `vmrt params create` and `convert` to turn `SHAPExTYPE=VALUE` into a
byte length and a splat pattern, with IREE's rules (runtime/src/iree/hal/
string_util.c, runtime/src/iree/base/internal/math.h):

- types: i1 (a byte), iN / siN / uiN, f16 / f32 / f64, bf16, f8E5M2,
  f8E4M3FN, f8E5M2FNUZ, f8E4M3FNUZ, f8E8M0FNU, cfN, and opaque xN / *N;
- values: integers in C `strtol` base-0 syntax (42, -7, 0x2A, 052) range-checked
  per type; floats parsed as f32 (f64 for f64) and rounded to the type with
  round-to-nearest-even; any other type takes exactly 2 hex digits per byte.
"""

from __future__ import annotations

import math
import re
import struct
from typing import NamedTuple

import numpy as np

from vmrt.errors import StatusCode, VmrtError

_F8_TYPES = {
    # name: (exponent bits, mantissa bits, has infinity, has NaN, bias tweak, NaN is -0)
    "f8E5M2": (5, 2, True, True, 0, False),
    "f8E4M3FN": (4, 3, False, True, 0, False),
    "f8E5M2FNUZ": (5, 2, False, True, 1, True),
    "f8E4M3FNUZ": (4, 3, False, True, 1, True),
}
_SMALL_FLOATS = {
    ("float", 16): (5, 10, True, True, 0, False),
    ("bfloat", 16): (8, 7, True, True, 0, False),
}


class ElementType(NamedTuple):
    """A HAL element type: numerical kind and bit count (plus its spelling)."""

    name: str
    kind: str  # bool int sint uint float bfloat complex opaque, or the f8 name
    bits: int

    @property
    def byte_count(self) -> int:
        return (self.bits + 7) // 8


def _invalid(message: str) -> VmrtError:
    return VmrtError(message, StatusCode.INVALID_ARGUMENT)


def parse_element_type(text: str) -> ElementType:
    if text == "i1":
        return ElementType(text, "bool", 8)
    if text in _F8_TYPES or text == "f8E8M0FNU":
        return ElementType(text, text, 8)
    for prefix, kind in (("i", "int"), ("si", "sint"), ("ui", "uint"), ("f", "float"),
                         ("bf", "bfloat"), ("cf", "complex"), ("x", "opaque"),
                         ("*", "opaque")):
        if text.startswith(prefix):
            digits = text[len(prefix):]
            break
    else:
        raise _invalid(f"unhandled element type prefix in '{text}'")
    if not digits.isdigit() or int(digits) > 0xFF:
        raise _invalid(f"out of range bit count in '{text}'")
    return ElementType(text, kind, int(digits))


_INT64_MAX = (1 << 63) - 1


def parse_shape_and_type(text: str) -> tuple[tuple[int, ...], ElementType]:
    """`4x8xf32` -> ((4, 8), f32); `f32` -> ((), f32)."""
    value = text.strip().strip('"')
    if not value:
        raise _invalid("empty string input")
    value = value.split("=", 1)[0]
    if "x" in value:
        shape_text, type_text = value.rsplit("x", 1)
        if not type_text:
            raise _invalid(f"invalid shape and type specification: '{text}'")
    else:
        shape_text, type_text = "", value
    shape = []
    if shape_text:
        for i, dim in enumerate(shape_text.split("x")):
            parsed = _parse_c_int(dim)
            if parsed is None or not 0 <= parsed <= _INT64_MAX:  # (an int64 upstream)
                raise _invalid(f"shape[{i}] invalid value '{dim}' of '{shape_text}'")
            shape.append(parsed)
    return tuple(shape), parse_element_type(type_text)


_C_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _parse_c_int(text: str) -> int | None:
    """An integer in strtol base-0 syntax (the whole string), or None."""
    text = text.strip()
    if not _C_INT.fullmatch(text):
        return None
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body[:2] in ("0x", "0X"):
        return sign * int(body[2:], 16)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body[1:], 8)
    return sign * int(body, 10)


def _parse_float(text: str) -> float:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float.fromhex(text)
    except ValueError:
        raise _invalid(f"invalid floating-point value '{text}'") from None


def _f32_bits(value: float) -> int:
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


def _round_even_bias(value: int, shift: int) -> int:
    even_bit = 1 << shift
    odd_bit = even_bit >> 1
    return value + (odd_bit if value & even_bit else odd_bit - 1)


def f32_to_small_float(value: float, exp_bits: int, mantissa_bits: int, has_inf: bool,
                       has_nan: bool, bias_tweak: int, nan_is_neg_zero: bool) -> int:
    """The bits of the f32 `value` in a narrower float format, as IREE rounds it."""
    bits = _f32_bits(value)
    sign_shift = exp_bits + mantissa_bits
    sign_mask = 1 << sign_shift
    mantissa_mask = (1 << mantissa_bits) - 1
    exp_mask = (1 << sign_shift) - (1 << mantissa_bits)
    bias = bias_tweak + (1 << (exp_bits - 1)) - 1
    sign = sign_mask if bits >> 31 else 0
    f_exp = bits & 0x7F800000
    f_mantissa = bits & 0x7FFFFF
    exp = mantissa = 0
    make_nan = make_inf = False
    if f_exp == 0x7F800000:
        make_nan, make_inf = bool(f_mantissa), not f_mantissa
    elif f_exp == 0:
        if exp_bits == 8:  # bf16 keeps f32's subnormals
            shift = 23 - mantissa_bits
            mantissa = _round_even_bias(f_mantissa, shift) >> shift
    else:
        arith_exp = (f_exp >> 23) - 127
        if arith_exp > (1 << (exp_bits - 1)) - int(has_inf):
            make_inf = True
        elif arith_exp + bias <= 0:
            shift = 23 - mantissa_bits - arith_exp + (1 - bias)
            if 0 <= shift <= 23:
                mantissa = _round_even_bias((1 << 23) + f_mantissa, shift) >> shift
        else:
            shift = 23 - mantissa_bits
            biased = _round_even_bias(f_mantissa, shift)
            if biased > 0x7FFFFF:
                biased = 0
                arith_exp += 1
            exp = (arith_exp + bias) << mantissa_bits
            mantissa = biased >> shift
            if not has_inf and exp > exp_mask:
                make_nan = True
    if make_inf:
        if has_inf:
            return sign | exp_mask
        if not has_nan:
            return sign | exp_mask | mantissa_mask
        make_nan = True
    if make_nan:
        if not has_nan:
            return 0
        return sign_mask if nan_is_neg_zero else sign | exp_mask | mantissa_mask
    if nan_is_neg_zero and exp == 0 and mantissa == 0:
        return 0
    return sign | exp | mantissa


def f32_to_f8e8m0fnu(value: float) -> int:
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        value = float(np.float32(value))
    if not math.isfinite(value):
        return 0xFF
    if value <= 0:
        return 0
    normalized, exp = math.frexp(value)
    biased = exp - (normalized < 0.75) + 127
    return min(max(biased, 0), 0xFF)


_INT_FORMATS = {8: "b", 16: "h", 32: "i", 64: "q"}


def encode_element(text: str, etype: ElementType) -> bytes:
    """The little-endian bytes of one value of `etype` written as `text`."""
    kind, bits = etype.kind, etype.bits
    if kind in ("int", "sint", "uint") and bits in _INT_FORMATS:
        value = _parse_c_int(text)
        if value is None:
            raise _invalid(f"invalid {etype.name} value '{text}'")
        low = 0 if kind == "uint" else -(1 << (bits - 1))
        high = (1 << (bits - 1)) - 1 if kind == "sint" or (kind == "int" and bits >= 32) \
            else (1 << bits) - 1
        if not low <= value <= high:
            raise _invalid(f"{etype.name} value '{text}' out of range [{low}, {high}]")
        return (value & ((1 << bits) - 1)).to_bytes(bits // 8, "little")
    if kind == "float" and bits == 32:
        return struct.pack("<I", _f32_bits(_parse_float(text)))
    if kind == "float" and bits == 64:
        return struct.pack("<d", _parse_float(text))
    if (kind, bits) in _SMALL_FLOATS:
        return struct.pack("<H", f32_to_small_float(_parse_float(text),
                                                    *_SMALL_FLOATS[(kind, bits)]))
    if kind in _F8_TYPES:
        return bytes([f32_to_small_float(_parse_float(text), *_F8_TYPES[kind])])
    if kind == "f8E8M0FNU":
        return bytes([f32_to_f8e8m0fnu(_parse_float(text))])
    # Anything else is raw bytes as hex, first byte first.
    digits = text.strip()
    if len(digits) != etype.byte_count * 2:
        raise _invalid(f"binary hex element count mismatch: buffer length={len(digits)} "
                       f"< expected={etype.byte_count * 2}")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise _invalid(f"invalid hex value '{text}' for {etype.name}") from None


class ParameterDecl(NamedTuple):
    """A `--data`/`--splat` declaration: name, byte length and fill pattern."""

    name: str
    shape: tuple[int, ...]
    element_type: ElementType
    length: int
    pattern: bytes


def parse_parameter_decl(text: str) -> ParameterDecl:
    """`name=SHAPExTYPE[=VALUE]` as iree-create-parameters reads it."""
    name, _, spec = text.partition("=")
    shape_type, _, contents = spec.partition("=")
    shape, etype = parse_shape_and_type(shape_type)
    if etype.bits == 0 or etype.bits % 8:
        raise _invalid("opaque and sub-byte aligned element types cannot currently be "
                       "used as splats; use a bitcast type (2xi4=1xi8, etc)")
    length = etype.byte_count * math.prod(shape)
    if not contents:
        pattern = b"\0"
    else:
        if etype.byte_count > 16:
            raise VmrtError(f"element type size for {shape_type} out of range of splat "
                            "patterns", StatusCode.OUT_OF_RANGE)
        pattern = encode_element(contents, etype)
    return ParameterDecl(name, shape, etype, length, pattern)


def parse_splat_value(text: str) -> bytes:
    """`TYPE=VALUE` (or empty for zero) as iree-convert-parameters --splat reads it."""
    if not text:
        return b"\0"
    type_text, _, value = text.partition("=")
    etype = parse_element_type(type_text)
    if etype.byte_count > 16:
        raise VmrtError(f"element type size for {type_text} out of range of splat patterns",
                        StatusCode.OUT_OF_RANGE)
    if etype.byte_count == 0:
        raise _invalid(f"element type {type_text} has no bytes")
    return encode_element(value, etype)
