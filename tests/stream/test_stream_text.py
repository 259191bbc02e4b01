"""The stream text form: parsing, printing, and errors at file:line:col."""

import pytest

from vmrt.errors import StatusCode, VmrtError
from vmrt.stream import (Lifetime, ProgramBuilder, StreamError, format_program,
                         parse_program)

DEMO = """\
// comment line
program @demo attributes {partitioning = "min-peak-memory", note = 3} {
  func @step(%x: external<4096>, %w: constant<1024>) -> (external<4096>)
      attributes {partitioning = "max-concurrency"} {
    %t = splat 0.0 : f32 -> transient<4096>   // trailing comment
    %t1 = fill 1.0 : f32 -> %t[0 for 1024]
    %p = param.load "model"::"layer.0" -> parameter<256>
    %p1 = param.gather "model" {"a" -> %p[0 for 128], "b\\"q" -> %p[128 for 128]}
    %y = dispatch @ex::@kernel(%x, %w[0 for 512], %t1, %p1) -> external<4096>
    %y1, %t2 = dispatch @ex::@other(%y, %t1) -> (%y, %t1)
    %c = copy %t2[0 for 64] -> %y1[64 for 64]
    dispatch @ex::@sink(%t2)
    return %c
  }

  func @empty() {
    return
  }
}
"""


def test_parse_demo():
    program = parse_program(DEMO, "demo.stream")
    assert program.name == "demo"
    assert program.attributes == {"partitioning": "min-peak-memory", "note": 3}
    step = program.func("step")
    assert step.attributes == {"partitioning": "max-concurrency"}
    assert [a.name for a in step.args] == ["x", "w"]
    assert step.args[1].type.lifetime is Lifetime.CONSTANT
    assert [op.kind for op in step.ops] == ["splat", "fill", "param.load", "param.gather",
                                            "dispatch", "dispatch", "copy", "dispatch"]
    fill = step.ops[1]
    assert fill.ties == [0] and (fill.operands[0].offset, fill.operands[0].length) == (0, 1024)
    gather = step.ops[3]
    assert gather.keys == ["a", 'b"q'] and gather.scope == "model"
    other = step.ops[5]
    assert other.ties == [0, 1]
    assert other.callee == ("ex", "other")
    assert step.ops[7].results == []
    assert step.returns[0].name == "c"
    assert step.ops[0].loc.line == 5 and step.ops[0].loc.col == 10
    assert program.func("empty").ops == []


def test_round_trip_is_canonical():
    program = parse_program(DEMO)
    text = format_program(program)
    again = format_program(parse_program(text))
    assert again == text
    assert "%t1 = fill 1.0 : f32 -> %t[0 for 1024]" in text
    # a whole-resource range prints without brackets
    assert "%y = dispatch @ex::@kernel(%x, %w[0 for 512], %t1, %p1) -> external<4096>" in text


def test_numbers_round_trip():
    pb = ProgramBuilder("n")
    f = pb.func("f")
    f.splat((1e-30, "f64"), "transient", 64)
    f.splat((-7, "i8"), "transient", 64)
    f.splat((255, "i8"), "transient", 64)
    f.splat((0.5, "bf16"), "transient", 64)
    f.ret()
    text = format_program(pb.build())
    assert format_program(parse_program(text)) == text
    assert "1e-30 : f64" in text and "-7 : i8" in text
    program = parse_program("program @p { func @f() { %a = splat 0x3F800000 : i32 -> "
                            "external<8>\nreturn } }")
    assert program.funcs[0].ops[0].pattern.value == 0x3F800000


BAD = [
    # (text, line, col, fragment of the message)
    ("program @p { func @f() { %a = splat 1 : i32 -> transient<4> } }", 1, 61,
     "a function ends with 'return'"),
    ("program @p {\n  func @f() {\n    %a = splat 1 : i32 -> transient<4> $\n", 3, 40,
     "unexpected character '$'"),
    ('program @p { func @f() { %a = param.load "x -> constant<4>\n', 1, 42,
     "unterminated string"),
    ("program @p { func @f() {\n  %a = dispatch @k(%nope) -> external<4>\n  return } }", 2, 20,
     "use of undefined value %nope"),
    ("program @p { func @f(%x: external<8>) {\n  %a = fill 0 : i32 -> %x\n"
     "  %b = dispatch @k(%x) -> external<4>\n  return } }", 3, 20,
     "%x is used after it was updated in place by fill at bad.stream:2:8"),
    ("program @p { func @f(%x: external<8>) {\n  %a = fill 0 : i32 -> %x[4 for 8]\n"
     "  return } }", 2, 24, "range [4 for 8] is outside %x (8 bytes)"),
    ("program @p { func @f(%x: constant<8>) {\n  %a = fill 0 : i32 -> %x\n  return } }",
     2, 24, "%x is constant and cannot be updated in place"),
    ("program @p { func @f(%x: external<8>) {\n  %a = dispatch @k(%x) -> %y\n  return } }",
     2, 27, "use of undefined value %y"),
    ("program @p { func @f(%x: external<8>, %y: external<8>) {\n"
     "  %a = dispatch @k(%x) -> %y\n  return } }", 2, 27,
     "result tied to %y, which is not an operand"),
    ("program @p { func @f(%x: external<8>) {\n  %a = dispatch @k(%x, %x) -> %x\n"
     "  return } }", 2, 31, "ambiguous"),
    ("program @p { func @f() -> (external<8>) {\n  %a = splat 0 : i8 -> transient<8>\n"
     "  return %a } }", 3, 10, "%a is transient and cannot escape @f"),
    ("program @p { func @f() -> (external<8>) {\n  %a = splat 0 : i8 -> external<16>\n"
     "  return %a } }", 3, 10, "%a is external<16> but @f declares external<8>"),
    ("program @p { func @f() -> (external<8>) {\n  return } }", 2, 3,
     "returns 0 value(s) but its signature declares 1"),
    ('program @p attributes {partitioning = "fast"} { }', 1, 39,
     "unknown partitioning favor 'fast'"),
    ("program @p { func @f() {\n  %a = splat 0 : i8 -> transient<8>\n"
     "  %a = splat 0 : i8 -> transient<8>\n  return } }", 3, 8, "value %a is defined twice"),
    ("program @p { func @f() {\n  %a = splat 0 : i32 -> transient<6>\n  return } }", 2, 8,
     "not a whole number of i32 elements"),
    ("program @p { func @f() {\n  %a = splat 300 : i8 -> transient<8>\n  return } }", 2, 14,
     "300 does not fit in i8"),
    ("program @p { func @f() {\n  %a = splat 0 : u8 -> transient<8>\n  return } }", 2, 14,
     "unknown element type 'u8'"),
    ("program @p { func @f() {\n  %a = splat 0 : i8 -> transient<0>\n  return } }", 2, 24,
     "resource size must be positive"),
    ("program @p { func @f() {\n  %a = splat 0 : i8 -> heap<8>\n  return } }", 2, 24,
     "expected a resource type"),
    ("program @p { func @f(%x: transient<8>) { return } }", 1, 22,
     "argument %x cannot be transient"),
    ("program @p { func @f() { return } func @f() { return } }", 1, 35,
     "function @f is defined twice"),
    ("program @p { func @f(%x: external<8>, %y: external<4>) {\n"
     "  %a = copy %x -> %y\n  return } }", 2, 19, "copy of 8 bytes into a range of 4 bytes"),
    ("program @p { func @f(%x: external<8>, %y: external<8>) {\n"
     '  %a = param.gather "s" {"k" -> %x[0 for 4], "j" -> %y[0 for 4]}\n  return } }', 2, 53,
     "one gather has one target"),
    ("program @p { func @f(%x: external<8>) {\n"
     '  %a = param.gather "s" {"k" -> %x[0 for 6], "j" -> %x[4 for 4]}\n  return } }', 2, 53,
     "entries overlap"),
    ("program @p { func @f(%x: external<8>) {\n  %a, %b = fill 0 : i8 -> %x\n  return } }",
     2, 12, "fill has one result; 2 name(s) given"),
    ("program @p { func @f(%x: external<8>) {\n  %a, %b = dispatch @k(%x) -> %x\n"
     "  return } }", 2, 3, "dispatch has 1 result(s); 2 name(s) given"),
    ("program @p { func @f() {\n  %a = frobnicate\n  return } }", 2, 8, "expected an op"),
    ("program @p { func @f() { return } } trailing", 1, 37, "expected end of input"),
    ("func @f() { return }", 1, 1, "expected 'program'"),
    ("program @p { func @f() { return }", 1, 34, "expected 'func' or '}'"),
    ('program @p attributes {a = 1, a = 2} { }', 1, 31, "attribute 'a' given twice"),
    ("program @p { func @f() {\n  %a = splat 1.0 : f32 -> transient<4>\n"
     "  %b = fill 0 : i8 -> %a[0 for 0]\n  return } }", 3, 23, "empty range of %a"),
]


@pytest.mark.parametrize("text,line,col,fragment", BAD)
def test_errors_carry_line_and_column(text, line, col, fragment):
    with pytest.raises(StreamError) as info:
        parse_program(text, "bad.stream")
    error = info.value
    assert isinstance(error, VmrtError)
    assert error.code is StatusCode.INVALID_ARGUMENT
    assert fragment in error.bare_message, error.one_line()
    assert (error.loc.line, error.loc.col) == (line, col), error.one_line()
    assert error.loc.file == "bad.stream"
    assert f"bad.stream:{line}:{col}: " in error.one_line()
