"""Exact scalar semantics the generated interpreter code calls: C integer and
float behaviour (upstream runtime/src/iree/vm/ops.h) on Python ints and floats.

i32/i64 values are Python ints kept in signed range; f32 values are Python
floats already rounded to single precision; f64 values are Python floats.
Division by zero raises ZeroDivisionError, which the interpreter reports as a
VMError at the failing instruction.
"""

from __future__ import annotations

import math
import struct
from array import array

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
U32_MASK, U64_MASK = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
INF, NAN = math.inf, math.nan
# What x86 hardware (and so the reference VM) makes of an invalid operation such as
# 0/0 or sqrt(-1): the "real indefinite" quiet NaN, with the sign bit set.
DEFAULT_NAN = -math.nan

# One-slot float32 array: assigning a double and reading it back rounds to single
# precision with the C cast's round-to-nearest (overflow gives inf), in one store.
F32_SLOT = array("f", [0.0])


def f32(x: float) -> float:
    F32_SLOT[0] = x
    return F32_SLOT[0]


def wrap_i32(x: int) -> int:
    return ((x + 0x80000000) & U32_MASK) - 0x80000000


def wrap_i64(x: int) -> int:
    return ((x + 0x8000000000000000) & U64_MASK) - 0x8000000000000000


# -- integer division: C truncates toward zero; Python floors -----------------
def div_s(a: int, b: int) -> int:
    q = abs(a) // abs(b)  # ZeroDivisionError when b == 0
    return -q if (a < 0) != (b < 0) else q


def rem_s(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def div_u32(a: int, b: int) -> int:
    return wrap_i32((a & U32_MASK) // (b & U32_MASK))


def rem_u32(a: int, b: int) -> int:
    return wrap_i32((a & U32_MASK) % (b & U32_MASK))


def div_u64(a: int, b: int) -> int:
    return wrap_i64((a & U64_MASK) // (b & U64_MASK))


def rem_u64(a: int, b: int) -> int:
    return wrap_i64((a & U64_MASK) % (b & U64_MASK))


def ctlz32(a: int) -> int:
    return 32 - (a & U32_MASK).bit_length()


def ctlz64(a: int) -> int:
    return 64 - (a & U64_MASK).bit_length()


# -- bit casts -------------------------------------------------------------------
_I32 = struct.Struct("<i")
_F32 = struct.Struct("<f")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


_U64 = struct.Struct("<Q")


def bitcast_i32_f32(a: int) -> float:
    """Bits -> f32 value. A float -> double conversion would quiet a signalling NaN,
    so NaNs are widened by hand (the f32 payload on top of the f64 mantissa): any
    bit pattern survives bitcast.i32.f32 then bitcast.f32.i32, neg, abs, moves."""
    x = _F32.unpack(_I32.pack(a))[0]
    if x != x:
        return _F64.unpack(_U64.pack(((a & 0x80000000) << 32) | 0x7FF0000000000000
                                     | ((a & 0x7FFFFF) << 29)))[0]
    return x


def bitcast_f32_i32(x: float) -> int:
    if x != x:
        bits = _U64.unpack(_F64.pack(x))[0]
        payload = (bits >> 29) & 0x7FFFFF
        # A payload only in the low double bits narrows to a quiet NaN, as in C.
        return wrap_i32(((bits >> 32) & 0x80000000) | 0x7F800000 | (payload or 0x400000))
    return _I32.unpack(_F32.pack(x))[0]


def bitcast_i64_f64(a: int) -> float:
    return _F64.unpack(_I64.pack(a))[0]


def bitcast_f64_i64(x: float) -> int:
    return _I64.unpack(_F64.pack(x))[0]


# -- rounding ----------------------------------------------------------------------
def round_half_away(x: float) -> float:
    """C roundf/round: halfway cases away from zero; keeps -0.0 and inf; x + x
    quiets a signalling NaN as libm does."""
    if x != x or x in (INF, -INF):
        return x + x
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return math.copysign(float(t), x)


def round_half_even(x: float) -> float:
    """Upstream's vm_round_f*_even: roundf, then step back toward zero on odd ties."""
    rounded = round_half_away(x)
    if rounded != rounded or rounded in (INF, -INF):
        return rounded
    if abs(x - rounded) == 0.5 and math.fmod(rounded, 2.0) != 0:
        # No copysign: upstream's -1.0 + 1.0 makes round_even(-0.5) +0.0.
        rounded = rounded - 1.0 if rounded > 0.0 else rounded + 1.0
    return rounded


# -- int -> float: C rounds the exact integer once, to nearest even --------------------
def int_to_f32(v: int) -> float:
    if -(1 << 24) <= v <= (1 << 24):
        return float(v)
    sign = -1 if v < 0 else 1
    m = abs(v)
    shift = m.bit_length() - 24
    q, r = m >> shift, m & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    # q * 2**shift: ldexp is exact here; overflow past f32 max becomes inf.
    return f32(sign * math.ldexp(q, shift)) if shift < 1000 else sign * INF


def u32_to_f32(a: int) -> float:
    return int_to_f32(a & U32_MASK)


def u64_to_f32(a: int) -> float:
    return int_to_f32(a & U64_MASK)


def u32_to_f64(a: int) -> float:
    return float(a & U32_MASK)


def u64_to_f64(a: int) -> float:
    return float(a & U64_MASK)


# -- float -> int: lroundf/llroundf then C integer conversion -----------------------------
# lround/llround of NaN, inf or a value outside the long range return LONG_MIN on
# the x86-64 builds of the reference runtime.
_LONG_MIN = I64_MIN


def _llround(x: float) -> int:
    if x != x or x in (INF, -INF):
        return _LONG_MIN
    r = int(round_half_away(x))
    if not I64_MIN <= r <= I64_MAX:
        return _LONG_MIN
    return r


def f32_to_si32(x: float) -> int:
    return wrap_i32(_llround(x))


def f32_to_ui32(x: float) -> int:
    return wrap_i32(_llround(x))


def f32_to_si64(x: float) -> int:
    return _llround(x)


def f32_to_ui64(x: float) -> int:
    """(uint64_t)roundf(x): x86-64's unsigned conversion of the rounded float."""
    r = round_half_away(x)
    if r != r or r in (INF, -INF) or not -(2.0 ** 63) <= r < 2.0 ** 64:
        return _LONG_MIN  # 0x8000000000000000 reinterpreted as i64
    return wrap_i64(int(r))


def f64_to_si32(x: float) -> int:
    # Upstream rounds through lroundf: the double is narrowed to float first.
    return wrap_i32(_llround(f32(x)))


def f64_to_ui32(x: float) -> int:
    return wrap_i32(_llround(f32(x)))


def f64_to_si64(x: float) -> int:
    return _llround(x)


def f64_to_ui64(x: float) -> int:
    return wrap_i64(_llround(x))


# -- libm with C semantics (no Python exceptions) -----------------------------------------
def c_exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


_exp2 = getattr(math, "exp2", lambda x: 2.0 ** x)  # math.exp2 is libm's (3.11+)


def c_exp2(x: float) -> float:
    try:
        return _exp2(x)
    except OverflowError:
        return INF


def c_expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return INF


def _log_domain(x: float, fn) -> float:
    if x != x:
        return x
    if x == 0.0:
        return -INF
    if x < 0.0:
        return NAN
    if x == INF:
        return INF
    return fn(x)


def c_log(x: float) -> float:
    return _log_domain(x, math.log)


def c_log10(x: float) -> float:
    return _log_domain(x, math.log10)


def c_log2(x: float) -> float:
    return _log_domain(x, math.log2)


def c_log1p(x: float) -> float:
    if x != x:
        return x
    if x == -1.0:
        return -INF
    if x < -1.0:
        return DEFAULT_NAN
    if x == INF:
        return INF
    return math.log1p(x)


def c_pow(b: float, e: float) -> float:
    try:
        return math.pow(b, e)
    except OverflowError:
        # Overflow: sign follows C (negative base with odd integer exponent).
        if b < 0 and e == math.floor(e) and int(e) % 2 == 1:
            return -INF
        return INF
    except ValueError:
        if b == 0.0 and e < 0:
            odd = e == math.floor(e) and int(e) % 2 == 1
            return math.copysign(INF, b) if odd else INF
        return DEFAULT_NAN


def c_sqrt(x: float) -> float:
    if x != x or x == INF:
        return x
    if x < 0.0:
        return DEFAULT_NAN
    return math.sqrt(x)


def c_rsqrt(x: float) -> float:
    s = c_sqrt(x)
    if s == 0.0:
        return math.copysign(INF, s)
    return 1.0 / s


def c_rsqrt_f32(x: float) -> float:
    """1.0f / sqrtf(x): the square root is rounded to f32 before the division."""
    s = f32(c_sqrt(x))
    if s == 0.0:
        return math.copysign(INF, s)
    return f32(1.0 / s)


def c_trig(fn):
    def wrapped(x: float) -> float:
        if x != x:
            return x
        if x in (INF, -INF):
            return DEFAULT_NAN
        return fn(x)
    return wrapped


c_sin = c_trig(math.sin)
c_cos = c_trig(math.cos)


def c_div(a: float, b: float) -> float:
    """IEEE division: x/0 is +-inf or nan instead of an exception."""
    try:
        return a / b
    except ZeroDivisionError:
        if a != a:
            return a  # a NaN operand propagates
        if a == 0.0:
            return DEFAULT_NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)


def c_remainder(a: float, b: float) -> float:
    if a != a or b != b:
        return a if a != a else b  # a NaN operand propagates
    if a in (INF, -INF) or b == 0.0:
        return DEFAULT_NAN
    if b in (INF, -INF):
        return a
    return math.remainder(a, b)


def c_fma_f32(a: float, b: float, c: float) -> float:
    # Without FP_FAST_FMAF upstream computes a * b + c in float: two roundings.
    return f32(f32(a * b) + c)


def c_ceil(x: float) -> float:
    if x != x or x in (INF, -INF):
        return x + x  # quiets a signalling NaN, as libm does
    return math.copysign(float(math.ceil(x)), x)


def c_floor(x: float) -> float:
    if x != x or x in (INF, -INF):
        return x + x  # quiets a signalling NaN, as libm does
    return math.copysign(float(math.floor(x)), x)


fabs = math.fabs
atan = math.atan
tanh = math.tanh
erf = math.erf


def atan2(y: float, x: float) -> float:
    if y != y or x != x:
        return y if y != y else x  # math.atan2 would answer a fresh NaN
    return math.atan2(y, x)
