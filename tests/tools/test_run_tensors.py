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
