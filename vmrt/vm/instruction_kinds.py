"""What the instructions without a formula do (their handler kinds in vmrt/isa/ops.py),
read off a decoded instruction once for both code generators: the refs an
instruction moves away, a global access, a call's parts, a terminator's edges. The
Python tier (vmrt/vm/codegen.py) and the C tier (vmrt/vm/ctier/cgen.py) each only
spell these out in their language."""

from __future__ import annotations

from typing import NamedTuple

from vmrt.isa.decoder import Decoded
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import is_move, is_ref, ref_index


def moved_refs(d: Decoded) -> list[int]:
    """The ref registers `d` reads with the move bit and does not write: their refs
    moved into the instruction, so the registers are cleared after it."""
    written, moved = set(), []
    for operand, value in zip(d.instruction.operands, d.values):
        if operand.kind is OperandKind.REGISTER and operand.bank == "ref":
            if operand.access == "w":
                written.add(ref_index(value))
            elif operand.move and is_move(value):
                moved.append(value)
        elif operand.kind is OperandKind.VARIADIC_OPERANDS and operand.move:
            moved.extend(r for r in value if is_move(r))
    return [r for r in moved if ref_index(r) not in written]


class GlobalAccess(NamedTuple):
    """A load or store of a value global (`vm.global.load.i32`, ...): direct or
    through a register is read off the first operand, load or store off the access
    of the last (the value register)."""

    bank: str       # i32, i64, f32 or f64
    store: bool
    indirect: bool  # `offset` is the register holding the byte offset
    offset: int     # the byte offset, or its register
    value: int      # the register loaded or stored

    @property
    def width(self) -> int:
        return 4 if self.bank in ("i32", "f32") else 8


def global_access(d: Decoded) -> GlobalAccess:
    operands = d.instruction.operands
    value = operands[-1]
    return GlobalAccess(value.bank, value.access == "r",
                        operands[0].kind is OperandKind.REGISTER, d.values[0], d.values[-1])


class CallParts(NamedTuple):
    """A call's callee (an internal ordinal, or an import with
    IMPORT_ORDINAL_BIT), its argument and result registers, and the span sizes of
    a variadic call (None for a plain one)."""

    callee: int
    operands: tuple
    results: tuple
    segment_sizes: tuple | None

    def moved_operands(self) -> list[int]:
        """Argument refs moved into the call that no result overwrites: cleared after."""
        written = {ref_index(r) for r in self.results if is_ref(r)}
        return [r for r in self.operands if is_move(r) and ref_index(r) not in written]


def call_parts(d: Decoded) -> CallParts:
    values = dict(zip([o.name for o in d.instruction.operands], d.values))
    return CallParts(values["callee_ordinal"], values["operands"], values["results"],
                     values.get("segment_sizes"))


def branch_edges(d: Decoded) -> list[tuple[int, tuple]]:
    """(target pc, remap pairs) of each edge of a terminator, in operand order: a
    conditional branch's taken edge first, a branch table's default first."""
    edges, target = [], None
    for operand, value in zip(d.instruction.operands, d.values):
        if operand.kind is OperandKind.BRANCH_TARGET:
            target = value
        elif operand.kind is OperandKind.BRANCH_OPERANDS:
            edges.append((target, value))
        elif operand.kind is OperandKind.BRANCH_TABLE_CASES:
            edges.extend((pc, pairs) for pc, pairs in value)
    return edges
