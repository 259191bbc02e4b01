"""The one VM ISA table (vmrt/isa/table.py: isa.json joined with vmrt/isa/ops.py) and
its indexes.

Decoder, encoder, verifier, code generator, assembler and disassembler all read
these rows (encoding, meaning, syntax, flags); nothing else in vmrt keeps a list
of opcodes or names an instruction.
"""

from __future__ import annotations

from vmrt.isa.operands import Operand, OperandKind
from vmrt.isa.spec import Instruction, OpcodeSet
from vmrt.isa.table import BYTECODE_VERSION, INSTRUCTIONS, OPCODE_SETS

BYTECODE_VERSION_MAJOR, BYTECODE_VERSION_MINOR = BYTECODE_VERSION

#: opcode set id -> 256-entry tuple of Instruction or None.
BY_OPCODE: dict[str, tuple[Instruction | None, ...]] = {}
for _set in OPCODE_SETS:
    _slots: list[Instruction | None] = [None] * 256
    for _inst in INSTRUCTIONS:
        if _inst.opcode_set == _set.id:
            _slots[_inst.opcode] = _inst
    BY_OPCODE[_set.id] = tuple(_slots)

BY_SYMBOL: dict[str, Instruction] = {i.symbol: i for i in INSTRUCTIONS}
BY_MNEMONIC: dict[str, Instruction] = {i.mnemonic: i for i in INSTRUCTIONS if i.mnemonic}
OPCODE_SET_BY_ID: dict[str, OpcodeSet] = {s.id: s for s in OPCODE_SETS}

#: The block marker that starts every block, and its core opcode.
BLOCK: Instruction = next(i for i in INSTRUCTIONS if i.kind == "marker")
BLOCK_OPCODE = BLOCK.opcode
#: Core prefix opcode -> the extension opcode set it leads into.
PREFIXES: dict[int, OpcodeSet] = {
    i.opcode: OPCODE_SET_BY_ID[i.target] for i in INSTRUCTIONS if i.kind == "prefix"
}

__all__ = [
    "BLOCK", "BLOCK_OPCODE", "BYTECODE_VERSION", "BYTECODE_VERSION_MAJOR", "BYTECODE_VERSION_MINOR",
    "BY_MNEMONIC", "BY_OPCODE", "BY_SYMBOL", "INSTRUCTIONS", "Instruction", "OPCODE_SETS",
    "OPCODE_SET_BY_ID", "OpcodeSet", "Operand", "OperandKind", "PREFIXES",
]
