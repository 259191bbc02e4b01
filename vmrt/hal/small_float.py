"""Narrow floating-point formats (f16, bf16, the f8 family) to and from f32,
rounding to nearest even, with the infinity/NaN conventions of each format
(runtime/src/iree/base/internal/math.h describes them)."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class FloatFormat:
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


def from_f32(value: float, fmt: FloatFormat) -> int:
    """The encoding of f32 `value` in `fmt`, rounded to nearest even."""
    u = _U32.unpack(_F32.pack(value))[0] if math.isfinite(value) else None
    negative = math.copysign(1.0, value) < 0
    sign = fmt.sign_mask if negative else 0
    generate_nan = generate_inf = False
    exp_field = mantissa = 0
    if math.isnan(value):
        generate_nan = True
    elif math.isinf(value):
        generate_inf = True
    else:
        f32_exp = (u >> 23) & 0xFF
        f32_mantissa = u & 0x7FFFFF
        shift = 23 - fmt.mantissa_bits
        if f32_exp == 0:
            if fmt.exp_bits == 8:  # bf16 keeps f32 denormals
                mantissa = _round_shift(f32_mantissa, shift)
        else:
            exponent = f32_exp - 127
            if exponent > (1 << (fmt.exp_bits - 1)) - int(fmt.have_infinity):
                generate_inf = True
            elif exponent + fmt.bias <= 0:
                sub_shift = shift - exponent + (1 - fmt.bias)
                if 0 <= sub_shift <= 23:
                    mantissa = _round_shift((1 << 23) + f32_mantissa, sub_shift)
                # A rounding carry lands in the exponent field, as it should.
            else:
                rounded = _round_shift(f32_mantissa, shift) << shift
                if rounded > 0x7FFFFF:
                    rounded = 0
                    exponent += 1
                exp_field = (exponent + fmt.bias) << fmt.mantissa_bits
                mantissa = rounded >> shift
                if not fmt.have_infinity and exp_field > fmt.exp_mask:
                    generate_nan = True
    if generate_inf:
        if fmt.have_infinity:
            return sign | fmt.exp_mask
        if fmt.have_nan:
            generate_nan = True
        else:
            return sign | fmt.exp_mask | fmt.mantissa_mask
    if generate_nan:
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
