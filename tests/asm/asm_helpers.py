"""Helpers shared by the vmasm tests: the reference tools, module comparisons."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vmrt.format import read_module

HERE = Path(__file__).resolve().parent
OWN_VMASM = HERE / "vmasm"
#: Where upstream's sources are looked for (a bare snapshot works).
IREE_GITDIRS = [os.environ.get("VMRT_IREE_GITDIR", ""), "/work/.mirror/iree-org+iree/repo"]
UPSTREAM_TESTS = "runtime/src/iree/vm/test"


def require_tools(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pytest.skip(f"needs the IREE 3.13.0 tools {', '.join(missing)}")


def iree_as_module(source: Path, output: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["iree-as-module", f"--output={output}", str(source)],
                          capture_output=True, text=True)


def iree_dump(path: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iree-dump-module", "--output=disassembly", *flags, str(path)],
                          capture_output=True, text=True, errors="surrogateescape")


def parallel(function, items, workers: int = 4) -> list:
    """Runs subprocess-bound work a few at a time (results in input order)."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, items))


def function_table(module) -> list[tuple]:
    """Per function: (bytecode, block count, i32 registers, ref registers, requirements)."""
    data = bytes(module.bytecode_data)
    return [(data[d.bytecode_offset:d.bytecode_offset + d.bytecode_length], d.block_count,
             d.i32_register_count, d.ref_register_count, int(d.requirements))
            for d in module.function_descriptors]


def module_tables(module) -> dict:
    """Everything but the bytecode that decides how a module behaves."""
    state = module.module_state
    return {
        "name": module.name, "version": module.version,
        "requirements": int(module.requirements),
        "types": [t.full_name for t in module.types],
        "imports": [(i.full_name, i.signature.calling_convention if i.signature else None,
                     int(i.flags)) for i in module.imported_functions],
        "exports": [(e.local_name, e.internal_ordinal) for e in module.exported_functions],
        "signatures": [s.calling_convention for s in module.function_signatures],
        "rodata": [bytes(s.data) for s in module.rodata_segments],
        "state": (state.global_bytes_capacity, state.global_ref_count) if state else (0, 0),
    }


def load(path_or_bytes):
    return read_module(path_or_bytes)


def own_programs() -> list[Path]:
    return sorted(OWN_VMASM.glob("*.vmasm"))


def vmrt_only(source: Path) -> bool:
    """Own programs whose first line says `// vmrt-only` use syntax iree-as-module lacks."""
    return source.read_text().startswith("// vmrt-only")


STATUS_RE = re.compile(r"\b([A-Z_]{5,})\b")


def expect_value(text: str):
    """(type, value) of an `// expect` argument or result such as `f32=1.5`."""
    kind, _, literal = text.partition("=")
    return kind, float(literal) if kind in ("f32", "f64") else int(literal)


def same_result(kind: str, got, want) -> bool:
    """A result as expected: floats to the 6 digits `// expect` lines print, NaN as NaN."""
    if kind in ("f32", "f64"):
        return math.isnan(got) if math.isnan(want) else float(f"{got:.6g}") == want
    return got == want
