"""What limits cost where users measure it, before and after a change, in one run.

    python benchmarks/limits_bench.py --before DIR [--rounds 5]

DIR is a checkout of the code to compare with (its C extension built), e.g. one made
with `git worktree add --detach /tmp/before fbc7844`; the working tree's code is
"after". Each side runs in child processes (PYTHONPATH set to its tree, its own
VMRT_CACHE_DIR), alternating, and the best time of all rounds is kept:

- loops a C compiler cannot fold (benchmarks/limits_bench.vmasm: xorshift32, recursive
  fib, Mandelbrot) in the C tier, without limits and with Limits(fuel);
- real models on local-sync in both tiers, without limits and with Limits(fuel,
  timeout): benchmarks/models/mlp.mlir (784-512-512-10, batch 32) compiled for VMVX
  by iree-compile into a temporary folder, and examples/mlp.vmfb (4-8-3: its calls
  are mostly the host's per-call work).

Times are the CPU time of the calling thread (time.thread_time: on local-sync all
the work runs there), as the machine is shared and wall time measures the
neighbours too. Ratios are with limits over without, per side, from the same run.
Also printed, for information: the same loops in the Python tier (smaller sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LOOPS = HERE / "limits_bench.vmasm"
SMALL_MODEL = ROOT / "examples" / "mlp.vmfb"
MODEL_SOURCE = HERE / "models" / "mlp.mlir"
#: (export, argument) of the loops: each call takes milliseconds or more in C.
LOOP_CALLS = (("xorshift", 5_000_000), ("fib", 30), ("mandelbrot", 300))
PYTHON_LOOP_CALLS = (("xorshift", 100_000), ("fib", 18), ("mandelbrot", 40))


def best_of(variants: dict, rounds: int, calls: int = 1) -> dict:
    """The least time per call of `rounds` timings of `calls` calls of each of
    `variants` (name -> fn), taken in turns so that all see the same load."""
    best = dict.fromkeys(variants, float("inf"))
    for fn in variants.values():
        fn()
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.thread_time()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.thread_time() - start) / calls)
    return best


def child(rounds: int, model: Path) -> dict:
    """Timings of this process's vmrt (seconds per call), by case and variant."""
    import numpy as np

    import vmrt
    from vmrt.asm import assemble

    assert Path(vmrt.__file__).resolve().is_relative_to(Path.cwd()), vmrt.__file__
    times = {}
    module = vmrt.load_module(assemble(LOOPS.read_text()))
    vmrt.Context(modules=[module], tier="c").function("loops.fib")(2)  # (builds its C)
    for tier, calls in (("c", LOOP_CALLS), ("python", PYTHON_LOOP_CALLS)):
        for name, argument in calls:
            fns = {variant: vmrt.Context(modules=[module], tier=tier, limits=limits).function(
                f"loops.{name}") for variant, limits in (("none", None),
                                                         ("limits", vmrt.Limits(fuel=10**15)))}
            times[f"{tier} tier {name}({argument}), fuel"] = best_of(
                {variant: (lambda fn=fn: fn(argument)) for variant, fn in fns.items()}, rounds)
    rng = np.random.default_rng(0)
    big = [rng.standard_normal(shape).astype(np.float32) for shape in
           ((32, 784), (784, 512), (512,), (512, 512), (512,), (512, 10), (10,))]
    small = [np.array([[1, 0.5, -0.5, 2]], dtype=np.float32)]
    for tier in ("python", "c"):
        for path, inputs, calls in ((model, big, 1), (SMALL_MODEL, small, 50)):
            times[f"{tier} tier {path.name} predict, fuel+timeout"] = model_times(
                path.read_bytes(), inputs, tier, rounds, calls)
    return times


def model_times(data: bytes, inputs, tier: str, rounds: int, calls: int) -> dict:
    """Seconds per predict call of a model, without limits and with Limits(fuel, timeout)."""
    import vmrt
    from vmrt.modules.hal import HalModule

    vmrt.Context(modules=[HalModule(device="local-sync"), vmrt.load_module(data)],
                 tier=tier).function("module.predict")(*inputs)  # (builds its C: see child)
    fns = {variant: vmrt.Context(modules=[HalModule(device="local-sync"),
                                          vmrt.load_module(data)], tier=tier,
                                 limits=limits).function("module.predict")
           for variant, limits in (("none", None),
                                   ("limits", vmrt.Limits(fuel=10**15, timeout=3600)))}
    return best_of({variant: (lambda fn=fn: fn(*inputs)) for variant, fn in fns.items()},
                   rounds, calls)


def run_side(tree: Path, cache: Path, rounds: int, model: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), VMRT_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                          str(model), "--rounds", str(rounds)], env=env, cwd=tree,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def compile_model(folder: Path) -> Path:
    """benchmarks/models/mlp.mlir compiled for VMVX into `folder`."""
    output = folder / "mlp_vmvx.vmfb"
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=vmvx", str(MODEL_SOURCE),
                    "-o", str(output)], check=True)
    return output


def merge(best: dict, times: dict) -> None:
    for case, variants in times.items():
        for variant, seconds in variants.items():
            slot = best.setdefault(case, {})
            slot[variant] = min(slot.get(variant, float("inf")), seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout of the code to compare with")
    parser.add_argument("--rounds", type=int, default=15, help="timings per child")
    parser.add_argument("--children", type=int, default=3, help="child processes per side")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds, args.child)))
        return 0
    if args.before is None:
        parser.error("--before DIR is required")
    sides = {"before": args.before.resolve(), "after": ROOT}
    best = {side: {} for side in sides}
    with tempfile.TemporaryDirectory(prefix="limits_bench_") as scratch:
        caches = {side: Path(scratch, side) for side in sides}
        for cache in caches.values():
            cache.mkdir(mode=0o700)
        model = compile_model(Path(scratch))
        for _ in range(args.children):
            for side, tree in sides.items():
                merge(best[side], run_side(tree, caches[side], args.rounds, model))
    print(f"{'case':<46} {'before ms':>10} {'+limits':>9} {'ratio':>6}   "
          f"{'after ms':>9} {'+limits':>9} {'ratio':>6}")
    for case in best["after"]:
        cells = []
        for side in sides:
            none, limited = best[side][case]["none"], best[side][case]["limits"]
            cells += [f"{none * 1e3:>9.3f}", f"{limited * 1e3:>9.3f}", f"{limited / none:>5.3f}x"]
        print(f"{case:<46} {cells[0]:>10} {cells[1]} {cells[2]:>6}   "
              f"{cells[3]:>9} {cells[4]} {cells[5]:>6}")
    print(f"(best of {args.children} x {args.rounds} timings a side, with and without limits "
          "in turns; ratio: with limits / without, same side)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
