"""Instruction lines matched against their syntax templates (vmrt/asm/syntax.py):
one regex per template, converters from operand text to encoded values, the
per-mnemonic plan the assembler follows, and where a line stops fitting (errors)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vmrt.asm.syntax import Ignored, Literal, Optional, Remaps, Slot, Template, templates
from vmrt.isa import BY_MNEMONIC, OPCODE_SET_BY_ID
from vmrt.isa.encoder import encoder, fixed_packer, opcode_bytes
from vmrt.isa.operands import OperandKind

_FEATURE_BITS = {"EXT_F32": 1 << 0, "EXT_F64": 1 << 1}

_REG = r"(%[A-Za-z]\w*(?::\w+)?)"
_SLOT_REGEX = {
    OperandKind.REGISTER: _REG,
    OperandKind.ATTRIBUTE: r"([^\s,()\[\]{}]+)",
    OperandKind.GLOBAL_ATTR: r"(\.\w+\s*\[[^\]]*\]|@[^\s,]+)",
    OperandKind.FUNC_ATTR: r"(@[^\s,()\[\]]+)",
    OperandKind.RODATA_ATTR: r"([^\s,]+)",
    OperandKind.TYPE_OF: r"([^\s,][^,]*?)",
    # From the first quote to the last: iree-dump-module prints strings unescaped.
    OperandKind.STRING_ATTR: r'(".*")',
    OperandKind.VARIADIC_OPERANDS: r"([^()\[\]{}]*?)",
    OperandKind.VARIADIC_RESULTS: r"([^()\[\]{}]*?)",
    OperandKind.BRANCH_TARGET: r"(\^[\w$.]+)",
    OperandKind.BRANCH_OPERANDS: r"([^()]*?)",
    OperandKind.BRANCH_TABLE_CASES:
        r"((?:\s*,\s*[^,:{}]*?\s*:\s*\^[\w$.]+\s*(?:\([^()]*\))?)*)",
}
_IGNORED_TYPE = r"(?:[^\s,][^,]*?)"
# Greedier forms for finding where a line stops matching (error columns).
_DIAGNOSE_REGEX = dict(_SLOT_REGEX)
_DIAGNOSE_REGEX.update({
    OperandKind.TYPE_OF: r"([^\s,]+)",
    OperandKind.VARIADIC_OPERANDS: r"([^()\[\]{}]*)",
    OperandKind.VARIADIC_RESULTS: r"([^()\[\]{}]*)",
    OperandKind.BRANCH_OPERANDS: r"([^()]*)",
})
_SLOT_WORDS = {
    OperandKind.REGISTER: "a register",
    OperandKind.ATTRIBUTE: "a constant",
    OperandKind.GLOBAL_ATTR: "a global (.rwdata[N], .refs[N] or @name)",
    OperandKind.FUNC_ATTR: "a function (@name)",
    OperandKind.RODATA_ATTR: "a rodata ordinal",
    OperandKind.TYPE_OF: "a type",
    OperandKind.STRING_ATTR: 'a quoted string',
    OperandKind.VARIADIC_OPERANDS: "a list",
    OperandKind.VARIADIC_RESULTS: "a list",
    OperandKind.BRANCH_TARGET: "a block label (^bbN)",
    OperandKind.BRANCH_OPERANDS: "a remap list",
    OperandKind.BRANCH_TABLE_CASES: "branch table cases",
}


def _literal_regex(text: str) -> str:
    out = []
    for part in re.split(r"(\s+)", text):
        if not part:
            continue
        out.append(r"\s*" if part.isspace() else re.escape(part))
    return "".join(out)


def _pieces_regex(pieces, groups: list, table=_SLOT_REGEX) -> str:
    out = []
    for piece in pieces:
        if isinstance(piece, Literal):
            out.append(_literal_regex(piece.text))
        elif isinstance(piece, Slot):
            groups.append(piece)
            out.append(table[piece.kind])
        elif isinstance(piece, Remaps):
            groups.append(piece.slot)
            out.append(r"(?:\s*\(\s*" + table[piece.slot.kind] + r"\s*\))?")
        elif isinstance(piece, Optional):
            out.append("(?:" + _pieces_regex(piece.pieces, groups, table) + ")?")
        elif isinstance(piece, Ignored):
            out.append(_IGNORED_TYPE)
    return "".join(out)


@dataclass
class _Matcher:
    template: Template
    regex: re.Pattern
    slots: list  # Slot per regex group, in group order


_MATCHERS: dict[str, list[_Matcher]] = {}


def _matchers(inst) -> list[_Matcher]:
    found = _MATCHERS.get(inst.symbol)
    if found is None:
        found = []
        for template in templates(inst):
            slots: list[Slot] = []
            body = _pieces_regex(template.pieces, slots)
            found.append(_Matcher(template, re.compile(r"\s*" + body + r"\s*"), slots))
        _MATCHERS[inst.symbol] = found
    return found


def template_summary(template: Template) -> str:
    """The template as a reader sees it: `%result = vm.add.i32 %left, %right`."""
    text = template.text.partition("  //")[0]
    text = text.replace("{?", "[").replace("?}", "]").replace("$_type", "TYPE")
    text = text.replace("$op", template.instruction.vm_name)
    return re.sub(r"\$\{?(\w+)(?::\w+)?\}?", r"<\1>", text)


def diagnose(matcher: _Matcher, text: str) -> tuple[int, str]:
    """(offset in text, message) of where `text` stops fitting the template."""
    pos = 0

    def walk(pieces, pos):
        for piece in pieces:
            if isinstance(piece, Optional):
                sub = walk(piece.pieces, pos)
                if sub[1] is None:
                    pos = sub[0]
                continue
            if isinstance(piece, Literal):
                regex, what = _literal_regex(piece.text), f"'{piece.text.strip()}'"
            elif isinstance(piece, Slot):
                regex, what = _DIAGNOSE_REGEX[piece.kind], _SLOT_WORDS[piece.kind]
            elif isinstance(piece, Remaps):
                regex = r"(?:\s*\(\s*" + _DIAGNOSE_REGEX[piece.slot.kind] + r"\s*\))?"
                what = "a remap list"
            else:
                regex, what = _IGNORED_TYPE, "a type"
            m = re.compile(r"\s*" + regex).match(text, pos)
            if m is None or (m.end() == pos and not regex.endswith(")?")
                             and isinstance(piece, (Slot, Ignored))
                             and _slot_required(piece)):
                skip = len(text) - len(text[pos:].lstrip())
                return skip, what
            pos = m.end()
        return pos, None

    end, missing = walk(matcher.template.pieces, pos)
    if missing is not None:
        return end, f"expected {missing}"
    rest = text[end:].strip()
    if rest:
        return end + (len(text[end:]) - len(text[end:].lstrip())), \
            f"unexpected '{rest}' (too many operands?)"
    return 0, "malformed operands"


def _slot_required(piece) -> bool:
    if isinstance(piece, Slot):
        return piece.kind not in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS,
                                  OperandKind.BRANCH_OPERANDS,
                                  OperandKind.BRANCH_TABLE_CASES)
    return True


# --------------------------------------------------------------------------
# Assembler state

# Converters: one small function per operand slot, built once per template.
# Each takes (assembler, text, column offset, refs) and returns the encoded value.
_REGISTER_CACHES: dict = {}
LIST_CACHES: dict = {bank: {} for bank in ("any", "ref", "i32", "i64", "f32", "f64")}


def _register_converter(bank: str, move_ok: bool, name: str | None):
    cache = _REGISTER_CACHES.setdefault((bank, move_ok, name), {})

    def convert(asm, text, at, refs):
        known = cache.get(text)
        if known is None:
            known = asm.register_info(text, bank, move_ok, at, name)
            cache[text] = known
        function = asm.current
        if known[1] > function.i32_count:
            function.i32_count = known[1]
        if known[2] > function.ref_count:
            function.ref_count = known[2]
        return known[0]
    return convert


def _slot_converter(slot: Slot, inst):
    operand = inst.operands[slot.index]
    kind = slot.kind
    if kind is OperandKind.REGISTER:
        return _register_converter(operand.bank, operand.move, operand.name)
    if kind is OperandKind.ATTRIBUTE:
        type_ = operand.type
        if type_ in ("i32", "i64"):
            def convert(asm, text, at, refs):
                if text.isdigit() and (text[0] != "0" or len(text) == 1) and len(text) < 10:
                    return int(text)
                return asm.attribute(text, type_, at)
            return convert
        return lambda asm, text, at, refs: asm.attribute(text, type_, at)
    return lambda asm, text, at, refs: asm.convert(slot, text, at, inst, refs)


@dataclass
class _Plan:
    """Everything the assembler needs per mnemonic, computed once."""

    inst: object
    matchers: list
    operand_count: int
    table_size: int | None
    feature: int
    checks_cconv: bool  # a call or return: register lists checked against a cconv
    is_terminator: bool
    prefix: bytes
    packer: object  # struct.Struct.pack when every operand has a fixed size, else None
    encode: object  # (values, pc) -> bytes


PLANS: dict[str, _Plan] = {}
PLANS_BY_SYMBOL: dict[str, _Plan] = {}
def plan_for(mnemonic: str) -> _Plan | None:
    name = mnemonic[3:] if mnemonic.startswith("vm.") else mnemonic
    inst = BY_MNEMONIC.get(name)
    if inst is None or inst.kind != "op":
        return None
    matchers = _matchers(inst)
    for matcher in matchers:
        matcher.converters = [(g, slot.index, _slot_converter(slot, inst))
                              for g, slot in enumerate(matcher.slots, 1)]
        result = matcher.template.result
        matcher.result = None if result is None else (result.index,
                                                      _slot_converter(result, inst))
    table_size = next((i for i, o in enumerate(inst.operands)
                       if o.kind is OperandKind.CONST_I16), None)
    feature = _FEATURE_BITS.get(OPCODE_SET_BY_ID[inst.opcode_set].feature or "", 0)
    # Calls and returns: their register lists are checked against a cconv.
    checks_cconv = inst.is_call or inst.handler == "return"
    plan = _Plan(inst, matchers, len(inst.operands), table_size, feature, checks_cconv,
                 inst.is_terminator, opcode_bytes(inst), fixed_packer(inst), encoder(inst))
    PLANS[mnemonic] = plan
    PLANS_BY_SYMBOL[inst.symbol] = plan
    return plan

