"""What the assembler builds up while it reads vmasm: diagnostics, functions, globals,
instructions waiting for addresses, and the limits a module must keep within."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Highest register ordinals a function may use: its register counts must stay
#: within the register file (i32: 0x7FFF registers, ref: 0x3FFF).
MAX_I32_ORDINAL = 0x7FFE
MAX_REF_ORDINAL = 0x3FFE
STORAGE_SIZES = {"i32": 4, "f32": 4, "i64": 8, "f64": 8, "ref": 0}
MAX_ERRORS = 100


@dataclass
class Diagnostic:
    """One error: where (1-based line and column) and what."""

    filename: str
    line: int
    column: int
    message: str
    source: str = ""

    def format(self) -> str:
        """`file:line:col: error: message`, the source line and a caret under the column."""
        head = f"{self.filename}:{self.line}:{self.column}: error: {self.message}"
        if not self.source:
            return head
        source = self.source.expandtabs(1)
        return f"{head}\n  {source}\n  {' ' * (self.column - 1)}^"


class LineError(Exception):
    """An error at a column of the current line (0-based offset into the raw line)."""

    def __init__(self, offset: int, message: str):
        super().__init__(message)
        self.offset = offset
        self.message = message


# --------------------------------------------------------------------------

@dataclass
class Pending:
    """An encoded instruction waiting for label, function or global addresses."""

    pc: int
    inst: object
    values: list
    refs: list  # (kind, operand index, case index, name, line, offset, extra)


@dataclass
class Function:
    name: str
    line: int
    offset: int  # column offset of the name
    cconv: str
    data: bytearray = field(default_factory=bytearray)
    block_count: int = 1
    i32_count: int = 0
    ref_count: int = 0
    requirements: int = 0
    labels: dict = field(default_factory=dict)
    label_count: int = 0
    pending: list = field(default_factory=list)
    calls: list = field(default_factory=list)  # (inst, values) of calls and returns
    terminated: bool = False  # the current block ends with a terminator
    empty: bool = True  # the current block has no instruction yet
    unsure: bool = False  # a line of the current block failed to assemble


@dataclass
class Global:
    name: str
    size: int
    ordinal: int = -1
