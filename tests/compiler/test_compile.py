"""vmrt.compile and vmrt.load of .onnx and .mlir files: results against numpy, inputs
by name, the compile cache across processes, checked candidate builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vmrt
from tests.compiler.conftest import WEIGHTS, affine_model, affine_reference, example_inputs

REPO = Path(__file__).resolve().parents[2]


def test_onnx_model_runs_by_position_and_by_name(affine_loaded):
    fn = affine_loaded.function("affine")
    features, bias = example_inputs()
    want = affine_reference(features, bias)
    np.testing.assert_allclose(fn(features, bias), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fn(bias=bias, features=features), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(affine_loaded.affine(features, bias=bias), want,
                               rtol=1e-5, atol=1e-6)


def test_onnx_input_names_shapes_and_dtypes(affine_loaded):
    fn = affine_loaded.function("affine")
    assert [(v.name, v.shape, v.dtype) for v in fn.inputs] == [
        ("features", (2, 8), "float32"), ("bias", (4,), "float32")]
    assert [(v.name, v.shape, v.dtype) for v in fn.outputs] == [("y", (2, 4), "float32")]


def test_inputs_by_unknown_or_missing_name_fail_clearly(affine_loaded):
    features, bias = example_inputs()
    with pytest.raises(vmrt.VmrtError, match="no input named 'weights'.*features, bias"):
        affine_loaded.affine(features, weights=bias)
    with pytest.raises(vmrt.VmrtError, match="missing input 'bias'"):
        affine_loaded.affine(features=features)
    with pytest.raises(vmrt.VmrtError, match="given by position and by name"):
        affine_loaded.affine(features, features=features)


SECOND_PROCESS = """
import sys, numpy as np, vmrt
from vmrt.compiler import cache, session
with vmrt.load(sys.argv[1]) as m:
    out = m.affine(features=np.ones((2, 8), np.float32), bias=np.zeros(4, np.float32))
print(cache.STATS.hits, session.COUNTS.compiles, "iree.compiler" in sys.modules,
      "onnx" in sys.modules, float(out.sum()))
"""


def test_second_process_loads_from_the_cache_without_compiling(affine_loaded, affine_onnx):
    done = subprocess.run([sys.executable, "-c", SECOND_PROCESS, str(affine_onnx)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    hits, compiles, compiler, onnx, total = done.stdout.split()
    want = affine_reference(np.ones((2, 8), np.float32), np.zeros(4, np.float32)).sum()
    assert (hits, compiles, compiler, onnx) == ("1", "0", "False", "False")
    assert float(total) == pytest.approx(float(want), rel=1e-5)


def test_changed_model_is_compiled_again(tmp_path):
    import onnx
    from vmrt.compiler import session
    path = tmp_path / "affine.onnx"
    onnx.save(affine_model(), path)
    features, bias = example_inputs()
    with vmrt.load(path) as m:
        np.testing.assert_allclose(m.affine(features, bias), affine_reference(features, bias),
                                   rtol=1e-5, atol=1e-6)
    model = affine_model()
    model.graph.node[2].op_type = "Sigmoid"  # (another model under the same path)
    onnx.save(model, path)
    before = session.COUNTS.compiles
    with vmrt.load(path) as m:
        got = m.affine(features, bias)
    assert session.COUNTS.compiles > before
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-(features @ WEIGHTS + bias))),
                               rtol=1e-5, atol=1e-6)


def test_candidate_that_changes_results_is_not_used(affine_onnx):
    """A build whose outputs differ from the default build's (f16 arithmetic on values
    past f16's range) falls back to the default build, with a warning."""
    from vmrt.compiler import CompileWarning
    scaled = np.full((2, 8), 3e4, np.float32), np.zeros(4, np.float32)
    with pytest.warns(CompileWarning, match="given .*not used"):
        compiled = vmrt.compile(affine_onnx, example_args=scaled,
                                flags=["--iree-input-demote-f32-to-f16"])
    record = compiled.record
    assert record["chosen"] != "given"
    assert [c["name"] for c in record["candidates"] if c["rejected"]] == ["given"]
    with vmrt.load(compiled) as m:
        np.testing.assert_allclose(m.affine(*scaled), affine_reference(*scaled), rtol=1e-5)


def test_compiled_module_is_savable_bytes(tmp_path, affine_onnx):
    compiled = vmrt.compile(affine_onnx)
    assert isinstance(compiled, bytes) and compiled.function == "affine"
    written = compiled.save(tmp_path / "affine.vmfb")
    assert written == [str(tmp_path / "affine.vmfb"), str(tmp_path / "affine.vmfb.json")]
    record = json.loads((tmp_path / "affine.vmfb.json").read_text())
    assert record["chosen"] == compiled.record["chosen"]
    assert "--iree-llvmcpu-target-cpu=host" in record["flags"]
    features, bias = example_inputs()
    with vmrt.load(tmp_path / "affine.vmfb") as m:
        np.testing.assert_allclose(m.affine(features, bias), affine_reference(features, bias),
                                   rtol=1e-5, atol=1e-6)


def test_external_parameters_go_to_an_irpa(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    weights = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        initializer=[numpy_helper.from_array(weights, "w")])
    path = tmp_path / "dense.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    compiled = vmrt.compile(path, target="generic", parameters="external")
    assert compiled.parameters is not None and compiled.parameters.endswith(".irpa")
    assert weights.tobytes() not in bytes(compiled)
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)
    with vmrt.load(compiled) as m:
        np.testing.assert_allclose(m.dense(x), x @ weights, rtol=1e-5, atol=1e-5)
    (tmp_path / "out").mkdir()
    written = compiled.save(tmp_path / "out" / "dense.vmfb")
    with vmrt.load(written[0], parameters={"model": written[1]}) as m:
        np.testing.assert_allclose(m.dense(x), x @ weights, rtol=1e-5, atol=1e-5)


STABLEHLO = """
func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<3xf32>
  %1 = stablehlo.add %0, %a : tensor<3xf32>
  return %1 : tensor<3xf32>
}
"""


def test_stablehlo_mlir_file(tmp_path):
    path = tmp_path / "fma.mlir"
    path.write_text(STABLEHLO)
    a, b = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    with vmrt.load(path) as m:
        np.testing.assert_array_equal(m.main(a, b), a * b + a)
        assert [v.shape for v in m.main.inputs] == [(3,), (3,)]


def test_vmvx_target(tmp_path):
    path = tmp_path / "fma.mlir"
    path.write_text(STABLEHLO)
    compiled = vmrt.compile(path, target="vmvx")
    assert compiled.record["chosen"] == "default"
    assert "--iree-hal-local-target-device-backends=vmvx" in compiled.flags
    a = np.array([1, 2, 3], np.float32)
    with vmrt.load(compiled) as m:
        np.testing.assert_array_equal(m.main(a, a), a * a + a)


def test_import_vmrt_and_loading_a_vmfb_never_import_the_compiler():
    code = ("import sys, vmrt\n"
            f"m = vmrt.load({str(REPO / 'examples' / 'scalar.vmfb')!r})\n"
            "print(sorted(n for n in sys.modules\n"
            "             if n.startswith(('vmrt.compiler', 'iree', 'onnx'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_cache_entry_others_can_write_or_cut_short_is_compiled_again(tmp_path):
    from vmrt.compiler import cache, session
    path = tmp_path / "fma.mlir"
    path.write_text(STABLEHLO)
    entry = Path(vmrt.compile(path, target="vmvx").build.vmfb)
    assert entry.parent.name == "compiled" and entry.stat().st_mode & 0o777 == 0o600
    for spoil in (lambda: entry.chmod(0o666), lambda: os.truncate(entry, 100)):
        spoil()
        compiles, rejected = session.COUNTS.compiles, cache.STATS.rejected
        again = vmrt.compile(path, target="vmvx")
        assert session.COUNTS.compiles == compiles + 1
        assert cache.STATS.rejected == rejected + 1
        a = np.array([1, 2, 3], np.float32)
        with vmrt.load(again) as m:
            np.testing.assert_array_equal(m.main(a, a), a * a + a)
    hits = cache.STATS.hits
    vmrt.compile(path, target="vmvx")  # (the entry written again is used)
    assert cache.STATS.hits == hits + 1


def test_builds_over_the_bound_are_evicted_least_recently_used_first(tmp_path, monkeypatch):
    from vmrt.compiler import session
    paths = []
    for name, op in (("older", "subtract"), ("newer", "maximum")):
        path = tmp_path / f"{name}.mlir"
        path.write_text(STABLEHLO.replace("stablehlo.multiply", f"stablehlo.{op}"))
        paths.append(path)
    older = Path(vmrt.compile(paths[0], target="vmvx").build.vmfb)
    for file in older.parent.glob(older.stem + ".*"):
        os.utime(file, (1, 1))  # (used long ago)
    monkeypatch.setenv("VMRT_COMPILE_CACHE_MAX_BYTES", str(older.stat().st_size * 3 // 2))
    newer = Path(vmrt.compile(paths[1], target="vmvx").build.vmfb)
    assert newer.exists() and not older.exists()
    compiles = session.COUNTS.compiles
    vmrt.compile(paths[1], target="vmvx")
    assert session.COUNTS.compiles == compiles  # (the newer build is still there)


def test_flags_failing_to_compile_fall_back_to_the_next_set(tmp_path, monkeypatch):
    from vmrt.compiler import CompileWarning, flags
    monkeypatch.setattr(flags, "FAST", flags.Candidate(
        "broken", ("--iree-no-such-flag",), flags.O3_UKERNELS))
    path = tmp_path / "fma.mlir"
    path.write_text(STABLEHLO.replace("stablehlo.add", "stablehlo.subtract"))
    with pytest.warns(CompileWarning, match="flags broken .*failed to compile.*no-such-flag"):
        compiled = vmrt.compile(path)
    assert [c["name"] for c in compiled.record["candidates"]] == [
        "default", "broken", "o3-ukernels"]
    assert compiled.record["chosen"] == "o3-ukernels"
    a = np.array([1, 2, 3], np.float32)
    with vmrt.load(compiled) as m:
        np.testing.assert_array_equal(m.main(a, a), a * a - a)
