"""Generates large VM bytecode modules for loader/interpreter benchmarks.

Two kinds, both written as vmasm text and assembled with ``iree-as-module``:

* ``many``: 10,000 small functions of four shapes (straight-line arithmetic,
  a branch diamond, calls to earlier functions, a small counted loop with an
  i64 accumulator), with an export every 500 functions plus ``main``.
* ``huge``: a few very large functions (thousands of blocks each, ~1 MB of
  bytecode in total). Each block does a little arithmetic and branches
  forward, so a call runs through a data-dependent path and terminates.

Usage::

    python benchmarks/gen_large_module.py {many,huge} OUTDIR

or ``generate(kind, outdir) -> Path`` from Python. Every generated function
takes one i32 and returns one i32; ``expected_exports(kind)`` lists the
exported names.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("many", "huge")

MANY_FUNCTIONS = 10_000
MANY_EXPORT_EVERY = 500

HUGE_FUNCTIONS = 4
HUGE_BLOCKS_PER_FUNCTION = 4_200  # ~1 MB of bytecode for the module


def _header(name: str) -> list[str]:
    return [f"vm.module @{name} version 1", "vm.type i32", "vm.type i64", ""]


# --------------------------------------------------------------------------
# kind "many"
# --------------------------------------------------------------------------


def _small_function(i: int) -> list[str]:
    """One of four small function shapes, chosen by i % 4 (all (i32) -> i32)."""
    k = 3 + i % 97
    c = (i * 7919) % 100_003 - 50_000
    shape = i % 4
    out = [f"vm.func @f{i}(%i0: i32) -> (i32) {{", "^bb0:"]
    if shape == 0:
        # Straight-line arithmetic.
        out += [
            f"  %i1 = vm.const.i32 {k}",
            f"  %i2 = vm.const.i32 {c}",
            "  %i3 = vm.mul.i32 %i0, %i1",
            "  %i3 = vm.add.i32 %i3, %i2",
            f"  %i4 = vm.const.i32 {i % 13 + 1}",
            "  %i5 = vm.shr.i32.u %i3, %i4",
            "  %i3 = vm.xor.i32 %i3, %i5",
            "  vm.return %i3",
        ]
    elif shape == 1:
        # Branch diamond with block-argument remaps.
        out += [
            f"  %i1 = vm.const.i32 {k}",
            "  %i2 = vm.cmp.lt.i32.s %i0, %i1",
            "  vm.cond_br %i2, ^bb1(), ^bb2()",
            "^bb1:",
            "  %i3 = vm.add.i32 %i0, %i1",
            "  vm.br ^bb3(%i3->%i4)",
            "^bb2:",
            "  %i3 = vm.sub.i32 %i0, %i1",
            "  %i3 = vm.mul.i32 %i3, %i1",
            "  vm.br ^bb3(%i3->%i4)",
            "^bb3:",
            "  vm.return %i4",
        ]
    elif shape == 2:
        # Calls to the two previous functions (shapes 1 and 0: no deeper calls).
        out += [
            f"  %i1 = vm.call @f{i - 1}(%i0)",
            f"  %i2 = vm.call @f{i - 2}(%i1)",
            "  %i3 = vm.min.i32.s %i1, %i2",
            "  %i4 = vm.max.i32.s %i1, %i2",
            "  %i3 = vm.sub.i32 %i4, %i3",
            "  vm.return %i3",
        ]
    else:
        # Loop: sum of j * k for j in [0, (x & 15)) in an i64 accumulator.
        out += [
            "  %i1 = vm.const.i32 15",
            "  %i1 = vm.and.i32 %i0, %i1",
            "  %i2 = vm.const.i32.zero",
            "  %i4:5 = vm.const.i64.zero",
            f"  %i6:7 = vm.const.i64 {k}",
            "  %i3 = vm.const.i32 1",
            "  vm.br ^bb1()",
            "^bb1:",
            "  %i8 = vm.cmp.lt.i32.s %i2, %i1",
            "  vm.cond_br %i8, ^bb2(), ^bb3()",
            "^bb2:",
            "  %i10:11 = vm.ext.i32.i64.s %i2",
            "  %i10:11 = vm.mul.i64 %i10:11, %i6:7",
            "  %i4:5 = vm.add.i64 %i4:5, %i10:11",
            "  %i2 = vm.add.i32 %i2, %i3",
            "  vm.br ^bb1()",
            "^bb3:",
            "  %i9 = vm.trunc.i64.i32 %i4:5",
            "  vm.return %i9",
        ]
    out += ["}", ""]
    return out


def _many_text(count: int = MANY_FUNCTIONS) -> str:
    lines = _header("many_functions")
    for i in range(count):
        if i % MANY_EXPORT_EVERY == 0:
            lines.append(f"vm.export @f{i}")
        lines += _small_function(i)
    # main(x): runs a handful of functions of every shape and mixes results.
    lines += ["vm.export @main", "vm.func @main(%i0: i32) -> (i32) {", "^bb0:", "  %i1 = vm.const.i32.zero"]
    for i in range(2, count, max(1, count // 16)):
        for j in (i, i + 1):
            if j < count:
                lines += [f"  %i2 = vm.call @f{j}(%i0)", "  %i1 = vm.xor.i32 %i1, %i2"]
    lines += ["  vm.return %i1", "}", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# kind "huge"
# --------------------------------------------------------------------------


def _huge_function(index: int, blocks: int) -> list[str]:
    """A function of ``blocks`` blocks; block b updates the state and jumps
    forward to b+1 or b+2 depending on a state bit, the last block returns."""
    out = [f"vm.func @huge{index}(%i0: i32) -> (i32) {{", "^bb0:"]
    out += [
        "  %i1 = vm.const.i32 1",
        "  %i2 = vm.const.i32 31",
        "  %i3 = vm.const.i32 7",
        "  %i4:5 = vm.ext.i32.i64.u %i0",
        f"  %i6 = vm.const.i32 {index + 1}",
        "  vm.br ^bb1()",
    ]
    for b in range(1, blocks + 1):
        nxt = min(b + 1, blocks + 1)
        skip = min(b + 2, blocks + 1)
        salt = (b * 2654435761 + index) & 0x7FFFFFFF
        out += [
            f"^bb{b}:",
            f"  %i7 = vm.const.i32 {salt}",
            "  %i0 = vm.mul.i32 %i0, %i2",
            "  %i0 = vm.add.i32 %i0, %i7",
            "  %i8 = vm.shr.i32.u %i0, %i3",
            "  %i0 = vm.xor.i32 %i0, %i8",
            "  %i9 = vm.and.i32 %i0, %i1",
        ]
        if b % 16 == 0:
            out += [
                "  %i10:11 = vm.ext.i32.i64.u %i0",
                "  %i4:5 = vm.add.i64 %i4:5, %i10:11",
            ]
        if b % 64 == 0:
            out.append(f"  vm.br_table %i9 {{ default: ^bb{nxt}(), 0: ^bb{skip}(), 1: ^bb{nxt}(%i6->%i12) }}")
        else:
            out.append(f"  vm.cond_br %i9, ^bb{nxt}(), ^bb{skip}()")
    out += [
        f"^bb{blocks + 1}:",
        "  %i13 = vm.trunc.i64.i32 %i4:5",
        "  %i0 = vm.xor.i32 %i0, %i13",
        "  vm.return %i0",
        "}",
        "",
    ]
    return out


def _huge_text(functions: int = HUGE_FUNCTIONS, blocks: int = HUGE_BLOCKS_PER_FUNCTION) -> str:
    lines = _header("huge_functions")
    for f in range(functions):
        lines.append(f"vm.export @huge{f}")
        lines += _huge_function(f, blocks)
    lines += ["vm.export @main", "vm.func @main(%i0: i32) -> (i32) {", "^bb0:", "  %i1 = vm.const.i32.zero"]
    for f in range(functions):
        lines += [f"  %i2 = vm.call @huge{f}(%i0)", "  %i1 = vm.add.i32 %i1, %i2"]
    lines += ["  vm.return %i1", "}", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def vmasm_text(kind: str) -> str:
    if kind == "many":
        return _many_text()
    if kind == "huge":
        return _huge_text()
    raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")


def expected_exports(kind: str) -> list[str]:
    if kind == "many":
        return [f"f{i}" for i in range(0, MANY_FUNCTIONS, MANY_EXPORT_EVERY)] + ["main"]
    if kind == "huge":
        return [f"huge{f}" for f in range(HUGE_FUNCTIONS)] + ["main"]
    raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")


def generate(kind: str, outdir, *, timings: dict | None = None) -> Path:
    """Writes OUTDIR/large_<kind>.vmasm, assembles OUTDIR/large_<kind>.vmfb
    and returns the .vmfb path. If ``timings`` is given, fills in seconds
    spent generating ("generate") and assembling ("assemble")."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    text = vmasm_text(kind)
    source = outdir / f"large_{kind}.vmasm"
    source.write_text(text)
    t1 = time.perf_counter()
    tool = shutil.which("iree-as-module")
    if tool is None:
        raise RuntimeError("iree-as-module is not installed (pip install iree-base-runtime)")
    vmfb = outdir / f"large_{kind}.vmfb"
    proc = subprocess.run([tool, str(source), f"--output={vmfb}"], capture_output=True, text=True)
    t2 = time.perf_counter()
    if proc.returncode != 0:
        raise RuntimeError(f"iree-as-module failed on {source}:\n{proc.stderr.strip()}")
    if timings is not None:
        timings["generate"] = t1 - t0
        timings["assemble"] = t2 - t1
    return vmfb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=KINDS + ("all",))
    parser.add_argument("outdir", type=Path)
    args = parser.parse_args(argv)
    for kind in KINDS if args.kind == "all" else (args.kind,):
        timings: dict = {}
        vmfb = generate(kind, args.outdir, timings=timings)
        source = vmfb.with_suffix(".vmasm")
        print(
            f"{kind}: {vmfb} ({vmfb.stat().st_size / 1e6:.2f} MB; vmasm {source.stat().st_size / 1e6:.2f} MB) "
            f"generate {timings['generate']:.2f}s, assemble {timings['assemble']:.2f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
