"""`vmrt script compile`, and the narrow widths (i32, f32) a host may ask for."""

from __future__ import annotations

import struct

import vmrt
import vmrt.script
from vmrt.tools.cli import main


def as_f32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]

WIDTHS = """
from vmrt.script import i32, f32

def narrow(a: i32, b: f32) -> tuple[i32, f32]:
    return a + 1, b * 2.0

def wide(a: int) -> tuple[int, float]:
    return narrow(a, 0.5)

def first(a: int) -> int:
    return narrow(a, 0.5)[0] + int(narrow(a, 0.5)[-1])
"""


def test_narrow_parameters_and_results_wrap_and_round(tier):
    module = vmrt.load(vmrt.script.compile(WIDTHS), tier=tier)
    assert "0if_if" in repr(module.narrow)
    assert module.narrow(2**31 - 1, 1.1) == (-2**31, as_f32(as_f32(1.1) * 2.0))
    assert module.narrow(-5, 0.25) == (-4, 0.5)
    assert module.wide(2**32 + 7) == (8, 1.0)  # the argument narrowed to i32 on the way
    assert module.first(4) == 6


def test_cli_compiles_a_script(tmp_path, capsys):
    script = tmp_path / "fib.py"
    script.write_text("def fib(n: int) -> int:\n    return n if n < 2 else "
                      "fib(n - 1) + fib(n - 2)\n")
    assert main(["script", "compile", str(script), "-o", str(tmp_path / "out.vmfb")]) == 0
    module = vmrt.load(str(tmp_path / "out.vmfb"))
    assert module.fib(15) == 610
    assert module.fib.__repr__().startswith("<vmrt function fib.fib(")


def test_cli_reports_a_refused_construct_in_one_line(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text("def f() -> int:\n    return len('text')\n")
    assert main(["script", "compile", str(script)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{script}:2:16: strings are not supported" in err
    assert not (tmp_path / "bad.vmfb").exists()
