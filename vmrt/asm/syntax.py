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
nothing to remap. Instructions without an entry get the generic template
derived from their operand list: `RESULTS = $op READS` with a `: TYPE` after a
register that is followed by a type operand (see `generic_template`).

Lookup order: instruction symbol, then its encoding class (the ISA encoding
name with a leading value type dropped: `i32_global_load` -> `global_load`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vmrt.isa import INSTRUCTIONS, Instruction
from vmrt.isa.operands import OperandKind

IGNORED_TYPE_TEXT = "!vm.ref<?>"

# fmt: off
SYNTAX: dict[str, tuple[str, ...]] = {
    # -- globals: storage operands print as .rwdata[N] / .refs[N] (or @name in source)
    "global_load":               ("$result = $op $byte_offset",),
    "global_store":              ("$op $value, $byte_offset",),
    "global_load_indirect":      ("$result = $op .rwdata[$byte_offset]",
                                  "$result = $op $byte_offset"),
    "global_store_indirect":     ("$op $value, .rwdata[$byte_offset]",
                                  "$op $byte_offset, $value"),
    "global_load_ref":           ("$value = $op $global : $type_def",),
    "global_store_ref":          ("$op $value, $global : $type_def",),
    "global_load_indirect_ref":  ("$value = $op .refs[$global] : $type_def",
                                  "$value = $op $global : $type_def"),
    "global_store_indirect_ref": ("$op $value, .refs[$global] : $type_def",
                                  "$op $global : $type_def, $value"),
    # -- constants
    "ConstI32":                  ("$result = $op $value  // ${value:hex}",),
    "ConstI64":                  ("$result = $op $value  // ${value:hex}",),
    "const_ref_zero":            ("${result:nomove} = $op",),
    "const_ref_rodata":          ("$value = $op $rodata  // ${rodata:size}b",),
    # -- lists, conditional assignment
    "list_alloc":                ("$result = $op $initial_capacity : !vm.list<$element_type>",),
    "list_get_ref":              ("$result = $op $list, $index : $type_def",),
    "select":                    ("$result = $op $condition ? $true_value : $false_value",),
    "select_ref":                ("$result = $op $condition ? $true_value : $false_value "
                                  "-> $true_value_type_def",),
    "switch":                    ("$result = $op $index[$values] else $default_value",),
    # vmrt's own spelling: iree-as-module cannot write switch.ref and
    # iree-dump-module mis-decodes it (it skips the type operand).
    "switch_ref":                ("$result = $op $index[$values] else $default_value "
                                  "-> $type_def",),
    "cast_any_ref":              ("$result = $op $operand : $_type -> $result_type",),
    # -- buffers: the stored value comes first
    "buffer_store":              ("$op $value, $target_buffer, $target_offset",),
    # -- control flow
    "branch":                    ("$op $dest_pc($operands)",),
    "conditional_branch":        ("$op $condition, $true_dest_pc($true_operands), "
                                  "$false_dest_pc($false_operands)",),
    "conditional_break":         ("$op $condition, $dest_pc($operands)",),
    "branch_table":              ("$op $index { default: $default_dest_pc($default_operands)"
                                  "$cases }",),
    "call":                      ("{?$results = ?}$op $callee_ordinal($operands)",),
    "call_variadic":             ("{?$results = ?}$op $callee_ordinal "
                                  "segments[$segment_sizes]($operands)",),
    "yieldable_call":            ("$op $callee_ordinal($operands) -> $dest_pc($results)",),
    "call_variadic_yieldable":   ("$op $callee_ordinal segments[$segment_sizes]($operands) "
                                  "-> $dest_pc($results)",),
    "return":                    ("$op{? $operands?}",),
    "fail":                      ("$op $status, $message",),
    # iree-dump-module prints `"name"(operands)`, iree-as-module reads `"name", operands`.
    "trace":                     ("$op $event_name($operands)",
                                  "$op $event_name{?, $operands?}"),
}
# fmt: on

_VALUE_TYPES = ("i32_", "i64_", "f32_", "f64_")


def encoding_class(inst: Instruction) -> str | None:
    encoding = inst.encoding
    if encoding and encoding.startswith(_VALUE_TYPES):
        return encoding[4:]
    return encoding


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


def generic_template(inst: Instruction) -> str:
    """`RESULTS = $op READS`; a type operand follows the register before it as `: TYPE`."""
    results = []
    reads: list[str] = []
    for operand in inst.operands:
        kind = operand.kind
        if ((kind is OperandKind.REGISTER and operand.access == "w")
                or kind is OperandKind.VARIADIC_RESULTS):
            results.append("$" + operand.name)
        elif kind is OperandKind.TYPE_OF:
            if not reads:
                raise ValueError(f"no generic syntax for {inst.symbol}: leading type")
            reads[-1] += " : $" + operand.name
        elif kind in (OperandKind.REGISTER, OperandKind.ATTRIBUTE, OperandKind.FUNC_ATTR,
                      OperandKind.GLOBAL_ATTR, OperandKind.RODATA_ATTR,
                      OperandKind.STRING_ATTR, OperandKind.VARIADIC_OPERANDS):
            reads.append("$" + operand.name)
        else:
            raise ValueError(f"no generic syntax for {inst.symbol}: {kind.value} operand")
    if len(results) > 1:
        raise ValueError(f"no generic syntax for {inst.symbol}: several results")
    text = "$op"
    if reads:
        text += " " + ", ".join(reads)
    if results:
        text = results[0] + " = " + text
    return text


def templates_for(inst: Instruction) -> tuple[str, ...]:
    entry = SYNTAX.get(inst.symbol)
    if entry is None:
        entry = SYNTAX.get(encoding_class(inst) or "")
    if entry is None:
        entry = (generic_template(inst),)
    return entry


_COMPILED: dict[str, tuple[Template, ...]] = {}


def templates(inst: Instruction) -> tuple[Template, ...]:
    """The compiled templates of `inst` (the first is the printed spelling)."""
    found = _COMPILED.get(inst.symbol)
    if found is None:
        found = tuple(compile_template(t, inst) for t in templates_for(inst))
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
