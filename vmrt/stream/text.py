"""The stream text form: parser (errors at file:line:col) and printer.

The grammar is in vmrt/stream/README.md. `format_program(parse_program(t))` is the
canonical spelling of `t`, and parsing the canonical spelling gives it back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from vmrt.errors import StatusCode
from vmrt.stream.builder import FuncBuilder, ProgramBuilder, as_pattern
from vmrt.stream.ir import (Func, Lifetime, Loc, Op, Pattern, Program, ResourceType,
                            StreamError, Use, Value, format_number)
from vmrt.stream.partition import parse_favor

_TOKEN_RE = re.compile(r"""
    (?P<space>[ \t\r\f]+)
  | (?P<newline>\n)
  | (?P<comment>//[^\n]*)
  | (?P<value>%[A-Za-z0-9_.$]+)
  | (?P<symbol>@[A-Za-z0-9_.$]+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:0[xX][0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>->|::|[(){}\[\]<>,:=])
""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


@dataclass
class Token:
    kind: str      # value symbol string number ident punct eof
    text: str
    loc: Loc

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        return f"'{self.text}'"


def tokenize(text: str, filename: str | None = None) -> list[Token]:
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        loc = Loc(line, pos - line_start + 1, filename)
        if match is None:
            char = text[pos]
            if char == '"':
                raise StreamError("unterminated string", loc)
            if char in "%@":
                raise StreamError(f"'{char}' must be followed by a name", loc)
            raise StreamError(f"unexpected character {char!r}", loc)
        kind = match.lastgroup
        if kind == "newline":
            line += 1
            line_start = match.end()
        elif kind not in ("space", "comment"):
            tokens.append(Token(kind, match.group(), loc))
        pos = match.end()
    tokens.append(Token("eof", "", Loc(line, pos - line_start + 1, filename)))
    return tokens


def _unquote(token: Token) -> str:
    body = token.text[1:-1]
    out = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            escape = body[i + 1]
            if escape not in _ESCAPES:
                raise StreamError(f"unknown escape '\\{escape}' in string",
                                  Loc(token.loc.line, token.loc.col + 1 + i, token.loc.file))
            out.append(_ESCAPES[escape])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _quote(text: str) -> str:
    out = ['"']
    for char in text:
        if char == '"' or char == "\\":
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _number(token: Token) -> int | float:
    text = token.text
    if text.lower().lstrip("-").startswith("0x"):
        return int(text, 16)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


class Parser:
    def __init__(self, text: str, filename: str | None = None):
        self.tokens = tokenize(text, filename)
        self.pos = 0

    # -- token helpers ----------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != "eof":
            self.pos += 1
        return token

    def at(self, kind: str, text: str | None = None) -> bool:
        token = self.tok
        return token.kind == kind and (text is None or token.text == text)

    def accept(self, kind: str, text: str | None = None) -> Token | None:
        if self.at(kind, text):
            return self.advance()
        return None

    def error(self, message: str, token: Token | None = None) -> StreamError:
        token = token or self.tok
        return StreamError(message, token.loc)

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        if self.at(kind, text):
            return self.advance()
        wanted = what or (f"'{text}'" if text else kind)
        return self._fail(f"expected {wanted}, found {self.tok.describe()}")

    def _fail(self, message: str):
        raise self.error(message)

    # -- grammar ----------------------------------------------------------------------------
    def parse_program(self) -> Program:
        start = self.expect("ident", "program")
        name = self.expect("symbol", what="a program name (@name)")
        attrs = self.parse_attributes()
        builder = ProgramBuilder(name.text[1:], attributes=attrs, loc=start.loc)
        self.expect("punct", "{")
        while not self.at("punct", "}"):
            if self.at("eof"):
                self._fail("expected 'func' or '}', found end of input")
            self.parse_func(builder)
        self.advance()
        if not self.at("eof"):
            self._fail(f"expected end of input after the program, found {self.tok.describe()}")
        return builder.build()

    def parse_attributes(self) -> dict:
        attrs: dict = {}
        if not self.accept("ident", "attributes"):
            return attrs
        self.expect("punct", "{")
        if not self.at("punct", "}"):
            while True:
                key = self.expect("ident", what="an attribute name")
                if key.text in attrs:
                    raise self.error(f"attribute '{key.text}' given twice", key)
                self.expect("punct", "=")
                value_token = self.tok
                if self.accept("string"):
                    value = _unquote(value_token)
                elif self.accept("number"):
                    value = _number(value_token)
                else:
                    self._fail(f"expected a string or number attribute value, found "
                               f"{value_token.describe()}")
                if key.text == "partitioning":
                    parse_favor(value, value_token.loc)
                attrs[key.text] = value
                if not self.accept("punct", ","):
                    break
        self.expect("punct", "}")
        return attrs

    def parse_type(self) -> ResourceType:
        token = self.tok
        if token.kind != "ident" or token.text not in {l.value for l in Lifetime}:
            self._fail(f"expected a resource type (external<N>, transient<N>, constant<N>, "
                       f"parameter<N>), found {token.describe()}")
        self.advance()
        self.expect("punct", "<")
        size = self.parse_int("a size in bytes")
        if size <= 0:
            raise StreamError("resource size must be positive", token.loc)
        self.expect("punct", ">")
        return ResourceType(Lifetime(token.text), size)

    def parse_int(self, what: str) -> int:
        token = self.expect("number", what=what)
        value = _number(token)
        if not isinstance(value, int):
            raise self.error(f"expected {what}, found {token.describe()}", token)
        return value

    def parse_func(self, program: ProgramBuilder) -> None:
        start = self.expect("ident", "func", what="'func'")
        name = self.expect("symbol", what="a function name (@name)")
        self.expect("punct", "(")
        args, arg_locs = [], []
        if not self.at("punct", ")"):
            while True:
                value = self.expect("value", what="an argument (%name)")
                self.expect("punct", ":")
                args.append((value.text[1:], self.parse_type()))
                arg_locs.append(value.loc)
                if not self.accept("punct", ","):
                    break
        self.expect("punct", ")")
        results = []
        if self.accept("punct", "->"):
            if self.accept("punct", "("):
                if not self.at("punct", ")"):
                    while True:
                        results.append(self.parse_type())
                        if not self.accept("punct", ","):
                            break
                self.expect("punct", ")")
            else:
                results.append(self.parse_type())
        attrs = self.parse_attributes()
        fb = program.func(name.text[1:], args, results, attributes=attrs, loc=start.loc,
                          arg_locs=arg_locs)
        self.expect("punct", "{")
        while True:
            if self.at("ident", "return"):
                self.parse_return(fb)
                break
            if self.at("punct", "}") or self.at("eof"):
                self._fail(f"expected an op or 'return', found {self.tok.describe()} "
                           f"(a function ends with 'return')")
            self.parse_statement(fb)
        self.expect("punct", "}", what="'}' after 'return'")

    def lookup(self, fb: FuncBuilder, token: Token) -> Value:
        value = fb.value(token.text[1:])
        if value is None:
            raise self.error(f"use of undefined value {token.text}", token)
        return value

    def parse_return(self, fb: FuncBuilder) -> None:
        start = self.advance()
        values, locs = [], []
        if self.at("value"):
            while True:
                token = self.expect("value", what="a value (%name)")
                values.append(self.lookup(fb, token))
                locs.append(token.loc)
                if not self.accept("punct", ","):
                    break
        fb.ret(*values, loc=start.loc, locs=locs)

    def parse_use(self, fb: FuncBuilder) -> Use:
        token = self.expect("value", what="an operand (%name)")
        value = self.lookup(fb, token)
        if self.accept("punct", "["):
            offset = self.parse_int("a byte offset")
            self.expect("ident", "for")
            length = self.parse_int("a byte length")
            self.expect("punct", "]")
            return Use(value, offset, length, token.loc)
        return Use(value, 0, value.type.size, token.loc)

    def parse_pattern(self) -> Pattern:
        token = self.expect("number", what="a pattern value")
        self.expect("punct", ":")
        etype = self.expect("ident", what="an element type")
        return as_pattern((_number(token), etype.text), token.loc)

    def parse_statement(self, fb: FuncBuilder) -> None:
        names: list[Token] = []
        if self.at("value"):
            while True:
                names.append(self.expect("value", what="a result name (%name)"))
                if not self.accept("punct", ","):
                    break
            self.expect("punct", "=")
        kind = self.tok
        if kind.kind != "ident" or kind.text not in _OPS:
            self._fail(f"expected an op (splat, fill, copy, dispatch, param.load, "
                       f"param.gather), found {kind.describe()}")
        self.advance()
        _OPS[kind.text](self, fb, kind, names)

    def _single(self, kind: Token, names: list[Token]) -> str:
        if len(names) != 1:
            raise self.error(f"{kind.text} has one result; {len(names)} name(s) given", kind)
        return names[0].text[1:]

    def op_splat(self, fb: FuncBuilder, kind: Token, names: list[Token]) -> None:
        name = self._single(kind, names)
        pattern = self.parse_pattern()
        self.expect("punct", "->")
        rtype = self.parse_type()
        fb.splat(pattern, rtype.lifetime, rtype.size, name=name, loc=kind.loc)

    def op_fill(self, fb: FuncBuilder, kind: Token, names: list[Token]) -> None:
        name = self._single(kind, names)
        pattern = self.parse_pattern()
        self.expect("punct", "->")
        target = self.parse_use(fb)
        fb.fill(pattern, target, name=name, loc=kind.loc)

    def op_copy(self, fb: FuncBuilder, kind: Token, names: list[Token]) -> None:
        name = self._single(kind, names)
        source = self.parse_use(fb)
        self.expect("punct", "->")
        target = self.parse_use(fb)
        fb.copy(source, target, name=name, loc=kind.loc)

    def op_dispatch(self, fb: FuncBuilder, kind: Token, names: list[Token]) -> None:
        callee = [self.expect("symbol", what="a kernel symbol (@name)").text]
        while self.accept("punct", "::"):
            callee.append(self.expect("symbol", what="a symbol (@name)").text)
        self.expect("punct", "(")
        operands = []
        if not self.at("punct", ")"):
            while True:
                operands.append(self.parse_use(fb))
                if not self.accept("punct", ","):
                    break
        self.expect("punct", ")")
        results, result_locs = [], []
        if self.accept("punct", "->"):
            def one():
                token = self.tok
                if token.kind == "value":
                    self.advance()
                    results.append(self.lookup(fb, token))
                else:
                    results.append(self.parse_type())
                result_locs.append(token.loc)
            if self.accept("punct", "("):
                if not self.at("punct", ")"):
                    while True:
                        one()
                        if not self.accept("punct", ","):
                            break
                self.expect("punct", ")")
            else:
                one()
        if len(names) != len(results):
            raise self.error(f"dispatch has {len(results)} result(s); {len(names)} name(s) "
                             f"given", names[0] if names else kind)
        fb.dispatch(callee, operands, results, names=[t.text[1:] for t in names],
                    loc=kind.loc, result_locs=result_locs)

    def op_param_load(self, fb: FuncBuilder, kind: Token, names: list[Token]) -> None:
        name = self._single(kind, names)
        scope = _unquote(self.expect("string", what="a parameter scope (\"scope\")"))
        self.expect("punct", "::")
        key = _unquote(self.expect("string", what="a parameter key (\"key\")"))
        self.expect("punct", "->")
        rtype = self.parse_type()
        fb.param_load(scope, key, rtype.lifetime, rtype.size, name=name, loc=kind.loc)

    def op_param_gather(self, fb: FuncBuilder, kind: Token, names: list[Token]) -> None:
        name = self._single(kind, names)
        scope = _unquote(self.expect("string", what="a parameter scope (\"scope\")"))
        self.expect("punct", "{")
        entries = []
        while True:
            key = _unquote(self.expect("string", what="a parameter key (\"key\")"))
            self.expect("punct", "->")
            entries.append((key, self.parse_use(fb)))
            if not self.accept("punct", ","):
                break
        self.expect("punct", "}")
        fb.param_gather(scope, entries, name=name, loc=kind.loc)


_OPS = {"splat": Parser.op_splat, "fill": Parser.op_fill, "copy": Parser.op_copy,
        "dispatch": Parser.op_dispatch, "param.load": Parser.op_param_load,
        "param.gather": Parser.op_param_gather}


def parse_program(text: str, filename: str | None = None) -> Program:
    """Parses and verifies stream text; StreamError (file:line:col) on failure."""
    return Parser(text, filename).parse_program()


def load_program(path: str | Path) -> Program:
    """Reads and parses a stream program file: StreamError when it cannot be read,
    is not UTF-8 (at the first bad byte) or does not parse."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        raise StreamError(f"cannot read '{path}': {reason}", code=StatusCode.NOT_FOUND) \
            from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[:error.start]
        line = before.count(b"\n") + 1
        column = error.start - (before.rfind(b"\n") + 1) + 1
        raise StreamError(f"not UTF-8 text (byte 0x{data[error.start]:02X})",
                          Loc(line, column, str(path))) from None
    return parse_program(text, str(path))


# -- printer ----------------------------------------------------------------------------------
def _attributes(attrs: dict) -> str:
    if not attrs:
        return ""
    parts = []
    for key, value in attrs.items():
        if isinstance(value, str):
            parts.append(f"{key} = {_quote(value)}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{key} = {format_number(value)}")
        else:
            parts.append(f"{key} = {_quote(json.dumps(value))}")
    return " attributes {" + ", ".join(parts) + "}"


def _use(use: Use) -> str:
    if use.is_whole:
        return f"%{use.value.name}"
    return f"%{use.value.name}[{use.offset} for {use.length}]"


def format_op(op: Op) -> str:
    lhs = ", ".join(f"%{v.name}" for v in op.results)
    prefix = f"{lhs} = " if lhs else ""
    if op.kind == "splat":
        body = f"splat {op.pattern} -> {op.results[0].type}"
    elif op.kind == "fill":
        body = f"fill {op.pattern} -> {_use(op.operands[0])}"
    elif op.kind == "copy":
        body = f"copy {_use(op.operands[0])} -> {_use(op.operands[1])}"
    elif op.kind == "dispatch":
        callee = "::".join("@" + part for part in op.callee)
        body = f"dispatch {callee}({', '.join(_use(u) for u in op.operands)})"
        outs = [f"%{op.operands[tie].value.name}" if tie is not None else str(result.type)
                for result, tie in zip(op.results, op.ties)]
        if len(outs) == 1:
            body += f" -> {outs[0]}"
        elif outs:
            body += f" -> ({', '.join(outs)})"
    elif op.kind == "param.load":
        body = (f"param.load {_quote(op.scope)}::{_quote(op.keys[0])} "
                f"-> {op.results[0].type}")
    elif op.kind == "param.gather":
        entries = ", ".join(f"{_quote(key)} -> {_use(use)}"
                            for key, use in zip(op.keys, op.operands))
        body = f"param.gather {_quote(op.scope)} {{{entries}}}"
    else:  # pragma: no cover - the builder makes no other kinds
        raise StreamError(f"unknown op kind {op.kind}")
    return prefix + body


def format_func(func: Func, indent: str = "  ") -> str:
    args = ", ".join(f"%{a.name}: {a.type}" for a in func.args)
    head = f"func @{func.name}({args})"
    if func.result_types:
        head += " -> (" + ", ".join(str(t) for t in func.result_types) + ")"
    head += _attributes(func.attributes) + " {"
    lines = [indent + head]
    for op in func.ops:
        lines.append(indent * 2 + format_op(op))
    ret = "return"
    if func.returns:
        ret += " " + ", ".join(f"%{v.name}" for v in func.returns)
    lines.append(indent * 2 + ret)
    lines.append(indent + "}")
    return "\n".join(lines)


def format_program(program: Program) -> str:
    lines = [f"program @{program.name}{_attributes(program.attributes)} {{"]
    for number, func in enumerate(program.funcs):
        if number:
            lines.append("")
        lines.append(format_func(func))
    lines.append("}")
    return "\n".join(lines) + "\n"
