"""VM stack traces of iree-compile'd modules name the MLIR file:line:col of the
failing op (from the module's debug database, which iree-compile keeps by default).

iree-compile 3.13.0 writes every function's source map at index 0 of the
database, so the last function compiled keeps the only map: frames of other
functions must show no location rather than borrow that one.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import vmrt
from vmrt.tools.cli import main

CHECKED = """\
// outer(a, b) = a / (b + 1), checked: the assert fails when b is -1.
func.func @outer(%a: i32, %b: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %d = arith.addi %b, %one : i32
  %ok = arith.cmpi ne, %d, %zero : i32
  cf.assert %ok, "divisor must not be zero"
  %q = arith.divsi %a, %d : i32
  return %q : i32
}
"""

NESTED = """\
// outer -> middle -> checked_div, none inlined: a three-frame VM stack.
util.func private @checked_div(%a: i32, %b: i32) -> i32 attributes {inlining_policy = #util.inline.never} {
  %zero = arith.constant 0 : i32
  %ok = arith.cmpi ne, %b, %zero : i32
  cf.assert %ok, "divisor must not be zero"
  %q = arith.divsi %a, %b : i32
  util.return %q : i32
}

util.func private @middle(%a: i32, %b: i32) -> i32 attributes {inlining_policy = #util.inline.never} {
  %one = arith.constant 1 : i32
  %c = arith.addi %b, %one : i32
  %q = util.call @checked_div(%a, %c) : (i32, i32) -> i32
  util.return %q : i32
}

util.func public @outer(%a: i32, %b: i32) -> i32 {
  %q = util.call @middle(%a, %b) : (i32, i32) -> i32
  %r = arith.addi %q, %a : i32
  util.return %r : i32
}
"""


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    if not shutil.which("iree-compile"):
        pytest.skip("needs iree-compile (pip install iree-base-compiler)")
    directory = tmp_path_factory.mktemp("locations")
    paths = {}
    for name, source in (("checked", CHECKED), ("nested", NESTED)):
        mlir = directory / f"{name}.mlir"
        mlir.write_text(source)
        paths[name] = directory / f"{name}.vmfb"
        subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                        "--iree-hal-local-target-device-backends=vmvx", str(mlir), "-o",
                        str(paths[name])], check=True, timeout=300)
    return paths


def test_failing_op_shows_its_mlir_line(compiled):
    line = _line_of(CHECKED, "cf.assert")
    with vmrt.load(compiled["checked"]) as m:
        assert m.outer(7, 1) == 3
        with pytest.raises(vmrt.VMError) as info:
            m.outer(7, -1)
    error = info.value
    assert error.code == vmrt.StatusCode.FAILED_PRECONDITION
    assert len(error.stack) == 1
    assert re.fullmatch(rf"module\.outer\+[0-9A-F]{{8}} \(\S*checked\.mlir:{line}:3\)",
                        error.stack[0]), error.stack
    assert f"checked.mlir:{line}:3" in str(error)


def test_vmrt_run_prints_the_location(compiled, capsys):
    code = main(["run", f"--module={compiled['checked']}", "--function=outer", "--input=7",
                 "--input=-1"])
    err = capsys.readouterr().err
    assert code != 0
    assert f"checked.mlir:{_line_of(CHECKED, 'cf.assert')}:3)" in err


def test_frames_without_a_source_map_do_not_borrow_one(compiled):
    call_line = _line_of(NESTED, "util.call @middle")
    with vmrt.load(compiled["nested"]) as m:
        assert m.outer(6, 1) == 9
        with pytest.raises(vmrt.VMError) as info:
            m.outer(6, -1)
    stack = info.value.stack
    assert len(stack) == 3
    # the two internal functions have no map (and no name): no location, not outer's
    assert all(re.fullmatch(r"module\.function#\d\+[0-9A-F]{8}", frame) for frame in stack[:2])
    assert re.fullmatch(rf"module\.outer\+[0-9A-F]{{8}} \(\S*nested\.mlir:{call_line}:8\)",
                        stack[2]), stack


def test_debugger_stop_has_the_location(compiled):
    from vmrt.debug import Debugger
    with vmrt.load(compiled["checked"], instrumented=True) as m:
        debugger = Debugger(m.context)
        debugger.break_at("module.outer")
        with debugger.start("module.outer", 7, -1) as session:
            stop = session.wait()
            while stop is not None and stop.instruction != "vm.fail":
                stop = session.step()
            assert stop is not None
            line = _line_of(CHECKED, "cf.assert")
            assert stop.location.endswith(f"checked.mlir:{line}:3")
            assert stop.backtrace()[0].endswith(f"checked.mlir:{line}:3)")
            assert session.cont() is None
        assert session.error.code == vmrt.StatusCode.FAILED_PRECONDITION
