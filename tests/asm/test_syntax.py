"""The syntax table covers the ISA table, and the lexer reads lines and
numbers as iree-as-module does."""

from __future__ import annotations

import math

import pytest

from vmrt.asm import lexer
from vmrt.asm.syntax import check_table, templates
from vmrt.isa import BY_SYMBOL, INSTRUCTIONS
from vmrt.isa.generate import encoding_class, generic_template
from vmrt.isa.ops import OPS, SYNTAX_BY_CLASS


def test_every_instruction_has_a_complete_syntax():
    check_table()  # raises when a template names a missing operand or leaves one out
    ops = [i for i in INSTRUCTIONS if i.kind == "op"]
    assert len(ops) == 262
    for inst in ops:
        assert templates(inst), inst.symbol


def test_every_table_entry_is_used():
    classes = {encoding_class(i.encoding) for i in INSTRUCTIONS}
    assert set(SYNTAX_BY_CLASS) <= classes
    assert all(OPS[i.symbol].syntax or i.syntax == SYNTAX_BY_CLASS.get(
        encoding_class(i.encoding), i.syntax) for i in INSTRUCTIONS)


@pytest.mark.parametrize("symbol,text", [
    ("AddI32", "$result = $op $left, $right"),
    ("CmpNZRef", "$result = $op $operand"),
    ("ListSetRef", "$op $list, $index, $value"),
    ("DiscardRefs", "$op $refs"),
    ("ImportResolved", "$result = $op $import_ordinal"),
])
def test_generic_templates(symbol, text):
    assert generic_template(symbol, BY_SYMBOL[symbol].operands) == text


def test_printer_and_parser_spellings_are_both_read():
    spellings = {t.text for t in templates(BY_SYMBOL["Trace"])}
    assert spellings == {"$op $event_name($operands)", "$op $event_name{?, $operands?}"}
    spellings = [t.text for t in templates(BY_SYMBOL["GlobalStoreIndirectI32"])]
    assert spellings[0] == "$op $value, .rwdata[$byte_offset]"  # what is printed


@pytest.mark.parametrize("raw,content,offset", [
    ("  %i0 = vm.const.i32 1  // 0x00000001", "%i0 = vm.const.i32 1", 2),
    ("[0000002A]  vm.return   # done", "vm.return", 12),
    ('  vm.fail %i0, "a // b # c"  // tail', 'vm.fail %i0, "a // b # c"', 2),
    ("// only a comment", "", 0),
])
def test_strip_line(raw, content, offset):
    assert lexer.strip_line(raw) == (content, offset)


@pytest.mark.parametrize("text,value", [
    ("0", 0), ("42", 42), ("-7", -7), ("+3", 3), ("0x10", 16), ("0XfF", 255), ("010", 8),
    ("4294967295", -1), ("-2147483648", -2147483648), ("2147483648", -2147483648),
    ("1.5", None), ("abc", None), ("0x", None), ("9" * 30, None),
])
def test_int32_like_strtol(text, value):
    assert lexer.parse_int32(text) == value


@pytest.mark.parametrize("text,value", [
    ("1.5", 1.5), ("-0x1.8p1", -3.0), ("inf", math.inf), ("-INF", -math.inf),
    ("1e-45", 1.401298464324817e-45), ("3.4028235e38", 3.4028234663852886e38),
    ("1e39", None), ("1e-50", None), ("1.5x", None), ("", None),
])
def test_f32_like_strtof(text, value):
    assert lexer.parse_f32(text) == value


def test_nan():
    assert math.isnan(lexer.parse_f64("nan"))
