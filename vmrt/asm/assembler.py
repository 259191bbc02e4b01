"""vmasm text -> .vmfb, producing the bytecode iree-as-module 3.13.0 produces.

The grammar is iree-as-module's (line oriented; see vmrt/asm/lexer.py for
lines and numbers): a module header, `vm.type`, `vm.import`, `vm.rodata`,
`vm.global.*`, `vm.export` directives and `vm.func` bodies of labels and
instructions. Instructions are read through their syntax templates
(vmrt/asm/syntax.py), encoded from the ISA table (vmrt/isa/encoder.py), and
laid out as iree-as-module lays them out: the same type table order, register
counts, block markers, global layout and function alignment, so the function
bytecode is byte-identical.

Beyond iree-as-module, the assembler also reads iree-dump-module's spellings
where the two disagree (`vm.trace "x"(%a)`, `.rwdata[%i]` for indirect
globals), `vm.switch.ref`, `vm.global.ref` and any `^name:` block label; it
reports every error it can find (file:line:col) instead of stopping at the
first. See vmrt/asm/__init__.py for the grammar and every difference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vmrt.asm.lexer import (
    parse_f32, parse_f64, parse_int32, parse_int64, parse_uint32, strip_line,
)
from vmrt.asm.syntax import Ignored, Literal, Optional, Remaps, Slot, Template, templates
from vmrt.errors import AssemblyError
from vmrt.format import (
    BytecodeModuleDef, ExportFunctionDef, FunctionDescriptor, FunctionSignatureDef,
    ImportFlagBits, ImportFunctionDef, ModuleDependencyDef, ModuleDependencyFlagBits,
    ModuleStateDef, RodataSegmentDef, TypeDef, write_module,
)
from vmrt.isa import BLOCK, BY_MNEMONIC, BYTECODE_VERSION, OPCODE_SET_BY_ID
from vmrt.isa.encoder import encoder, fixed_packer, opcode_bytes
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import REF_MOVE_BIT, REF_TYPE_BIT
from vmrt.vm import cconv as cconv_mod

IMPORT_BIT = 0x80000000
#: Highest register ordinals a function may use: its register counts must stay
#: within the register file (i32: 0x7FFF registers, ref: 0x3FFF).
MAX_I32_ORDINAL = 0x7FFE
MAX_REF_ORDINAL = 0x3FFE
_FEATURE_BITS = {"EXT_F32": 1 << 0, "EXT_F64": 1 << 1}
_STORAGE_SIZES = {"i32": 4, "f32": 4, "i64": 8, "f64": 8, "ref": 0}
_CCONV_CHARS = {"i32": "i", "i64": "I", "f32": "f", "f64": "F"}
MAX_ERRORS = 100


# --------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------


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


class _Error(Exception):
    """An error at a column of the current line (0-based offset into the raw line)."""

    def __init__(self, offset: int, message: str):
        super().__init__(message)
        self.offset = offset
        self.message = message


# --------------------------------------------------------------------------
# Instruction matchers compiled from the syntax templates
# --------------------------------------------------------------------------

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


def _template_summary(template: Template) -> str:
    """The template as a reader sees it: `%result = vm.add.i32 %left, %right`."""
    text = template.text.partition("  //")[0]
    text = text.replace("{?", "[").replace("?}", "]").replace("$_type", "TYPE")
    text = text.replace("$op", template.instruction.vm_name)
    return re.sub(r"\$\{?(\w+)(?::\w+)?\}?", r"<\1>", text)


def _diagnose(matcher: _Matcher, text: str) -> tuple[int, str]:
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
# --------------------------------------------------------------------------


@dataclass
class _Pending:
    """An encoded instruction waiting for label, function or global addresses."""

    pc: int
    inst: object
    values: list
    refs: list  # (kind, operand index, case index, name, line, offset, extra)


@dataclass
class _Function:
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
class _Global:
    name: str
    size: int
    ordinal: int = -1


_FUNC_HEADER = re.compile(r"vm\.func\s+(@[^\s(]*)\s*\(([^)]*)\)\s*(.*)$")
_RESULTS = re.compile(r"->\s*\(([^)]*)\)\s*\{$")
_LABEL = re.compile(r"\^([\w$.]+)\s*:$")
_SYMBOL = re.compile(r"@([\w$.]+)$")
_REGISTER = re.compile(r"%([irR])(\w+)(?::(\w+))?$")
_GLOBAL = re.compile(r"vm\.global\.(\w+)\s+(.*)$")


# Converters: one small function per operand slot, built once per template.
# Each takes (assembler, text, column offset, refs) and returns the encoded value.
_REGISTER_CACHES: dict = {}
_LIST_CACHES: dict = {bank: {} for bank in ("any", "ref", "i32", "i64", "f32", "f64")}


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


_PLANS: dict[str, _Plan] = {}
_PLANS_BY_SYMBOL: dict[str, _Plan] = {}
def _plan_for(mnemonic: str) -> _Plan | None:
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
    _PLANS[mnemonic] = plan
    _PLANS_BY_SYMBOL[inst.symbol] = plan
    return plan


class Assembler:
    def __init__(self, filename: str = "<vmasm>"):
        self.filename = filename
        self.diagnostics: list[Diagnostic] = []
        self.lines: list[str] = []
        self.lineno = 0
        self.module_name: str | None = None
        self.module_version = 0
        self.types: list[str] = []
        self.type_index: dict[str, int] = {}
        self.imports: list[tuple[str, str, bool]] = []
        self.import_index: dict[str, int] = {}
        self.rodata: list[bytes] = []
        self.globals: list[_Global] = []
        self.global_index: dict[str, _Global] = {}
        self.global_bytes = 0
        self.global_refs = 0
        self.exports: list[tuple[str, str, int, int]] = []  # name, function, line, offset
        self.export_names: set[str] = set()
        self.functions: list[_Function] = []
        self.function_index: dict[str, int] = {}
        self.requirements = 0
        self.current: _Function | None = None
        #: Function arguments number registers one after another (%i1:2 is fine
        #: there); everywhere else i64/f64 pairs must start at even registers.
        self.in_signature = False
        self.module_pending: list[tuple[_Function, _Pending]] = []

    # -- diagnostics -------------------------------------------------------------
    def error(self, offset: int, message: str, line: int | None = None) -> None:
        line = self.lineno if line is None else line
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.diagnostics.append(Diagnostic(self.filename, line, offset + 1, message,
                                           source.rstrip("\r\n")))

    # -- driver ------------------------------------------------------------------
    def assemble(self, text: str) -> bytes:
        self.lines = text.split("\n")
        diagnostics = self.diagnostics
        for lineno, raw in enumerate(self.lines, 1):
            content = raw.strip()
            if not content:
                continue
            self.lineno = lineno
            if content[0] == "[" or "/" in content or "#" in content:
                content, base = strip_line(raw)
                if not content:
                    continue
            else:
                base = len(raw) - len(raw.lstrip())
            try:
                if self.current is None:
                    self.top_level(content, base)
                elif content[0] == "^" or content == "}" or content.startswith("vm.func "):
                    self.function_line(content, base)
                else:
                    self.instruction(content, base)
            except _Error as e:
                self.error(e.offset, e.message)
                if self.current is not None:
                    # The block's end is unknown now: no follow-up terminator errors.
                    self.current.unsure = True
                if len(diagnostics) >= MAX_ERRORS:
                    break
        self.lineno = len(self.lines)
        if len(self.diagnostics) < MAX_ERRORS:
            self.finish()
        if self.diagnostics:
            self.diagnostics.sort(key=lambda d: (d.line, d.column))
            raise AssemblyError(self.diagnostics)
        return self.build()

    def finish(self) -> None:
        if self.current is not None:
            self.error(0, f"function @{self.current.name} is not closed with '}}'",
                       line=self.current.line)
            self.current = None
        if self.module_name is None:
            self.error(0, "missing module directive (vm.module @name)", line=1)
            return
        if not self.functions and not self.diagnostics:
            self.error(0, "module has no functions (vm.func)",
                       line=max(1, len(self.lines) - (self.lines[-1:] == [""])))
        for name, function_name, line, offset in self.exports:
            if function_name not in self.function_index:
                self.error(offset, f"export of unknown function @{function_name}", line=line)
        self.assign_global_ordinals()
        for function, pending in self.module_pending:
            self.resolve(function, pending, module_level=True)
        if not self.diagnostics:
            for function in self.functions:
                self.count_wide_list_registers(function)

    def count_wide_list_registers(self, function: _Function) -> None:
        """i64/f64 values in call and return lists are written `%iN` (as
        iree-dump-module prints them); the callee's cconv says they take the
        pair N, N+1, which the register count must cover."""
        for inst, values in function.calls:
            names = [o.name for o in inst.operands]
            if inst.handler == "return":
                fragment = cconv_mod.split_fragments(function.cconv)[1]
                lists = [(fragment, None, values[0])]
            else:
                callee = values[0]
                if callee & IMPORT_BIT:
                    k = callee & ~IMPORT_BIT
                    cconv = self.imports[k][1] if k < len(self.imports) else ""
                elif callee < len(self.functions):
                    cconv = self.functions[callee].cconv
                else:
                    continue
                arguments, results = cconv_mod.split_fragments(cconv)
                segments = values[names.index("segment_sizes")] \
                    if "segment_sizes" in names else None
                lists = [(arguments, segments, values[names.index("operands")]),
                         (results, None, values[names.index("results")])]
            for fragment, segments, registers in lists:
                for char, reg in _typed_registers(fragment, segments, registers):
                    if char in "IF" and not reg & REF_TYPE_BIT:
                        function.i32_count = max(function.i32_count, reg + 2)

    # -- top level ---------------------------------------------------------------
    def top_level(self, text: str, base: int) -> None:
        word = text.split(None, 1)[0]
        if word == "vm.module":
            return self.module_directive(text, base)
        if word == "vm.func":
            return self.function_header(text, base)
        if word == "vm.export":
            return self.export_directive(text, base)
        if word.startswith("vm.rodata["):
            return self.rodata_directive(text, base)
        if word in ("vm.type", "vm.import") or word.startswith("vm.global."):
            self.require_module(base, word)
            if self.functions:
                raise _Error(base, f"{word} directives must appear before functions")
            if word == "vm.type":
                return self.type_directive(text, base)
            if word == "vm.import":
                return self.import_directive(text, base)
            return self.global_directive(text, base)
        if text == "}":
            raise _Error(base, "'}' outside a function")
        raise _Error(base, f"unexpected top-level directive '{word}'")

    def require_module(self, base: int, what: str) -> None:
        if self.module_name is None:
            raise _Error(base, f"the module directive (vm.module) must come before {what}")

    def symbol(self, text: str, offset: int, what: str = "symbol") -> str:
        m = _SYMBOL.match(text)
        if m is None:
            raise _Error(offset, f"expected a {what} name like @name, got '{text}'")
        return m.group(1)

    def module_directive(self, text: str, base: int) -> None:
        if self.module_name is not None:
            raise _Error(base, "module already declared")
        m = re.match(r"vm\.module\s+(\S+)(?:\s+(.*))?$", text)
        if m is None:
            raise _Error(base + len(text), "expected a module name like @name")
        self.module_name = self.symbol(m.group(1), base + m.start(1), "module")
        rest = m.group(2)
        if rest:
            v = re.match(r"version\s+(\S+)$", rest)
            if v is None:
                raise _Error(base + m.start(2), "expected 'version <uint32>'")
            version = parse_uint32(v.group(1))
            if version is None:
                raise _Error(base + m.start(2) + v.start(1), "invalid module version")
            self.module_version = version

    def type_directive(self, text: str, base: int) -> None:
        name = text[len("vm.type"):].strip()
        if not name:
            raise _Error(base + len(text), "expected a type name")
        if name in self.type_index:
            raise _Error(base + text.index(name, 7), f"duplicate type {name}")
        self.type_index[name] = len(self.types)
        self.types.append(name)

    def import_directive(self, text: str, base: int) -> None:
        m = re.match(r'vm\.import\s+(optional\s+)?(\S+)\s*(?:(cconv)\s*(.*))?$', text)
        if m is None:
            raise _Error(base + len(text), "expected 'vm.import [optional] @name cconv \"...\"'")
        name = self.symbol(m.group(2), base + m.start(2), "import")
        if m.group(3) is None:
            raise _Error(base + m.end(2), "expected import cconv")
        s = re.fullmatch(r'"([^"]*)"', m.group(4))
        if s is None:
            raise _Error(base + m.start(4), "expected the calling convention as a quoted "
                                            "string like \"0ii_i\"")
        cconv = s.group(1)
        try:
            cconv_mod.check_well_formed(cconv)
        except cconv_mod.CConvError as e:
            raise _Error(base + m.start(4) + 1, f"malformed cconv: {e.message}")
        if name in self.import_index:
            raise _Error(base + m.start(2), f"duplicate import @{name}")
        self.import_index[name] = len(self.imports)
        self.imports.append((name, cconv, bool(m.group(1))))

    def rodata_directive(self, text: str, base: int) -> None:
        self.require_module(base, "rodata")
        if self.functions:
            raise _Error(base, "rodata directives must appear before functions")
        m = re.match(r"vm\.rodata\[([^\]]*)\]\s*(=)?\s*(.*)$", text)
        if m is None:
            raise _Error(base + len(text), "unterminated rodata ordinal")
        ordinal = parse_uint32(m.group(1).strip())
        if ordinal is None:
            raise _Error(base + m.start(1), "invalid rodata ordinal")
        if m.group(2) is None:
            raise _Error(base + m.end(1) + 1, "expected '= <hex bytes>'")
        hex_text = m.group(3)
        if len(hex_text) % 2:
            raise _Error(base + m.start(3), "rodata hex data must have an even length")
        bad = re.search(r"[^0-9a-fA-F]", hex_text)
        if bad:
            raise _Error(base + m.start(3) + bad.start(), "invalid rodata hex digit")
        if ordinal != len(self.rodata):
            raise _Error(base + m.start(1),
                         f"rodata segments must be declared in ordinal order "
                         f"(expected vm.rodata[{len(self.rodata)}])")
        self.rodata.append(bytes.fromhex(hex_text))

    def global_directive(self, text: str, base: int) -> None:
        m = _GLOBAL.match(text)
        type_name = m.group(1) if m else ""
        if type_name not in ("i32", "i64", "f32", "f64", "ref"):
            raise _Error(base, f"unknown global type 'vm.global.{type_name}' "
                               f"(expected i32, i64, f32, f64 or ref)")
        rest = m.group(2)
        if type_name == "ref":
            # vmrt's own: `vm.global.ref [private] [mutable] @name : TYPE` reserves
            # a .refs[N] slot (iree-as-module has no ref global directive).
            rest, colon, ref_type = rest.rpartition(":")
            if not colon or not ref_type.strip().startswith("!"):
                raise _Error(base + len(text), "expected ': !type' after a ref global name")
        rest_at = base + m.start(2)
        words = rest.split()
        while words and words[0] in ("private", "mutable"):
            skip = rest.index(words[0]) + len(words[0])
            rest_at += skip + len(rest[skip:]) - len(rest[skip:].lstrip())
            rest = rest[skip:].lstrip()
            words.pop(0)
        name_text, _, initializer = rest.partition("=")
        name = self.symbol(name_text.strip(), rest_at, "global")
        if initializer:
            value, sep, init_type = initializer.partition(":")
            at = rest_at + len(name_text) + 1
            number = parse_int64(value.strip())
            if number is None:
                raise _Error(at, "invalid global initializer")
            if number != 0:
                raise _Error(at, "non-zero global initializers must be set by __init bytecode")
            if type_name == "ref" or init_type.strip() != type_name:
                raise _Error(at, f"global initializer type mismatch (expected : {type_name})")
        if name in self.global_index:
            raise _Error(rest_at, f"duplicate global @{name}")
        g = _Global(name, _STORAGE_SIZES[type_name])
        self.global_index[name] = g
        self.globals.append(g)

    def export_directive(self, text: str, base: int) -> None:
        rest = text[len("vm.export"):]
        at = base + len("vm.export")
        lhs, eq, rhs = rest.partition("=")
        name = self.symbol(lhs.strip(), at + len(lhs) - len(lhs.lstrip()), "export")
        if eq:
            function = self.symbol(rhs.strip(), at + len(lhs) + 1 + len(rhs) - len(rhs.lstrip()),
                                   "function")
        else:
            function = name
        if name in self.export_names:
            raise _Error(at + len(lhs) - len(lhs.lstrip()), f"duplicate export @{name}")
        self.export_names.add(name)
        offset = at + (len(lhs) + 1 + len(rhs) - len(rhs.lstrip()) if eq
                       else len(lhs) - len(lhs.lstrip()))
        self.exports.append((name, function, self.lineno, offset))

    # -- functions ---------------------------------------------------------------
    def function_header(self, text: str, base: int) -> None:
        # Whatever goes wrong, the body is still read (for its own errors).
        function = _Function("", self.lineno, base, "0v_v")
        self.current = function
        try:
            self.require_module(base, "functions")
            m = _FUNC_HEADER.match(text)
            if m is None:
                raise _Error(base + len(text), "expected 'vm.func @name(ARGS) -> (RESULTS) {'")
            function.offset = base + m.start(1)
            function.name = self.symbol(m.group(1), base + m.start(1), "function")
            r = _RESULTS.match(m.group(3))
            if r is None:
                raise _Error(base + m.start(3), "expected '-> (RESULTS) {' after the arguments")
            # As iree-as-module, argument registers do not count towards the
            # register file: only registers the body uses do.
            self.in_signature = True
            try:
                arguments = self.signature_arguments(m.group(2), base + m.start(2),
                                                     _Function("", 0, 0, ""))
            finally:
                self.in_signature = False
            results = self.signature_results(r.group(1), base + m.start(3) + r.start(1))
            function.cconv = "0" + (arguments or "v") + "_" + (results or "v")
            if function.name in self.function_index:
                raise _Error(function.offset, f"duplicate function @{function.name}")
        finally:
            function.data += opcode_bytes(BLOCK)

    def signature_arguments(self, text: str, at: int, function: _Function) -> str:
        cconv = []
        next_i32 = next_ref = 0
        pos = 0
        for item in text.split(","):
            offset = at + pos + len(item) - len(item.lstrip())
            pos += len(item) + 1
            item = item.strip()
            if not item:
                if text.strip():
                    raise _Error(offset, "empty argument")
                continue
            reg_text, colon, type_text = item.rpartition(":")
            if not colon:
                raise _Error(offset, f"expected a typed register like %i0: i32, got '{item}'")
            type_at = offset + len(reg_text) + 1 + len(type_text) - len(type_text.lstrip())
            type_text = type_text.strip()
            char = self.cconv_char(type_text, type_at)
            bank = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "ref"}[char]
            reg = self.register(reg_text.strip(), bank, False, offset, function)
            if char == "r":
                if reg != (REF_TYPE_BIT | next_ref):
                    raise _Error(offset, f"ref arguments must be %r0, %r1, ... in order "
                                         f"(expected %r{next_ref})")
                next_ref += 1
            else:
                if reg != next_i32:
                    pair = f"%i{next_i32}:{next_i32 + 1}" if char in "IF" else f"%i{next_i32}"
                    raise _Error(offset, f"value arguments must use consecutive registers "
                                         f"from %i0 (expected {pair})")
                next_i32 += 2 if char in "IF" else 1
            cconv.append(char)
        return "".join(cconv)

    def signature_results(self, text: str, at: int) -> str:
        cconv = []
        pos = 0
        for item in text.split(","):
            offset = at + pos + len(item) - len(item.lstrip())
            pos += len(item) + 1
            if not item.strip():
                if text.strip():
                    raise _Error(offset, "empty result type")
                continue
            type_text = item.rpartition(":")[2].strip()
            cconv.append(self.cconv_char(type_text, offset))
        return "".join(cconv)

    def cconv_char(self, type_text: str, offset: int) -> str:
        char = _CCONV_CHARS.get(type_text)
        if char is None:
            if type_text.startswith("!"):
                return "r"
            raise _Error(offset, f"unsupported signature type '{type_text}' "
                                 f"(i32, i64, f32, f64 or a !ref type)")
        return char

    def function_line(self, text: str, base: int) -> None:
        function = self.current
        if text == "}":
            self.end_function(base)
            return
        if text.startswith("vm.func "):
            self.error(base, f"function @{function.name} is not closed with '}}' before "
                             f"the next function")
            function.unsure = True
            self.end_function(base)
            return self.function_header(text, base)
        if text.startswith("^"):
            m = _LABEL.match(text)
            if m is not None:
                return self.label(m.group(1), base)
        self.instruction(text, base)

    def label(self, name: str, base: int) -> None:
        function = self.current
        pc = len(function.data)
        if function.label_count == 0 and pc == 1:
            pc = 0  # the block every function starts with
        else:
            if not function.terminated and not function.unsure:
                self.error(base, "the block before this label is empty" if function.empty
                           else "the block before this label does not end with a "
                                "terminator (vm.br, vm.return, ...)")
            function.data += opcode_bytes(BLOCK)
            function.block_count += 1
        function.label_count += 1
        function.terminated = False
        function.empty = True
        function.unsure = False
        if name in function.labels:
            raise _Error(base, f"duplicate block label ^{name}")
        function.labels[name] = pc

    def end_function(self, base: int) -> None:
        function = self.current
        self.current = None
        if not function.terminated and not function.unsure:
            self.error(base, "the last block is empty" if function.empty else
                       "the last block does not end with a terminator (vm.return, ...)")
        for pending in function.pending:
            self.resolve(function, pending, module_level=False)
        if not function.name or function.name in self.function_index:
            return
        self.function_index[function.name] = len(self.functions)
        self.functions.append(function)

    # -- instructions ------------------------------------------------------------
    def instruction(self, text: str, base: int) -> None:
        function = self.current
        result_text = None
        result_at = 0
        rest, rest_at = text, base
        eq = text.find("=")
        if eq > 0 and text[0] == "%":
            result_text = text[:eq].rstrip()
            result_at = base
            rest = text[eq + 1:]
            rest_at = base + eq + 1
            lead = len(rest) - len(rest.lstrip())
            rest = rest[lead:]
            rest_at += lead
        space = rest.find(" ")
        mnemonic = rest if space < 0 else rest[:space]
        if "\t" in mnemonic:
            mnemonic = mnemonic.split(None, 1)[0]
        plan = _PLANS.get(mnemonic)
        if plan is None:
            plan = _plan_for(mnemonic)
            if plan is None:
                raise _Error(rest_at, f"unknown instruction '{mnemonic}'")
        if function.terminated:
            raise _Error(rest_at, "instruction after a terminator: start a new block with a "
                                  "label (^bbN:)")
        operands = rest[len(mnemonic):]
        operands_at = rest_at + len(mnemonic)
        for matcher in plan.matchers:
            match = matcher.regex.fullmatch(operands)
            if match is not None:
                break
        else:
            inst = plan.inst
            best = max((_diagnose(m, operands) + (m,) for m in plan.matchers),
                       key=lambda r: r[0])
            offset, message, matcher = best
            raise _Error(operands_at + offset,
                         f"{message}; {inst.vm_name} is written "
                         f"`{_template_summary(plan.matchers[0].template)}`")
        values, refs = self.operand_values(plan, matcher, match, result_text, result_at,
                                           operands_at, rest_at)
        pc = len(function.data)
        if plan.packer is not None and not refs:
            function.data += plan.prefix + plan.packer(*values)
        else:
            function.data += plan.encode(values, pc)
            if refs:
                function.pending.append(_Pending(pc, plan.inst, values, refs))
        if plan.feature:
            function.requirements |= plan.feature
            self.requirements |= plan.feature
        if plan.checks_cconv:
            function.calls.append((plan.inst, values))
        function.empty = False
        function.terminated = plan.is_terminator

    def operand_values(self, plan, matcher, match, result_text, result_at, operands_at,
                       rest_at):
        """The ISA operand values of a matched instruction line, and the references
        (labels, functions, globals) left to resolve."""
        values: list = [None] * plan.operand_count
        refs: list = []
        # The result register(s), left of `=`.
        result = matcher.result
        if result is not None:
            if result_text is None:
                if not matcher.template.result_optional:
                    raise _Error(rest_at, f"{plan.inst.vm_name} needs a result register "
                                          f"(`{_template_summary(matcher.template)}`)")
                values[result[0]] = ()
            else:
                values[result[0]] = result[1](self, result_text, result_at, refs)
        elif result_text is not None:
            raise _Error(result_at, f"{plan.inst.vm_name} has no result")
        for group, index, convert in matcher.converters:
            part = match.group(group)
            if part is None:
                values[index] = ()
            else:
                values[index] = convert(self, part, operands_at + match.start(group), refs)
        if plan.table_size is not None:
            values[plan.table_size] = len(values[plan.table_size + 1])
        return values, refs

    def resolve(self, function: _Function, pending: _Pending, module_level: bool) -> None:
        """Fills in addresses; re-encodes the instruction once all are known."""
        unresolved = []
        values = pending.values
        for ref in pending.refs:
            kind, index, case, name, line, offset, extra = ref
            if kind == "label":
                pc = function.labels.get(name)
                if pc is None:
                    self.error(offset, f"undefined block label ^{name}", line=line)
                    continue
                if case is None:
                    values[index] = pc
                else:
                    cases = list(values[index])
                    cases[case] = (pc, cases[case][1])
                    values[index] = tuple(cases)
            elif not module_level:
                unresolved.append(ref)
            elif kind == "func_ordinal":
                if name >= len(self.functions):
                    self.error(offset, f"function ordinal {name} is out of range "
                                       f"({len(self.functions)} functions)", line=line)
            elif kind == "func":
                ordinal = self.function_index.get(name)
                if ordinal is None:
                    self.error(offset, f"unknown function @{name}", line=line)
                    continue
                values[index] = ordinal
            elif kind == "global":
                g = self.global_index.get(name)
                if g is None:
                    self.error(offset, f"unknown global @{name}", line=line)
                    continue
                if g.size != extra:
                    self.error(offset, f"global @{name} has the wrong storage class for "
                                       f"{pending.inst.vm_name}", line=line)
                    continue
                values[index] = g.ordinal
        if unresolved:
            pending.refs = unresolved
            self.module_pending.append((function, pending))
            return
        data = _PLANS_BY_SYMBOL[pending.inst.symbol].encode(values, pending.pc)
        function.data[pending.pc:pending.pc + len(data)] = data

    # -- operands ----------------------------------------------------------------
    def convert(self, slot: Slot, text: str, at: int, inst, refs: list):
        operand = inst.operands[slot.index]
        kind = slot.kind
        function = self.current
        if kind is OperandKind.REGISTER:
            return self.register(text, operand.bank, operand.move, at, function, operand.name)
        if kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
            if operand.name == "segment_sizes":
                return tuple(self.u16(item, item_at) for item, item_at in _items(text, at))
            bank = operand.bank
            return tuple(self.list_register(item, bank, item_at, function)
                         for item, item_at in _items(text, at))
        if kind is OperandKind.ATTRIBUTE:
            return self.attribute(text, operand.type, at)
        if kind is OperandKind.BRANCH_TARGET:
            refs.append(("label", slot.index, None, text[1:], self.lineno, at, None))
            return 0
        if kind is OperandKind.BRANCH_OPERANDS:
            return self.remaps(text, at, function)
        if kind is OperandKind.BRANCH_TABLE_CASES:
            return self.cases(text, at, slot.index, refs, function)
        if kind is OperandKind.TYPE_OF:
            return self.type_ordinal(text.strip())
        if kind is OperandKind.FUNC_ATTR:
            return self.function_ordinal(text, at, slot.index, refs)
        if kind is OperandKind.GLOBAL_ATTR:
            return self.global_ordinal(text, at, slot.index, refs, inst)
        if kind is OperandKind.RODATA_ATTR:
            ordinal = parse_uint32(text)
            if ordinal is None:
                raise _Error(at, f"expected a rodata ordinal, got '{text}'")
            if ordinal >= len(self.rodata):
                raise _Error(at, f"undefined rodata segment {ordinal} "
                                 f"({len(self.rodata)} declared with vm.rodata[N])")
            return ordinal
        if kind is OperandKind.STRING_ATTR:
            data = text[1:-1].encode("utf-8", "surrogateescape")
            if len(data) > 0xFFFF:
                raise _Error(at, "string attribute is too large")
            return data
        raise AssertionError(kind)  # pragma: no cover

    def register(self, text: str, bank: str, move_ok: bool, at: int, function: _Function,
                 name: str | None = None) -> int:
        value, i32_end, ref_end = self.register_info(text, bank, move_ok, at, name)
        if i32_end > function.i32_count:
            function.i32_count = i32_end
        if ref_end > function.ref_count:
            function.ref_count = ref_end
        return value

    def register_info(self, text: str, bank: str, move_ok: bool, at: int,
                      name: str | None = None) -> tuple[int, int, int]:
        """(encoded register, i32 registers needed, ref registers needed)."""
        m = _REGISTER.match(text)
        what = f"'{name}' " if name else ""
        if m is None:
            raise _Error(at, f"expected {_bank_words(bank)} for operand {what}"
                             f"but got '{text}'")
        letter, number, high = m.groups()
        ordinal = parse_uint32(number)
        if ordinal is None:
            raise _Error(at, f"invalid register number in '{text}'")
        if bank == "ref":
            if letter == "i":
                raise _Error(at, f"wrong register bank: operand {what}takes a ref register "
                                 f"(%rN), not '{text}'")
            if high is not None:
                raise _Error(at, f"ref registers have no pair: '{text}'")
            if letter == "R" and not move_ok:
                raise _Error(at, f"operand {what}does not allow a ref move (%R); "
                                 f"write %r{number}")
            if ordinal > MAX_REF_ORDINAL:
                raise _Error(at, f"ref register '{text}' is beyond the ref register file "
                                 f"(%r0..%r{MAX_REF_ORDINAL})")
            return REF_TYPE_BIT | (REF_MOVE_BIT if letter == "R" else 0) | ordinal, 0, ordinal + 1
        if letter != "i":
            raise _Error(at, f"wrong register bank: operand {what}takes "
                             f"{_bank_words(bank)}, not '{text}'")
        span = 1
        if bank in ("i64", "f64"):
            if high is None:
                raise _Error(at, f"operand {what}takes {_bank_words(bank)}: write "
                                 f"%i{ordinal}:{ordinal + 1}")
            if parse_uint32(high) != ordinal + 1:
                raise _Error(at, f"an {bank} register names two adjacent i32 registers "
                                 f"(%i{ordinal}:{ordinal + 1}), not '{text}'")
            if ordinal & 1 and not self.in_signature:
                raise _Error(at, f"an {bank} register pair starts at an even register "
                                 f"(%i{ordinal - 1}:{ordinal} or %i{ordinal + 1}:"
                                 f"{ordinal + 2}), not '{text}': the verifier rejects it")
            span = 2
        elif high is not None:
            raise _Error(at, f"wrong register bank: operand {what}takes "
                             f"{_bank_words(bank)}, not the pair '{text}'")
        if ordinal + span - 1 > MAX_I32_ORDINAL:
            raise _Error(at, f"register '{text}' is beyond the i32 register file "
                             f"(%i0..%i{MAX_I32_ORDINAL})")
        return ordinal, ordinal + span, 0

    def list_register(self, text: str, bank: str, at: int, function: _Function) -> int:
        """A register of a list: 'any' takes whichever bank it names; i64 lists
        may name the first register of the pair only."""
        cache = _LIST_CACHES[bank]
        known = cache.get(text)
        if known is not None:
            if known[1] > function.i32_count:
                function.i32_count = known[1]
            if known[2] > function.ref_count:
                function.ref_count = known[2]
            return known[0]
        scratch = _Function("", 0, 0, "")
        value = self.list_register_slow(text, bank, at, scratch)
        cache[text] = (value, scratch.i32_count, scratch.ref_count)
        return self.list_register(text, bank, at, function)

    def list_register_slow(self, text: str, bank: str, at: int, function: _Function) -> int:
        if bank == "any":
            if text.startswith(("%r", "%R")):
                return self.register(text, "ref", True, at, function)
            return self.register(text, "i64" if ":" in text else "i32", False, at, function)
        if bank == "ref":
            return self.register(text, "ref", True, at, function)
        if bank in ("i64", "f64") and ":" not in text:
            ordinal = self.register(text, "i32", False, at, function)
            if ordinal + 2 > function.i32_count:
                function.i32_count = ordinal + 2
            return ordinal
        return self.register(text, bank, False, at, function)

    def remaps(self, text: str, at: int, function: _Function) -> tuple:
        pairs = []
        for item, item_at in _items(text, at):
            source, arrow, target = item.partition("->")
            if not arrow:
                raise _Error(item_at, f"expected a remap like %i0->%i1, got '{item}'")
            s = self.list_register(source.strip(), "any", item_at, function)
            t_at = item_at + len(source) + 2 + len(target) - len(target.lstrip())
            t = self.list_register(target.strip(), "any", t_at, function)
            pairs.append((s, t))
        return tuple(pairs)

    def cases(self, text: str, at: int, index: int, refs: list, function: _Function):
        cases = []
        for m in re.finditer(r"\s*,\s*([^,:{}]*?)\s*:\s*(\^[\w$.]+)\s*(?:\(([^()]*)\))?",
                             text):
            number = parse_uint32(m.group(1))
            if number is None or number != len(cases):
                raise _Error(at + m.start(1), f"branch table cases must be numbered 0, 1, ... "
                                              f"in order (expected {len(cases)})")
            refs.append(("label", index, len(cases), m.group(2)[1:], self.lineno,
                         at + m.start(2), None))
            pairs = self.remaps(m.group(3) or "", at + (m.start(3) if m.group(3) else 0),
                                function)
            cases.append((0, pairs))
        if len(cases) > 0xFFFF:
            raise _Error(at, "branch table is too large")
        return tuple(cases)

    def u16(self, text: str, at: int) -> int:
        value = parse_uint32(text)
        if value is None or value > 0xFFFF:
            raise _Error(at, f"expected a u16 value, got '{text}'")
        return value

    def attribute(self, text: str, type_: str, at: int):
        if type_ == "i32":
            value = parse_int32(text)
        elif type_ == "i64":
            value = parse_int64(text)
        elif type_ == "f32":
            value = parse_f32(text)
        else:
            value = parse_f64(text)
        if value is None:
            raise _Error(at, f"expected an {type_} constant, got '{text}'")
        return value

    def type_ordinal(self, name: str) -> int:
        """As iree-as-module: `vm.x` finds `!vm.x`; unknown types are appended."""
        if name.startswith("vm."):
            ordinal = self.type_index.get("!" + name)
            if ordinal is not None:
                return ordinal
        ordinal = self.type_index.get(name)
        if ordinal is None:
            ordinal = len(self.types)
            self.type_index[name] = ordinal
            self.types.append(name)
        return ordinal

    def function_ordinal(self, text: str, at: int, index: int, refs: list) -> int:
        name = text[1:]
        if not name:
            raise _Error(at, "expected a function name after '@'")
        prefix, colon, ordinal_text = name.partition(":")
        if colon:
            if prefix != self.module_name:
                raise _Error(at, f"'{text}': an internal function ordinal must be written "
                                 f"@{self.module_name}:N")
            ordinal = parse_uint32(ordinal_text)
            if ordinal is None:
                raise _Error(at, f"expected a function ordinal in '{text}'")
            refs.append(("func_ordinal", index, None, ordinal, self.lineno, at, None))
            return ordinal
        import_ordinal = self.import_index.get(name)
        if import_ordinal is not None:
            return IMPORT_BIT | import_ordinal
        prefix, dot, local = name.partition(".")
        if dot and prefix == self.module_name:
            name = local
        refs.append(("func", index, None, name, self.lineno, at, None))
        return 0

    def global_ordinal(self, text: str, at: int, index: int, refs: list, inst) -> int:
        size = _global_storage_size(inst, index)
        m = re.fullmatch(r"\.(\w+)\s*\[\s*([^\]]*?)\s*\]", text)
        if m is not None:
            storage, number = m.groups()
            expected = "refs" if size == 0 else "rwdata"
            if storage != expected:
                raise _Error(at, f"{inst.vm_name} addresses .{expected}[N], not .{storage}[...]")
            ordinal = parse_uint32(number)
            if ordinal is None:
                raise _Error(at + m.start(2), f"invalid storage ordinal '{number}'")
            if size == 0:
                self.global_refs = max(self.global_refs, ordinal + 1)
            else:
                if ordinal % size:
                    raise _Error(at, f".rwdata[{ordinal}] is not {size}-byte aligned")
                self.global_bytes = max(self.global_bytes, ordinal + size)
            return ordinal
        name = self.symbol(text, at, "global")
        refs.append(("global", index, None, name, self.lineno, at, size))
        return 0

    def assign_global_ordinals(self) -> None:
        """iree-as-module's layout: refs in order, then bytes by size class, aligned."""
        next_ref = 0
        for g in self.globals:
            if g.size == 0:
                g.ordinal = next_ref
                next_ref += 1
        self.global_refs = max(self.global_refs, next_ref)
        offset = 0
        for size in range(1, 9):
            sized = [g for g in self.globals if g.size == size]
            if not sized:
                continue
            offset = (offset + size - 1) & ~(size - 1)
            for g in sized:
                g.ordinal = offset
                offset += size
        self.global_bytes = max(self.global_bytes, offset)

    # -- output ------------------------------------------------------------------
    def build(self) -> bytes:
        bytecode = bytearray()
        descriptors = []
        signatures = []
        for f in self.functions:
            descriptors.append(FunctionDescriptor(
                bytecode_offset=len(bytecode), bytecode_length=len(f.data),
                requirements=f.requirements, reserved=0, block_count=f.block_count,
                i32_register_count=f.i32_count, ref_register_count=f.ref_count))
            signatures.append(FunctionSignatureDef(calling_convention=f.cconv))
            bytecode += f.data
            bytecode += bytes(-len(bytecode) % 8)
        imports = [ImportFunctionDef(
            full_name=name, signature=FunctionSignatureDef(calling_convention=cconv),
            flags=ImportFlagBits.OPTIONAL if optional else ImportFlagBits.REQUIRED)
            for name, cconv, optional in self.imports]
        exports = [ExportFunctionDef(local_name=name,
                                     internal_ordinal=self.function_index[function])
                   for name, function, _, _ in self.exports]
        # A module depends on every module it imports from (optionally when all
        # of those imports are optional). vmasm has no dependency directive and
        # iree-as-module writes none, but runtimes (iree-run-module) decide from
        # them which native modules (hal, io_parameters, ...) to create.
        dependencies: dict[str, bool] = {}
        for name, _, optional in self.imports:
            target = name.split(".", 1)[0]
            dependencies[target] = dependencies.get(target, True) and optional
        dependency_defs = [ModuleDependencyDef(
            name=target, minimum_version=0,
            flags=ModuleDependencyFlagBits.OPTIONAL if optional
            else ModuleDependencyFlagBits.REQUIRED)
            for target, optional in dependencies.items()]
        state = None
        if self.global_bytes or self.global_refs:
            state = ModuleStateDef(global_bytes_capacity=self.global_bytes,
                                   global_ref_count=self.global_refs)
        module = BytecodeModuleDef(
            name=self.module_name, version=self.module_version,
            requirements=self.requirements,
            types=[TypeDef(full_name=t) for t in self.types],
            dependencies=dependency_defs, imported_functions=imports, exported_functions=exports,
            function_signatures=signatures,
            rodata_segments=[RodataSegmentDef(embedded_data=data) for data in self.rodata],
            module_state=state, function_descriptors=descriptors,
            bytecode_version=(BYTECODE_VERSION[0] << 16) | BYTECODE_VERSION[1],
            bytecode_data=bytes(bytecode))
        return write_module(module)



def _typed_registers(fragment: str, segments, registers):
    """(cconv char, register) pairs of a call list, spans expanded by segment sizes."""
    out = []
    reg_i = seg_i = 0
    i = 0
    n = len(fragment)
    while i < n and reg_i <= len(registers):
        ch = fragment[i]
        if ch in "iIfFr":
            if reg_i < len(registers):
                out.append((ch, registers[reg_i]))
            reg_i += 1
        elif ch == "C":
            end = fragment.find("D", i + 1)
            end = n if end < 0 else end
            count = segments[seg_i] if segments is not None and seg_i < len(segments) else 0
            for _ in range(count):
                for sch in fragment[i + 1:end]:
                    if sch in "iIfFr" and reg_i < len(registers):
                        out.append((sch, registers[reg_i]))
                    reg_i += 1
            i = end
        i += 1
        seg_i += 1
    return out


def _items(text: str, at: int):
    """Comma-separated items of a list with their offsets (empty list for blank text)."""
    if not text.strip():
        return
    pos = 0
    for item in text.split(","):
        stripped = item.strip()
        offset = at + pos + len(item) - len(item.lstrip())
        if not stripped:
            raise _Error(offset, "empty list entry")
        yield stripped, offset
        pos += len(item) + 1


def _bank_words(bank: str) -> str:
    return {"i32": "an i32 register (%iN)", "f32": "an f32 register (%iN)",
            "i64": "an i64 register pair (%iN:M)", "f64": "an f64 register pair (%iN:M)",
            "ref": "a ref register (%rN)", "any": "a register"}[bank]


def _global_storage_size(inst, index: int) -> int:
    for operand in inst.operands[index + 1:]:
        if operand.kind is OperandKind.REGISTER:
            return _STORAGE_SIZES[operand.bank]
    return 0


def assemble(text: str, filename: str = "<vmasm>") -> bytes:
    """Assembles vmasm text into .vmfb bytes; raises AssemblyError listing every error."""
    return Assembler(filename).assemble(text)
