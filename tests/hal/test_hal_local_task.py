"""local-task runs a dispatch's workgroups and independent dispatches on a worker pool:
results must equal local-sync's, every time."""

import shutil
import subprocess

import numpy as np
import pytest

import vmrt
from vmrt.modules.hal import HalModule

# Two independent matmuls (independent dispatches) and an elementwise op over
# a tensor large enough to need many workgroups.
SOURCE = """
func.func @work(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>, %c: tensor<128x32xf32>)
    -> (tensor<32x32xf32>, tensor<32x32xf32>, tensor<128x32xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<32x32xf32>, tensor<32x32xf32>)
                      outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m2 = linalg.matmul ins(%b, %a : tensor<32x32xf32>, tensor<32x32xf32>)
                      outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  %t = math.tanh %c : tensor<128x32xf32>
  %s = arith.mulf %t, %c : tensor<128x32xf32>
  return %m1, %m2, %s : tensor<32x32xf32>, tensor<32x32xf32>, tensor<128x32xf32>
}
"""


@pytest.fixture(scope="module")
def module_path(tmp_path_factory):
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile not installed")
    folder = tmp_path_factory.mktemp("local_task")
    (folder / "work.mlir").write_text(SOURCE)
    out = folder / "work.vmfb"
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=vmvx",
                    str(folder / "work.mlir"), "-o", str(out)], check=True)
    return out


def test_local_task_matches_local_sync_100_times(module_path):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((32, 32), dtype=np.float32)
    b = rng.standard_normal((32, 32), dtype=np.float32)
    c = rng.standard_normal((128, 32), dtype=np.float32)
    with vmrt.Context(modules=[HalModule(device="local-sync"),
                               vmrt.load_module(module_path)]) as ctx:
        expected = ctx.function("module.work")(a, b, c)
    np.testing.assert_allclose(expected[0], a @ b, rtol=1e-4, atol=1e-4)
    with vmrt.Context(modules=[HalModule(device="local-task"),
                               vmrt.load_module(module_path)]) as ctx:
        work = ctx.function("module.work")
        for _ in range(100):
            got = work(a, b, c)
            for g, e in zip(got, expected):
                np.testing.assert_array_equal(g, e)
