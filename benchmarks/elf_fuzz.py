"""Long fuzz run of vmrt's ELF loader (csrc/vmrt_elf.c) outside CI.

    python benchmarks/elf_fuzz.py N [--seed S] [--jobs J] [--elf PATH ...] [--crashes DIR]

Runs N mutated images (the mutator of tests/hal/test_elf_loader.py: byte flips,
random bytes, interesting 64-bit values, truncation) through vmrt.hal.elf, never
running initializers or loaded code, and prints how many loaded and how many were
refused with each status code. Seed images are the embedded ELFs of the test's
matmul+tanh MLIR compiled by iree-compile for a generic and the host CPU (or the
files given with --elf). Case i is derived from (S, i) alone, so chunks run in
separate processes: a chunk whose process dies is bisected down to the case that
crashed, which is saved to the crashes folder and counted. Exit status 1 when
anything crashed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "hal" / "test_elf_loader.py"
CHUNK = 2000


def load_tests():
    spec = importlib.util.spec_from_file_location("elf_loader_tests", TESTS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def case_image(tests, seeds: list[bytes], seed: int, case: int) -> bytes:
    rng = random.Random(f"{seed}:{case}")
    return tests.mutate(seeds[case % len(seeds)], rng)


def run_worker(folder: Path, seed: int, start: int, stop: int) -> None:
    """Child process: runs cases [start, stop) and prints their status counts."""
    tests = load_tests()
    seeds = [p.read_bytes() for p in sorted(folder.glob("seed*"))]
    counts: dict[str, int] = {}
    for case in range(start, stop):
        code = tests.try_load(case_image(tests, seeds, seed, case))
        key = "loaded" if code == 0 else tests.StatusCode(code).name
        counts[key] = counts.get(key, 0) + 1
    print(json.dumps(counts))


def run_chunk(folder: Path, seed: int, start: int, stop: int) -> tuple[dict, list[int]]:
    """(status counts, crashing cases) of [start, stop), bisecting a crash."""
    result = subprocess.run([sys.executable, __file__, "--worker", str(folder), str(seed),
                             str(start), str(stop)], capture_output=True, text=True)
    if result.returncode == 0:
        return json.loads(result.stdout.strip().splitlines()[-1]), []
    if stop - start == 1:
        return {}, [start]
    middle = (start + stop) // 2
    left, right = run_chunk(folder, seed, start, middle), run_chunk(folder, seed, middle, stop)
    counts = dict(left[0])
    for key, value in right[0].items():
        counts[key] = counts.get(key, 0) + value
    return counts, left[1] + right[1]


def compile_seeds(folder: Path) -> list[bytes]:
    tests = load_tests()
    if shutil.which("iree-compile") is None:
        sys.exit("iree-compile is not installed; pass seed images with --elf")
    from vmrt.vm.module import load_module

    (folder / "source.mlir").write_text(tests.MATMUL_TANH)
    images = []
    for name, extra in (("generic", []), ("host", ["--iree-llvmcpu-target-cpu=host"])):
        vmfb = folder / f"{name}.vmfb"
        subprocess.run(["iree-compile", *tests.LLVM_CPU, *extra, str(folder / "source.mlir"),
                        "-o", str(vmfb)], check=True, capture_output=True)
        module = load_module(vmfb.read_bytes())
        images += [bytes(s.data) for s in module.definition.rodata_segments
                   if bytes(s.data[:4]) == b"\x7fELF"]
    return images


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        run_worker(Path(sys.argv[2]), *(int(a) for a in sys.argv[3:6]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--elf", type=Path, action="append", default=[])
    parser.add_argument("--crashes", type=Path, default=Path("elf_fuzz_crashes"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        seeds = [p.read_bytes() for p in args.elf] or compile_seeds(folder)
        for index, image in enumerate(seeds):
            (folder / f"seed{index:03d}").write_bytes(image)
        began = time.perf_counter()
        chunks = [(s, min(s + CHUNK, args.cases)) for s in range(0, args.cases, CHUNK)]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda c: run_chunk(folder, args.seed, *c), chunks))
        elapsed = time.perf_counter() - began

    counts: dict[str, int] = {}
    crashes = [case for _, crashed in results for case in crashed]
    for partial, _ in results:
        for key, value in partial.items():
            counts[key] = counts.get(key, 0) + value
    refused = sum(v for k, v in counts.items() if k != "loaded")
    print(f"{args.cases} cases from {len(seeds)} seed images in {elapsed:.1f} s "
          f"({args.cases / elapsed:.0f}/s)")
    print(f"loaded:  {counts.get('loaded', 0)}")
    print(f"refused: {refused}  " + "  ".join(
        f"{k}={v}" for k, v in sorted(counts.items()) if k != "loaded"))
    print(f"crashed: {len(crashes)}")
    if crashes:
        args.crashes.mkdir(parents=True, exist_ok=True)
        tests = load_tests()
        for case in crashes:
            path = args.crashes / f"case_{args.seed}_{case}.elf"
            path.write_bytes(case_image(tests, seeds, args.seed, case))
            print(f"  saved {path}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
