"""`vmrt run` on the corpus's MLIR programs compiled for llvm-cpu (embedded ELF and
system ELF executables): prints what iree-run-module prints for the same module,
on both drivers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vmrt.hal.native_loader import native_unavailable_reason
from vmrt.tools.cli import main

pytestmark = pytest.mark.skipif(native_unavailable_reason() is not None,
                                reason=str(native_unavailable_reason()))

_TARGETS = ("llvm-cpu", "llvm-cpu-system")


@pytest.fixture(scope="module", params=_TARGETS)
def native_corpus(request):
    if shutil.which("iree-compile") is None or shutil.which("iree-run-module") is None:
        pytest.skip("needs the IREE tools")
    from tests.conftest import CORPUS_BUILD_DIR
    from tests.corpus.build import build_corpus, run_function
    modules = build_corpus(CORPUS_BUILD_DIR, target=request.param)
    by_name = {m.name: m for m in modules}
    runs = []
    for module in modules:
        for run in module.runs:
            reference = run_function(module, run.function, run.flags, by_name)
            runs.append((module, run, reference))
    return request.param, runs


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_native_corpus_matches_iree_run_module(native_corpus, capsys, device):
    target, runs = native_corpus
    for module, run, reference in runs:
        argv = ["run", f"--module={module.vmfb}", f"--function={run.function}",
                f"--device={device}", *run.flags]
        argv += [f"--parameters={scope}={path}" for scope, path in module.parameters.items()]
        code = main(argv)
        captured = capsys.readouterr()
        where = (target, module.name, run.function, run.flags)
        if reference.returncode:
            assert code == 1, where
            assert reference.status and reference.status in captured.err, (where, captured.err)
        else:
            assert code == 0, (where, captured.err)
            assert captured.out.splitlines()[1:] == reference.output, where
    assert len(runs) > 40


MLP_CPU = Path(__file__).resolve().parents[2] / "examples" / "mlp_cpu.vmfb"
MLP_INPUT = "--input=1x4xf32=1 0.5 -0.5 2"


def test_limits_refuse_native_executables_unless_the_host_opts_in(capsys):
    argv = ["run", f"--module={MLP_CPU}", "--function=predict", MLP_INPUT, "--fuel=1000000"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "PERMISSION_DENIED" in err and "--native_under_limits" in err
    assert len(err.strip().splitlines()) == 1
    assert main(argv + ["--native_under_limits"]) == 0
    assert "1x3xf32=[0.170226 0.071629 0.758145]" in capsys.readouterr().out


def test_limits_refuse_native_executables_from_python():
    import numpy as np

    import vmrt
    from vmrt.modules.hal import HalModule
    from vmrt.vm.limits import Limits
    x = np.float32([[1, 0.5, -0.5, 2]])
    with pytest.raises(vmrt.VmrtError) as info:
        vmrt.Context(modules=[HalModule(), vmrt.load_module(MLP_CPU)],
                     limits=Limits(timeout=10.0))
    assert info.value.code.name == "PERMISSION_DENIED"
    with vmrt.Context(modules=[HalModule(native_under_limits=True), vmrt.load_module(MLP_CPU)],
                      limits=Limits(timeout=10.0)) as ctx:
        np.testing.assert_allclose(ctx.function("module.predict")(x),
                                   [[0.170226, 0.071629, 0.758145]], rtol=1e-5)
