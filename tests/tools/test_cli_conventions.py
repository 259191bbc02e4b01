"""The `vmrt` command's conventions, as IREE's tools have them: --version and
`python -m vmrt`, exact flags only (no abbreviations), --flagfile, IREE's flag
spellings (iree-dump-module's --output, underscores), `--output=-` and vm.export
lines as upstream prints them, complete --help texts, progress bars only on a
terminal, and a start-up that imports only the chosen subcommand."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from vmrt.asm import assemble
from vmrt.tools import cli
from vmrt.tools.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCALAR = EXAMPLES / "scalar.vmfb"
MLP = EXAMPLES / "mlp.vmfb"
SCALAR_RUN = [f"--module={SCALAR}", "--function=demo", "--input=48", "--input=18",
              "--input=27", "--input=2.0"]
MLP_RUN = [f"--module={MLP}", "--function=predict", "--input=1x4xf32=1 0.5 -0.5 2"]

needs_run_module = pytest.mark.skipif(shutil.which("iree-run-module") is None,
                                      reason="iree-run-module is not installed")
needs_dump_module = pytest.mark.skipif(shutil.which("iree-dump-module") is None,
                                       reason="iree-dump-module is not installed")


def vmrt(capsys, *argv):
    """`vmrt ARGV` in-process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def vmrt_process(*argv, module="vmrt", env=None):
    return subprocess.run([sys.executable, "-m", module, *map(str, argv)], cwd=REPO,
                          capture_output=True, text=True, env=env)


def reference(tool, *argv):
    return subprocess.run([tool, *map(str, argv)], capture_output=True, text=True)


def assert_one_line_error(code, out, err, *fragments):
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("vmrt"), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# -- 1. --version and python -m vmrt ---------------------------------------------------------
def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"vmrt {metadata.version('vmrt')}\n"


def test_python_dash_m_vmrt_is_the_vmrt_command():
    ran = vmrt_process("run", *SCALAR_RUN)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == vmrt_process("run", *SCALAR_RUN, module="vmrt.tools.cli").stdout
    assert ran.stdout.startswith("EXEC @demo\nresult[0]: i32=6\n")
    version = vmrt_process("--version")
    assert version.returncode == 0 and version.stdout.startswith("vmrt ")


# -- 2. exact flags only -----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["run", f"--module={SCALAR}", "--func=demo"],  # was taken as --function
    ["run", f"--mod={SCALAR}", "--function=demo"],  # was "ambiguous option"
    ["dump", "--out=flatbuffer-json", str(SCALAR)],
    ["params", "dump", "--param=x.irpa"],
])
def test_abbreviated_flags_are_not_recognized(capsys, argv):
    code, out, err = vmrt(capsys, *argv)
    assert_one_line_error(code, out, err, "unrecognized arguments")
    assert "ambiguous" not in err


# -- 3. --flagfile ---------------------------------------------------------------------------
FLAGFILE_TEXT = """# scalar.vmfb's demo, as a flag file
  --function = demo

// inputs in order
--input=48
--input=18
"""


@pytest.fixture
def flagfile(tmp_path):
    path = tmp_path / "demo.flags"
    path.write_text(FLAGFILE_TEXT)
    return path


def test_flagfile_flags_take_its_place(capsys, flagfile):
    expected = vmrt(capsys, "run", *SCALAR_RUN)
    assert expected[0] == 0
    got = vmrt(capsys, "run", f"--module={SCALAR}", f"--flagfile={flagfile}", "--input=27",
               "--input=2.0")
    assert got == expected
    # Flags after it override what it set; what flags before it set, it overrides.
    code, _, err = vmrt(capsys, "run", f"--module={SCALAR}", "--flagfile", flagfile,
                        "--function=nothere", "--input=27", "--input=2.0")
    assert code == 1 and "no function `nothere`" in err
    assert vmrt(capsys, "run", f"--module={SCALAR}", "--function=nothere",
                f"--flagfile={flagfile}", "--input=27", "--input=2.0") == expected


@needs_run_module
def test_flagfile_reads_as_iree_run_module_reads_it(capsys, flagfile):
    argv = [f"--module={SCALAR}", f"--flagfile={flagfile}", "--input=27", "--input=2.0"]
    theirs = reference("iree-run-module", *argv)
    assert theirs.returncode == 0, theirs.stderr
    assert vmrt(capsys, "run", *argv)[:2] == (0, theirs.stdout)


def test_flagfiles_may_name_flagfiles(capsys, tmp_path, flagfile):
    outer = tmp_path / "outer.flags"
    outer.write_text(f"--flagfile={flagfile}\n--input=27\n--input=2.0\n")
    assert vmrt(capsys, "run", f"--module={SCALAR}", f"--flagfile={outer}") == \
        vmrt(capsys, "run", *SCALAR_RUN)
    outer.write_text(f"--flagfile={outer}\n")
    code, out, err = vmrt(capsys, "run", f"--module={SCALAR}", f"--flagfile={outer}")
    assert_one_line_error(code, out, err, "includes itself")


@pytest.mark.parametrize("text,fragments", [
    (None, ["vmrt: error: NOT_FOUND", "failed to open file", "while trying to parse flagfile"]),
    ("--input=1\ndemo\n", [":2: positional arguments not allowed in flag files"]),
])
def test_flagfile_errors_are_one_line(capsys, tmp_path, text, fragments):
    path = tmp_path / "missing.flags"
    if text is not None:
        path.write_text(text)
    code, out, err = vmrt(capsys, "run", f"--module={SCALAR}", f"--flagfile={path}")
    assert_one_line_error(code, out, err, str(path), *fragments)
    assert out == ""


def test_flagfile_without_a_path_is_an_error(capsys):
    code, out, err = vmrt(capsys, "run", "--flagfile=")
    assert_one_line_error(code, out, err, "--flagfile= requires a file path")


# -- 4. dump --output, as iree-dump-module -----------------------------------------------------
@needs_dump_module
@pytest.mark.parametrize("module", sorted(EXAMPLES.glob("*.vmfb")), ids=lambda p: p.name)
@pytest.mark.parametrize("flags", [["--output=flatbuffer-json"],
                                   ["--output=flatbuffer-json", "--pretty"],
                                   ["--output=metadata"], ["--output=flatbuffer-binary"]])
def test_dump_output_matches_iree_dump_module(capsysbinary, module, flags):
    theirs = subprocess.run(["iree-dump-module", *flags, str(module)], capture_output=True)
    assert theirs.returncode == 0
    assert main(["dump", *flags, str(module)]) == 0
    assert capsysbinary.readouterr().out == theirs.stdout


@needs_dump_module
def test_dump_output_all_and_disassembly_match_iree_dump_module(capsys):
    # scalar.vmfb has no function named like an export (see test_disasm.py for those).
    for output in ("all", "disassembly"):
        theirs = reference("iree-dump-module", f"--output={output}", SCALAR)
        assert vmrt(capsys, "dump", f"--output={output}", SCALAR)[:2] == (0, theirs.stdout)


def test_dump_defaults_to_all_and_refuses_unknown_outputs(capsys):
    assert vmrt(capsys, "dump", SCALAR) == vmrt(capsys, "dump", "--output=all", SCALAR)
    code, out, _ = vmrt(capsys, "dump", "--output=flatbuffer-json", SCALAR)
    assert code == 0 and json.loads(out)["name"] == "module"
    code, out, err = vmrt(capsys, "dump", "--output=xml", SCALAR)
    assert_one_line_error(code, out, err, "--output")


# -- 5. run --output=-, as iree-run-module -----------------------------------------------------
IREE_MLP_OUTPUT = "EXEC @predict\nhal.buffer_view\n1x3xf32=[0.170226 0.071629 0.758145]\n"


def test_output_dash_prints_the_buffer_view_type_line(capsys):
    assert vmrt(capsys, "run", *MLP_RUN, "--output=-") == (0, IREE_MLP_OUTPUT, "")
    code, out, _ = vmrt(capsys, "run", *MLP_RUN, "--output=-", "--output_max_element_count=2")
    assert out == "EXEC @predict\nhal.buffer_view\n1x3xf32=[0.170226 0.071629...]\n"


@needs_run_module
@pytest.mark.parametrize("argv", [
    MLP_RUN + ["--output=-"],
    MLP_RUN + ["--output=-", "--output_max_element_count=2"],
    MLP_RUN,
    SCALAR_RUN + ["--output=-"] * 5,
    SCALAR_RUN + ["--output=-", "--output=", "--output=-", "--output=", "--output=-"],
], ids=["mlp", "mlp-max2", "mlp-results", "scalar", "scalar-skips"])
def test_run_output_matches_iree_run_module(capsys, argv):
    theirs = reference("iree-run-module", *argv)
    assert theirs.returncode == 0, theirs.stderr
    assert vmrt(capsys, "run", *argv) == (0, theirs.stdout, "")


# -- 6. vm.export lines as iree-dump-module prints them --------------------------------------
def export_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("vm.export")]


def test_disasm_prints_exports_as_upstream(capsys):
    code, out, _ = vmrt(capsys, "disasm", MLP)
    assert code == 0
    assert "vm.export @__init\nvm.func @__init() -> () {" in out
    assert not [line for line in export_lines(out) if " = @" in line]


@needs_dump_module
def test_disasm_export_lines_match_iree_dump_module(capsys):
    for module in sorted(EXAMPLES.glob("*.vmfb")):
        theirs = reference("iree-dump-module", "--output=disassembly", module).stdout
        assert export_lines(vmrt(capsys, "disasm", module)[1]) == export_lines(theirs), module


# -- 7. IREE's spellings: underscores, older ones hidden -------------------------------------
def all_parsers():
    """(command words, parser) of every subcommand and action, each with its arguments."""
    for name in cli.SUBCOMMANDS:
        parser = subparsers(cli.build_parser(name))[name]
        yield [name], parser
        for action, nested in subparsers(parser).items():
            yield [name, action], nested


def subparsers(parser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def subcommand_help(capsys, *words) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*words, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_lists_only_underscore_spellings(capsys):
    for words, _ in all_parsers():
        flags = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", subcommand_help(capsys, *words)))
        hyphenated = {flag for flag in flags if "-" in flag[2:]}
        assert not hyphenated, (words, hyphenated)


@pytest.mark.parametrize("argv", [
    ["disasm", SCALAR, "--bytecode-offsets"],
    ["dump", SCALAR, "--no-verify"],
    ["params", "create", "--output={tmp}/a.gguf", "--data=w=4xi8", "--gguf-types=ggml", "-q",
     "--no-progress"],
    ["params", "dump", "--parameter-mode=file", "{tmp}/a.gguf"],
    ["stream", "stats", "--partitioning-favor=debug", EXAMPLES / "mlp_train_step.stream"],
])
def test_older_spellings_still_work(capsys, tmp_path, argv):
    argv = [str(a).format(tmp=tmp_path) for a in argv]
    underscored = [re.sub(r"^(--\w+)-(\w+)", r"\1_\2", a) for a in argv]
    if argv[0] == "params" and argv[1] == "dump":
        assert vmrt(capsys, "params", "create", f"--output={tmp_path}/a.gguf",
                    "--data=w=4xi8", "-q")[0] == 0
    expected = vmrt(capsys, *underscored)
    assert expected[0] == 0, expected
    assert vmrt(capsys, *argv) == expected


def test_parameter_mode_is_spelled_as_iree_spells_it(capsys, tmp_path):
    archive = tmp_path / "a.irpa"
    assert vmrt(capsys, "params", "create", f"--output={archive}", "--data=w=4xi8", "-q")[0] == 0
    for argv in (["params", "dump", f"--parameters={archive}"],
                 ["params", "convert", f"--parameters={archive}", f"--output={tmp_path}/b.irpa"],
                 ["run", *SCALAR_RUN, f"--parameters={archive}"]):
        code, _, err = vmrt(capsys, *argv, "--parameter_mode=file")
        assert code == 0, (argv, err)


# -- 8. complete --help texts ------------------------------------------------------------------
def test_every_help_text_is_complete(capsys):
    for words, parser in all_parsers():
        help_text = subcommand_help(capsys, *words)
        description = parser.description or ""
        assert description.rstrip().endswith("."), (words, description)
        # (Compared without white space: help lines break at hyphens too.)
        assert "".join(description.split()) in "".join(help_text.split()), words
    top = subcommand_help(capsys)
    for name, (_, summary) in cli.SUBCOMMANDS.items():
        assert summary.endswith("."), name
        assert "".join(summary.split()) in "".join(top.split()), name


def test_command_summaries_are_their_modules_first_paragraphs():
    for name, (module_name, summary) in cli.SUBCOMMANDS.items():
        doc = importlib.import_module(module_name).__doc__.strip()
        assert " ".join(doc.split("\n\n")[0].split()) == summary, name


def test_stream_help_is_not_cut_mid_sentence(capsys):
    help_text = subcommand_help(capsys, "stream")
    assert "report their transient memory,\nlower them to VM modules and run them." in help_text
    assert "`stats` prints, per function," in help_text


# -- 9. progress bars only on a terminal -------------------------------------------------------
CHECK_SUITE = """vm.module @suite version 0
vm.export @first
vm.func @first() -> () {
^bb0:
  vm.return
}
vm.export @second
vm.func @second() -> () {
^bb0:
  vm.return
}
"""

ARCHIVE = ["params", "create", "--data=w=8x1024x1024xi8=1", "-q"]


@pytest.fixture
def suite(tmp_path):
    path = tmp_path / "suite.vmfb"
    path.write_bytes(assemble(CHECK_SUITE))
    return path


def on_a_terminal(monkeypatch):
    """Standard error claims to be a terminal. (Called in the test body: only then is
    sys.stderr the stream capsys captures.)"""
    pytest.importorskip("tqdm")
    monkeypatch.delenv("VMRT_NO_PROGRESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_no_progress_output_off_a_terminal(capsys, tmp_path, suite):
    assert vmrt(capsys, *ARCHIVE, f"--output={tmp_path}/w.irpa") == (0, "", "")
    code, out, err = vmrt(capsys, "check", suite)
    assert (code, err) == (0, "")
    assert out == "PASSED suite.first\nPASSED suite.second\n2 passed, 0 failed\n"
    ran = vmrt_process(*ARCHIVE, f"--output={tmp_path}/v.safetensors")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_progress_bars_on_a_terminal(capsys, tmp_path, suite, monkeypatch):
    if not os.path.exists("/proc/self/io"):
        pytest.skip("no /proc/self/io: archives are written without a bar")
    on_a_terminal(monkeypatch)
    code, out, err = vmrt(capsys, *ARCHIVE, f"--output={tmp_path}/w.irpa")
    assert (code, out) == (0, "")
    assert "writing w.irpa" in err and "%|" in err
    code, out, err = vmrt(capsys, "check", suite)
    assert code == 0 and "2 passed, 0 failed" in out
    assert "suite:" in err and "/2" in err


def test_progress_bars_can_be_turned_off(capsys, tmp_path, suite, monkeypatch):
    on_a_terminal(monkeypatch)
    assert vmrt(capsys, *ARCHIVE, f"--output={tmp_path}/w.irpa", "--no_progress") == \
        (0, "", "")
    assert vmrt(capsys, "check", suite, "--no_progress")[2] == ""
    monkeypatch.setenv("VMRT_NO_PROGRESS", "1")
    assert vmrt(capsys, *ARCHIVE, f"--output={tmp_path}/w.gguf") == (0, "", "")


# -- 10. start-up: only the chosen subcommand is imported --------------------------------------
def imported_after(*argv) -> set[str]:
    probe = ("import sys; from vmrt.tools.cli import main; "
             f"code = main({[str(a) for a in argv]!r}); "
             "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True)
    line = next(line for line in ran.stderr.splitlines() if line.startswith("MODULES "))
    return set(line.split()[1:])


def test_run_imports_only_what_a_scalar_run_needs():
    modules = imported_after("run", *SCALAR_RUN)
    assert "vmrt.tools.run" in modules
    for unwanted in ("vmrt.asm.assembler", "vmrt.stream", "vmrt.modules.check",
                     "vmrt.tools.check", "vmrt.tools.stream", "vmrt.tools.params"):
        assert unwanted not in modules, unwanted


def test_help_imports_no_subcommand():
    probe = ("import sys\nfrom vmrt.tools.cli import main\ntry:\n    main(['--help'])\n"
             "except SystemExit:\n    pass\n"
             "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True)
    assert "COMMAND" in ran.stdout
    line = next(line for line in ran.stderr.splitlines() if line.startswith("MODULES "))
    loaded = set(line.split()[1:])
    assert not {module for module, _ in cli.SUBCOMMANDS.values()} & loaded
