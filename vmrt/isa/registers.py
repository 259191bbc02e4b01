"""Register operand encoding: i32 ordinals, i64/f64 pairs, the ref bit and the move bit.

A register operand is a u16. Bit 15 set means a ref register, whose ordinal is
the low 14 bits and whose bit 14 asks to move (not retain) the ref. Otherwise it
is an i32-bank ordinal (15 bits); i64 and f64 values use the aligned pair
(n, n+1) and are named by the even ordinal n.
"""

from __future__ import annotations

REF_TYPE_BIT = 0x8000
REF_MOVE_BIT = 0x4000
REF_MASK = 0x3FFF
I32_MASK = 0x7FFF

#: A function ordinal with this bit set names an import (the low bits its ordinal).
IMPORT_ORDINAL_BIT = 0x80000000

#: Upper bounds on a function's declared register counts (isa.h).
MAX_I32_REGISTERS = 0x7FFF
MAX_REF_REGISTERS = 0x3FFF


def is_ref(ordinal: int) -> bool:
    return bool(ordinal & REF_TYPE_BIT)


def is_move(ordinal: int) -> bool:
    return bool(ordinal & REF_TYPE_BIT) and bool(ordinal & REF_MOVE_BIT)


def pair_start(i32_count: int) -> int:
    """The first register an i64/f64 pair may take at or after `i32_count` (pairs
    start at even registers)."""
    return i32_count + (i32_count & 1)


def ref_index(ordinal: int) -> int:
    return ordinal & REF_MASK


def i32_index(ordinal: int) -> int:
    return ordinal & I32_MASK


def encode_ref(index: int, move: bool = False) -> int:
    if not 0 <= index <= REF_MASK:
        raise ValueError(f"ref register {index} out of range")
    return REF_TYPE_BIT | (REF_MOVE_BIT if move else 0) | index


def encode_i32(index: int) -> int:
    if not 0 <= index <= I32_MASK:
        raise ValueError(f"i32 register {index} out of range")
    return index


def encode_i64(index: int) -> int:
    if index & 1:
        raise ValueError(f"i64 register {index} is not pair-aligned")
    return encode_i32(index)


def round_up_pow2(value: int) -> int:
    """Register file sizes are rounded up to a power of two (as upstream's frames)."""
    value = max(1, value)
    return 1 << (value - 1).bit_length()


def format_register(ordinal: int, bank: str = "any") -> str:
    """vmasm spelling: `%i3`, `%i4:5` (pair), `%r2`, `%r2!`... kept simple here."""
    if ordinal & REF_TYPE_BIT:
        return f"%r{ordinal & REF_MASK}"
    if bank in ("i64", "f64"):
        return f"%i{ordinal}:{ordinal + 1}"
    return f"%i{ordinal}"
