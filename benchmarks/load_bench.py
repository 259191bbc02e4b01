"""Benchmark: load and verify large modules, vmrt beside the reference runtime.

    python benchmarks/load_bench.py [--repeat N] [--outdir DIR]

Generates (with benchmarks/gen_large_module.py and iree-as-module) a module of
10,000 functions and one of about 1 MB of bytecode, then times vmrt reading the
FlatBuffer and verifying every function against iree.runtime.VmModule loading
(and verifying) the same bytes in the same run. Prints seconds and the ratio.
Bar (issue 2): each module loads and verifies in <= 0.5 s in vmrt.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_large_module import generate  # noqa: E402

from vmrt.format import read_module  # noqa: E402
from vmrt.vm.verifier import verify_module  # noqa: E402

BAR_SECONDS = 0.5


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def vmrt_load(data: bytes) -> None:
    verify_module(read_module(data))


def reference_load(data: bytes):
    try:
        import iree.runtime as rt
    except ImportError:
        return None
    instance = rt.VmInstance()
    return lambda: rt.VmModule.copy_buffer(instance, data)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--outdir", default=None)
    args = parser.parse_args(argv)
    outdir = Path(args.outdir or tempfile.mkdtemp(prefix="vmrt-load-bench-"))
    print(f"{'module':<12} {'functions':>9} {'bytecode':>10} {'vmrt s':>8} "
          f"{'iree s':>8} {'ratio':>7}  bar")
    ok = True
    for kind in ("many", "huge"):
        data = generate(kind, outdir).read_bytes()
        module = read_module(data)
        functions = len(module.function_descriptors)
        code = len(module.bytecode_data)
        ours = best_of(args.repeat, lambda: vmrt_load(data))
        ref_fn = reference_load(data)
        theirs = best_of(args.repeat, ref_fn) if ref_fn else float("nan")
        passed = ours <= BAR_SECONDS
        ok &= passed
        print(f"{kind:<12} {functions:>9} {code:>10} {ours:>8.3f} {theirs:>8.4f} "
              f"{ours / theirs:>6.0f}x  {'<= ' if passed else '> '}{BAR_SECONDS} s "
              f"{'ok' if passed else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
