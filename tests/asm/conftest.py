"""Fixtures for the vmasm tests: upstream's conformance sources, extracted from
an iree-org/iree git directory into a temporary folder (never into the
repository), and the same assembled by iree-as-module."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from asm_helpers import IREE_GITDIRS, UPSTREAM_TESTS, iree_as_module, require_tools


@pytest.fixture(scope="session")
def upstream_vmasm(tmp_path_factory) -> dict[str, Path]:
    """name -> extracted path of upstream's runtime/src/iree/vm/test/*.vmasm."""
    gitdir = next((g for g in IREE_GITDIRS if g and Path(g).is_dir()), None)
    if gitdir is None or shutil.which("git") is None:
        pytest.skip("needs an iree-org/iree git directory (set VMRT_IREE_GITDIR)")
    listing = subprocess.run(["git", f"--git-dir={gitdir}", "ls-tree", "--name-only", "HEAD",
                              UPSTREAM_TESTS + "/"], capture_output=True, text=True)
    names = [line for line in listing.stdout.splitlines() if line.endswith(".vmasm")]
    if listing.returncode or not names:
        pytest.skip(f"no vmasm sources under {UPSTREAM_TESTS} in {gitdir}")
    out = tmp_path_factory.mktemp("upstream_vmasm")
    found = {}
    for name in names:
        text = subprocess.run(["git", f"--git-dir={gitdir}", "show", f"HEAD:{name}"],
                              capture_output=True, check=True).stdout
        path = out / Path(name).name
        path.write_bytes(text)
        found[path.stem] = path
    return found


@pytest.fixture(scope="session")
def upstream_vmfb(upstream_vmasm, tmp_path_factory) -> dict[str, Path]:
    """Upstream's conformance sources assembled by iree-as-module."""
    require_tools("iree-as-module")
    out = tmp_path_factory.mktemp("upstream_vmfb")
    built = {}
    for name, source in upstream_vmasm.items():
        path = out / f"{name}.vmfb"
        result = iree_as_module(source, path)
        assert result.returncode == 0, f"iree-as-module {name}: {result.stderr}"
        built[name] = path
    return built


