"""MLP inference per call: vmrt (hal module over local-sync / local-task) beside
iree.runtime on the same machine, in one run (these machines are noisy: read
the ratio). Usage: python benchmarks/hal_bench.py [--calls N] [--vmfb PATH]"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import vmrt
from vmrt.modules.hal import HalModule

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mlp.vmfb"
INPUT = np.array([[1, 0.5, -0.5, 2]], dtype=np.float32)


def per_call_ms(fn, calls: int, rounds: int = 5) -> float:
    """Best of `rounds` averages of `calls` calls, in milliseconds."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--vmfb", type=Path, default=EXAMPLE)
    args = parser.parse_args()
    results = {}
    for device in ("local-sync", "local-task"):
        hal = HalModule(device=device)
        ctx = vmrt.Context(modules=[hal, vmrt.load_module(args.vmfb)])
        predict = ctx.function("module.predict")
        results[f"vmrt {device}"] = per_call_ms(lambda: predict(INPUT), args.calls)
        ctx.close()
        for d in hal.devices:
            d.close()
    try:
        import iree.runtime as rt
    except ImportError:
        rt = None
    if rt is not None:
        ctx = rt.SystemContext(config=rt.Config("local-sync"))
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, args.vmfb.read_bytes()))
        predict = ctx.modules.module["predict"]
        results["iree.runtime local-sync"] = per_call_ms(
            lambda: predict(INPUT).to_host(), args.calls * 10)
    reference = results.get("iree.runtime local-sync")
    for name, ms in results.items():
        ratio = f"  ({ms / reference:.1f}x iree.runtime)" if reference and "vmrt" in name else ""
        print(f"{args.vmfb.name} predict, {name}: {ms:.3f} ms/call{ratio}")


if __name__ == "__main__":
    main()
