"""Small calls: a tiny compiled model's call per call, vmrt beside iree.runtime, on
local-sync and local-task, in one run.

    python benchmarks/small_call_bench.py [--vmfb PATH] [--calls N] [--rounds N]
                                          [--tiers auto,c,python] [--devices ...]
                                          [--clock wall|process] [--no-reference]

The same module (default examples/mlp_cpu.vmfb: llvm-cpu, `predict` of a 1x4 f32
tensor, weights as constants) and the same numpy input go to

- vmrt: `vmrt.load(path, device=..., tier=...).predict(x)`, one context per tier
  (VMRT_TIER's values: `auto` is what users get, the test suite forces `python`);
- iree.runtime: `SystemContext(config=Config(device))`, the module mapped
  (`VmModule.mmap`), `predict(x).to_host()`, numpy in and numpy out as vmrt's.

Every round times `--calls` calls of each runtime back to back, in a rotating
order, so that a change in the machine's load (a shared machine) weighs on all
alike. Printed per runtime: the median and the best microseconds per call over
the rounds; per vmrt tier: `ratio`, the median over the rounds of vmrt's time
over iree.runtime's in the same round (paired: it spreads less between runs than
best over best), and the bar (issue 33: <= 2x on both devices). Results must agree
with iree.runtime's; a mismatch is an error (exit status 1). `--clock process`
times CPU time instead of the wall clock (see CLOCKS).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vmrt  # noqa: E402

EXAMPLE = ROOT / "examples" / "mlp_cpu.vmfb"
INPUT = np.array([[1, 0.5, -0.5, 2]], dtype=np.float32)
#: The bar of issue 33: vmrt's time per call over iree.runtime's.
BAR = 2.0


def vmrt_runner(path: Path, device: str, tier: str):
    """(call, close) of vmrt's `predict` on `device` in tier `tier`."""
    loaded = vmrt.load(path, device=device, tier=tier)
    predict = loaded.predict
    return (lambda: predict(INPUT)), loaded.close


def iree_runner(path: Path, device: str):
    """(call, close) of iree.runtime's `predict` on `device`, numpy in and out."""
    import iree.runtime as rt
    context = rt.SystemContext(config=rt.Config(device))
    context.add_vm_module(rt.VmModule.mmap(context.instance, str(path)))
    predict = context.modules.module["predict"]
    return (lambda: predict(INPUT).to_host()), (lambda: None)


#: What --clock times: the wall clock (what a caller waits), or the process's CPU
#: time, all threads (on a machine busy with other work it leaves out the time
#: the process waits for a core; local-task's waiting workers count in it).
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}


def time_calls(call, calls: int, clock=time.perf_counter) -> float:
    """Microseconds per call of `calls` calls."""
    start = clock()
    for _ in range(calls):
        call()
    return (clock() - start) / calls * 1e6


def measure(runners: dict, calls: int, rounds: int,
            clock=time.perf_counter) -> dict[str, list[float]]:
    """Per runner, its microseconds per call in every round (runners take turns)."""
    names = list(runners)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up: first calls, code caches, allocator pools
        time_calls(runners[name], max(1, calls // 4))
    gc.disable()
    try:
        for round_number in range(rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(time_calls(runners[name], calls, clock))
    finally:
        gc.enable()
    return times


def check_results(runners: dict) -> bool:
    results = {name: np.asarray(call()) for name, call in runners.items()}
    reference = next(iter(results.values()))
    agree = True
    for name, result in results.items():
        if result.shape != reference.shape or not np.array_equal(result, reference):
            print(f"MISMATCH: {name} returned {result!r}, expected {reference!r}")
            agree = False
    return agree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vmfb", type=Path, default=EXAMPLE)
    parser.add_argument("--calls", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tiers", default="auto,c,python")
    parser.add_argument("--devices", default="local-sync,local-task")
    parser.add_argument("--no-reference", action="store_true",
                        help="vmrt alone (no iree.runtime)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = parser.parse_args()
    tiers = [t for t in args.tiers.split(",") if t]
    ok = True
    print(f"{args.vmfb.name} predict, {args.rounds} rounds of {args.calls} calls, "
          f"{args.clock} microseconds per call (median, best); ratio = median of per-round "
          f"vmrt / iree.runtime; bar <= {BAR:g}x")
    for device in [d for d in args.devices.split(",") if d]:
        runners, closers = {}, []
        if not args.no_reference:
            call, close = iree_runner(args.vmfb, device)
            runners["iree.runtime"] = call
            closers.append(close)
        for tier in tiers:
            call, close = vmrt_runner(args.vmfb, device, tier)
            runners[f"vmrt {tier}"] = call
            closers.append(close)
        try:
            ok &= check_results(runners)
            times = measure(runners, args.calls, args.rounds, CLOCKS[args.clock])
        finally:
            for close in closers:
                close()
        reference = times.get("iree.runtime")
        for name, series in times.items():
            line = (f"  {device:10s} {name:13s} {statistics.median(series):7.2f} "
                    f"{min(series):7.2f}")
            if reference is not None and name != "iree.runtime":
                ratio = statistics.median(t / r for t, r in zip(series, reference))
                verdict = "ok" if ratio <= BAR else "OVER THE BAR"
                line += f"   ratio {ratio:4.2f}x  ({verdict})"
            print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
