"""The public API is typed: mypy resolves every name `vmrt` loads lazily (through the
TYPE_CHECKING imports of vmrt/__init__.py), so a user program using them checks
clean and a misuse is flagged (`vmrt.load` is not Any); vmrt/__init__.py, vmrt/api.py
and vmrt/errors.py are fully annotated. Other modules are read, not checked
(follow_imports = silent). mypy's cache lives in the temporary directory, so a
second run takes about a second."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

CONFIG = """
[mypy]
follow_imports = silent
ignore_missing_imports = True
warn_unused_ignores = True

[mypy-vmrt,vmrt.api,vmrt.errors,vmrt.modules.natives]
disallow_untyped_defs = True
disallow_incomplete_defs = True
"""

USER_PROGRAM = """
import numpy as np
import vmrt


def run(path: str) -> None:
    limits = vmrt.Limits(fuel=10_000, max_depth=500, max_memory=64 << 20, timeout=2.0)
    with vmrt.load(path, limits=limits, driver="local-task",
                   parameters={"model": "weights.irpa"}) as m:
        predict: vmrt.Function = m.predict
        out = predict(np.zeros((1, 4), np.float32))
        names: list[str] = m.exports
        declaration: str | None = predict.reflection.get("iree.abi.declaration")
        context: vmrt.Context = m.context
        context.refuel(10)
        remaining: int | None = context.fuel_remaining
        print(out, names, declaration, remaining)
    try:
        vmrt.load(b"vm.module", modules=[vmrt.HalModule(device="local-sync")])
    except vmrt.FuelExhausted as error:
        code: vmrt.StatusCode = error.code
        stack: list[str] = error.stack
        print(code, stack, error.format_stack())
    except (vmrt.DepthExceeded, vmrt.MemoryLimitExceeded, vmrt.DeadlineExceeded,
            vmrt.Cancelled) as error:
        limit: str | None = error.limit
        print(limit)
    except FileNotFoundError as error:
        print(error.filename)
    module: vmrt.BytecodeModule = vmrt.load_module(path)
    ctx = vmrt.Context(vmrt.Instance(max_depth=100), modules=[module])
    add: vmrt.Function = ctx.function("module", "add")
    print(add(2, 3), ctx.function("module.add").cconv, vmrt.io.ParameterScopes)
    params = vmrt.IoParametersModule(vmrt.io.ParameterScopes())
    print(params)


class Host(vmrt.NativeModule, name="host", version=1):
    @vmrt.export("0ii_i")
    def add(self, a: int, b: int) -> int:
        return a + b
"""

# Each line is one misuse mypy must flag (so none of these names is Any).
MISUSES = """
import vmrt

a: int = vmrt.load
b: int = vmrt.Limits
c: str = vmrt.Context().function("m.f")
d: int = vmrt.load("m.vmfb").exports
e: int = vmrt.FuelExhausted("x").stack
vmrt.load("m.vmfb", device=3)
vmrt.load("m.vmfb", limit=vmrt.Limits())
vmrt.load("m.vmfb", driver=3)
"""


def mypy(tmp_path: Path, *targets: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG)
    cache = Path(tempfile.gettempdir()) / f"vmrt-mypy-cache-{sys.version_info[0]}" \
        f"{sys.version_info[1]}"
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                           "--cache-dir", str(cache), "--no-color-output", *targets],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_public_api_and_a_user_program_type_check(tmp_path):
    program = tmp_path / "user_program.py"
    program.write_text(USER_PROGRAM)
    result = mypy(tmp_path, str(program), "vmrt/__init__.py", "vmrt/api.py", "vmrt/errors.py",
                  "vmrt/modules/natives.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_misuses_of_lazy_names_are_flagged(tmp_path):
    program = tmp_path / "misuses.py"
    program.write_text(MISUSES)
    result = mypy(tmp_path, str(program))
    # (by file name: mypy's cache replays the errors of an unchanged file with the
    # path it had in an earlier run)
    flagged = {int(line.split(":")[1]) for line in result.stdout.splitlines()
               if line.split(":")[0].endswith("misuses.py") and ": error:" in line}
    expected = {number for number, line in enumerate(MISUSES.splitlines(), 1)
                if line and not line.startswith("import")}
    assert flagged == expected, result.stdout
