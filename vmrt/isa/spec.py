"""The shapes of the ISA table: opcode sets and instructions (data, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vmrt.isa.operands import Operand, OperandKind


@dataclass(frozen=True)
class OpcodeSet:
    """One opcode space: `core`, or an extension reached through a core prefix opcode."""

    id: str
    c_tag: str
    prefix: str | None = None  # symbol of the core prefix opcode, None for core
    feature: str | None = None  # FeatureBits name a function must declare to use it


@dataclass(frozen=True)
class Instruction:
    """One ISA entry: opcode, names and operands in the order they are encoded."""

    opcode_set: str
    opcode: int
    symbol: str
    mnemonic: str | None
    operands: tuple[Operand, ...]
    kind: str = "op"  # 'op', 'marker' (Block) or 'prefix' (extension trampoline)
    encoding: str | None = None
    target: str | None = None  # for prefixes: the opcode set they lead into
    # Derived at construction: whether the instruction ends a block.
    is_terminator: bool = field(init=False, default=False)
    fixed_size: int | None = field(init=False, default=None)

    def __post_init__(self):
        # Control leaves the block through a branch target, a return or a fail:
        # that is what upstream's verifier treats as a terminator.
        terminator = self.symbol in ("Return", "Fail") or any(
            o.kind is OperandKind.BRANCH_TARGET for o in self.operands)
        object.__setattr__(self, "is_terminator", terminator)
        size = 0
        for o in self.operands:
            if o.size is None:
                size = None
                break
            size += o.size
        object.__setattr__(self, "fixed_size", size)

    @property
    def opcode_bytes(self) -> int:
        """Bytes taken by the opcode itself (extension opcodes follow a prefix byte)."""
        return 1 if self.opcode_set == "core" else 2

    @property
    def vm_name(self) -> str | None:
        """The op name as vmasm writes it (`vm.add.i32`)."""
        return None if self.mnemonic is None else "vm." + self.mnemonic
