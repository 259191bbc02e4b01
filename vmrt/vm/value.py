"""Primitive VM value types and the conversions between them.

A value type is one of i8, i16, i32, i64, f32, f64 (upstream's
iree_vm_value_type_t, with NONE meaning "not a value"). In vmrt values are
plain Python numbers: integers are kept signed and wrapped to their width,
f32 values are Python floats already rounded to single precision.

`convert_value` is the one conversion rule used wherever a value is read or
written with a type other than the one it is stored as (vm.list get/set): it
follows upstream list.c exactly, including its surprise that a conversion
between an integer type and a float type yields zero rather than a numeric
conversion.
"""

from __future__ import annotations

import enum
import math
import struct


class ValueType(enum.IntEnum):
    """iree_vm_value_type_t: the numbering matches upstream."""

    NONE = 0
    I8 = 1
    I16 = 2
    I32 = 3
    I64 = 4
    F32 = 5
    F64 = 6


NONE, I8, I16, I32, I64, F32, F64 = (ValueType.NONE, ValueType.I8, ValueType.I16,
                                     ValueType.I32, ValueType.I64, ValueType.F32,
                                     ValueType.F64)

#: Size in bytes of each value type's storage.
VALUE_TYPE_SIZE = {NONE: 0, I8: 1, I16: 2, I32: 4, I64: 8, F32: 4, F64: 8}

#: Value types by the name a module's type table spells them with.
VALUE_TYPE_BY_NAME = {"i8": I8, "i16": I16, "i32": I32, "i64": I64,
                      "f32": F32, "f64": F64}

VALUE_TYPE_NAME = {v: k for k, v in VALUE_TYPE_BY_NAME.items()}
VALUE_TYPE_NAME[NONE] = "none"

INTEGER_TYPES = frozenset((I8, I16, I32, I64))
FLOAT_TYPES = frozenset((F32, F64))

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def wrap_i8(value: int) -> int:
    """The low 8 bits of `value` as a signed integer (C's (int8_t) cast)."""
    return ((value + 0x80) & 0xFF) - 0x80


def wrap_i16(value: int) -> int:
    return ((value + 0x8000) & 0xFFFF) - 0x8000


def wrap_i32(value: int) -> int:
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def wrap_i64(value: int) -> int:
    return ((value + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


_F32 = struct.Struct("<f")
_f32_pack = _F32.pack
_f32_unpack = _F32.unpack


def round_f32(value: float) -> float:
    """`value` rounded to single precision as C's (float) cast does.

    Finite values beyond the f32 range become infinities of the same sign
    (struct refuses them, so they are handled here).
    """
    try:
        return _f32_unpack(_f32_pack(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


_WRAP = {I8: wrap_i8, I16: wrap_i16, I32: wrap_i32, I64: wrap_i64}


def normalize_value(value, value_type: ValueType):
    """`value` made a valid value of `value_type`: integers wrapped to the
    width, floats rounded for f32. Integers given for a float type (and floats
    for an integer type) are converted numerically; this is a host-side
    convenience, not a VM rule."""
    if value_type in INTEGER_TYPES:
        if isinstance(value, float):
            value = int(value)
        return _WRAP[value_type](int(value))
    if value_type == F32:
        return round_f32(float(value))
    if value_type == F64:
        return float(value)
    raise ValueError(f"not a value type: {value_type!r}")


def zero_of(value_type: ValueType):
    """The zero of a value type (0 or 0.0)."""
    return 0.0 if value_type in FLOAT_TYPES else 0


def _convert_fn(source: ValueType, target: ValueType):
    """The function mapping a value stored as `source` to `target`, or None
    when the value is passed through unchanged. A constant result (the
    int/float mismatch case) is returned as a function too."""
    if source == target:
        return None
    if source in INTEGER_TYPES and target in INTEGER_TYPES:
        if VALUE_TYPE_SIZE[target] < VALUE_TYPE_SIZE[source]:
            return _WRAP[target]
        return None  # sign extension: the signed Python int is unchanged
    if source == F64 and target == F32:
        return round_f32
    if source == F32 and target == F64:
        return None
    # Upstream zeroes the result and converts nothing between int and float
    # (and from NONE).
    zero = zero_of(target)
    return lambda _value: zero


#: CONVERT[(source, target)]: None (identity) or a one-argument function.
CONVERT = {(s, t): _convert_fn(s, t)
           for s in ValueType for t in ValueType if t != NONE}


def convert_value(value, source: ValueType, target: ValueType):
    """Converts a value stored as `source` to `target` (upstream's
    iree_vm_list_convert_value_type): integers are truncated or sign
    extended, f32 and f64 convert to each other, and every other pair
    (integer <-> float) yields zero."""
    fn = CONVERT[(source, target)]
    return value if fn is None else fn(value)
