"""Instruction encoding derived from the ISA table: the inverse of vmrt.isa.decoder.

Values are given in operand order with the same shapes the decoder returns
(registers as raw u16 ordinals, lists as tuples, remap lists as (src, dst) pairs,
branch table cases as (target, pairs)). List alignment depends on the pc the
instruction starts at (relative to the function), so encoding takes that pc.
"""

from __future__ import annotations

import struct

from vmrt.isa import BLOCK, BY_SYMBOL, OPCODE_SET_BY_ID
from vmrt.isa.decoder import operand_layout
from vmrt.isa.spec import Instruction


def opcode_bytes(inst: Instruction) -> bytes:
    """The opcode as encoded: one byte, or a core prefix byte and the extension opcode."""
    if inst.opcode_set == "core":
        return bytes([inst.opcode])
    prefix = BY_SYMBOL[OPCODE_SET_BY_ID[inst.opcode_set].prefix].opcode
    return bytes([prefix, inst.opcode])


def fixed_packer(inst: Instruction):
    """struct pack of all operands when every one has a fixed size, else None."""
    layout = operand_layout(inst)
    if any(letter in "SVRC" for letter in layout):
        return None
    return struct.Struct("<" + layout).pack


_REMAP_PACK = "out += pack('<%dH' % (2 * len({v}) + 1), len({v}), *[r for p in {v} for r in p])"


def _encoder_source(inst: Instruction) -> tuple[str, dict]:
    """Python source of `encode(values, pc)` for one instruction, read off its operand
    layout (vmrt.isa.decoder.operand_layout), and the constants it uses."""
    layout = operand_layout(inst)
    names = [f"v{i}" for i in range(len(layout))]
    lines = ["def encode(values, pc):",
             f"    ({', '.join(names)}{',' if len(names) == 1 else ''}) = values",
             "    out = bytearray(OPCODE)"]
    consts = {"OPCODE": opcode_bytes(inst), "pack": struct.pack}
    fixed: list[tuple[str, str]] = []
    for name, letter in zip(names + [None], layout + "."):
        if letter not in "SVRC.":
            fixed.append((name, letter))
            continue
        if fixed:  # consecutive fixed-size operands: one struct pack
            key = f"S{len(consts)}"
            consts[key] = struct.Struct("<" + "".join(c for _, c in fixed)).pack
            lines.append(f"    out += {key}({', '.join(n for n, _ in fixed)})")
            fixed.clear()
        if letter == "S":
            lines.append(f"    {name} = {name}.encode() if isinstance({name}, str) "
                         f"else bytes({name})")
            lines.append(f"    out += pack('<H', len({name})) + {name}")
        elif letter in "VR":  # u16-counted lists start 2-aligned (relative to the function)
            lines.append("    if (pc + len(out)) & 1: out.append(0)")
            lines.append("    " + (_REMAP_PACK.format(v=name) if letter == "R" else
                                  f"out += pack('<%dH' % (len({name}) + 1), len({name}), *{name})"))
        elif letter == "C":
            lines.append(f"    for target, pairs in {name}:")
            lines.append("        out += pack('<I', target)")
            lines.append("        if (pc + len(out)) & 1: out.append(0)")
            lines.append("        " + _REMAP_PACK.format(v="pairs"))
    lines.append("    return out")
    return "\n".join(lines) + "\n", consts


_ENCODERS: dict[str, object] = {}


def encoder(inst: Instruction):
    """The function (values, pc) -> bytearray encoding `inst`, compiled on first use."""
    found = _ENCODERS.get(inst.symbol)
    if found is None:
        source, namespace = _encoder_source(inst)
        exec(compile(source, f"<vmrt.isa encoder {inst.symbol}>", "exec"), namespace)
        found = _ENCODERS[inst.symbol] = namespace["encode"]
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
