"""Fixtures for vmrt.io tests: upstream-written test archives and the IREE tools.

The archives under ../shared/testdata were written by IREE's own tools
(iree-create-parameters, the gguf package); tests needing them, the
iree.runtime package or iree-dump-parameters skip with the reason when they
are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTDATA = Path(os.environ.get("VMRT_SHARED_TESTDATA", REPO_ROOT.parent / "shared" / "testdata"))


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not (TESTDATA / "irpa").is_dir() or not (TESTDATA / "gguf").is_dir():
        pytest.skip(f"upstream parameter test archives not found under {TESTDATA}")
    return TESTDATA


@pytest.fixture(scope="session")
def rt():
    return pytest.importorskip("iree.runtime")


@pytest.fixture(scope="session")
def dump_tool():
    tool = shutil.which("iree-dump-parameters")
    if tool is None:
        pytest.skip("iree-dump-parameters not installed (pip install iree-base-runtime)")
    return tool


def iree_dump(tool, *paths) -> subprocess.CompletedProcess:
    return subprocess.run([tool, *(f"--parameters={p}" for p in paths)],
                          capture_output=True, text=True)


def run_vmrt(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vmrt.tools.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO_ROOT)
