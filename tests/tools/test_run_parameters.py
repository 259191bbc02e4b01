"""`vmrt run --parameters` against iree-run-module: compiled models whose weights are
`#flow.parameter.named` globals print the same with IRPA, safetensors and GGUF archives
of the same weights, on both devices; bad archives and missing keys are one-line errors."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from vmrt.io import FileCache, ParameterIndex
from vmrt.tools.cli import main

pytestmark = pytest.mark.skipif(
    shutil.which("iree-run-module") is None or shutil.which("iree-compile") is None,
    reason="needs iree-run-module and iree-compile")

FORMATS = ("irpa", "safetensors", "gguf")


def gguf_info(length: int) -> dict:
    """A layout IREE's GGUF parser reads with the same size as vmrt's: its type table
    predates ggml's renumbering of the integer types, F32 and F16 agree in both."""
    if length % 4 == 0:
        return {"ggml_type": 0, "ggml_dims": (length // 4,)}
    assert length % 2 == 0, "GGUF test archives need even parameter sizes"
    return {"ggml_type": 1, "ggml_dims": (length // 2,)}


def write_archive(source: ParameterIndex, path, fmt: str) -> None:
    """`source`'s entries (splats stay splats in IRPA) as an archive of format `fmt`."""
    index = ParameterIndex()
    for entry in source:
        info = gguf_info(entry.length) if fmt == "gguf" else None
        if entry.is_splat and fmt == "irpa":
            index.add_splat(entry.key, entry.pattern, entry.length)
        elif entry.is_splat:
            index.add_buffer(entry.key, entry.read(), info=info)
        else:
            index.add_file(entry.key, entry.file, entry.offset, entry.length, info=info)
    index.save(path, format=fmt)


def reference(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(["iree-run-module", *map(str, argv)], capture_output=True,
                          text=True, timeout=120)


def vmrt(capsys, *argv):
    code = main(["run", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def parameter_modules(corpus):
    return [m for m in corpus if m.kind == "mlir" and m.parameters]


@pytest.fixture(scope="module")
def converted(corpus, tmp_path_factory):
    """{(module name, format): [--parameters flags]} for every corpus parameter model."""
    out = tmp_path_factory.mktemp("archives")
    flags = {}
    for module in parameter_modules(corpus):
        for fmt in FORMATS:
            specs = []
            for scope, irpa in sorted(module.parameters.items()):
                path = out / f"{module.name}.{scope}.{fmt}"
                write_archive(ParameterIndex.load(irpa, cache=FileCache()), path, fmt)
                specs.append(f"--parameters={scope}={path}")
            flags[module.name, fmt] = specs
    return flags


def test_every_corpus_parameter_model_matches_in_every_format(corpus, converted, capsys):
    modules = parameter_modules(corpus)
    assert {m.name for m in modules} >= {"params", "params_types", "params_gather"}
    checked = 0
    for module in modules:
        for fmt in FORMATS:
            for run in module.runs:
                argv = [f"--device=local-sync", *converted[module.name, fmt],
                        f"--module={module.vmfb}", f"--function={run.function}", *run.flags]
                expected = reference(*argv)
                assert expected.returncode == 0, (module.name, fmt, expected.stderr)
                code, out, err = vmrt(capsys, *argv)
                assert code == 0, (module.name, fmt, run.function, err)
                assert out == expected.stdout, (module.name, fmt, run.function)
                assert out.splitlines()[1:] == run.expected_output
                checked += 1
    assert checked >= 3 * 12


@pytest.mark.parametrize("mode", ["file", "preload"])
def test_parameter_modes_read_the_same_bytes(corpus, converted, capsys, mode):
    for module in parameter_modules(corpus):
        for run in module.runs:
            code, out, err = vmrt(capsys, "--device=local-task", f"--parameter_mode={mode}",
                                  *converted[module.name, "safetensors"],
                                  f"--module={module.vmfb}", f"--function={run.function}",
                                  *run.flags)
            assert code == 0, err
            assert out.splitlines()[1:] == run.expected_output


# -- a model the corpus does not have: the global scope, splats, 16-bit floats, bools ------------
GENERAL_MLIR = """
util.global private @h = #flow.parameter.named<"h"> : tensor<4xf16>
util.global private @bf = #flow.parameter.named<"bf"> : tensor<2x2xbf16>
util.global private @ones = #flow.parameter.named<"ones"> : tensor<6xi32>
util.global private @u = #flow.parameter.named<"s2"::"u"> : tensor<2xui16>
util.global private mutable @state = #flow.parameter.named<"s2"::"state"> : tensor<2xf32>

func.func @get_h() -> tensor<4xf16> {
  %0 = util.global.load @h : tensor<4xf16>
  return %0 : tensor<4xf16>
}
func.func @get_bf() -> tensor<2x2xbf16> {
  %0 = util.global.load @bf : tensor<2x2xbf16>
  return %0 : tensor<2x2xbf16>
}
func.func @get_ones() -> tensor<6xi32> {
  %0 = util.global.load @ones : tensor<6xi32>
  return %0 : tensor<6xi32>
}
func.func @get_u() -> tensor<2xui16> {
  %0 = util.global.load @u : tensor<2xui16>
  return %0 : tensor<2xui16>
}
func.func @step(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = util.global.load @state : tensor<2xf32>
  %1 = arith.mulf %0, %x : tensor<2xf32>
  util.global.store %1, @state : tensor<2xf32>
  return %1 : tensor<2xf32>
}
"""
GENERAL_RUNS = [("get_h", []), ("get_bf", []), ("get_ones", []), ("get_u", []),
                ("step", ["--input=2xf32=2 -3"])]


@pytest.fixture(scope="module")
def general_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("general")
    source = out / "general.mlir"
    source.write_text(GENERAL_MLIR)
    vmfb = out / "general.vmfb"
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=vmvx", str(source), "-o",
                    str(vmfb)], check=True, capture_output=True, timeout=300)
    global_scope = ParameterIndex()
    global_scope.add_buffer("h", np.array([1.5, -2, 65504, 0.25], np.float16).tobytes())
    bf = np.array([1.0, -0.5, 3.0, 256.0], np.float32).view(np.uint32) >> 16
    global_scope.add_buffer("bf", bf.astype(np.uint16).tobytes())
    global_scope.add_splat("ones", np.int32(7).tobytes(), 24)
    second = ParameterIndex()
    second.add_buffer("u", np.array([65535, 3], np.uint16).tobytes())
    second.add_buffer("state", np.array([1.5, 4], np.float32).tobytes())
    flags = {}
    for fmt in FORMATS:
        write_archive(global_scope, out / f"global.{fmt}", fmt)
        write_archive(second, out / f"s2.{fmt}", fmt)
        flags[fmt] = [f"--parameters={out / f'global.{fmt}'}",
                      f"--parameters=s2={out / f's2.{fmt}'}"]
    return vmfb, flags


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_global_scope_splats_and_16_bit_floats_match(general_model, capsys, fmt, device):
    vmfb, flags = general_model
    for function, inputs in GENERAL_RUNS:
        argv = [f"--device={device}", *flags[fmt], f"--module={vmfb}",
                f"--function={function}", *inputs]
        expected = reference(*argv)
        assert expected.returncode == 0, expected.stderr
        code, out, err = vmrt(capsys, *argv)
        assert code == 0, err
        assert out == expected.stdout, function


# -- bad input -------------------------------------------------------------------------------------
def _one_line_error(code, err, *fragments):
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmrt: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


def test_missing_scope_and_missing_key_fail_like_the_reference(corpus, tmp_path, capsys):
    module = next(m for m in corpus if m.name == "params_types")
    # No archives at all: no provider handles scope "a".
    argv = [f"--module={module.vmfb}", "--function=get_i8"]
    assert reference(*argv).returncode != 0
    code, _, err = vmrt(capsys, *argv)
    _one_line_error(code, err, "NOT_FOUND", "no provider registered that handles scopes like")
    # Scope "a" lacks a key the module loads.
    partial = ParameterIndex.load(module.parameters["a"], cache=FileCache())
    index = ParameterIndex(e for e in partial if e.key != "i16s")
    index.save(tmp_path / "a.irpa")
    argv = [f"--parameters=a={tmp_path / 'a.irpa'}", f"--parameters=b={module.parameters['b']}",
            *argv]
    expected = reference(*argv)
    assert expected.returncode != 0 and "i16s" in expected.stderr
    code, _, err = vmrt(capsys, *argv)
    _one_line_error(code, err, "NOT_FOUND", "i16s")


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_archives_are_one_line_errors(corpus, tmp_path, capsys, damage):
    module = next(m for m in corpus if m.name == "params_types")
    for fmt in FORMATS:
        path = tmp_path / f"a.{fmt}"
        write_archive(ParameterIndex.load(module.parameters["a"], cache=FileCache()), path, fmt)
        data = path.read_bytes()
        if damage == "truncated":  # cut inside the last parameter's bytes
            index = ParameterIndex.load(path, cache=FileCache())
            data = data[:max(e.offset + e.length for e in index) - 1]
            del index
        else:
            data = b"\xff" * 4 + data[4:] if fmt != "safetensors" else \
                (1 << 40).to_bytes(8, "little") + data[8:]
        path.write_bytes(data)
        before = path.read_bytes()
        argv = [f"--parameters=a={path}", f"--parameters=b={module.parameters['b']}",
                f"--module={module.vmfb}", "--function=get_i8"]
        assert reference(*argv).returncode != 0
        code, _, err = vmrt(capsys, *argv)
        _one_line_error(code, err, str(path))
        assert path.read_bytes() == before
