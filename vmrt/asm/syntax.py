"""The vmasm syntax of every instruction: one declarative table for both directions.

The ISA table (vmrt.isa) says what an instruction encodes; this table says how
it is written. Each entry is a list of templates: the disassembler prints the
first, the assembler accepts any of them (the later ones are the spellings
iree-as-module's parser wants where it disagrees with iree-dump-module's
printer, and vmrt's own spellings for what neither handles).

Template language (operands are named as in the ISA table):

    $name / ${name}        an operand, rendered by its kind (register, list,
                           attribute, type, branch target, ...)
    ${name:mod}            a rendering variant: `hex` (integer attribute as
                           0x...), `nomove` (ref register without the %R move
                           marker), `size` (byte length of a rodata segment)
    $op                    the mnemonic (`vm.add.i32`); text before it is the
                           result part `RESULT = `, text after it the operands
    {? ... ?}              optional: printed when its operands are non-empty
    $_type                 a type that is written but not encoded (parsed and
                           ignored; printed as `!vm.ref<?>`)
    `  // ...`             a trailing comment, printed but never parsed
    space                  any amount of whitespace (none required) when parsing

A branch target written `$target($remaps)` may leave out `(...)` when there is
nothing to remap.

The templates of each instruction are part of its ISA row (`Instruction.syntax`):
vmrt/isa/ops.py holds them by encoding class or per instruction, and
`make isa` gives every other instruction the generic template derived from its
operand list (`RESULTS = $op READS`, see vmrt.isa.generate.generic_template).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vmrt.isa import INSTRUCTIONS, Instruction
from vmrt.isa.operands import OperandKind

IGNORED_TYPE_TEXT = "!vm.ref<?>"


# --------------------------------------------------------------------------
# Compiled templates
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One operand in a template: its index in the ISA operand list."""

    index: int
    kind: OperandKind
    name: str
    modifier: str | None = None


@dataclass(frozen=True)
class Remaps:
    """`($remaps)` right after a branch target: may be left out when empty."""

    slot: Slot


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Optional:
    pieces: tuple


@dataclass(frozen=True)
class Ignored:
    """Text that is written but not encoded (`$_type`)."""

    text: str


@dataclass
class Template:
    """One spelling of one instruction, split into result and operand parts."""

    text: str
    instruction: Instruction
    result: Slot | None  # the register or register list left of ` = `
    result_optional: bool  # `{?$results = ?}`: no ` = ` when there are none
    pieces: tuple  # operand part after the mnemonic, including the leading space
    comment: tuple  # print-only trailing pieces (`  // ...`)
    #: Operand indices filled by the template; the rest are implied.
    slots: tuple = field(default=())
    _regex: re.Pattern | None = field(default=None, repr=False)


_TOKEN_RE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\{\?|\?\}")


def _parse_pieces(text: str, inst: Instruction, by_name: dict) -> list:
    """Template text -> pieces (nested for optional groups)."""
    stack: list[list] = [[]]
    pos = 0
    for m in _TOKEN_RE.finditer(text):
        if m.start() > pos:
            stack[-1].append(Literal(text[pos:m.start()]))
        pos = m.end()
        token = m.group(0)
        if token == "{?":
            stack.append([])
        elif token == "?}":
            group = stack.pop()
            stack[-1].append(Optional(tuple(group)))
        else:
            name = m.group(1) or m.group(3)
            modifier = m.group(2)
            if name == "op":
                stack[-1].append("$op")
            elif name == "_type":
                stack[-1].append(Ignored(IGNORED_TYPE_TEXT))
            else:
                if name not in by_name:
                    raise ValueError(f"syntax for {inst.symbol}: no operand named {name!r}")
                index = by_name[name]
                stack[-1].append(Slot(index, inst.operands[index].kind, name, modifier))
    if pos < len(text):
        stack[-1].append(Literal(text[pos:]))
    if len(stack) != 1:
        raise ValueError(f"syntax for {inst.symbol}: unbalanced optional group")
    return stack[0]


def _mark_optional_parens(pieces: list) -> list:
    """`$target(` `$remaps` `)` -> target, Remaps(remaps): the parentheses may be left out."""
    out = []
    i = 0
    while i < len(pieces):
        window = pieces[i:i + 4]
        if (len(window) == 4 and isinstance(window[0], Slot)
                and window[0].kind is OperandKind.BRANCH_TARGET
                and window[1] == Literal("(")
                and isinstance(window[2], Slot)
                and window[2].kind is OperandKind.BRANCH_OPERANDS
                and window[3] == Literal(")")):
            out += [window[0], Remaps(window[2])]
            i += 4
            continue
        piece = pieces[i]
        if isinstance(piece, Optional):
            piece = Optional(tuple(_mark_optional_parens(list(piece.pieces))))
        out.append(piece)
        i += 1
    return out


def _split_literals(pieces: list) -> list:
    """Splits literals so that `(` and `)` around remaps stand alone."""
    out = []
    for piece in pieces:
        if isinstance(piece, Literal):
            for part in re.split(r"(\(|\))", piece.text):
                if part:
                    out.append(Literal(part))
        elif isinstance(piece, Optional):
            out.append(Optional(tuple(_split_literals(list(piece.pieces)))))
        else:
            out.append(piece)
    return out


def _join_literals(pieces) -> tuple:
    out: list = []
    for piece in pieces:
        if isinstance(piece, Optional):
            piece = Optional(_join_literals(piece.pieces))
        if isinstance(piece, Literal) and out and isinstance(out[-1], Literal):
            out[-1] = Literal(out[-1].text + piece.text)
        else:
            out.append(piece)
    return tuple(out)


def _collect_slots(pieces, into: list) -> None:
    for piece in pieces:
        if isinstance(piece, Slot):
            into.append(piece)
        elif isinstance(piece, Remaps):
            into.append(piece.slot)
        elif isinstance(piece, Optional):
            _collect_slots(piece.pieces, into)


def compile_template(text: str, inst: Instruction) -> Template:
    by_name = {o.name: i for i, o in enumerate(inst.operands)}
    body, _, comment = text.partition("  //")
    pieces = _parse_pieces(body, inst, by_name)
    comment_pieces = _parse_pieces("  //" + comment, inst, by_name) if comment else []
    if "$op" not in pieces:
        raise ValueError(f"syntax for {inst.symbol}: template without $op")
    at = pieces.index("$op")
    before, after = pieces[:at], pieces[at + 1:]
    result = None
    result_optional = False
    if before:
        if len(before) == 1 and isinstance(before[0], Optional):
            inner = before[0].pieces
            result_optional = True
        else:
            inner = before
        if (len(inner) != 2 or not isinstance(inner[0], Slot)
                or not isinstance(inner[1], Literal) or inner[1].text != " = "):
            raise ValueError(f"syntax for {inst.symbol}: result part must be `$x = `")
        result = inner[0]
    after = _join_literals(_mark_optional_parens(_split_literals(after)))
    slots: list[Slot] = [result] if result else []
    _collect_slots(after, slots)
    return Template(text, inst, result, result_optional, after,
                    _join_literals(comment_pieces), tuple(s.index for s in slots))


_COMPILED: dict[str, tuple[Template, ...]] = {}


def templates(inst: Instruction) -> tuple[Template, ...]:
    """The compiled templates of `inst` (the first is the printed spelling)."""
    found = _COMPILED.get(inst.symbol)
    if found is None:
        found = tuple(compile_template(t, inst) for t in inst.syntax)
        _COMPILED[inst.symbol] = found
    return found


def check_table() -> None:
    """Compiles every template; raises ValueError for an entry that does not fit the ISA."""
    for inst in INSTRUCTIONS:
        if inst.kind == "op":
            for template in templates(inst):
                _check_complete(template)


def _check_complete(template: Template) -> None:
    inst = template.instruction
    covered = set(template.slots)
    for i, operand in enumerate(inst.operands):
        if i in covered:
            continue
        implied = (operand.kind is OperandKind.CONST_I16
                   and i + 1 < len(inst.operands)
                   and inst.operands[i + 1].kind is OperandKind.BRANCH_TABLE_CASES)
        if not implied:
            raise ValueError(f"syntax for {inst.symbol} ({template.text!r}) "
                             f"leaves out operand {operand.name!r}")
