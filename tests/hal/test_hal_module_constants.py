"""Programs iree-compile 3.13 builds in ways that need care: a dispatch writing into a
constant imported from the module's rodata, export and dispatch names with dots, and
the compiler's `__builtin_splat_i64` dispatch."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import vmrt.format.mapped as mapped
from vmrt.modules.check import CheckModule, failures_of
from vmrt.modules.hal import HalModule
from vmrt.tools.cli import main
from vmrt.vm.context import Context, Instance
from vmrt.vm.module import load_module

# The scatter's `outs` is a constant: iree-compile binds the constant's rodata to the
# dispatch read-write and accumulates into it in place. A write that escaped its
# context would show in a second run as [10, 22, 30, 44].
SCATTER_ADD_MLIR = """
func.func @scatter_add_into_constant() {
  %original = util.unfoldable_constant dense<[10, 20, 30, 40]> : tensor<4xi32>
  %update = util.unfoldable_constant dense<[1, 2]> : tensor<2xi32>
  %indices = util.unfoldable_constant dense<[[1], [3]]> : tensor<2x1xi32>
  %result = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true)
      ins(%update, %indices : tensor<2xi32>, tensor<2x1xi32>)
      outs(%original : tensor<4xi32>) {
    ^bb0(%new: i32, %old: i32):
      %sum = arith.addi %new, %old : i32
      iree_linalg_ext.yield %sum : i32
  } -> tensor<4xi32>
  check.expect_eq_const(%result, dense<[10, 21, 30, 42]> : tensor<4xi32>) : tensor<4xi32>
  return
}
"""

NAMES_MLIR = """
func.func @"add.i32"(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %r = arith.addi %a, %b : tensor<4xi32>
  return %r : tensor<4xi32>
}
func.func @"fill.i64"(%v: i64) -> tensor<5xi64> {
  %e = tensor.empty() : tensor<5xi64>
  %f = linalg.fill ins(%v : i64) outs(%e : tensor<5xi64>) -> tensor<5xi64>
  return %f : tensor<5xi64>
}
"""


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_scatter(module) -> list:
    with Context(Instance(), [HalModule(), CheckModule(), module]) as context:
        context.function(module.name, "scatter_add_into_constant")()
        return failures_of(context)


@pytest.fixture(scope="module")
def scatter_vmfb(compile_mlir):
    return compile_mlir(SCATTER_ADD_MLIR)


def test_constant_written_in_place_gets_private_pages(scatter_vmfb, monkeypatch):
    made = []

    def recording(view):
        pages = real(view)
        made.append(pages)
        return pages
    real = mapped.private_pages
    monkeypatch.setattr(mapped, "private_pages", recording)
    digest = _sha256(scatter_vmfb)
    module = load_module(str(scatter_vmfb))  # a read-only mapping of the file
    rodata = [bytes(segment.view) for segment in module.rodata]
    assert _run_scatter(module) == []
    assert _run_scatter(module) == []  # a second context sees the original constant
    # Each context wrote on private copy-on-write pages of the file; neither the
    # module's mapping nor the file saw the write.
    assert len(made) == 2 and all(p is not None and not p.readonly for p in made)
    assert [bytes(segment.view) for segment in module.rodata] == rodata
    assert _sha256(scatter_vmfb) == digest


def test_constant_written_in_place_in_memory_module(scatter_vmfb):
    module = load_module(scatter_vmfb.read_bytes())  # bytes: a private copy instead
    assert _run_scatter(module) == [] and _run_scatter(module) == []
    assert main(["check", str(scatter_vmfb), "--module_mode=preload"]) == 0


def test_private_pages_only_for_views_of_module_files(scatter_vmfb):
    assert mapped.private_pages(memoryview(b"constant bytes")) is None
    module = load_module(str(scatter_vmfb))
    segment = max(module.rodata, key=lambda s: s.length).view
    pages = mapped.private_pages(segment)
    assert bytes(pages) == bytes(segment)
    pages[:4] = b"\xff\xff\xff\xff"
    assert bytes(segment[:4]) != b"\xff\xff\xff\xff"


def test_dotted_export_and_dispatch_names(compile_mlir, capsys):
    vmfb = compile_mlir(NAMES_MLIR)
    module = load_module(str(vmfb))
    with Context(Instance(), [HalModule(), module]) as context:
        a, b = np.arange(4, dtype=np.int32), np.full(4, 10, np.int32)
        assert context.function("module", "add.i32")(a, b).tolist() == [10, 11, 12, 13]
        assert context.function("module.add.i32")(a, a).tolist() == [0, 2, 4, 6]
        assert context.lookup_function("module", "add.i32").name == "add.i32"
        # The compiler's __builtin_splat_i64 dispatch fills i64 tensors.
        assert context.function("module", "fill.i64")(-7).tolist() == [-7] * 5
    assert main(["run", f"--module={vmfb}", "--function=add.i32", "--input=4xi32=1",
                 "--input=4xi32=2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "4xi32=3 3 3 3"
