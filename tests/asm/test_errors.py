"""Assembly errors: file:line:col, the source line and a caret, every error of
a run, exit code 1 and no traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from vmrt.asm import AssemblyError, assemble
from vmrt.errors import VmrtError

HEADER = "vm.module @m\n"


def _errors(body: str, header: str = HEADER) -> list[tuple[int, int, str]]:
    with pytest.raises(AssemblyError) as info:
        assemble(header + textwrap.dedent(body), "t.vmasm")
    return [(d.line, d.column, d.message) for d in info.value.diagnostics]


def _one(body: str, header: str = HEADER) -> tuple[int, int, str]:
    errors = _errors(body, header)
    assert len(errors) == 1, errors
    return errors[0]


def _func(*lines: str, signature: str = "(%i0: i32) -> (i32)") -> str:
    return "\n".join([f"vm.func @f{signature} {{", "^bb0:", *lines, "}"]) + "\n"


@pytest.mark.parametrize("line,column,fragment", [
    ("  %i1 = vm.addd.i32 %i0, %i0", 9, "unknown instruction 'vm.addd.i32'"),
    ("  %i1 = vm.add.i32 %i0", 23, "expected ','"),
    ("  %i1 = vm.add.i32 %i0, %i0, %i0", 28, "too many operands"),
    ("  %i1 = vm.add.i32 %i0, %r0", 25, "wrong register bank"),
    ("  %r1 = vm.add.i32 %i0, %i0", 3, "wrong register bank"),
    ("  %i2:3 = vm.add.i64 %i0, %i0", 22, "i64 register pair"),
    ("  %i2:4 = vm.add.i64 %i0:1, %i0:1", 3, "adjacent"),
    ("  %i3:4 = vm.add.i64 %i0:1, %i0:1", 3, "even register"),
    ("  %i1 = vm.add.i32 %i0:1, %i0", 20, "not the pair"),
    ("  %i40000 = vm.add.i32 %i0, %i0", 3, "beyond the i32 register file"),
    ("  %r20000 = vm.const.ref.zero", 3, "beyond the ref register file"),
    ("  %i1 = vm.const.i32 zero", 22, "expected an i32 constant"),
    ("  %i2:3 = vm.const.f64 1e999", 24, "expected an f64 constant"),
    ("  vm.add.i32 %i0, %i0", 3, "needs a result register"),
    ("  %i1 = vm.return %i0", 3, "has no result"),
    ("  %r0 = vm.buffer.clone %R1, %i0:1, %i0:1, %i0", 25, "does not allow a ref move"),
    ("  vm.br ^nowhere", 9, "undefined block label ^nowhere"),
    ("  %i1 = vm.call @missing(%i0)", 17, "unknown function @missing"),
    ("  %i1 = vm.call @m:9(%i0)", 17, "out of range"),
    ("  %i1 = vm.call @other:0(%i0)", 17, "@m:N"),
    ("  %r0 = vm.const.ref.rodata 3", 29, "undefined rodata segment 3"),
    ("  %i1 = vm.global.load.i32 @nope", 28, "unknown global @nope"),
    ("  %i1 = vm.global.load.i32 .refs[0]", 28, ".rwdata[N]"),
    ("  %i1 = vm.global.load.i32 .rwdata[2]", 28, "aligned"),
    ('  vm.fail %i0, "unterminated', 16, "expected a quoted string"),
    ("  vm.br_table %i0 { default: ^bb0(), 1: ^bb0() }", 38, "numbered 0, 1"),
])
def test_instruction_errors(line, column, fragment):
    body = _func(line, "  vm.return %i0")
    errors = _errors(body)
    assert errors[0][:2] == (3 + 1, column), errors
    assert fragment in errors[0][2], errors


@pytest.mark.parametrize("text,line,column,fragment", [
    ("vm.module @m\nvm.module @n\n", 2, 1, "module already declared"),
    ("vm.type i32\n", 1, 1, "vm.module"),
    (HEADER + "vm.type i32\nvm.type i32\n", 3, 9, "duplicate type i32"),
    (HEADER + 'vm.import @x.f cconv "0i_q"\n', 2, 23, "malformed cconv"),
    (HEADER + 'vm.import @x.f cconv "1i_i"\n', 2, 23, "malformed cconv"),
    (HEADER + 'vm.import @x.f cconv "0iCi_i"\n', 2, 23, "malformed cconv"),
    (HEADER + 'vm.import @x.f cconv 0i_i\n', 2, 22, "quoted string"),
    (HEADER + 'vm.import @x.f\n', 2, 15, "expected import cconv"),
    (HEADER + 'vm.import @x.f cconv "0i_i"\nvm.import @x.f cconv "0_i"\n', 3, 11,
     "duplicate import @x.f"),
    (HEADER + "vm.rodata[1] = 00\n", 2, 11, "ordinal order"),
    (HEADER + "vm.rodata[0] = 0G\n", 2, 17, "invalid rodata hex digit"),
    (HEADER + "vm.rodata[0] = 000\n", 2, 16, "even length"),
    (HEADER + "vm.global.i16 @g\n", 2, 1, "unknown global type"),
    (HEADER + "vm.global.i32 @g = 3 : i32\n", 2, 19, "non-zero"),
    (HEADER + "vm.global.i32 @g\nvm.global.i32 @g\n", 3, 15, "duplicate global @g"),
    (HEADER + "vm.export @f\nvm.export @f\n" + _func("  vm.return %i0"), 3, 11,
     "duplicate export @f"),
    (HEADER + "vm.export @g\n" + _func("  vm.return %i0"), 2, 11, "unknown function @g"),
    (HEADER + _func("  vm.return %i0") + _func("  vm.return %i0"), 6, 9,
     "duplicate function @f"),
    (HEADER + "vm.func @f(%i1: i32) -> () {\n^bb0:\n  vm.return\n}\n", 2, 12,
     "consecutive registers"),
    (HEADER + "vm.func @f(%i0: i8) -> () {\n^bb0:\n  vm.return\n}\n", 2, 17,
     "unsupported signature type 'i8'"),
    (HEADER + "vm.func @f() {\n^bb0:\n  vm.return\n}\n", 2, 14, "-> (RESULTS)"),
    (HEADER + "vm.func @f() -> () {\n^bb0:\n  vm.return\n", 2, 1, "not closed"),
    (HEADER + "vm.func @f() -> () {\n^bb0:\n  vm.return\n^bb1:\n}\n", 6, 1,
     "last block is empty"),
    (HEADER + "vm.func @f() -> () {\n^bb0:\n  %i0 = vm.const.i32 1\n^bb1:\n  vm.return\n}\n",
     5, 1, "does not end with a terminator"),
    (HEADER + "vm.func @f() -> () {\n^bb0:\n  vm.return\n  vm.return\n}\n", 5, 3,
     "after a terminator"),
    (HEADER + "vm.func @f() -> () {\n^bb0:\n  vm.br ^bb0\n^bb0:\n  vm.return\n}\n", 5, 1,
     "duplicate block label ^bb0"),
    (HEADER, 1, 1, "no functions"),
    (HEADER + "vm.func @a() -> () {\n^bb0:\n  vm.return\nvm.func @b() -> () {\n", 5, 1,
     "not closed with '}' before the next function"),
    (HEADER + "vm.fun @f() -> () {\n", 2, 1, "unexpected top-level directive 'vm.fun'"),
])
def test_module_errors(text, line, column, fragment):
    with pytest.raises(AssemblyError) as info:
        assemble(text, "t.vmasm")
    first = info.value.diagnostics[0]
    assert (first.line, first.column) == (line, column), info.value.format()
    assert fragment in first.message, info.value.format()


def test_every_error_is_reported_in_line_order():
    errors = _errors("""\
        vm.func @f(%i0: i32) -> (i32) {
        ^bb0:
          %i1 = vm.nope %i0
          %i1 = vm.add.i32 %i0, %r0
          vm.br ^bb9
        ^bb1:
          %i2 = vm.call @gone(%i1)
          vm.return %i2
        }
        vm.func @f() -> () {
        ^bb0:
          vm.return
        }
        """)
    assert [e[:2] for e in errors] == [(4, 9), (5, 25), (6, 9), (8, 17), (11, 9)]


def test_a_failed_line_does_not_cascade():
    # The failed vm.fail leaves the block's end unknown: no terminator error.
    errors = _errors(_func('  vm.fail %i0, "oops'))
    assert len(errors) == 1


def test_diagnostic_format():
    with pytest.raises(AssemblyError) as info:
        assemble(HEADER + _func("\t%i1 = vm.add.i32 %i0, %q7", "  vm.return %i1"), "dir/p.vmasm")
    error = info.value
    assert isinstance(error, VmrtError)
    assert error.format() == (
        "dir/p.vmasm:4:24: error: expected an i32 register (%iN) for operand 'right' but "
        "got '%q7'\n"
        "   %i1 = vm.add.i32 %i0, %q7\n"
        "                         ^")


def test_cli_reports_every_error_and_exits_1(tmp_path):
    source = tmp_path / "bad.vmasm"
    source.write_text(HEADER + _func("  %i1 = vm.nope", "  %i2 = vm.add.i32 %i0",
                                     "  vm.return %i0"))
    run = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "asm", str(source), "-o",
                          str(tmp_path / "bad.vmfb")], capture_output=True, text=True)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert lines[0] == f"{source}:4:9: error: unknown instruction 'vm.nope'"
    assert lines[1] == "    %i1 = vm.nope"
    assert lines[2] == "          ^"
    assert lines[3].startswith(f"{source}:5:23: error: expected ','")
    assert lines[-1] == "2 errors"
    assert not (tmp_path / "bad.vmfb").exists()


def test_cli_writes_the_module(tmp_path):
    source = tmp_path / "ok.vmasm"
    source.write_text(HEADER + "vm.export @f\n" + _func("  vm.return %i0"))
    run = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "asm", str(source)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    import vmrt
    module = vmrt.load_module(tmp_path / "ok.vmfb")
    with vmrt.Context(vmrt.Instance(), modules=[module]) as context:
        assert context.function("m.f")(41) == 41
