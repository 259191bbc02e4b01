"""`vmrt run` on the iree-compile'd corpus (tensors through the hal module): prints what
iree-run-module printed for every recorded run, on both drivers."""

import pytest

from vmrt.tools.cli import main


def _runs(corpus):
    for module in corpus:
        if module.kind != "mlir":
            continue
        for run in module.runs:
            yield module, run


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_recorded_runs_match(corpus, capsys, device):
    checked = 0
    for module, run in _runs(corpus):
        argv = ["run", f"--module={module.vmfb}", f"--function={run.function}",
                f"--device={device}", *run.flags]
        argv += [f"--parameters={scope}={path}" for scope, path in module.parameters.items()]
        code = main(argv)
        captured = capsys.readouterr()
        lines = captured.out.splitlines()
        assert lines and lines[0] == f"EXEC @{run.function}", (module.name, run, captured)
        if run.expected_error:
            assert code == 1, (module.name, run)
            assert run.expected_error in captured.err, (module.name, run, captured.err)
            assert len(captured.err.strip().splitlines()) == 1
        else:
            assert code == 0, (module.name, run, captured.err)
            assert lines[1:] == run.expected_output, (module.name, run)
        checked += 1
    assert checked > 40


def test_bad_tensor_inputs_are_one_line_errors(capsys, corpus):
    mlp = next(m for m in corpus if m.name == "tensor_linalg")
    function = mlp.runs[0].function
    for bad in ["2x2xf32=1 2 3", "2xq99=1", "nonsense"]:
        code = main(["run", f"--module={mlp.vmfb}", f"--function={function}", f"--input={bad}"])
        captured = capsys.readouterr()
        assert code == 1
        assert captured.err.startswith("vmrt: error: ")
        assert len(captured.err.strip().splitlines()) == 1


def test_npy_input_and_output_match_iree_run_module(tmp_path, capsys):
    import shutil
    import subprocess
    from pathlib import Path

    import numpy as np

    mlp = Path(__file__).resolve().parents[2] / "examples" / "mlp.vmfb"
    np.save(tmp_path / "in.npy", np.array([[1, 0.5, -0.5, 2]], dtype=np.float32))
    ours = tmp_path / "ours.npy"
    assert main(["run", f"--module={mlp}", "--function=predict",
                 f"--input=@{tmp_path / 'in.npy'}", f"--output=@{ours}"]) == 0
    capsys.readouterr()
    if shutil.which("iree-run-module") is None:
        pytest.skip("iree-run-module not installed")
    theirs = tmp_path / "theirs.npy"
    subprocess.run(["iree-run-module", f"--module={mlp}", "--function=predict",
                    f"--input=@{tmp_path / 'in.npy'}", f"--output=@{theirs}"],
                   check=True, capture_output=True)
    assert ours.read_bytes() == theirs.read_bytes()


# ---------------------------------------------------------------------------
# --expected_output with tensors, as iree-run-module compares them
# ---------------------------------------------------------------------------
_MLP = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "mlp.vmfb"
_MLP_RUN = [f"--module={_MLP}", "--function=predict", "--input=1x4xf32=1 0.5 -0.5 2"]


def _cli(*argv):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "vmrt", "run", *argv], capture_output=True,
                          text=True, cwd=_MLP.parents[1])


@pytest.mark.parametrize("expected, code, out", [
    ("1x3xf32=0.170226 0.071629 0.758145", 0,
     "[SUCCESS] all function outputs matched their expected values.\n"),
    ("(ignored)", 0, "[SUCCESS] all function outputs matched their expected values.\n"),
    ("1x3xf32=0.170226 0.071629 0.758", 1,
     "[FAILED] result[0]: element at index 2 (0.758145) does not match the expected "
     "(0.758); expected that the view is equal to contents of a view of 1x3xf32\n"
     "  expected:\n1x3xf32=[0.170226 0.071629 0.758]\n"
     "  actual:\n1x3xf32=[0.170226 0.071629 0.758145]\n"),
    ("1x4xf32=0", 1,
     "[FAILED] result[0]: metadata is 1x3xf32; expected that the view matches 1x4xf32; "
     "expected that the view is equal to contents of a view of 1x4xf32\n"
     "  expected:\n1x4xf32=[0 0 0 0]\n  actual:\n1x3xf32=[0.170226 0.071629 0.758145]\n"),
])
def test_expected_tensor_output_prints_success_or_failed(expected, code, out):
    result = _cli(*_MLP_RUN, f"--expected_output={expected}")
    assert (result.returncode, result.stderr) == (code, "")
    assert result.stdout == "EXEC @predict\n" + out


def test_expected_tensor_tolerances_follow_the_flags():
    # 0.7581 is 4.5e-5 from 0.758145: within f32's default atol (1e-4), not within 1e-5,
    # and never byte-equal.
    near = "--expected_output=1x3xf32=0.170226 0.071629 0.7581"
    assert _cli(*_MLP_RUN, near).returncode == 0
    assert _cli(*_MLP_RUN, near, "--expected_f32_threshold=0.00001").returncode == 1
    assert _cli(*_MLP_RUN, near, "--equality_mode=exact").returncode == 1


@pytest.mark.skipif(__import__("shutil").which("iree-run-module") is None,
                    reason="iree-run-module not installed")
@pytest.mark.parametrize("expected", ["1x3xf32=0.17 0.0716 nan", "1x3xi32=0 0 0",
                                      "1x3xf32=0.170226 0.071629 0.758145", "(null)"])
def test_expected_tensor_output_is_iree_run_modules(expected):
    import subprocess
    ours = _cli(*_MLP_RUN, f"--expected_output={expected}")
    theirs = subprocess.run(["iree-run-module", *_MLP_RUN, f"--expected_output={expected}"],
                            capture_output=True, text=True)
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout)
