"""Importing IREE's stream IR (vmrt stream import / compare) and comparing favors.

The models are this project's own StableHLO (examples/gen_mlp_train_mlir.py and
tests/data/stream/); each is compiled once per module (iree-compile takes a second
or two per run) and shared by the tests below.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("iree.compiler")

from vmrt.io import ParameterIndex  # noqa: E402
from vmrt.io.formats import write_file  # noqa: E402
from vmrt.stream import Favor, format_program, parse_program  # noqa: E402
from vmrt.stream.compare import compare_model, format_comparison  # noqa: E402
from vmrt.stream.importer import (HANDLERS, ImportFailed, import_model,  # noqa: E402
                                  import_stream_ir)
from vmrt.tools.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data" / "stream"
MODELS = {"mlp": EXAMPLES / "mlp_train_sgd.mlir", "deep": EXAMPLES / "mlp_train_sgd_deep.mlir"}


@pytest.fixture(scope="module")
def comparisons():
    return {name: compare_model(path) for name, path in MODELS.items()}


@pytest.fixture(scope="module")
def small_model():
    return import_model(DATA / "scale_concat.mlir")


def test_generator_writes_the_checked_in_models(tmp_path):
    subprocess.run([sys.executable, str(EXAMPLES / "gen_mlp_train_mlir.py"), "--directory",
                    str(tmp_path)], check=True)
    for path in MODELS.values():
        assert (tmp_path / path.name).read_text() == path.read_text()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_import_is_faithful_and_vmrt_keeps_debug_memory(comparisons, name):
    comparison = comparisons[name]
    iree = comparison.iree["train_step"]
    vmrt = comparison.vmrt["train_step"]
    # The same dispatches, and debug's transients within 10% of IREE's.
    assert vmrt[Favor.DEBUG].dispatches == iree[Favor.DEBUG].dispatches >= 15
    debug = iree[Favor.DEBUG].transient_bytes
    assert abs(vmrt[Favor.DEBUG].transient_bytes - debug) <= debug // 10
    assert iree[Favor.DEBUG].concurrent_dispatches == vmrt[Favor.DEBUG].concurrent_dispatches == 0
    # vmrt's min-peak-memory: at most debug's bytes, with concurrency.
    low = vmrt[Favor.MIN_PEAK_MEMORY]
    assert low.transient_bytes <= vmrt[Favor.DEBUG].transient_bytes
    assert low.concurrent_dispatches > 0
    # IREE's min-peak-memory pays more than its debug for its concurrency.
    assert iree[Favor.MIN_PEAK_MEMORY].transient_bytes > debug
    # vmrt's max-concurrency: at least IREE's concurrency.
    assert vmrt[Favor.MAX_CONCURRENCY].concurrent_dispatches >= max(
        stats.concurrent_dispatches for stats in iree.values())


def test_compare_table_shows_all_three_favors(comparisons):
    table = format_comparison(comparisons["mlp"])
    lines = table.splitlines()
    assert lines[0].startswith("@train_step: IREE 16 dispatches; imported 16 ops")
    assert "transient bytes" in lines[1] and lines[2].split()[:3] == ["favor", "IREE", "vmrt"]
    assert [line.split()[0] for line in lines[3:6]] == [f.value for f in Favor]


def test_mlp_import_maps_every_op_kind(comparisons):
    for comparison in comparisons.values():
        counts = comparison.imported.op_counts["train_step"]
        assert counts["stream.async.dispatch"] >= 15
        assert not comparison.imported.notes      # nothing approximated on the MLPs
        program = comparison.imported.program
        assert format_program(parse_program(format_program(program))) == \
            format_program(program)


def test_small_model_covers_params_constants_copies(small_model):
    counts = {name for ops in small_model.op_counts.values() for name in ops}
    mapped = {"stream.async.dispatch", "stream.async.alloca", "stream.async.update",
              "stream.async.slice", "stream.async.clone", "stream.async.constant",
              "stream.tensor.import", "stream.tensor.export", "util.global.load",
              "util.global.store", "stream.async.splat"}
    assert mapped <= counts and mapped <= set(HANDLERS)
    kinds = {op.kind for func in small_model.program.funcs for op in func.ops}
    assert kinds == {"dispatch", "splat", "copy", "param.load"}
    text = small_model.text(source="scale_concat.mlir")
    assert 'param.load "model"::"scale"' in text
    assert "// approximated: stream.async.alloca imported as splat 0 : i8" in text
    assert list(small_model.constants.values()) == [
        np.array([1, 2, 3, 4], np.float32).tobytes()]


def test_unsupported_ops_are_listed_by_name_and_location():
    with pytest.raises(ImportFailed) as failure:
        import_model(DATA / "host_loop.mlir")
    names = {op.name for op in failure.value.unsupported}
    assert names == {"scf.if", "stream.async.load"}
    assert all(op.location.startswith(str(DATA / "host_loop.mlir"))
               for op in failure.value.unsupported)


def test_jax_step_with_private_functions_and_constant_evaluation_imports():
    # IREE compiles the -1/4 on the side in a nested jit_eval module whose print shows
    # @main before its conversion to stream; the import reads the model's own prints.
    imported = import_model(DATA / "private_calls.mlir")
    main_ops = imported.program.funcs[-1].ops
    assert imported.program.funcs[-1].name == "main"
    assert sum(op.kind == "dispatch" for op in main_ops) == 4
    assert not imported.skipped


def test_compare_verifies_vmrt_plans_and_names_functions_without_dispatches(capsys):
    assert main(["stream", "compare", str(DATA / "onnx_matmul.mlir")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("@main_graph$async: IREE 2 dispatches; imported 2 ops")
    assert "@main_graph: skipped: no stream work (calls @main_graph$async)" in out
    assert out[-1].startswith("verified: vmrt's 3 plans keep every dependency and hazard")
    assert main(["stream", "compare", str(DATA / "onnx_matmul.mlir"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is True and list(report["skipped"]) == ["main_graph"]


def test_async_entry_point_imports_and_its_wrapper_is_skipped():
    imported = import_model(DATA / "onnx_matmul.mlir")
    assert [func.name for func in imported.program.funcs] == ["main_graph$async"]
    assert [op.kind for op in imported.program.funcs[0].ops] == ["dispatch", "dispatch"]
    assert imported.skipped == {"main_graph": "no stream work (calls @main_graph$async)"}
    assert "// skipped: @main_graph: no stream work (calls @main_graph$async)" in \
        imported.text()


HAND_WRITTEN_STREAM_IR = """
util.func public @peek(%arg0: !hal.buffer_view) -> !hal.buffer_view {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %0 = stream.tensor.import %arg0 : !hal.buffer_view -> tensor<16xf32> in !stream.resource<external>{%c64}
  %1 = stream.async.transfer %0 : !stream.resource<external>{%c64} -> !stream.resource<staging>{%c64}
  %2 = stream.async.load %1[%c0] : !stream.resource<staging>{%c64} -> f32
  %3 = arith.bitcast %2 : f32 to i32
  %4 = stream.async.splat %3 : i32 -> !stream.resource<external>{%c64}
  %5 = stream.tensor.export %4 : tensor<16xf32> in !stream.resource<external>{%c64} -> !hal.buffer_view
  util.return %5 : !hal.buffer_view
}
"""


def test_stream_ir_with_unknown_ops_fails_in_one_line(tmp_path, capsys):
    with pytest.raises(ImportFailed, match=r"stream\.async\.load at -:7:"):
        import_stream_ir(HAND_WRITTEN_STREAM_IR)
    path = tmp_path / "peek.mlir"
    path.write_text(HAND_WRITTEN_STREAM_IR)
    assert main(["stream", "import", str(path), "--stream-ir"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vmrt: error: UNIMPLEMENTED: cannot import 1 op")


def _many_host_loads(count: int) -> str:
    loads = "".join(f"  %l{i} = stream.async.load %1[%c0] : !stream.resource<staging>{{%c64}}"
                    " -> f32\n" for i in range(count))
    head, tail = HAND_WRITTEN_STREAM_IR.split("  %2 = stream.async.load")
    return head + loads + "  %2 = stream.async.load" + tail


def test_many_unsupported_ops_make_a_short_message_and_verbose_lists_them(tmp_path,
                                                                           capsys):
    path = tmp_path / "loads.mlir"
    path.write_text(_many_host_loads(300))
    assert main(["stream", "import", str(path), "--stream-ir"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and len(err[0]) < 300
    assert "cannot import 301 op(s) (stream.async.load x301); first: stream.async.load " \
           "at -:7:9" in err[0]
    assert main(["stream", "import", str(path), "--stream-ir", "--verbose"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 302 and err[-1].startswith("vmrt: error: UNIMPLEMENTED")
    assert all(line.startswith("cannot import: stream.async.load at ") for line in err[:-1])
    assert len({line.split(" at ")[1] for line in err[:-1]}) == 301    # every location


@pytest.mark.parametrize("text, message", [
    ("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
     "  %y = stablehlo.bogus %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n",
     "iree-compile rejected"),
    ("this is not MLIR\n", "iree-compile rejected"),
])
def test_a_model_iree_compile_rejects_fails_in_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    assert main(["stream", "compare", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vmrt: error: INVALID_ARGUMENT: ")
    assert message in err[0] and "error:" in err[0].split(message)[1]


def _write_archive(path: Path, entries: dict[str, bytes]) -> None:
    index = ParameterIndex()
    for key, data in entries.items():
        index.add_buffer(key, bytearray(data))
    write_file(index, path)


KERNELS = """
import numpy as np
def scale_add(a, scale, b, out):
    out.view(np.float32)[:] = a.view(np.float32) * scale.view(np.float32) + b.view(np.float32)
KERNELS = {"step_dispatch_0::step_dispatch_0_elementwise_16_f32": scale_add}
"""


def test_imported_program_runs_with_kernels(tmp_path, capsys):
    stream, constants = tmp_path / "model.stream", tmp_path / "constants.irpa"
    assert main(["stream", "import", str(DATA / "scale_concat.mlir"), "-o", str(stream),
                 f"--constants={constants}"]) == 0
    scale = np.arange(16, dtype=np.float32)
    _write_archive(tmp_path / "model.irpa", {"scale": scale.tobytes()})
    (tmp_path / "kernels.py").write_text(KERNELS)
    a, b = np.linspace(1, 2, 16, dtype=np.float32), np.full(16, 0.5, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    common = [str(stream), f"--kernels={tmp_path / 'kernels.py'}", "--check"]
    init = [f"@{tmp_path / 'init0.bin'}", f"@{tmp_path / 'init1.bin'}"]
    assert main(["stream", "run", *common, "--function=initializer",
                 f"--parameters=model={tmp_path / 'model.irpa'}",
                 f"--parameters=constants={constants}"]
                + [f"--output={spec}" for spec in init]) == 0
    results = [f"@{tmp_path / f'r{i}.npy'}" for i in range(5)]
    assert main(["stream", "run", *common, "--function=step"]
                + [f"--input={spec}" for spec in init]
                + [f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}"]
                + [f"--output={spec}" for spec in results]) == 0
    assert capsys.readouterr().out.count("[SUCCESS]") == 2
    out = [np.load(spec[1:]).view(np.float32) for spec in results]
    np.testing.assert_array_equal(out[0], a * scale + b)
    np.testing.assert_array_equal(out[1], np.concatenate([a, b]))
    np.testing.assert_array_equal(out[2], a[:8])
    np.testing.assert_array_equal(out[3], np.zeros(16, np.float32))
    np.testing.assert_array_equal(out[4], [1, 2, 3, 4])


def test_compare_names_the_ops_that_are_not_dispatches(capsys):
    assert main(["stream", "compare", str(DATA / "scale_concat.mlir")]) == 0
    assert "@step: IREE 1 dispatches; imported 7 ops, 3 dispatches, 2 copy, 2 splat" in \
        capsys.readouterr().out.splitlines()


def test_compare_json(capsys):
    assert main(["stream", "compare", str(DATA / "scale_concat.mlir"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    step = next(f for f in report["functions"] if f["function"] == "step")
    assert set(step["favors"]) == {f.value for f in Favor}
    assert step["favors"]["debug"]["iree"]["dispatches"] == 1
    assert step["favors"]["debug"]["vmrt"]["concurrent_dispatches"] == 0
    assert any("alloca" in note for note in report["approximations"])


def test_iree_compiler_is_imported_only_by_the_subcommands():
    code = ("import sys, vmrt, vmrt.stream, vmrt.tools.stream\n"
            "from vmrt.tools.cli import main\n"
            "try:\n    main(['stream', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'iree.compiler' not in sys.modules, 'iree.compiler imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)
