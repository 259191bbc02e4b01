"""`vmrt example`: where the bundled examples are (a wheel's vmrt/examples, or a
checkout's examples/; tests/test_packaging.py runs an installed wheel's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = ["--function=predict", "--input=1x4xf32=1 0.5 -0.5 2"]


def vmrt(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vmrt", *argv], cwd=REPO.parent,
                          capture_output=True, text=True, timeout=120)


def test_example_lists_the_checkouts_examples():
    result = vmrt("example")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.splitlines()
    expected = sorted(p for p in (REPO / "examples").iterdir()
                      if p.is_file() and p.suffix != ".pyc")
    assert [Path(line) for line in listed] == expected


def test_example_name_gives_a_path_vmrt_run_takes():
    result = vmrt("example", "mlp.vmfb")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert Path(result.stdout.strip()) == REPO / "examples" / "mlp.vmfb"
    run = vmrt("run", f"--module={result.stdout.strip()}", *RUN)
    assert run.stdout.endswith("1x3xf32=[0.170226 0.071629 0.758145]\n"), run.stderr


def test_an_unknown_example_is_one_line_naming_the_others():
    result = vmrt("example", "mlp.vmf")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert "no example named 'mlp.vmf'; there are: " in result.stderr
    assert "mlp.vmfb" in result.stderr
