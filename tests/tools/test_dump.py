"""`vmrt dump` against iree-dump-module on the project's corpus, and its bad-input behaviour."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.format import read_module, write_module
from vmrt.tools.cli import main

needs_dump_tool = pytest.mark.skipif(shutil.which("iree-dump-module") is None,
                                     reason="iree-dump-module not installed")


def run_vmrt(*args):
    return subprocess.run([sys.executable, "-m", "vmrt.tools.cli", *map(str, args)],
                          capture_output=True, text=True)


def reference_dump(path, output):
    return subprocess.run(["iree-dump-module", f"--output={output}", str(path)],
                          capture_output=True, text=True, check=True).stdout


@needs_dump_tool
def test_json_matches_iree_dump_module(corpus, capsys):
    for module in corpus:
        assert main(["dump", "--output=flatbuffer-json", str(module.vmfb)]) == 0
        ours = capsys.readouterr().out
        theirs = reference_dump(module.vmfb, "flatbuffer-json")
        # Field by field first (clear failure messages), then byte for byte.
        assert json.loads(ours) == json.loads(theirs), module.name
        assert ours == theirs, module.name


@needs_dump_tool
def test_text_matches_iree_dump_module_metadata(corpus, capsys):
    for module in corpus:
        assert main(["dump", "--output=metadata", str(module.vmfb)]) == 0
        assert capsys.readouterr().out == reference_dump(module.vmfb, "metadata"), module.name


@needs_dump_tool
def test_default_and_disassembly_are_iree_dump_modules_on_the_examples():
    # (the default is `all`, as upstream's; the disassembly names functions as upstream
    # does: mlp.vmfb's internal `__init` and `vm.call @module.__init()`, not `@fn0`)

    examples = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.vmfb"))
    assert len(examples) >= 4
    for vmfb in examples:
        for flags in ([], ["--output=disassembly"]):
            ours = subprocess.run([sys.executable, "-m", "vmrt", "dump", *flags, str(vmfb)],
                                  capture_output=True, text=True, cwd=vmfb.parents[1])
            theirs = subprocess.run(["iree-dump-module", *flags, str(vmfb)],
                                    capture_output=True, text=True)
            assert ours.returncode == 0 and ours.stdout == theirs.stdout, (vmfb.name, flags)


@needs_dump_tool
def test_pretty_json_matches(corpus, capsys):
    module = corpus[0]
    assert main(["dump", "--output=flatbuffer-json", "--pretty", str(module.vmfb)]) == 0
    theirs = subprocess.run(["iree-dump-module", "--output=flatbuffer-json", "--pretty",
                             str(module.vmfb)], capture_output=True, text=True).stdout
    assert capsys.readouterr().out == theirs


def assert_one_line_error(result):
    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vmrt: error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


def test_missing_file(tmp_path):
    line = assert_one_line_error(run_vmrt("dump", tmp_path / "nope.vmfb"))
    assert "nope.vmfb" in line


@pytest.mark.parametrize("content", [b"", b"garbage", b"\x00" * 64, b"PK\x03\x04" + b"\x00" * 40])
def test_not_a_module(tmp_path, content):
    path = tmp_path / "bad.vmfb"
    path.write_bytes(content)
    assert_one_line_error(run_vmrt("dump", path))


def test_truncated_and_corrupted_modules(corpus, tmp_path):
    data = corpus[0].vmfb.read_bytes()
    archive = read_module(data).archive
    flatbuffer_end = archive.flatbuffer_offset + archive.flatbuffer_length
    path = tmp_path / "cut.vmfb"
    # Bytes after the FlatBuffer and its rodata (a ZIP trailer) are not the module's.
    for cut in (8, 100, flatbuffer_end // 2, flatbuffer_end - 1):
        path.write_bytes(data[:cut])
        assert_one_line_error(run_vmrt("dump", path))
    wrong_id = bytearray(data)
    start = read_module(data).archive.flatbuffer_offset
    wrong_id[start + 4:start + 8] = b"XXXX"
    path.write_bytes(bytes(wrong_id))
    assert "identifier" in assert_one_line_error(run_vmrt("dump", path))


def test_unsupported_bytecode_version(corpus, tmp_path):
    module = read_module(corpus[0].vmfb.read_bytes())
    module.bytecode_version = 18 << 16
    path = tmp_path / "v18.vmfb"
    path.write_bytes(write_module(module))
    assert "version" in assert_one_line_error(run_vmrt("dump", path))


def test_verification_failure_names_function(corpus, tmp_path):
    module = next(m for m in corpus if m.name == "int32_ops")
    mod = read_module(module.vmfb.read_bytes())
    data = bytearray(mod.bytecode_data)
    # Point the first function's second instruction at a register beyond its count.
    d = mod.function_descriptors[0]
    body = data[d.bytecode_offset:d.bytecode_offset + d.bytecode_length]
    assert body[0] == 0x79  # block marker
    mod.bytecode_data = bytes(data[:d.bytecode_offset]) + b"\x79\x0c\xff\x7f" + \
        bytes(data[d.bytecode_offset + 4:])
    path = tmp_path / "badreg.vmfb"
    path.write_bytes(write_module(mod))
    line = assert_one_line_error(run_vmrt("dump", path))
    assert "+00000001" in line
    # --no-verify still dumps the tables.
    assert run_vmrt("dump", "--no-verify", "--output=metadata", path).returncode == 0
