"""The shapes of the ISA table: opcode sets and instructions (data, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vmrt.isa.operands import Operand


@dataclass(frozen=True)
class OpcodeSet:
    """One opcode space: `core`, or an extension reached through a core prefix opcode."""

    id: str
    c_tag: str
    prefix: str | None = None  # symbol of the core prefix opcode, None for core
    feature: str | None = None  # FeatureBits name a function must declare to use it


@dataclass(frozen=True)
class Instruction:
    """One ISA row: encoding (from isa.json) joined with meaning and syntax (vmrt/isa/ops.py)."""

    opcode_set: str
    opcode: int
    symbol: str
    mnemonic: str | None
    operands: tuple[Operand, ...]  # in the order they are encoded
    kind: str = "op"  # 'op', 'marker' (Block) or 'prefix' (extension trampoline)
    encoding: str | None = None
    target: str | None = None  # for prefixes: the opcode set they lead into
    # The op row (field meanings: vmrt/isa/ops.py).
    handler: str = "formula"
    py: str = ""
    c: str = ""
    syntax: tuple[str, ...] = ()
    cost: int = 1
    store_bits: int = 0
    is_terminator: bool = False
    is_branch: bool = False
    is_call: bool = False
    may_yield: bool = False
    handles_moves: bool = False
    # Derived at construction: bytes of the operands when they have a fixed size.
    fixed_size: int | None = field(init=False, default=None)

    def __post_init__(self):
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
