"""Fuzz the C tier: byte-mutated modules loaded and run with VMRT_TIER=c.

    python scripts/ctier_fuzz.py [--mutants N] [--seed S] [--per-process K] [--timeout S]
                                 [--max-flips F]

Seeds are tests/vm/test_ctier.py's program and tests/vm/vmasm/{calls,control,
globals,moves}.vmasm (assembled by vmrt). Each mutant sets 1-8 random bytes of a
seed's function bytecode to random values; it is loaded
under Limits(fuel, timeout, max_memory) and every export is called with small
arguments. Mutants run K to a worker process, so a crash kills only its batch
(counted, and the batch goes on after it in a new process). Outcomes counted:
refused at load (a vmrt error), ran (results or a vmrt error per call), and the
failures this must never show: a crash (the process died), a hang (past the
deadline plus a grace) or a raw Python exception escaping vmrt. Not run by CI.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import vmrt
from vmrt.errors import VmrtError
from vmrt.vm.ctier.runtime import CModule
seeds = [open(p, 'rb').read() for p in json.loads(sys.argv[2])]
for line in sys.stdin:
    index, seed, flips = json.loads(line)
    data = bytearray(seeds[seed])
    for offset, value in flips:
        data[offset % len(data)] = value
    outcome = {"i": index, "load": "ok", "calls": 0, "errors": 0, "raw": None, "c": 0}
    try:
        # Built first: a context with limits runs only C that is already built.
        CModule.of(vmrt.load_module(bytes(data)), "c")
        module = vmrt.load(bytes(data), modules=[],
                           limits=vmrt.Limits(fuel=2_000_000, timeout=2, max_memory=1 << 24))
    except VmrtError:
        outcome["load"] = "refused"
    except Exception as exc:
        outcome["load"], outcome["raw"] = "raw", repr(exc)[:200]
    else:
        for name in module.module.export_names() if hasattr(module, 'module') else []:
            fn = None
            try:
                fn = module.function(name)
                outcome["c"] += getattr(fn.entry, "vmrt_c_ordinal", None) is not None
                args = [3 if c in "iI" else 1.5 if c in "fF" else None for c in fn.arguments]
                fn(*args)
                outcome["calls"] += 1
            except VmrtError:
                outcome["errors"] += 1
            except Exception as exc:
                outcome["raw"] = f"{name}: {exc!r}"[:200]
    print(json.dumps(outcome), flush=True)
"""


def seeds(out: Path) -> list[str]:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "vm"))
    from vmrt.asm import assemble

    paths = []
    texts = [("ctier", __import__("test_ctier").PROGRAM)] + [
        (name, (ROOT / "tests" / "vm" / "vmasm" / f"{name}.vmasm").read_text())
        for name in ("calls", "control", "globals", "moves")]
    for name, text in texts:
        path = out / f"{name}.vmfb"
        path.write_bytes(assemble(text))
        paths.append(str(path))
    return paths


def bytecode_region(data: bytes) -> tuple[int, int]:
    """Where the functions' bytecode lies in a module file: most mutants land there,
    so they pass the FlatBuffer checks and test the verifier and the code."""
    from vmrt.vm.module import load_module

    code = bytes(load_module(data).definition.bytecode_data)
    start = data.find(code)
    return (start, start + len(code)) if start >= 0 and code else (0, len(data))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-process", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=120.0, help="per batch, seconds")
    parser.add_argument("--max-flips", type=int, default=8, help="bytes set per mutant, at most")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts = {"refused": 0, "ran": 0, "c_functions": 0, "calls": 0, "call_errors": 0,
              "crash": 0, "hang": 0, "raw": 0}
    with tempfile.TemporaryDirectory() as tmp:
        paths = seeds(Path(tmp))
        regions = [bytecode_region(Path(p).read_bytes()) for p in paths]
        jobs = []
        for i in range(args.mutants):
            seed = rng.randrange(len(paths))
            start, end = regions[seed]
            flips = [(rng.randrange(start, end), rng.randrange(256))
                     for _ in range(rng.randint(1, args.max_flips))]
            jobs.append(json.dumps([i, seed, flips]))
        env = dict(os.environ, VMRT_TIER="c", VMRT_CACHE_DIR=str(Path(tmp) / "cache"))
        while jobs:
            batch, jobs = jobs[:args.per_process], jobs[args.per_process:]
            done = run_batch(batch, paths, env, args.timeout, counts)
            jobs = batch[done + 1:] + jobs if done < len(batch) else jobs
    print(json.dumps(counts, indent=1))
    return 1 if counts["crash"] or counts["hang"] or counts["raw"] else 0


def run_batch(batch, paths, env, timeout, counts) -> int:
    """Runs a batch; returns how many mutants finished (a crash or hang counts one)."""
    try:
        proc = subprocess.run([sys.executable, "-c", WORKER, str(ROOT), json.dumps(paths)],
                              input="\n".join(batch) + "\n", capture_output=True,
                              text=True, env=env, timeout=timeout)
        lines, died = proc.stdout.splitlines(), proc.returncode != 0
    except subprocess.TimeoutExpired as expired:
        lines = (expired.stdout or b"").decode().splitlines() if isinstance(
            expired.stdout, bytes) else (expired.stdout or "").splitlines()
        died = None
    for line in lines:
        outcome = json.loads(line)
        counts["refused" if outcome["load"] == "refused" else "ran"] += 1
        counts["c_functions"] += outcome["c"]
        counts["calls"] += outcome["calls"]
        counts["call_errors"] += outcome["errors"]
        if outcome["raw"]:
            counts["raw"] += 1
            print("raw exception:", outcome["raw"], file=sys.stderr)
    if len(lines) < len(batch):
        counts["hang" if died is None else "crash"] += 1
        print(f"{'hang' if died is None else 'crash'} at {batch[len(lines)][:80]}",
              file=sys.stderr)
    return len(lines)


if __name__ == "__main__":
    sys.exit(main())
