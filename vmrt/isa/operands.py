"""Operand kinds of the bytecode encoding and their wire layout (little-endian).

Registers are u16 ordinals; attributes, ordinals and branch targets are 32-bit;
variadic lists and branch remap lists are a u16 count aligned to 2 bytes
(relative to the function's first byte) followed by u16 entries.
"""

from __future__ import annotations

import enum
import functools
import re
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


# The generated table (vmrt/isa/table.py) writes an encoding's operands as calls with
# bare words, one per operand: `reg(left,i32,r) reg(value,ref,w,move) attr(value,i64)
# global_attr(byte_offset) variadic_operands(operands,any,move)`; the call's name is the
# kind's value (`reg` and `attr` short for register and attribute).
_KIND_WORDS = {"reg": OperandKind.REGISTER, "attr": OperandKind.ATTRIBUTE}
_OPERAND_CALL = re.compile(r"(\w+)\(([^)]*)\)")


# Operands are immutable, so equal ones are shared: the table's ~700 operands are 112
# distinct ones, and making each once saves a millisecond of start-up.
@functools.cache
def _operand(word: str, name: str, *details: str) -> Operand:
    kind = _KIND_WORDS.get(word) or OperandKind(word)
    move = details[-1:] == ("move",)
    if move:
        details = details[:-1]
    if kind is OperandKind.REGISTER:
        bank, access = details
        return Operand(name, kind, bank=bank, access=access, move=move)
    if kind is OperandKind.ATTRIBUTE:
        return Operand(name, kind, type=details[0])
    if kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
        access = "r" if kind is OperandKind.VARIADIC_OPERANDS else "w"
        return Operand(name, kind, bank=details[0], access=access, move=move)
    return Operand(name, kind)


def parse_operands(text: str) -> tuple[Operand, ...]:
    """An encoding's operands from the table's text (see above), in wire order."""
    return tuple(_operand(word, *arguments.split(","))
                 for word, arguments in _OPERAND_CALL.findall(text))
