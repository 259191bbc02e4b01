"""The module-level lines of vmasm: `vm.module`, `vm.type`, `vm.import`,
`vm.rodata`, `vm.global.*`, `vm.export` and `vm.func` headers with their signatures
(a part of vmrt.asm.assembler.Assembler)."""

from __future__ import annotations

import re

from vmrt.asm.lexer import parse_int64, parse_uint32
from vmrt.asm.state import Function, Global, LineError, STORAGE_SIZES
from vmrt.isa import BLOCK
from vmrt.isa.encoder import opcode_bytes
from vmrt.isa.registers import REF_TYPE_BIT
from vmrt.vm import cconv as cconv_mod

_FUNC_HEADER = re.compile(r"vm\.func\s+(@[^\s(]*)\s*\(([^)]*)\)\s*(.*)$")
_RESULTS = re.compile(r"->\s*\(([^)]*)\)\s*\{$")
_SYMBOL = re.compile(r"@([\w$.]+)$")
_GLOBAL = re.compile(r"vm\.global\.(\w+)\s+(.*)$")
_CCONV_CHARS = {"i32": "i", "i64": "I", "f32": "f", "f64": "F"}


class ModuleDirectives:
    """Reads the lines outside function bodies into the assembler's module tables."""

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
                raise LineError(base, f"{word} directives must appear before functions")
            if word == "vm.type":
                return self.type_directive(text, base)
            if word == "vm.import":
                return self.import_directive(text, base)
            return self.global_directive(text, base)
        if text == "}":
            raise LineError(base, "'}' outside a function")
        raise LineError(base, f"unexpected top-level directive '{word}'")

    def require_module(self, base: int, what: str) -> None:
        if self.module_name is None:
            raise LineError(base, f"the module directive (vm.module) must come before {what}")

    def symbol(self, text: str, offset: int, what: str = "symbol") -> str:
        m = _SYMBOL.match(text)
        if m is None:
            raise LineError(offset, f"expected a {what} name like @name, got '{text}'")
        return m.group(1)

    def module_directive(self, text: str, base: int) -> None:
        if self.module_name is not None:
            raise LineError(base, "module already declared")
        m = re.match(r"vm\.module\s+(\S+)(?:\s+(.*))?$", text)
        if m is None:
            raise LineError(base + len(text), "expected a module name like @name")
        self.module_name = self.symbol(m.group(1), base + m.start(1), "module")
        rest = m.group(2)
        if rest:
            v = re.match(r"version\s+(\S+)$", rest)
            if v is None:
                raise LineError(base + m.start(2), "expected 'version <uint32>'")
            version = parse_uint32(v.group(1))
            if version is None:
                raise LineError(base + m.start(2) + v.start(1), "invalid module version")
            self.module_version = version

    def type_directive(self, text: str, base: int) -> None:
        name = text[len("vm.type"):].strip()
        if not name:
            raise LineError(base + len(text), "expected a type name")
        if name in self.type_index:
            raise LineError(base + text.index(name, 7), f"duplicate type {name}")
        self.type_index[name] = len(self.types)
        self.types.append(name)

    def import_directive(self, text: str, base: int) -> None:
        m = re.match(r'vm\.import\s+(optional\s+)?(\S+)\s*(?:(cconv)\s*(.*))?$', text)
        if m is None:
            raise LineError(base + len(text), "expected 'vm.import [optional] @name cconv \"...\"'")
        name = self.symbol(m.group(2), base + m.start(2), "import")
        if m.group(3) is None:
            raise LineError(base + m.end(2), "expected import cconv")
        s = re.fullmatch(r'"([^"]*)"', m.group(4))
        if s is None:
            raise LineError(base + m.start(4), "expected the calling convention as a quoted "
                                            "string like \"0ii_i\"")
        cconv = s.group(1)
        try:
            cconv_mod.check_well_formed(cconv)
        except cconv_mod.CConvError as e:
            raise LineError(base + m.start(4) + 1, f"malformed cconv: {e.message}")
        if name in self.import_index:
            raise LineError(base + m.start(2), f"duplicate import @{name}")
        self.import_index[name] = len(self.imports)
        self.imports.append((name, cconv, bool(m.group(1))))

    def rodata_directive(self, text: str, base: int) -> None:
        self.require_module(base, "rodata")
        if self.functions:
            raise LineError(base, "rodata directives must appear before functions")
        m = re.match(r"vm\.rodata\[([^\]]*)\]\s*(=)?\s*(.*)$", text)
        if m is None:
            raise LineError(base + len(text), "unterminated rodata ordinal")
        ordinal = parse_uint32(m.group(1).strip())
        if ordinal is None:
            raise LineError(base + m.start(1), "invalid rodata ordinal")
        if m.group(2) is None:
            raise LineError(base + m.end(1) + 1, "expected '= <hex bytes>'")
        hex_text = m.group(3)
        if len(hex_text) % 2:
            raise LineError(base + m.start(3), "rodata hex data must have an even length")
        bad = re.search(r"[^0-9a-fA-F]", hex_text)
        if bad:
            raise LineError(base + m.start(3) + bad.start(), "invalid rodata hex digit")
        if ordinal != len(self.rodata):
            raise LineError(base + m.start(1),
                         f"rodata segments must be declared in ordinal order "
                         f"(expected vm.rodata[{len(self.rodata)}])")
        self.rodata.append(bytes.fromhex(hex_text))

    def global_directive(self, text: str, base: int) -> None:
        m = _GLOBAL.match(text)
        type_name = m.group(1) if m else ""
        if type_name not in ("i32", "i64", "f32", "f64", "ref"):
            raise LineError(base, f"unknown global type 'vm.global.{type_name}' "
                               f"(expected i32, i64, f32, f64 or ref)")
        rest = m.group(2)
        if type_name == "ref":
            # vmrt's own: `vm.global.ref [private] [mutable] @name : TYPE` reserves
            # a .refs[N] slot (iree-as-module has no ref global directive).
            rest, colon, ref_type = rest.rpartition(":")
            if not colon or not ref_type.strip().startswith("!"):
                raise LineError(base + len(text), "expected ': !type' after a ref global name")
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
                raise LineError(at, "invalid global initializer")
            if number != 0:
                raise LineError(at, "non-zero global initializers must be set by __init bytecode")
            if type_name == "ref" or init_type.strip() != type_name:
                raise LineError(at, f"global initializer type mismatch (expected : {type_name})")
        if name in self.global_index:
            raise LineError(rest_at, f"duplicate global @{name}")
        g = Global(name, STORAGE_SIZES[type_name])
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
            raise LineError(at + len(lhs) - len(lhs.lstrip()), f"duplicate export @{name}")
        self.export_names.add(name)
        offset = at + (len(lhs) + 1 + len(rhs) - len(rhs.lstrip()) if eq
                       else len(lhs) - len(lhs.lstrip()))
        self.exports.append((name, function, self.lineno, offset))

    # -- functions ---------------------------------------------------------------
    def function_header(self, text: str, base: int) -> None:
        # Whatever goes wrong, the body is still read (for its own errors).
        function = Function("", self.lineno, base, "0v_v")
        self.current = function
        try:
            self.require_module(base, "functions")
            m = _FUNC_HEADER.match(text)
            if m is None:
                raise LineError(base + len(text), "expected 'vm.func @name(ARGS) -> (RESULTS) {'")
            function.offset = base + m.start(1)
            function.name = self.symbol(m.group(1), base + m.start(1), "function")
            r = _RESULTS.match(m.group(3))
            if r is None:
                raise LineError(base + m.start(3), "expected '-> (RESULTS) {' after the arguments")
            # As iree-as-module, argument registers do not count towards the
            # register file: only registers the body uses do.
            self.in_signature = True
            try:
                arguments = self.signature_arguments(m.group(2), base + m.start(2),
                                                     Function("", 0, 0, ""))
            finally:
                self.in_signature = False
            results = self.signature_results(r.group(1), base + m.start(3) + r.start(1))
            function.cconv = "0" + (arguments or "v") + "_" + (results or "v")
            if function.name in self.function_index:
                raise LineError(function.offset, f"duplicate function @{function.name}")
        finally:
            function.data += opcode_bytes(BLOCK)

    def signature_arguments(self, text: str, at: int, function: Function) -> str:
        cconv = []
        next_i32 = next_ref = 0
        pos = 0
        for item in text.split(","):
            offset = at + pos + len(item) - len(item.lstrip())
            pos += len(item) + 1
            item = item.strip()
            if not item:
                if text.strip():
                    raise LineError(offset, "empty argument")
                continue
            reg_text, colon, type_text = item.rpartition(":")
            if not colon:
                raise LineError(offset, f"expected a typed register like %i0: i32, got '{item}'")
            type_at = offset + len(reg_text) + 1 + len(type_text) - len(type_text.lstrip())
            type_text = type_text.strip()
            char = self.cconv_char(type_text, type_at)
            bank = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "ref"}[char]
            reg = self.register(reg_text.strip(), bank, False, offset, function)
            if char == "r":
                if reg != (REF_TYPE_BIT | next_ref):
                    raise LineError(offset, f"ref arguments must be %r0, %r1, ... in order "
                                         f"(expected %r{next_ref})")
                next_ref += 1
            else:
                if reg != next_i32:
                    pair = f"%i{next_i32}:{next_i32 + 1}" if char in "IF" else f"%i{next_i32}"
                    raise LineError(offset, f"value arguments must use consecutive registers "
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
                    raise LineError(offset, "empty result type")
                continue
            type_text = item.rpartition(":")[2].strip()
            cconv.append(self.cconv_char(type_text, offset))
        return "".join(cconv)

    def cconv_char(self, type_text: str, offset: int) -> str:
        char = _CCONV_CHARS.get(type_text)
        if char is None:
            if type_text.startswith("!"):
                return "r"
            raise LineError(offset, f"unsupported signature type '{type_text}' "
                                 f"(i32, i64, f32, f64 or a !ref type)")
        return char
