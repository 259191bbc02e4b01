"""`vmrt run --trace_execution` and `--profile`.

The trace format is upstream's (iree_vm_bytecode_trace_disassembly). The
installed iree-run-module is built without execution tracing, so the text is
checked three ways: against lines written out from upstream's format rules,
against iree-dump-module's disassembly once the values are taken out, and
against iree-run-module's own trace when the reference does print one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.tools.cli import main

TRACED = Path(__file__).parents[1] / "vm" / "vmasm" / "traced.vmasm"
TOOLS = ("iree-as-module", "iree-dump-module", "iree-run-module")


@pytest.fixture(scope="module")
def module_path(tmp_path_factory):
    if not all(shutil.which(t) for t in TOOLS):
        pytest.skip("needs the IREE tools (pip install iree-base-compiler iree-base-runtime)")
    path = tmp_path_factory.mktemp("trace") / "traced.vmfb"
    subprocess.run(["iree-as-module", f"--output={path}", str(TRACED)], check=True)
    return path


def run(capsys, *argv):
    code = main(["run", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_trace_lines_follow_the_upstream_format(capsys, module_path):
    # (labels name the function by its export, then the debug database, then the ordinal:
    # square is not exported and the module has no debug database)
    code, out, err = run(capsys, f"--module={module_path}", "--function=sum", "--input=2",
                         "--trace_execution")
    assert code == 0 and out == "EXEC @sum\nresult[0]: i32=9\n"
    lines = err.splitlines()
    assert lines[:6] == [
        "[traced.sum+00000000]    <block>",
        "[traced.sum+00000001]    %i1 = vm.const.i32 0  // 0x00000000",
        "[traced.sum+00000008]    %i2 = vm.const.i32 1  // 0x00000001",
        "[traced.sum+0000000F]    %i5 = vm.const.i32 0  // 0x00000000",
        "[traced.sum+00000016]    vm.br ^0000001E()",
        "[traced.sum+0000001E]    <block>",
    ]
    assert "[traced.sum+0000001F]    %i3 = vm.add.i32 %i1(2), %i0(1)" in lines
    assert "[traced.sum+00000039]    vm.cond_br %i4(0), ^0000001E(), ^00000048()" in lines
    assert lines[-10:] == [
        "[traced.sum+00000048]    <block>",
        "[traced.sum+00000049]    %i5 = vm.call @traced:1(%i1(3))",
        "[traced@1+00000000]    <block>",
        "[traced@1+00000001]    %i2 = vm.global.load.i32 .rwdata[0](0)",
        "[traced@1+00000008]    %i3 = vm.const.i32 1  // 0x00000001",
        "[traced@1+0000000F]    %i2 = vm.add.i32 %i2(0), %i3(1)",
        "[traced@1+00000016]    vm.global.store.i32 %i2(1), .rwdata[0]",
        "[traced@1+0000001D]    %i1 = vm.mul.i32 %i0(3), %i0(3)",
        "[traced@1+00000024]    vm.return %i1(9)",
        "[traced.sum+00000056]    vm.return %i5(9)",
    ]
    assert len(lines) == 5 + 6 * 2 + 3 + 7


def test_trace_values_of_wide_and_float_registers(capsys, module_path):
    code, out, err = run(capsys, f"--module={module_path}", "--function=mixed", "--input=5",
                         "--input=-7", "--input=1.5", "--trace_execution=true")
    assert code == 0
    assert err.splitlines() == [
        "[traced.mixed+00000000]    <block>",
        "[traced.mixed+00000001]    %i6:7 = vm.add.i64 %i0:1(5), %i2:3(-7)",
        "[traced.mixed+00000008]    %i8 = vm.const.f32 2.5",
        "[traced.mixed+00000010]    %i9 = vm.mul.f32 %i4(1.5), %i8(2.5)",
        "[traced.mixed+00000018]    %i10 = vm.import.resolved @absent.fn // (unresolved)",
        # return lists print each register's low 32 bits unsigned: -2 and 3.75f's bits
        "[traced.mixed+0000001F]    vm.return %i6(4294967294), %i9(1081081856), %i10(0)",
    ]


def _dump(module_path) -> dict[tuple[int, int], str]:
    """(function ordinal, pc) -> iree-dump-module's text of the op there."""
    text = subprocess.run(["iree-dump-module", "--output=disassembly", "--bytecode_offsets",
                           str(module_path)], check=True, capture_output=True,
                          text=True).stdout
    ops, ordinal = {}, -1
    for line in text.splitlines():
        if line.startswith("vm.func "):
            ordinal += 1
        match = re.match(r"\[([0-9A-F]{8})\]\s*(.*)", line)
        if match:
            ops[(ordinal, int(match.group(1), 16))] = match.group(2)
    return ops


def _without_values(text: str, blocks: dict[int, str]) -> str:
    text = re.sub(r"(%[iIrR]\d+(?::\d+)?|\])\([^()]*\)", r"\1", text)
    text = text.replace(" // (resolved)", "").replace(" // (unresolved)", "")
    return re.sub(r"\^([0-9A-F]{8})", lambda m: blocks[int(m.group(1), 16)], text)


@pytest.mark.parametrize("function,inputs", [("sum", ["3"]), ("mixed", ["1", "2", "-0.5"]),
                                             ("check", ["0"]), ("check", ["5"])])
def test_trace_is_the_dump_disassembly_plus_values(capsys, module_path, function, inputs):
    code, _, err = run(capsys, f"--module={module_path}", f"--function={function}",
                       *[f"--input={v}" for v in inputs], "--trace_execution")
    dump = _dump(module_path)
    block_names = {}
    for (ordinal, pc), text in dump.items():
        if text.endswith(":") and text.startswith("^bb"):
            block_names[(ordinal, pc)] = text[:-1]
    ordinals = {"sum": 0, "square": 1, "mixed": 2, "check": 3}  # (traced.vmasm's order)
    traced = [line for line in err.splitlines() if line.startswith("[traced")]
    assert traced, err
    for line in traced:
        match = re.match(r"\[traced[.@](\w+)\+([0-9A-F]{8})\]    (.*)", line)
        label, pc, text = match.group(1), int(match.group(2), 16), match.group(3)
        ordinal = int(label) if label.isdigit() else ordinals[label]
        blocks = {p: name for (o, p), name in block_names.items() if o == ordinal}
        if text == "<block>":
            assert dump[(ordinal, pc)] == blocks[pc] + ":"
        else:
            assert _without_values(text, blocks) == dump[(ordinal, pc)]
    if inputs == ["0"]:
        assert code == 1 and traced[-1].endswith('vm.fail %i1(9), "n must not be zero"')


def test_reference_trace_matches_when_the_reference_traces(capsys, module_path):
    reference = subprocess.run(["iree-run-module", f"--module={module_path}", "--function=sum",
                                "--input=3", "--trace_execution=true"],
                               capture_output=True, text=True)
    expected = [line for line in reference.stderr.splitlines() if line.startswith("[")]
    if not expected:
        pytest.skip("this iree-run-module is built without execution tracing (release builds "
                    "compile IREE_VM_EXECUTION_TRACING_ENABLE out)")
    _, _, err = run(capsys, f"--module={module_path}", "--function=sum", "--input=3",
                    "--trace_execution")
    # (labels aside: upstream names a function by the debug database only, vmrt by its
    # export first, so `traced@0` here is `traced.sum`)
    unlabelled = [re.sub(r"^\[[^+]*\+", "[", line) for line in expected]
    assert [re.sub(r"^\[[^+]*\+", "[", line) for line in err.splitlines()] == unlabelled


def test_no_trace_without_the_flag(capsys, module_path):
    code, out, err = run(capsys, f"--module={module_path}", "--function=sum", "--input=3")
    assert code == 0 and err == "" and out == "EXEC @sum\nresult[0]: i32=36\n"
    code, _, err = run(capsys, f"--module={module_path}", "--function=sum", "--input=3",
                       "--trace_execution=false")
    assert code == 0 and err == ""


def test_profile_table(capsys, module_path):
    code, out, err = run(capsys, f"--module={module_path}", "--function=sum", "--input=4",
                         "--profile")
    assert code == 0 and out == "EXEC @sum\nresult[0]: i32=100\n"
    rows = [line.split() for line in err.splitlines()]
    assert rows[0][:3] == ["function", "calls", "instructions"]
    assert rows[1][:3] == ["traced.sum", "1", str(5 * 4 + 6)]
    assert rows[2][:3] == ["traced.function#1", "1", "6"]
    assert rows[3] == ["(all)", "2", str(5 * 4 + 6 + 6)]


def test_bad_flag_value(capsys, module_path):
    code, _, err = run(capsys, f"--module={module_path}", "--function=sum", "--input=4",
                       "--profile=maybe")
    assert code != 0 and "invalid boolean flag value 'maybe'" in err


@pytest.mark.parametrize("function, inputs", [("gcd", ["12", "8"]), ("collatz", ["6"]),
                                              ("newton_sqrt", ["2.0"])])
def test_trace_labels_name_the_running_function(function, inputs):
    # (examples/scalar.vmfb's debug database holds one name, `demo`, at index 0: labels
    # taken from it alone said `module.demo` for gcd and `module@1` for collatz)
    scalar = Path(__file__).parents[2] / "examples" / "scalar.vmfb"
    result = subprocess.run(
        [sys.executable, "-m", "vmrt", "run", f"--module={scalar}", f"--function={function}",
         *[f"--input={value}" for value in inputs], "--trace_execution"],
        capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr
    labels = {line.split("+")[0] for line in result.stderr.splitlines()}
    assert labels == {f"[module.{function}"}
