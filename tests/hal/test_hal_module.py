"""The `hal` native module end to end: real iree-compile output (the bundled
MLP and the MLIR corpus) runs through vmrt.Context with numpy in and out, on
local-sync and local-task, and matches iree-run-module / iree.runtime."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from tests.hal.conftest import MLP_VMFB, REPO_ROOT, reference_run

import vmrt
from vmrt.errors import StatusCode, VMError
from vmrt.hal import BufferView, create_device
from vmrt.hal.native_loader import native_unavailable_reason
from vmrt.modules.hal import HalModule
from vmrt.hal.vmvx_module import VmvxModule
from tests.corpus.build import discover
from tests.hal.corpus_runner import run

MLP_INPUT = np.array([[1, 0.5, -0.5, 2]], dtype=np.float32)
MLP_REFERENCE = np.array([[0.170226, 0.071629, 0.758145]], dtype=np.float32)
CORPUS_DIR = REPO_ROOT / "build" / "corpus"


def _mlp_context(**hal_options):
    return vmrt.Context(modules=[HalModule(**hal_options), vmrt.load_module(MLP_VMFB)])


def test_exports_and_cconvs_match_the_reference_hal_module():
    rt = pytest.importorskip("iree.runtime")
    reference = rt.create_hal_module(rt.VmInstance(), rt.get_device("local-sync"))
    expected = {}
    for name in reference.function_names:
        cconv = re.search(r"\((0[^)]*)\)", repr(reference.lookup_function(name))).group(1)
        expected[name] = cconv
    module = HalModule()
    assert {n: module.export_cconv(n) for n in module.export_names()} == expected
    assert (module.name, module.version) == (reference.name, reference.version)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_mlp_predicts_with_numpy_in_and_out(device):
    with _mlp_context(device=device) as ctx:
        predict = ctx.function("module.predict")
        result = predict(MLP_INPUT)
        assert isinstance(result, np.ndarray) and result.dtype == np.float32
        np.testing.assert_allclose(result, MLP_REFERENCE, rtol=1e-5)
        np.testing.assert_array_equal(predict(MLP_INPUT), result)  # repeatable


def test_mlp_matches_the_reference_runtime_bit_for_bit():
    rt = pytest.importorskip("iree.runtime")
    ctx = rt.SystemContext(config=rt.Config("local-sync"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, MLP_VMFB.read_bytes()))
    expected = ctx.modules.module["predict"](MLP_INPUT).to_host()
    with _mlp_context() as vm:
        np.testing.assert_array_equal(vm.function("module.predict")(MLP_INPUT), expected)


def test_raw_buffer_views_without_host_arrays():
    with _mlp_context(host_arrays=False) as ctx:
        hal = ctx.module("hal").module
        from vmrt.hal.buffer_view_io import buffer_view_from_numpy, format_buffer_view
        view = buffer_view_from_numpy(MLP_INPUT, hal.devices[0])
        result = ctx.function("module.predict")(view)
        assert isinstance(result, BufferView)
        assert format_buffer_view(result) == "1x3xf32=[0.170226 0.071629 0.758145]"


@pytest.mark.parametrize("bad,message", [
    (np.zeros((1, 5), np.float32), "input0 shape dimension 1 mismatch; expected 4 but have 5"),
    (np.zeros((4,), np.float32), "input0 shape rank mismatch; expected 2 but have 1"),
    (np.zeros((1, 4), np.int32), "input0 element type mismatch; expected f32"),
])
def test_wrong_inputs_fail_with_upstream_messages(bad, message):
    with _mlp_context() as ctx:
        with pytest.raises(VMError) as info:
            ctx.function("module.predict")(bad)
        assert info.value.code == StatusCode.INVALID_ARGUMENT
        assert message in info.value.message
        assert info.value.stack and "module.predict" in info.value.stack[-1]


def test_module_loaded_before_the_hal_types_are_registered():
    # A module read before vmrt.modules.hal is imported holds placeholder types;
    # registering the real ones must upgrade them.
    script = (
        "import numpy as np, vmrt\n"
        f"m = vmrt.load_module({str(MLP_VMFB)!r})\n"
        "from vmrt.modules.hal import HalModule\n"
        "ctx = vmrt.Context(modules=[HalModule(), m])\n"
        "print(ctx.function('module.predict')(np.float32([[1, 0.5, -0.5, 2]])))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    assert "0.1702" in out.stdout


def test_executable_from_the_mlp_lists_its_dispatch_functions():
    device = create_device()
    module = vmrt.load_module(MLP_VMFB)
    image = next(bytes(s.data) for s in module.definition.rodata_segments
                 if bytes(s.data[:4]) == b"PK\x03\x04")
    executable = device.create_executable("vmvx-bytecode-fb", image)
    names = [f.name for f in executable.functions]
    assert names[0] == "predict_dispatch_0_matmul_1x8x4_f32" and len(names) == 3
    assert all(f.binding_count == 2 and f.constant_count == 0 for f in executable.functions)
    assert executable.lookup_function(names[2]) == 2
    with pytest.raises(vmrt.VmrtError) as info:
        executable.lookup_function("missing")
    assert info.value.code == StatusCode.NOT_FOUND
    with pytest.raises(vmrt.VmrtError) as info:
        device.create_executable("cuda-nvptx-fb", image)
    assert info.value.code == StatusCode.NOT_FOUND
    with pytest.raises(vmrt.VmrtError) as info:  # a format vmrt loads, given other bytes
        device.create_executable("embedded-elf-x86_64", image)
    # (without the C extension no ELF loads at all: UNAVAILABLE, whatever the bytes)
    assert info.value.code == (StatusCode.INVALID_ARGUMENT if native_unavailable_reason() is None
                               else StatusCode.UNAVAILABLE)


# -- the MLIR corpus ---------------------------------------------------------------------------
_CORPUS = [m for m in discover(CORPUS_DIR) if m.kind == "mlir"]
_RUNS = [pytest.param(m.name, r.line, id=f"{m.name}:{r.line}:{r.function}")
         for m in _CORPUS for r in m.runs]


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|NAN|INF|nan|inf)")


def _same_output(got: list[str], expected: list[str]) -> bool:
    """Identical lines, or the same text around the same numbers: integers
    exactly, floats within 1e-5 relative."""
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected):
        if g == e:
            continue
        if _NUMBER.sub("#", g) != _NUMBER.sub("#", e):
            return False
        for a, b in zip(_NUMBER.findall(g), _NUMBER.findall(e)):
            if re.fullmatch(r"[-+]?\d+", a) and re.fullmatch(r"[-+]?\d+", b):
                if int(a) != int(b):
                    return False
            elif not np.isclose(float(a), float(b), rtol=1e-5, atol=0, equal_nan=True):
                return False
    return True


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
@pytest.mark.parametrize("name,line", _RUNS)
def test_corpus_run(corpus, device, name, line):
    module = next(m for m in corpus if m.name == name)
    recorded = next(r for r in module.runs if r.line == line)
    try:
        output, error = run(str(module.vmfb), recorded.function, recorded.flags, device,
                            module.parameters), None
    except vmrt.VmrtError as exc:
        output, error = None, exc
    where = f"{module.sidecar}:{line}"
    if recorded.expected_error:
        assert error is not None, f"{where}: expected {recorded.expected_error}, got {output}"
        assert error.code.name == recorded.expected_error, f"{where}: {error}"
    else:
        assert error is None, f"{where}: {error}"
        assert _same_output(output, recorded.expected_output), \
            f"{where}:\n{output}\n!=\n{recorded.expected_output}"


# -- microkernels (the vmvx module) -------------------------------------------------------------
def test_vmvx_exports_cover_what_executables_import(compile_mlir):
    names = set(VmvxModule().export_names())
    assert {"add.2d.f32", "mmt4d", "pack", "unpack", "fill.2d.x32", "query_tile_sizes.2d"} <= names
    assert len(names) == 32


UKERNEL_CASES = [
    ("tensor_linalg", "softmax"), ("tensor_linalg", "matmul_f32"), ("tensor_linalg", "conv2d"),
    ("tensor_elementwise", "int_elementwise"), ("tensor_elementwise", "add_f32"),
    ("tensor_dynamic", "matmul_dyn"), ("globals", "record"),
]


@pytest.mark.parametrize("name,function", UKERNEL_CASES)
def test_microkernel_builds_match_iree_run_module(compile_mlir, name, function):
    module = next(m for m in _CORPUS if m.name == name)
    vmfb = compile_mlir(module.source.read_text(), "--iree-vmvx-enable-microkernels",
                       *module.compile_flags)
    for recorded in (r for r in module.runs if r.function == function):
        code, expected, stderr = reference_run(vmfb, function, *recorded.flags)
        if code != 0:
            with pytest.raises(vmrt.VmrtError):
                run(str(vmfb), function, recorded.flags)
            continue
        assert _same_output(run(str(vmfb), function, recorded.flags), expected)


DATA_TILED = """
func.func @mm(%a: tensor<5x7xf32>, %b: tensor<7x6xf32>) -> tensor<5x6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x6xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<5x6xf32>) -> tensor<5x6xf32>
  %r = linalg.matmul ins(%a, %b : tensor<5x7xf32>, tensor<7x6xf32>) outs(%f : tensor<5x6xf32>) -> tensor<5x6xf32>
  return %r : tensor<5x6xf32>
}
func.func @mmi(%a: tensor<9x7xi8>, %b: tensor<7x3xi8>) -> tensor<9x3xi32> {
  %z = arith.constant 0 : i32
  %e = tensor.empty() : tensor<9x3xi32>
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<9x3xi32>) -> tensor<9x3xi32>
  %r = linalg.matmul ins(%a, %b : tensor<9x7xi8>, tensor<7x3xi8>) outs(%f : tensor<9x3xi32>) -> tensor<9x3xi32>
  return %r : tensor<9x3xi32>
}
"""


@pytest.mark.parametrize("function,inputs", [
    ("mm", ["5x7xf32=" + " ".join(str(i * 0.5 - 7) for i in range(35)),
            "7x6xf32=" + " ".join(str((i * 7) % 11 - 5) for i in range(42))]),
    ("mmi", ["9x7xi8=" + " ".join(str((i * 37) % 255 - 127) for i in range(63)),
             "7x3xi8=" + " ".join(str((i * 13) % 200 - 100) for i in range(21))]),
])
def test_data_tiled_matmul_uses_mmt4d_pack_unpack(compile_mlir, function, inputs):
    vmfb = compile_mlir(DATA_TILED, "--iree-vmvx-enable-microkernels", "--iree-opt-data-tiling")
    flags = [f"--input={text}" for text in inputs]
    code, expected, stderr = reference_run(vmfb, function, *flags)
    assert code == 0, stderr
    assert _same_output(run(str(vmfb), function, flags), expected)
    assert _same_output(run(str(vmfb), function, flags, "local-task"), expected)
    module = vmrt.load_module(vmfb)
    image = next(bytes(s.data) for s in module.definition.rodata_segments
                 if bytes(s.data[:4]) == b"PK\x03\x04")
    imports = {i.full_name for i in vmrt.load_module(image).definition.imported_functions}
    assert {"vmvx.mmt4d", "vmvx.pack", "vmvx.unpack"} <= imports
