"""The shapes of the ISA table: opcode sets and instructions, and the builder of the
generated table's rows (vmrt/isa/table.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vmrt.isa.operands import Operand, parse_operands


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


_VALUE_TYPES = ("i32_", "i64_", "f32_", "f64_")


def encoding_class(encoding: str | None) -> str | None:
    """The encoding name with a leading value type dropped: `i32_binary` -> `binary`."""
    if encoding and encoding.startswith(_VALUE_TYPES):
        return encoding[4:]
    return encoding


#: Instruction flag fields by their names in vmrt/isa/ops.py.
FLAG_FIELDS = {"terminator": "is_terminator", "branch": "is_branch", "call": "is_call",
               "may_yield": "may_yield", "handles_moves": "handles_moves"}


def row_builder(encodings: dict[str, str], syntax_by_class: dict[str, tuple[str, ...]],
                handler_flags: dict[str, str]):
    """The `I(...)` of the generated table: a row (opcode set, opcode, symbol,
    mnemonic, encoding, handler, store bits, Python formula, C formula) made an
    Instruction, its operands read from `encodings`, its syntax from
    `syntax_by_class` and its flags from `handler_flags` (each declared once in the
    table) unless the row gives its own."""
    operands = {name: parse_operands(text) for name, text in encodings.items()}
    flags = {kind: {FLAG_FIELDS[f]: True for f in names.split()}
             for kind, names in handler_flags.items()}

    def row(opcode_set: str, opcode: int, symbol: str, mnemonic: str | None,
            encoding: str | None, handler: str, store_bits: int, py: str, c: str = "", *,
            target: str | None = None,
            syntax: tuple[str, ...] | None = None, own_flags: str | None = None) -> Instruction:
        if syntax is None:
            syntax = syntax_by_class.get(encoding_class(encoding), ())
        row_flags = flags[handler] if own_flags is None else {
            FLAG_FIELDS[f]: True for f in own_flags.split()}
        kind = handler if handler in ("marker", "prefix") else "op"
        return Instruction(opcode_set, opcode, symbol, mnemonic, operands.get(encoding, ()),
                           kind=kind, encoding=encoding, target=target, handler=handler,
                           py=py, c=c, syntax=syntax, store_bits=store_bits, **row_flags)

    return row
