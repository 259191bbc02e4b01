"""A module's weights cost their size once: module files are mapped, never read into
private memory, and constants reach dispatches as views of the mapping (measured as
RssAnon, private memory, of a fresh process: never as time)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vmrt.hal.native_loader import native_unavailable_reason

N = 1024  # each weight matrix: 4 MiB of f32
LAYERS = 6
WEIGHTS_MIB = LAYERS * N * N * 4 >> 20


def _mlir() -> str:
    """A chain of matmuls whose weights are constants inline in the module."""
    rng = np.random.default_rng(0)
    lines = [f"func.func @predict(%x: tensor<1x{N}xf32>) -> tensor<1x{N}xf32> {{",
             "  %zero = arith.constant 0.0 : f32"]
    value = "%x"
    for i in range(LAYERS):
        lines += [
            f"  %w{i} = arith.constant dense_resource<w{i}> : tensor<{N}x{N}xf32>",
            f"  %e{i} = tensor.empty() : tensor<1x{N}xf32>",
            f"  %f{i} = linalg.fill ins(%zero : f32) outs(%e{i} : tensor<1x{N}xf32>)"
            f" -> tensor<1x{N}xf32>",
            f"  %y{i} = linalg.matmul ins({value}, %w{i} : tensor<1x{N}xf32>, "
            f"tensor<{N}x{N}xf32>) outs(%f{i} : tensor<1x{N}xf32>) -> tensor<1x{N}xf32>"]
        value = f"%y{i}"
    lines += [f"  return {value} : tensor<1x{N}xf32>", "}", "{-#", "  dialect_resources: {",
              "    builtin: {"]
    for i in range(LAYERS):
        weight = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
        comma = "," if i < LAYERS - 1 else ""
        lines.append(f'      w{i}: "0x04000000{weight.tobytes().hex()}"{comma}')
    return "\n".join(lines + ["    }", "  }", "#-}"])


@pytest.fixture(scope="module")
def weighty_vmfb(tmp_path_factory):
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile is not installed")
    if native_unavailable_reason() is not None:  # (llvm-cpu executables need it)
        pytest.skip(native_unavailable_reason())
    folder = tmp_path_factory.mktemp("footprint")
    mlir, vmfb = folder / "weights.mlir", folder / "weights.vmfb"
    mlir.write_text(_mlir())
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=generic", str(mlir), "-o", str(vmfb)],
                   check=True, capture_output=True)
    mlir.unlink()
    return vmfb


#: Loads `path` one way (argv[2]) in a fresh process, calls predict 6 times and prints
#: the RssAnon it added (bytes) and the result's checksum.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import vmrt, vmrt.api, vmrt.modules.hal, vmrt.vm.context, vmrt.tools.run
    from vmrt.modules.hal import HalModule
    def anon():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) << 10 for l in status if l.startswith("RssAnon"))
    path, how = sys.argv[1], sys.argv[2]
    x = np.ones((1, %d), np.float32)
    data = open(path, "rb").read() if how == "bytes" else None
    before = anon()
    if how == "context":
        module = vmrt.load_module(path)
        context = vmrt.Context(vmrt.Instance(), [HalModule(), module])
        predict = context.function(module.name, "predict")
    elif how == "cli":
        module, _ = vmrt.tools.run._load(path)
        context = vmrt.Context(vmrt.Instance(), [HalModule(), module])
        predict = context.function(module.name, "predict")
    else:
        loaded = vmrt.load(data if how == "bytes" else path)
        predict = loaded.predict
    loaded_anon = anon() - before
    for _ in range(6 if how != "bytes" else 0):
        y = predict(x)
    print(json.dumps({"load": loaded_anon, "total": anon() - before,
                      "sum": float(np.asarray(predict(x) if how == "bytes" else y).sum())}))
""" % N)


def _measure(vmfb, how: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(vmfb), how], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["load", "context", "cli"])
def test_module_file_is_mapped_not_copied(weighty_vmfb, how):
    figures = _measure(weighty_vmfb, how)
    # The weights stay file pages shared with the page cache: the private memory a
    # load and seven calls add is far below one copy of them.
    assert figures["total"] < (WEIGHTS_MIB << 20) // 3, figures
    reference = _measure(weighty_vmfb, "load")["sum"]
    assert figures["sum"] == reference


def test_module_bytes_are_not_copied_by_load(weighty_vmfb):
    figures = _measure(weighty_vmfb, "bytes")
    assert figures["load"] < (WEIGHTS_MIB << 20) // 3, figures
    assert figures["sum"] == _measure(weighty_vmfb, "load")["sum"]
