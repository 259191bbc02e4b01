"""Operand kinds of the bytecode encoding and their wire layout (little-endian).

Registers are u16 ordinals; attributes, ordinals and branch targets are 32-bit;
variadic lists and branch remap lists are a u16 count aligned to 2 bytes
(relative to the function's first byte) followed by u16 entries.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass


class OperandKind(enum.Enum):
    REGISTER = "register"
    ATTRIBUTE = "attribute"
    GLOBAL_ATTR = "global_attr"
    FUNC_ATTR = "func_attr"
    RODATA_ATTR = "rodata_attr"
    STRING_ATTR = "string_attr"
    TYPE_OF = "type_of"
    CONST_I16 = "const_i16"
    BRANCH_TARGET = "branch_target"
    BRANCH_OPERANDS = "branch_operands"
    BRANCH_TABLE_CASES = "branch_table_cases"
    VARIADIC_OPERANDS = "variadic_operands"
    VARIADIC_RESULTS = "variadic_results"


# Wire size in bytes of the fixed-size kinds; the rest are variable.
_FIXED_SIZES = {
    OperandKind.REGISTER: 2,
    OperandKind.GLOBAL_ATTR: 4,
    OperandKind.FUNC_ATTR: 4,
    OperandKind.RODATA_ATTR: 4,
    OperandKind.TYPE_OF: 4,
    OperandKind.CONST_I16: 2,
    OperandKind.BRANCH_TARGET: 4,
}
_ATTRIBUTE_SIZES = {"i32": 4, "f32": 4, "i64": 8, "f64": 8}

#: Register banks: i64/f64 values occupy an aligned pair of 32-bit registers.
BANKS = ("i32", "i64", "f32", "f64", "ref", "any")


@dataclass(frozen=True)
class Operand:
    """One encoded field of an instruction.

    `bank` is the register bank of a register (or of each entry of a variadic
    list: 'any' means the register's own ref bit decides); `type` the value type
    of an inline attribute; `access` 'r' or 'w'; `move` whether the ref move bit
    is allowed.
    """

    name: str
    kind: OperandKind
    bank: str | None = None
    access: str | None = None
    move: bool = False
    type: str | None = None

    @property
    def size(self) -> int | None:
        if self.kind is OperandKind.ATTRIBUTE:
            return _ATTRIBUTE_SIZES[self.type]
        return _FIXED_SIZES.get(self.kind)

    @property
    def is_wide(self) -> bool:
        """True for i64/f64 registers (a pair of i32 registers)."""
        return self.bank in ("i64", "f64")


# Builders used by the generated table (vmrt/isa/table.py), one per kind. Operands
# are immutable, so equal ones are shared: the table's ~700 operands are 112
# distinct ones, and making each once saves a millisecond of start-up.
@functools.cache
def reg(name, bank, access, move=False):
    return Operand(name, OperandKind.REGISTER, bank=bank, access=access, move=move)


@functools.cache
def attr(name, type):
    return Operand(name, OperandKind.ATTRIBUTE, type=type)


def _named_operand(kind: OperandKind):
    """The builder of the operands of `kind` that carry nothing but a name."""
    @functools.cache
    def build(name):
        return Operand(name, kind)
    return build


global_attr = _named_operand(OperandKind.GLOBAL_ATTR)
func_attr = _named_operand(OperandKind.FUNC_ATTR)
rodata_attr = _named_operand(OperandKind.RODATA_ATTR)
string_attr = _named_operand(OperandKind.STRING_ATTR)
type_of = _named_operand(OperandKind.TYPE_OF)
const_i16 = _named_operand(OperandKind.CONST_I16)
branch_target = _named_operand(OperandKind.BRANCH_TARGET)
branch_operands = _named_operand(OperandKind.BRANCH_OPERANDS)
branch_table_cases = _named_operand(OperandKind.BRANCH_TABLE_CASES)


@functools.cache
def variadic_operands(name, type, move=False):
    return Operand(name, OperandKind.VARIADIC_OPERANDS, bank=type, access="r", move=move)


@functools.cache
def variadic_results(name, type, move=False):
    return Operand(name, OperandKind.VARIADIC_RESULTS, bank=type, access="w", move=move)
