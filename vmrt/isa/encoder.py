"""Instruction encoding derived from the ISA table: the inverse of vmrt.isa.decoder.

Values are given in operand order with the same shapes the decoder returns
(registers as raw u16 ordinals, lists as tuples, remap lists as (src, dst) pairs,
branch table cases as (target, pairs)). List alignment depends on the pc the
instruction starts at (relative to the function), so encoding takes that pc.
"""

from __future__ import annotations

import functools
import struct

from vmrt.isa import BLOCK, BY_SYMBOL, OPCODE_SET_BY_ID
from vmrt.isa.decoder import VARIABLE, layout_segments, operand_layout
from vmrt.isa.spec import Instruction

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def opcode_bytes(inst: Instruction) -> bytes:
    """The opcode as encoded: one byte, or a core prefix byte and the extension opcode."""
    if inst.opcode_set == "core":
        return bytes([inst.opcode])
    prefix = BY_SYMBOL[OPCODE_SET_BY_ID[inst.opcode_set].prefix].opcode
    return bytes([prefix, inst.opcode])


def fixed_packer(inst: Instruction):
    """struct pack of all operands when every one has a fixed size, else None."""
    layout = operand_layout(inst)
    if any(letter in VARIABLE for letter in layout):
        return None
    return struct.Struct("<" + layout).pack


def _pack_list(out: bytearray, pc: int, count: int, entries) -> None:
    """A u16 `count` and u16 `entries` (a register list, or remap pairs flattened),
    2-aligned relative to the function."""
    if (pc + len(out)) & 1:
        out.append(0)
    out += struct.pack(f"<{len(entries) + 1}H", count, *entries)


def _encode(opcode: bytes, segments, values, pc: int) -> bytearray:
    """The bytes of one instruction starting at function-relative `pc`."""
    out = bytearray(opcode)
    index = 0
    for packer, letter, count in segments:
        if packer is not None:
            out += packer.pack(*values[index:index + count])
            index += count
            continue
        value = values[index]
        index += 1
        if letter == "S":
            value = value.encode() if isinstance(value, str) else bytes(value)
            out += _U16.pack(len(value)) + value
        elif letter == "V":
            _pack_list(out, pc, len(value), value)
        elif letter == "R":
            _pack_list(out, pc, len(value), [r for pair in value for r in pair])
        else:  # "C": branch table cases
            for target, pairs in value:
                out += _U32.pack(target)
                _pack_list(out, pc, len(pairs), [r for pair in pairs for r in pair])
    return out


_ENCODERS: dict[str, object] = {}


def encoder(inst: Instruction):
    """The function (values, pc) -> bytearray encoding `inst`."""
    found = _ENCODERS.get(inst.symbol)
    if found is None:
        found = _ENCODERS[inst.symbol] = functools.partial(
            _encode, opcode_bytes(inst), layout_segments(operand_layout(inst)))
    return found


def encode(inst: Instruction | str, values=(), pc: int = 0) -> bytes:
    """Bytes of one instruction starting at function-relative `pc`."""
    if isinstance(inst, str):
        inst = BY_SYMBOL[inst]
    if inst.kind == "marker":
        return opcode_bytes(inst)
    if len(values) != len(inst.operands):
        raise ValueError(f"{inst.symbol} takes {len(inst.operands)} operands, "
                         f"got {len(values)}")
    return bytes(encoder(inst)(tuple(values), pc))


class FunctionEncoder:
    """Appends instructions to one function body, tracking the pc for alignment."""

    def __init__(self):
        self.data = bytearray()

    @property
    def pc(self) -> int:
        return len(self.data)

    def block(self) -> int:
        pc = self.pc
        self.data += opcode_bytes(BLOCK)
        return pc

    def emit(self, symbol: str, *values) -> int:
        pc = self.pc
        self.data += encode(symbol, values, pc)
        return pc

    def patch_u32(self, offset: int, value: int) -> None:
        self.data[offset:offset + 4] = struct.pack("<I", value)
