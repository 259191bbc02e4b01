"""Every instruction is one row: vmrt/isa/ops.py (meaning, flags, syntax) joined with
upstream's isa.json (encoding) into vmrt/isa/table.py, and nothing outside vmrt/isa
names an instruction."""

from __future__ import annotations

import re

import ast
import io
import os
import string
import tokenize
from pathlib import Path

import pytest

from vmrt.asm.syntax import check_table
from vmrt.isa import INSTRUCTIONS
from vmrt.isa import generate
from vmrt.isa.operands import OperandKind
from vmrt.isa.ops import FORMULA_KINDS, KIND_FLAGS, OPS, SYNTAX_BY_CLASS
from vmrt.vm import codegen

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "vmrt" / "isa" / "table.py"
# The Makefile's default (upstream's isa.json is not kept in this repo).
ISA_JSON = Path(os.environ.get("ISA_JSON", ROOT.parent / "shared" / "reference" / "isa.json"))
OPS_ROWS = [i for i in INSTRUCTIONS if i.kind == "op"]


def test_every_instruction_has_one_op_row_and_every_row_an_instruction():
    assert [i.symbol for i in INSTRUCTIONS] == list(OPS)


@pytest.mark.parametrize("inst", INSTRUCTIONS, ids=lambda i: i.symbol)
def test_every_row_has_exactly_one_semantics(inst):
    assert inst.handler in KIND_FLAGS
    assert bool(inst.py) == (inst.handler in FORMULA_KINDS)  # a formula, or a handler kind
    if inst.c:  # the C tier's formula (vmrt/vm/ctier): over the same operands, and {pc}
        assert inst.handler in FORMULA_KINDS
        used = set(re.findall(r"\{(\w+)\}", inst.c))
        assert used <= {o.name for o in inst.operands} | {"pc"}, used
    if inst.kind != "op":
        assert inst.handler == inst.kind
        return
    # ... that the code generator can emit: terminators end blocks, the rest do not.
    emitters = codegen._TERMINATORS if inst.is_terminator else codegen._EMITTERS
    assert inst.handler in emitters
    if inst.py:
        names = {o.name for o in inst.operands}
        lists = {o.name for o in inst.operands if o.kind in (
            OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS)}
        allowed = names | {n + "_tuple" for n in lists} | ({"count"} if lists else set())
        for line in inst.py.split("\n"):
            fields = {f for _, f, _, _ in string.Formatter().parse(line) if f}
            assert fields <= allowed, (inst.symbol, fields - allowed)


@pytest.mark.parametrize("inst", OPS_ROWS, ids=lambda i: i.symbol)
def test_every_row_has_exactly_one_syntax(inst):
    own = OPS[inst.symbol].syntax
    by_class = SYNTAX_BY_CLASS.get(generate.encoding_class(inst.encoding))
    assert not (own and by_class), "both its own syntax and its encoding class's"
    assert inst.syntax == (own or by_class or (
        generate.generic_template(inst.symbol, inst.operands),))


def test_every_syntax_compiles_and_covers_its_operands():
    check_table()


def test_flags_agree_with_the_encoding():
    for inst in INSTRUCTIONS:
        leaves = inst.handler in ("return", "fail") or any(
            o.kind is OperandKind.BRANCH_TARGET for o in inst.operands)
        assert inst.is_terminator == leaves, inst.symbol
        assert inst.is_call == (inst.handler in ("call", "call_yieldable")), inst.symbol
        if inst.is_branch:
            assert inst.is_terminator, inst.symbol


@pytest.mark.skipif(not ISA_JSON.exists(), reason=f"no isa.json at {ISA_JSON}")
def test_generated_table_is_up_to_date():
    import json
    assert generate.generate(json.loads(ISA_JSON.read_text())) == TABLE.read_text(), \
        "vmrt/isa/table.py is stale: run `make isa`"


def _named_instructions(path: Path, symbols: set[str]) -> list[str]:
    """Code in `path` that names an instruction: a string literal that is a symbol,
    or an identifier that is one or a method `op_Symbol` selected by name (not the
    node classes of Python's `ast`, which vmrt.script compiles from)."""
    found = []
    text = path.read_text()
    # (a compiler of Python source names ast node classes, some alike instructions')
    python_syntax = "import ast" in text
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    before: list = [None, None]  # the two tokens before this one
    for token in tokens:
        after_ast = [t.string if t else None for t in before] == ["ast", "."]
        before = [before[1], token]
        if after_ast:  # Python's own syntax tree (ast.Call, ast.Return): not an instruction
            continue
        if token.type == tokenize.STRING:
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError):  # f-strings
                continue
            if value in symbols and not (python_syntax and hasattr(ast, str(value))):
                found.append(f"{path}:{token.start[0]}: {token.string}")
        elif token.type == tokenize.NAME:
            name = token.string
            if name in symbols or (name.startswith("op_") and name[3:] in symbols):
                found.append(f"{path}:{token.start[0]}: {token.string}")
    return found


def test_no_instruction_is_named_outside_vmrt_isa():
    symbols = {i.symbol for i in INSTRUCTIONS}
    found = []
    for path in sorted((ROOT / "vmrt").rglob("*.py")):
        if "isa" not in path.relative_to(ROOT / "vmrt").parts[:1]:
            found += _named_instructions(path, symbols)
    assert not found, "\n".join(found)
