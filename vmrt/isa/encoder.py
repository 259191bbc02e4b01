"""Instruction encoding derived from the ISA table: the inverse of vmrt.isa.decoder.

Values are given in operand order with the same shapes the decoder returns
(registers as raw u16 ordinals, lists as tuples, remap lists as (src, dst) pairs,
branch table cases as (target, pairs)). List alignment depends on the pc the
instruction starts at (relative to the function), so encoding takes that pc.
"""

from __future__ import annotations

import struct

from vmrt.isa import BY_SYMBOL, OPCODE_SET_BY_ID
from vmrt.isa.operands import OperandKind
from vmrt.isa.spec import Instruction

_PACK = {
    OperandKind.REGISTER: "<H", OperandKind.CONST_I16: "<H",
    OperandKind.GLOBAL_ATTR: "<I", OperandKind.FUNC_ATTR: "<I",
    OperandKind.RODATA_ATTR: "<I", OperandKind.TYPE_OF: "<I",
    OperandKind.BRANCH_TARGET: "<I",
}
_ATTRIBUTE_PACK = {"i32": "<i", "i64": "<q", "f32": "<f", "f64": "<d"}


def _opcode_bytes(inst: Instruction) -> bytes:
    if inst.opcode_set == "core":
        return bytes([inst.opcode])
    prefix = BY_SYMBOL[OPCODE_SET_BY_ID[inst.opcode_set].prefix].opcode
    return bytes([prefix, inst.opcode])


def _append_list(out: bytearray, base_pc: int, entries, count: int) -> None:
    if (base_pc + len(out)) & 1:
        out.append(0)
    out += struct.pack(f"<H{len(entries)}H", count, *entries)


def _append_remap(out: bytearray, base_pc: int, pairs) -> None:
    pairs = tuple(pairs)
    _append_list(out, base_pc, tuple(r for pair in pairs for r in pair), len(pairs))


def encode(inst: Instruction | str, values=(), pc: int = 0) -> bytes:
    """Bytes of one instruction starting at function-relative `pc`."""
    if isinstance(inst, str):
        inst = BY_SYMBOL[inst]
    if inst.kind == "marker":
        return _opcode_bytes(inst)
    if len(values) != len(inst.operands):
        raise ValueError(f"{inst.symbol} takes {len(inst.operands)} operands, "
                         f"got {len(values)}")
    out = bytearray(_opcode_bytes(inst))
    for operand, value in zip(inst.operands, values):
        kind = operand.kind
        if kind is OperandKind.ATTRIBUTE:
            out += struct.pack(_ATTRIBUTE_PACK[operand.type], value)
        elif kind in _PACK:
            out += struct.pack(_PACK[kind], value)
        elif kind is OperandKind.STRING_ATTR:
            data = value.encode() if isinstance(value, str) else bytes(value)
            out += struct.pack("<H", len(data)) + data
        elif kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
            entries = tuple(value)
            _append_list(out, pc, entries, len(entries))
        elif kind is OperandKind.BRANCH_OPERANDS:
            _append_remap(out, pc, value)
        elif kind is OperandKind.BRANCH_TABLE_CASES:
            for target, pairs in value:
                out += struct.pack("<I", target)
                _append_remap(out, pc, pairs)
        else:  # pragma: no cover
            raise AssertionError(kind)
    return bytes(out)


class FunctionEncoder:
    """Appends instructions to one function body, tracking the pc for alignment."""

    def __init__(self):
        self.data = bytearray()

    @property
    def pc(self) -> int:
        return len(self.data)

    def block(self) -> int:
        pc = self.pc
        self.data += encode("Block", (), pc)
        return pc

    def emit(self, symbol: str, *values) -> int:
        pc = self.pc
        self.data += encode(symbol, values, pc)
        return pc

    def patch_u32(self, offset: int, value: int) -> None:
        self.data[offset:offset + 4] = struct.pack("<I", value)
