"""Instruction decoding derived from the ISA table: bytes at a pc -> operand values.

Each operand layout is read off the operand lists when this module is imported:
the 265 instructions share 29 layouts (`AddI32` and `MulI32` both read three u16
registers), each a few segments (runs of fixed-size operands read by one struct
unpack, and the variable-size lists), so decoding an instruction is a table
index plus a few struct unpacks. Every read is bounds-checked against the
end of the function: malformed bytecode raises DecodeError, never IndexError.

Decoded values, in operand order: registers as raw u16 ordinals (ref/move bits
kept), attributes as int or float, string attributes as bytes, variadic lists as
tuples of ordinals, branch operands as tuples of (source, target) pairs, branch
table cases as tuples of (target pc, pairs).
"""

from __future__ import annotations

import functools
import struct
from typing import NamedTuple

from vmrt.errors import DecodeError, StatusCode
from vmrt.isa import BY_OPCODE, PREFIXES
from vmrt.isa.operands import OperandKind
from vmrt.isa.spec import Instruction

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")

_FORMAT_CHARS = {
    OperandKind.REGISTER: "H",
    OperandKind.GLOBAL_ATTR: "I",
    OperandKind.FUNC_ATTR: "I",
    OperandKind.RODATA_ATTR: "I",
    OperandKind.TYPE_OF: "I",
    OperandKind.BRANCH_TARGET: "I",
    OperandKind.CONST_I16: "H",
}
_ATTRIBUTE_CHARS = {"i32": "i", "i64": "q", "f32": "f", "f64": "d"}


class Decoded(NamedTuple):
    pc: int
    instruction: Instruction
    values: tuple
    next_pc: int


def _overrun(start_pc: int, need_end: int, end: int):
    raise DecodeError(
        f"bytecode data overrun decoding op at {start_pc:08X} "
        f"(needs {need_end}, {end} available)", start_pc, StatusCode.OUT_OF_RANGE)


def _read_list(data, pc: int, end: int, start_pc: int, per_entry: int):
    """A u16-counted list aligned to 2 bytes; returns (flat u16 tuple, next pc)."""
    pc += pc & 1
    if pc + 2 > end:
        _overrun(start_pc, pc + 2, end)
    (count,) = _U16.unpack_from(data, pc)
    pc += 2
    size = count * per_entry * 2
    if pc + size > end:
        _overrun(start_pc, pc + size, end)
    return struct.unpack_from(f"<{count * per_entry}H", data, pc), pc + size


def read_register_list(data, pc, end, start_pc):
    return _read_list(data, pc, end, start_pc, 1)


def read_remap_list(data, pc, end, start_pc):
    flat, pc = _read_list(data, pc, end, start_pc, 2)
    return tuple(zip(flat[0::2], flat[1::2])), pc


def read_string(data, pc, end, start_pc):
    if pc + 2 > end:
        _overrun(start_pc, pc + 2, end)
    (length,) = _U16.unpack_from(data, pc)
    pc += 2
    if pc + length > end:
        _overrun(start_pc, pc + length, end)
    return bytes(data[pc:pc + length]), pc + length


def read_branch_table_cases(data, pc, end, start_pc, count):
    cases = []
    for _ in range(count):
        if pc + 4 > end:
            _overrun(start_pc, pc + 4, end)
        (target,) = _U32.unpack_from(data, pc)
        pairs, pc = read_remap_list(data, pc + 4, end, start_pc)
        cases.append((target, pairs))
    return tuple(cases), pc


#: Letters naming the variable-size operand kinds in a layout (struct format
#: characters name the fixed-size ones).
_VARIABLE_LETTERS = {
    OperandKind.STRING_ATTR: "S",
    OperandKind.VARIADIC_OPERANDS: "V",
    OperandKind.VARIADIC_RESULTS: "V",
    OperandKind.BRANCH_OPERANDS: "R",
    OperandKind.BRANCH_TABLE_CASES: "C",
}
VARIABLE = "SVRC"


def operand_layout(inst: Instruction) -> str:
    """The wire layout of an instruction's operands, one letter each: a struct format
    character for a fixed-size operand, S/V/R/C for the variable-size kinds."""
    letters = []
    for operand in inst.operands:
        kind = operand.kind
        if kind is OperandKind.ATTRIBUTE:
            letters.append(_ATTRIBUTE_CHARS[operand.type])
        elif kind in _FORMAT_CHARS:
            letters.append(_FORMAT_CHARS[kind])
        else:
            letters.append(_VARIABLE_LETTERS[kind])
    return "".join(letters)


class Segment(NamedTuple):
    """A run of a layout: consecutive fixed-size operands as one struct (`count`
    values), or one variable-size operand (`letter`, struct None)."""

    struct: struct.Struct | None
    letter: str
    count: int


def layout_segments(layout: str) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    fixed = ""
    for letter in layout + ".":
        if letter not in VARIABLE + ".":
            fixed += letter
            continue
        if fixed:
            segments.append(Segment(struct.Struct("<" + fixed), "", len(fixed)))
            fixed = ""
        if letter != ".":
            segments.append(Segment(None, letter, 1))
    return tuple(segments)


_VARIABLE_READERS = {"S": read_string, "V": read_register_list, "R": read_remap_list}


def _decode(segments, data, pc: int, end: int, start: int):
    """The operand values of one instruction whose operands start at `pc`, and the pc
    after them; `start` is the instruction's pc (for errors)."""
    values: list = []
    for packer, letter, _ in segments:
        if packer is not None:
            size = packer.size
            if pc + size > end:
                _overrun(start, pc + size, end)
            values += packer.unpack_from(data, pc)
            pc += size
        elif letter == "C":  # the case count is the const_i16 operand just before
            value, pc = read_branch_table_cases(data, pc, end, start, values[-1])
            values.append(value)
        else:
            value, pc = _VARIABLE_READERS[letter](data, pc, end, start)
            values.append(value)
    return tuple(values), pc


def _fixed_decoder(packer: struct.Struct):
    """The decoder of a layout of fixed-size operands only (most instructions): one
    bounds check and one unpack."""
    size = packer.size
    unpack_from = packer.unpack_from

    def decode(data, pc: int, end: int, start: int):
        if pc + size > end:
            _overrun(start, pc + size, end)
        return unpack_from(data, pc), pc + size
    return decode


def _decoder(layout: str):
    segments = layout_segments(layout)
    if len(segments) == 1 and segments[0].struct is not None:
        return _fixed_decoder(segments[0].struct)
    return functools.partial(_decode, segments)


def _build_decoders():
    by_layout = {}
    tables = {}
    for set_id, slots in BY_OPCODE.items():
        decoders = [None] * 256
        for inst in slots:
            if inst is None or inst.kind != "op":
                continue
            layout = operand_layout(inst)
            decoder = by_layout.get(layout)
            if decoder is None:
                decoder = by_layout[layout] = _decoder(layout)
            decoders[inst.opcode] = decoder
        tables[set_id] = tuple(decoders)
    return tables


#: opcode set id -> 256 decoder functions (None where no instruction).
DECODERS = _build_decoders()
_CORE_DECODERS = DECODERS["core"]
_CORE = BY_OPCODE["core"]
_PREFIX_TABLES = {op: (BY_OPCODE[s.id], DECODERS[s.id]) for op, s in PREFIXES.items()}


def decode_opcode(data, pc: int, end: int) -> tuple[Instruction, int]:
    """The instruction at `pc` and the pc of its first operand byte."""
    if pc >= end:
        _overrun(pc, pc + 1, end)
    opcode = data[pc]
    inst = _CORE[opcode]
    if inst is None:
        raise DecodeError(f"unknown opcode {opcode:02X} at {pc:08X}", pc)
    if inst.kind == "prefix":
        if pc + 1 >= end:
            _overrun(pc, pc + 2, end)
        slots, _ = _PREFIX_TABLES[opcode]
        ext = slots[data[pc + 1]]
        if ext is None:
            raise DecodeError(
                f"unknown {inst.target} opcode {data[pc + 1]:02X} at {pc:08X}", pc)
        return ext, pc + 2
    return inst, pc + 1


def decode_at(data, pc: int, end: int) -> Decoded:
    """Decodes one instruction (or block marker) of `data[:end]` starting at `pc`."""
    inst, operand_pc = decode_opcode(data, pc, end)
    if inst.kind == "marker":
        return Decoded(pc, inst, (), operand_pc)
    decoder = DECODERS[inst.opcode_set][inst.opcode]
    values, next_pc = decoder(data, operand_pc, end, pc)
    return Decoded(pc, inst, values, next_pc)


def decode_function(data, start: int = 0, end: int | None = None):
    """Yields every instruction of one function body `data[start:end]`.

    pcs are relative to `start` (list alignment is relative to the function).
    """
    body = memoryview(data)[start:end] if (start or end is not None) else data
    length = len(body)
    pc = 0
    while pc < length:
        decoded = decode_at(body, pc, length)
        yield decoded
        pc = decoded.next_pc
