"""Shared pytest fixtures for the vmrt test suite."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


# The suite runs VM code in the tier users get (`auto`: C where a compiler exists)
# unless VMRT_TIER says otherwise; `make test` runs the instruction-family
# differential tests again with VMRT_TIER=python and VMRT_TIER=c.
os.environ.setdefault("VMRT_TIER", "auto")


@pytest.fixture(scope="session", autouse=True)
def _private_code_cache(tmp_path_factory):
    """The suite's generated-code cache (vmrt.vm.code_cache) lives in a temporary
    folder, never the user's ~/.cache/vmrt; subprocesses inherit it."""
    import os
    folder = tmp_path_factory.mktemp("vmrt-cache")
    folder.chmod(0o700)
    previous = os.environ.get("VMRT_CACHE_DIR")
    os.environ["VMRT_CACHE_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("VMRT_CACHE_DIR", None)
    else:
        os.environ["VMRT_CACHE_DIR"] = previous


# ---------------------------------------------------------------------------
# Test corpus (tests/corpus): compiled .vmfb modules built with the IREE tools.
# ---------------------------------------------------------------------------

CORPUS_BUILD_DIR = REPO_ROOT / "build" / "corpus"
_CORPUS_TOOLS = ("iree-compile", "iree-as-module")


@pytest.fixture(scope="session")
def corpus():
    """Builds tests/corpus into build/corpus (incrementally) and returns the
    list of tests.corpus.build.CorpusModule. Skips when the IREE tools are
    not installed."""
    missing = [t for t in _CORPUS_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"corpus needs the IREE tools {', '.join(missing)} (pip install iree-base-compiler iree-base-runtime)")
    from tests.corpus.build import build_corpus

    return build_corpus(CORPUS_BUILD_DIR)


# ---------------------------------------------------------------------------
# A model reading one parameter (tests/test_api.py, tests/test_ray.py).
# ---------------------------------------------------------------------------

#: x * w, with w the parameter `model::w` (4 x f32).
PARAMETER_MLIR = """
util.global private @w = #flow.parameter.named<"model"::"w"> : tensor<4xf32>
func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = util.global.load @w : tensor<4xf32>
  %r = arith.mulf %x, %w : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.fixture(scope="session")
def parameter_model(tmp_path_factory):
    """(a .vmfb reading scope `model` key `w`, an .irpa holding it, w)."""
    import subprocess

    import numpy as np

    if shutil.which("iree-compile") is None:
        pytest.skip("needs iree-compile")
    from vmrt.io import ParameterIndex
    folder = tmp_path_factory.mktemp("parameters")
    (folder / "scale.mlir").write_text(PARAMETER_MLIR)
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=vmvx", str(folder / "scale.mlir"),
                    "-o", str(folder / "scale.vmfb")], check=True, capture_output=True)
    weights = np.array([2, 3, 4, 5], np.float32)
    index = ParameterIndex()
    index.add_buffer("w", weights.tobytes())
    index.save(folder / "w.irpa")
    return folder / "scale.vmfb", folder / "w.irpa", weights
