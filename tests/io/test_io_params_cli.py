"""`vmrt params dump|create|convert` against iree-dump/create/convert-parameters."""

import shutil
import subprocess

import pytest

from vmrt.io import ParameterIndex
from vmrt.tools.cli import main

from tests.io.conftest import iree_dump, run_vmrt


def needs(tool):
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} not installed")


def test_dump_matches_iree_dump_parameters_on_testdata(testdata, dump_tool, capsys):
    for path in sorted(testdata.glob("*/*")):
        assert main(["params", "dump", str(path)]) == 0
        ours = capsys.readouterr().out
        theirs = iree_dump(dump_tool, path)
        assert theirs.returncode == 0
        assert ours == theirs.stdout, path


def test_dump_matches_with_several_files_and_scopes(testdata, dump_tool, capsys):
    files = [str(testdata / "irpa" / "mixed.irpa"), f"model={testdata / 'gguf' / 'multiple.gguf'}",
             f"model={testdata / 'irpa' / 'single.irpa'}", str(testdata / "gguf" / "single.gguf")]
    assert main(["params", "dump", *(f"--parameters={f}" for f in files)]) == 0
    ours = capsys.readouterr().out
    theirs = iree_dump(dump_tool, *files)
    assert ours == theirs.stdout
    assert "Parameter scope `model` (4 entries" in ours


def test_dump_json(testdata, capsys):
    import json
    assert main(["params", "dump", "--json", str(testdata / "irpa" / "mixed.irpa")]) == 0
    (scope,) = json.loads(capsys.readouterr().out)
    assert scope["scope"] == "" and scope["total_bytes"] == 33554454
    key3 = scope["entries"][1]
    assert key3 == {"key": "key3", "kind": "splat", "length": 33554432,
                    "pattern": "ffffffffffffff7f"}
    assert scope["entries"][2]["offset"] == 512


def test_extract(testdata, tmp_path, capsys):
    out = tmp_path / "key0.bin"
    mixed = testdata / "irpa" / "mixed.irpa"
    assert main(["params", "dump", f"--parameters=s={mixed}", f"--extract=s::key0={out}",
                 f"--extract=s::key2={tmp_path / 'key2.bin'}"]) == 0
    text = capsys.readouterr().out
    assert f"Extracting parameter `s::key0` (16b) to `{out}`..." in text
    assert out.read_bytes() == ParameterIndex.load(mixed).lookup("key0").read()
    assert (tmp_path / "key2.bin").read_bytes() == b"\x66"  # splats are written out


@needs("iree-create-parameters")
def test_create_matches_iree_create_parameters(tmp_path):
    flags = ["--data=a=5xi8=3", "--data=b=3xi16", "--splat=c=2x2xf32=1.5", "--splat=d=i1=01",
             "--data=e=0xi8", "--splat=f=4xui16=65535", "--splat=g=cf64=0102030405060708"]
    theirs = subprocess.run(["iree-create-parameters", f"--output={tmp_path / 'ref.irpa'}",
                             *flags], capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stderr
    ours = run_vmrt("params", "create", f"--output={tmp_path / 'ours.irpa'}", *flags)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout
    assert (tmp_path / "ours.irpa").read_bytes() == (tmp_path / "ref.irpa").read_bytes()


def test_created_archives_read_identically_in_iree(tmp_path, rt, dump_tool):
    out = tmp_path / "c.irpa"
    result = run_vmrt("params", "create", f"--output={out}", "--data=w=4x4xf32=0.5",
                      "--data=b=3xbf16=2", "--splat=s=16xf16=-1", "--alignment=128")
    assert result.returncode == 0, result.stderr
    assert result.stdout == iree_dump(dump_tool, out).stdout
    theirs = rt.ParameterIndex()
    theirs.load(str(out))
    ours = ParameterIndex.load(out)
    for entry, (key, other) in zip(ours, theirs.items()):
        assert entry.key == key and entry.length == other.length
        if entry.is_file:
            assert bytes(other.file_view) == entry.read()
            assert entry.offset % 128 == 0
        else:
            assert bytes(other.splat_pattern) == entry.pattern
    assert ours.lookup("w").read() == b"\x00\x00\x00\x3f" * 16
    assert ours.lookup("b").read() == b"\x00\x40" * 3


@needs("iree-convert-parameters")
@pytest.mark.parametrize("flags", [
    ["--rename=key0=renamed", "--splat=tensor1=f32=2.5", "--exclude=key1"],
    ["--strip", "--splat=key0=x32=CAFEF00D"],
    [],
])
def test_convert_matches_iree_convert_parameters(testdata, tmp_path, flags):
    inputs = [f"--parameters={testdata / 'gguf' / 'multiple.gguf'}",
              f"--parameters=s={testdata / 'irpa' / 'mixed.irpa'}"]
    theirs = subprocess.run(["iree-convert-parameters", *inputs, *flags,
                             f"--output={tmp_path / 'ref.irpa'}"], capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stderr
    ours = run_vmrt("params", "convert", *inputs, *flags, f"--output={tmp_path / 'ours.irpa'}")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout
    assert (tmp_path / "ours.irpa").read_bytes() == (tmp_path / "ref.irpa").read_bytes()


def test_convert_between_formats(testdata, tmp_path, capsys):
    source = testdata / "gguf" / "multiple.gguf"
    st = tmp_path / "m.safetensors"
    assert main(["params", "convert", str(source), f"--output={st}", "-q"]) == 0
    assert capsys.readouterr().out == ""
    irpa = tmp_path / "m.irpa"
    assert main(["params", "convert", str(st), f"--output={irpa}", "-q"]) == 0
    back = tmp_path / "m.gguf"
    assert main(["params", "convert", str(irpa), f"--output={back}", "--format=gguf"]) == 0
    first = ParameterIndex.load(source)
    last = ParameterIndex.load(back)
    assert [(e.key, e.read()) for e in first] == [(e.key, e.read()) for e in last]
    # Only the byte payload survives IRPA; dtype/shape came through safetensors before it.
    assert ParameterIndex.load(st).lookup("tensor2").info["shape"] == (4, 3)


@pytest.mark.parametrize("args, words", [
    (["params", "dump", "/nonexistent/p.irpa"], "NOT_FOUND"),
    (["params", "create", "--output={tmp}/x.irpa", "--data=bad"], "INVALID_ARGUMENT"),
    (["params", "create", "--output={tmp}/x.irpa", "--data=a=4xi4"], "sub-byte"),
    (["params", "create", "--output={tmp}/x.safetensors", "--splat=a=4xi8"], "splat"),
    (["params", "convert", "{tmp}/bad.irpa", "--output={tmp}/y.irpa"], "magic"),
    (["params", "dump", "--extract=nokey={tmp}/o.bin", "{tmp}/bad.irpa"], "magic"),
])
def test_errors_are_one_line_and_exit_1(tmp_path, args, words):
    (tmp_path / "bad.irpa").write_bytes(b"JUNK" * 10)
    result = run_vmrt(*(a.format(tmp=tmp_path) for a in args))
    assert result.returncode == 1
    assert result.stderr.startswith("vmrt: error: ") and result.stderr.count("\n") == 1
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_extract_of_missing_key(testdata, tmp_path):
    result = run_vmrt("params", "dump", str(testdata / "irpa" / "single.irpa"),
                      f"--extract=nope={tmp_path / 'o.bin'}")
    assert result.returncode == 1 and "NOT_FOUND" in result.stderr


# -- issue 39, item 9: no IRPA under another format's name; dtype-less conversions say so ----
def _vmrt(*argv, cwd):
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    env = dict(__import__("os").environ, PYTHONPATH=str(repo))
    return subprocess.run([sys.executable, "-m", "vmrt", "params", *map(str, argv)],
                          capture_output=True, text=True, cwd=cwd, env=env)


@pytest.fixture
def irpa(tmp_path):
    assert _vmrt("create", "-o", "w.irpa", "--data=w=2x3xf32=1.5", "--data=b=4xi32=7", "-q",
                 cwd=tmp_path).returncode == 0
    return tmp_path / "w.irpa"


@pytest.mark.parametrize("action", ["convert", "create"])
def test_an_output_named_for_no_format_is_an_error(irpa, action):
    argv = ["w.irpa"] if action == "convert" else ["--data=x=2xf32"]
    result = _vmrt(action, *argv, "-o", "out.npz", cwd=irpa.parent)
    assert result.returncode == 1 and not (irpa.parent / "out.npz").exists()
    assert result.stderr == ("vmrt: error: INVALID_ARGUMENT: cannot tell the format of "
                             "`out.npz` from its name: name it .irpa, .safetensors or .gguf, "
                             "or pass --format={irpa,gguf,safetensors}\n")
    assert _vmrt(action, *argv, "-o", "out.npz", "--format=irpa", "-q",
                 cwd=irpa.parent).returncode == 0


def test_irpa_to_safetensors_warns_of_untyped_parameters(irpa):
    result = _vmrt("convert", "w.irpa", "-o", "flat.safetensors", "-q", cwd=irpa.parent)
    assert result.returncode == 0
    assert result.stderr.startswith("vmrt: warning: 2 parameter(s) have no dtype or shape")
    assert "w, b are written to safetensors as flat U8 bytes" in result.stderr


def test_tensor_flags_give_irpa_parameters_their_dtype(irpa):
    np = pytest.importorskip("numpy")
    safetensors = pytest.importorskip("safetensors.numpy")
    result = _vmrt("convert", "w.irpa", "-o", "typed.safetensors", "-q", "--tensor=w=2x3xf32",
                   "--tensor=b=4xi32", cwd=irpa.parent)
    assert (result.returncode, result.stderr) == (0, "")
    arrays = safetensors.load_file(irpa.parent / "typed.safetensors")
    np.testing.assert_array_equal(arrays["w"], np.full((2, 3), 1.5, np.float32))
    np.testing.assert_array_equal(arrays["b"], np.full(4, 7, np.int32))
    wrong = _vmrt("convert", "w.irpa", "-o", "x.gguf", "--tensor=w=2x2xf32", cwd=irpa.parent)
    assert wrong.returncode == 1 and "16 bytes declared, but `w` has 24" in wrong.stderr
