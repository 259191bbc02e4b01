"""End-to-end fuzz of the native loaders (outside CI; tests/hal/test_elf_fuzz_e2e.py
runs a bounded version): mutated ELF payloads inside real .vmfb files, loaded and
called.

    python scripts/elf_fuzz_e2e.py N [--seed S] [--jobs J] [--code] [--crashes DIR]
                                     [--vmrt CHECKOUT]

Seeds: an elementwise add and a matmul+tanh compiled by iree-compile for llvm-cpu,
each as embedded-elf and system-elf (--iree-llvmcpu-link-embedded=false). Case i
(derived from (S, i) alone) takes seed i % 4, mutates its ELF with one of: random
byte edits weighted to the headers and PT_DYNAMIC (the mutator of
tests/hal/test_elf_loader.py), a truncation, a program header field, a symbol
value, or a relocation, puts it back into the module, and runs the module on
local-sync (vmrt.load and one call). Unless --code, the bytes of executable
segments are restored after mutating: only structure changes, so every crash is a
loader's fault, not mutated machine code running (with --code, kinds that changed
code are marked "+code"). Cases run in worker processes, a chunk at a time; the
case a worker dies (or hangs) in is counted and saved to the crashes folder, and a
new worker goes on. Prints the counts of refused / ran (right or wrong result) /
crashed / hung / leaked (a non-vmrt exception) per format and mutation kind. Exit
status 1 when anything crashed, hung or leaked.
--vmrt runs the cases with another checkout's vmrt (say, before a fix).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "hal"
CHUNK = 40
CASE_TIMEOUT = 20.0  # seconds a case may take before its chunk counts as hung
MATMUL_INPUTS = (("4x8xf32", [0.125 * i for i in range(32)]),
                 ("8x3xf32", [0.25 - 0.01 * i for i in range(24)]))
ADD_INPUTS = (("4xf32", [1.0, 2.0, 3.0, 4.0]), ("4xf32", [1.0, 1.0, 1.0, 1.0]))
KINDS = ("bytes", "truncate", "phdr", "symbol", "relocation")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code_ranges(image: bytes) -> list[tuple[int, int]]:
    """File byte ranges of the executable PT_LOADs."""
    phoff, phnum = struct.unpack_from("<Q", image, 32)[0], struct.unpack_from("<H", image, 56)[0]
    ranges = []
    for i in range(phnum):
        p_type, flags, offset, _, _, filesz, _, _ = struct.unpack_from(
            "<IIQQQQQQ", image, phoff + i * 56)
        if p_type == 1 and flags & 1:
            ranges.append((offset, min(offset + filesz, len(image))))
    return ranges


def _edit_phdr(image: bytearray, rng: random.Random, loader_tests) -> None:
    elf = loader_tests.Elf(bytes(image))
    at, fields = rng.choice(elf.phdrs())
    field = rng.choice(("offset", "vaddr", "filesz", "memsz", "flags", "align", "type"))
    index = ("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align").index(field)
    old = fields[index]
    if field in ("type", "flags"):
        new = rng.choice((0, 1, 2, 4, 5, 6, 7, old ^ 1, old ^ 2, 0x6474E551))
    else:
        new = rng.choice((old + rng.randint(-64, 64), old + 0x1000 * rng.randint(-2, 2),
                          0, old // 2, rng.choice(loader_tests.INTERESTING_64)))
    elf.set_phdr(at, **{field: new})
    image[:] = elf.b


def _edit_symbol(image: bytearray, rng: random.Random, loader_tests) -> None:
    elf = loader_tests.Elf(bytes(image))
    count = 2 if len(image) < 8192 else 8
    at = elf.symbol(rng.randrange(1, count)) + rng.choice((8, 16))  # st_value or st_size
    elf.u64(at, elf.u64(at) + rng.randint(-32, 32))
    image[:] = elf.b


def _edit_relocation(image: bytearray, rng: random.Random, loader_tests) -> None:
    elf = loader_tests.Elf(bytes(image))
    at, offset, info, addend = rng.choice(elf.relas())
    choice = rng.randrange(3)
    if choice == 0:
        elf.u64(at + 16, addend + rng.randint(-32, 32))
    elif choice == 1:
        elf.u64(at, offset + rng.choice((-8, 8, 0x1000, -0x1000, rng.randint(-64, 64))))
    else:
        elf.u64(at + 8, (info & ~0xFFFFFFFF) | rng.choice((0, 1, 2, 5, 6, 7, 10, 37)))
    image[:] = elf.b


def mutate_case(image: bytes, rng: random.Random, loader_tests, code: bool) -> tuple[str, bytes]:
    """(mutation kind, mutated image)."""
    kind = rng.choices(KINDS, weights=(45, 15, 15, 10, 15))[0]
    if kind == "truncate":
        return kind, image[:rng.randrange(len(image))]
    data = bytearray(image)
    try:
        if kind == "bytes":
            data = bytearray(loader_tests.mutate(image, rng))
        else:
            {"phdr": _edit_phdr, "symbol": _edit_symbol,
             "relocation": _edit_relocation}[kind](data, rng, loader_tests)
    except (LookupError, struct.error, IndexError, ValueError):
        data = bytearray(loader_tests.mutate(image, rng))
        kind = "bytes"
    for start, stop in _code_ranges(image):
        stop = min(stop, len(data))
        if not code:
            data[start:stop] = image[start:stop]
        elif data[start:stop] != image[start:stop]:
            kind = f"{kind}+code"  # (machine code changed: a crash is no loader's fault)
    return kind, bytes(data)


_TOOLS: list = []


def _tools() -> tuple:
    """The test modules whose helpers build the cases (loaded once)."""
    if not _TOOLS:
        _TOOLS.extend((_load("test_hostile_elf"), _load("test_elf_loader")))
    return tuple(_TOOLS)


def case_module(folder: Path, seed: int, case: int, code: bool) -> tuple[dict, str, bytes]:
    """(seed description, mutation kind, mutated .vmfb) of a case."""
    hostile, loader_tests = _tools()
    seeds = json.loads((folder / "seeds.json").read_text())
    entry = seeds[case % len(seeds)]
    vmfb = (folder / entry["file"]).read_bytes()
    rng = random.Random(f"{seed}:{case}")
    kind, image = mutate_case(hostile.elf_of(vmfb), rng, loader_tests, code)
    return entry, kind, hostile.with_elf(vmfb, image)


def _call(vmfb: bytes, entry: dict):
    import numpy as np

    import vmrt
    arrays = [np.array(values, np.float32).reshape([int(d) for d in shape.split("x")[:-1]])
              for shape, values in entry["inputs"]]
    with vmrt.load(vmfb, device="local-sync") as module:
        return np.asarray(getattr(module, entry["function"])(*arrays))


def run_worker(folder: Path, seed: int, start: int, stop: int, code: bool) -> None:
    """Child process: runs cases [start, stop), prints one JSON line per case."""
    import numpy as np

    from vmrt.errors import VmrtError
    seeds = json.loads((folder / "seeds.json").read_text())
    expected = {e["file"]: _call((folder / e["file"]).read_bytes(), e) for e in seeds}
    for case in range(start, stop):
        entry, kind, vmfb = case_module(folder, seed, case, code)
        try:
            result = _call(vmfb, entry)
            right = result.shape == expected[entry["file"]].shape and np.allclose(
                result, expected[entry["file"]], equal_nan=True)
            outcome = "ran" if right else "ran_wrong"
        except VmrtError:
            outcome = "refused"
        except Exception as error:  # noqa: BLE001 (a leak is what is being counted)
            outcome = f"leaked:{type(error).__name__}"
        print(json.dumps([case, entry["format"], kind, outcome]), flush=True)


def run_chunk(folder: Path, seed: int, start: int, stop: int, code: bool,
              vmrt_root: Path = ROOT) -> list[list]:
    """[case, format, kind, outcome] of [start, stop). A worker prints each case as
    it finishes: when one dies (a signal, or the system loader's exit) or hangs, the
    case it was running is the first one missing, counted as "crashed" (or "hung");
    a new worker goes on from the next."""
    env = {**os.environ, "PYTHONPATH": str(vmrt_root)}
    rows: list[list] = []
    while start < stop:
        command = [sys.executable, __file__, "--worker", str(folder), str(seed), str(start),
                   str(stop), str(int(code))]
        try:
            result = subprocess.run(command, capture_output=True, text=True, env=env,
                                    timeout=30 + CASE_TIMEOUT * (stop - start))
            output, hung = result.stdout, False  # (any death counts: ld.so exits 127)
        except subprocess.TimeoutExpired as expired:
            output, hung = expired.stdout or "", True
            if isinstance(output, bytes):
                output = output.decode("utf-8", "replace")
        done = [json.loads(line) for line in output.splitlines() if line.startswith("[")]
        rows += done
        start += len(done)
        if start < stop:  # the case the worker died (or hung) in
            entry, kind, _ = case_module(folder, seed, start, code)
            rows.append([start, entry["format"], kind, "hung" if hung else "crashed"])
            start += 1
    return rows


def compile_seeds(folder: Path, models: str = "all") -> None:
    """The seed modules and how to call them (folder/seeds.json)."""
    hostile, loader_tests = _tools()
    sources = [("add", hostile.ADD, ADD_INPUTS)]
    if models == "all":
        sources.append(("main", loader_tests.MATMUL_TANH, MATMUL_INPUTS))
    seeds = []
    for function, source, inputs in sources:
        for name, (executable_format, flags) in hostile.FORMATS.items():
            work = folder / f"{function}_{name}"
            work.mkdir()
            (folder / f"{function}_{name}.vmfb").write_bytes(
                hostile.compile_module(work, source, *flags))
            seeds.append({"file": f"{function}_{name}.vmfb", "format": name,
                          "function": function, "inputs": inputs})
    (folder / "seeds.json").write_text(json.dumps(seeds))


def fuzz(folder: Path, cases: int, seed: int, jobs: int, code: bool, chunk: int = CHUNK,
         vmrt_root: Path = ROOT) -> list[list]:
    """Every case's [case, format, kind, outcome], seeds compiled in `folder`."""
    chunks = [(s, min(s + chunk, cases)) for s in range(0, cases, chunk)]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        parts = pool.map(lambda c: run_chunk(folder, seed, *c, code, vmrt_root), chunks)
    return sorted(row for part in parts for row in part)


def summary(rows: list[list]) -> str:
    outcomes = ("refused", "ran", "ran_wrong", "crashed", "hung")
    lines = [f"{'':22}" + "".join(f"{o:>10}" for o in outcomes) + "    leaked"]
    groups: dict[str, list] = {}
    for row in rows:
        groups.setdefault(f"format {row[1]}", []).append(row)
        groups.setdefault(f"kind {row[2]}", []).append(row)
    for name, group in [("all", rows)] + sorted(groups.items()):
        counts = [sum(1 for r in group if r[3] == o) for o in outcomes]
        leaked = sum(1 for r in group if r[3].startswith("leaked"))
        lines.append(f"{name:22}" + "".join(f"{c:>10}" for c in counts) + f"{leaked:>10}")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        run_worker(Path(sys.argv[2]), *(int(a) for a in sys.argv[3:6]),
                   code=bool(int(sys.argv[6])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--code", action="store_true",
                        help="also mutate the bytes of executable segments")
    parser.add_argument("--crashes", type=Path, default=Path("elf_fuzz_e2e_crashes"))
    parser.add_argument("--vmrt", type=Path, default=ROOT,
                        help="the checkout whose vmrt runs the cases")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        compile_seeds(folder)
        began = time.perf_counter()
        rows = fuzz(folder, args.cases, args.seed, args.jobs, args.code,
                    vmrt_root=args.vmrt.resolve())
        elapsed = time.perf_counter() - began
        print(f"{args.cases} cases (seed {args.seed}, "
              f"{'code mutated too' if args.code else 'structure only'}) in {elapsed:.0f} s")
        print(summary(rows))
        bad = [r for r in rows if r[3] in ("crashed", "hung") or r[3].startswith("leaked")]
        if bad:
            args.crashes.mkdir(parents=True, exist_ok=True)
            for case, *_, outcome in bad:
                _, _, vmfb = case_module(folder, args.seed, case, args.code)
                path = args.crashes / f"case_{args.seed}_{case}_{outcome.replace(':', '_')}.vmfb"
                path.write_bytes(vmfb)
                print(f"  {outcome}: saved {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
