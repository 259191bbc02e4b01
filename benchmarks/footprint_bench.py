"""Footprint and first call on real models: vmrt beside iree.runtime, one fresh process each.

    python benchmarks/footprint_bench.py MODEL_DIR [--models a,b] [--device local-sync]
        [--calls 50] [--repeat 3]

MODEL_DIR holds what benchmarks/export_models.py writes (NAME.vmfb and NAME.json with
its inputs; NAME_params.vmfb runs with NAME.irpa as the `model` scope). For each model
and runtime, a fresh process measures:

- private memory (RssAnon) added by load + first call, and after `--calls` more calls;
- the time of load + first call (import time excluded; vmrt's code cache warm: a first
  process fills it and is not counted).

The best of `--repeat` processes is shown for time, the last for memory, with vmrt's
figures as ratios of iree.runtime's. The bars (issue 33): memory <= iree.runtime's +
16 MiB, load + first call <= 1.5x. Outputs of the two runtimes must agree (max |diff| is
printed), else the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

#: One measurement, in a fresh process: RUNTIME VMFB INPUTS_JSON IRPA|- DEVICE CALLS.
CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    which, path, inputs, irpa, device, calls = sys.argv[1:7]
    def anon():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon"):
                return int(line.split()[1]) * 1024
    rng = np.random.default_rng(0)
    args = [rng.integers(0, 1000, shape).astype(dtype) if dtype.startswith("int")
            else rng.standard_normal(shape).astype(dtype) for shape, dtype in json.loads(inputs)]
    if which == "iree":
        import iree.runtime as rt
        def load():
            config = rt.Config(device)
            modules = [rt.create_hal_module(config.vm_instance, config.device)]
            if irpa != "-":
                index = rt.ParameterIndex()
                index.load(irpa)
                modules.append(rt.create_io_parameters_module(
                    config.vm_instance, index.create_provider(scope="model")))
            main = rt.VmModule.mmap(config.vm_instance, path)
            context = rt.SystemContext(vm_modules=modules + [main], config=config)
            name = [n for n in main.function_names if not n.startswith("__") and "$async" not in n][0]
            function = context.modules[main.name][name]
            return context, lambda: np.asarray(function(*args).to_host())
    else:
        import vmrt, vmrt.api, vmrt.modules.hal, vmrt.modules.natives
        def load():
            loaded = vmrt.load(path, device=device,
                               parameters=None if irpa == "-" else {"model": irpa})
            name = [n for n in loaded.exports if not n.startswith("__") and "$async" not in n][0]
            function = loaded.function(name)
            return loaded, lambda: np.asarray(function(*args))
    before = anon()
    start = time.perf_counter()
    keep, call = load()
    out = call()
    first = time.perf_counter() - start
    after_first = anon()
    for _ in range(int(calls)):
        out = call()
    after = anon()
    np.save(sys.argv[7], out)
    print(json.dumps({"first": first, "mem_first": after_first - before, "mem": after - before}))
""")


def measure(runtime: str, vmfb: Path, inputs: str, irpa: str, device: str, calls: int,
            out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, runtime, str(vmfb), inputs, irpa,
                           device, str(calls), str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{runtime} on {vmfb.name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--models", default="")
    parser.add_argument("--device", default="local-sync")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or sorted(
        p.stem for p in args.dir.glob("*.vmfb"))
    mib, status = 1 << 20, 0
    print(f"{'model':<22} {'MiB file':>8} | {'private MiB (first / +calls)':>30} | "
          f"{'load + first call ms':>28} | max|diff|")
    for name in names:
        vmfb, inputs = args.dir / f"{name}.vmfb", (args.dir / f"{name}.json").read_text()
        irpa = args.dir / (name.removesuffix("_params") + ".irpa")
        irpa = str(irpa) if name.endswith("_params") else "-"
        rows = {}
        for runtime in ("vmrt", "iree"):
            out = args.dir / f"{name}.{runtime}.npy"
            if runtime == "vmrt":  # fills vmrt's code cache: load + first call, warm
                measure(runtime, vmfb, inputs, irpa, args.device, 0, out)
            runs = [measure(runtime, vmfb, inputs, irpa, args.device, args.calls, out)
                    for _ in range(args.repeat)]
            rows[runtime] = dict(runs[-1], first=min(r["first"] for r in runs))
        v, r = rows["vmrt"], rows["iree"]
        diff = float(np.max(np.abs(np.load(args.dir / f"{name}.vmrt.npy").astype(np.float64)
                                   - np.load(args.dir / f"{name}.iree.npy"))))
        memory_ok = v["mem"] <= r["mem"] + 16 * mib
        time_ok = v["first"] <= 1.5 * r["first"]
        status |= diff > 1e-4 or not memory_ok or not time_ok
        print(f"{name:<22} {vmfb.stat().st_size / mib:8.0f} | vmrt {v['mem_first'] / mib:5.1f}/"
              f"{v['mem'] / mib:5.1f} iree {r['mem_first'] / mib:5.1f}/{r['mem'] / mib:5.1f} "
              f"{'ok' if memory_ok else 'OVER'} | {v['first'] * 1e3:7.1f} vs "
              f"{r['first'] * 1e3:7.1f} = {v['first'] / r['first']:4.2f}x "
              f"{'ok' if time_ok else 'OVER'} | {diff:.2e}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
