"""`vmrt compile`, `vmrt run --module=model.onnx`, and bad input: one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vmrt
from tests.compiler.conftest import affine_reference

REPO = Path(__file__).resolve().parents[2]


def vmrt_cli(*argv, env=None, code=None):
    """`python -m vmrt ARGV` (or `code` running vmrt's main): (exit code, stdout, stderr)."""
    command = [sys.executable, "-m", "vmrt", *map(str, argv)] if code is None else \
        [sys.executable, "-c", code, *map(str, argv)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=900)
    return done.returncode, done.stdout, done.stderr


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmrt: error: "), err
    return lines[0]


def test_compile_tune_writes_the_module_and_the_choice(tmp_path, affine_onnx):
    out = tmp_path / "affine.vmfb"
    code, stdout, err = vmrt_cli("compile", affine_onnx, "-o", out, "--tune")
    assert code == 0, err
    record = json.loads(out.with_name("affine.vmfb.json").read_text())
    timed = [c for c in record["candidates"] if c["rejected"] is None]
    assert len(record["candidates"]) == 5 and record["tuned"] is True
    assert all(c["ms_per_call"] > 0 for c in timed)
    chosen = next(c for c in timed if c["name"] == record["chosen"])
    assert chosen["ms_per_call"] == min(c["ms_per_call"] for c in timed)  # (ties: rounded)
    assert record["chosen"] in stdout
    code, stdout, err = vmrt_cli("run", f"--module={out}", "--function=affine",
                                 "--input=2x8xf32=1", "--input=4xf32=0.5")
    want = affine_reference(np.ones((2, 8), np.float32), np.full(4, 0.5, np.float32))
    assert code == 0, err
    assert stdout.startswith("EXEC @affine\nresult[0]: hal.buffer_view\n2x4xf32=")
    printed = stdout.splitlines()[2].split("=", 1)[1].replace("][", " ").strip("[]")
    np.testing.assert_allclose(np.array(printed.split(), np.float32).reshape(2, 4), want,
                               rtol=1e-5)


def test_run_compiles_an_onnx_module(affine_onnx):
    code, stdout, err = vmrt_cli("run", f"--module={affine_onnx}", "--input=2x8xf32=1",
                                 "--input=4xf32=0.5")
    assert code == 0, err
    assert stdout.startswith("EXEC @affine\n")


def test_corrupt_onnx_is_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff not a model")
    code, _, err = vmrt_cli("compile", bad)
    assert code == 1
    assert "is not an ONNX model" in one_error_line(err)
    with pytest.raises(vmrt.VmrtError, match="is not an ONNX model") as error:
        vmrt.load(bad)
    assert error.value.code == vmrt.StatusCode.INVALID_ARGUMENT


def test_unsupported_operator_is_named(tmp_path):
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "custom.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]), path)
    code, _, err = vmrt_cli("run", f"--module={path}", "--input=4xf32=1")
    assert code == 1
    assert "does not support the ONNX operator Frobnicate" in one_error_line(err)
    with pytest.raises(vmrt.VmrtError, match="operator Frobnicate") as error:
        vmrt.compile(path)
    assert error.value.code == vmrt.StatusCode.UNIMPLEMENTED


WITHOUT_COMPILER = """
import sys
sys.modules["iree.compiler"] = None  # (as if iree-base-compiler were not installed)
from vmrt.tools.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_missing_compiler_package_says_what_to_install(tmp_path, affine_onnx):
    env = dict(__import__("os").environ, VMRT_CACHE_DIR=str(tmp_path / "cache"))
    code, _, err = vmrt_cli("compile", affine_onnx, "-o", tmp_path / "x.vmfb",
                            env=env, code=WITHOUT_COMPILER)
    assert code == 1
    line = one_error_line(err)
    assert "iree.compiler" in line and "pip install 'vmrt[compile]'" in line


def test_unknown_target_is_refused(affine_onnx):
    with pytest.raises(vmrt.VmrtError, match="unknown target 'gpu'"):
        vmrt.compile(affine_onnx, target="gpu")


def test_a_build_not_used_is_one_warning_line(tmp_path, monkeypatch, capsys):
    from vmrt.compiler import flags
    from vmrt.tools.cli import main
    # (the host's fast flag set replaced by one computing in f16: its outputs differ)
    monkeypatch.setattr(flags, "FAST", flags.Candidate("f16", ("--iree-input-demote-f32-to-f16",)))
    path = tmp_path / "cube.mlir"
    path.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %0 = stablehlo.multiply %a, %a : tensor<4xf32>\n"
                    "  %1 = stablehlo.multiply %0, %a : tensor<4xf32>\n"
                    "  return %1 : tensor<4xf32>\n}\n")
    assert main(["compile", str(path), "-o", str(tmp_path / "cube.vmfb")]) == 0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmrt: warning: vmrt.compile: flags f16 ")
    assert ": default (" in out
