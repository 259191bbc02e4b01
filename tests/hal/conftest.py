"""Fixtures for the HAL tests: MLIR compiled for VMVX with iree-compile, and
the reference iree-run-module to compare against."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MLP_VMFB = REPO_ROOT / "examples" / "mlp.vmfb"
VMVX_FLAGS = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx")


class Compiler:
    """Compiles MLIR text once per distinct (text, flags) into a temporary folder."""

    def __init__(self, folder: Path):
        self.folder = folder

    def __call__(self, source: str, *flags: str) -> Path:
        if shutil.which("iree-compile") is None:
            pytest.skip("iree-compile is not installed")
        key = hashlib.sha256((source + "\0" + "\0".join(flags)).encode()).hexdigest()[:16]
        output = self.folder / f"{key}.vmfb"
        if not output.exists():
            mlir = self.folder / f"{key}.mlir"
            mlir.write_text(source)
            subprocess.run(["iree-compile", *VMVX_FLAGS, *flags, str(mlir), "-o", str(output)],
                           check=True, capture_output=True)
        return output


@pytest.fixture(scope="session")
def compile_mlir(tmp_path_factory):
    return Compiler(tmp_path_factory.mktemp("hal_mlir"))


def reference_run(vmfb: Path, function: str, *flags: str) -> tuple[int, list[str], str]:
    """(return code, stdout lines after `EXEC @function`, stderr) of iree-run-module."""
    if shutil.which("iree-run-module") is None:
        pytest.skip("iree-run-module is not installed")
    result = subprocess.run(["iree-run-module", "--device=local-sync", f"--module={vmfb}",
                             f"--function={function}", *flags],
                            capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout.splitlines()[1:], result.stderr


NATIVE_LIBRARY_SOURCE = Path(__file__).resolve().parent / "native" / "test_library.c"


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(**macros) -> the test library's bytes (one ELF serves both formats:
    self-contained, position independent, no libc)."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    folder = tmp_path_factory.mktemp("native_lib")
    built: dict = {}

    def build(**macros) -> bytes:
        key = tuple(sorted(macros.items()))
        if key not in built:
            out = folder / f"lib{len(built)}.so"
            defines = [f"-D{k}={v}" for k, v in key]
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-nostdlib", *defines,
                            str(NATIVE_LIBRARY_SOURCE), "-o", str(out)], check=True)
            built[key] = out.read_bytes()
        return built[key]
    return build
