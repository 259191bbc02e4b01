"""Benchmark: a VMVX model's first call with an empty cache, vmrt beside iree.runtime.

    python benchmarks/cold_start_bench.py [--models mlp,cnn,transformer] [--repeat 3]
        [--calls 3] [--device local-sync]

Each model (benchmarks/models/*.mlir, compiled by iree-compile for VMVX, cached as
native_models_bench caches its builds) is run in fresh processes, same inputs
(random, fixed seed) in each:

    iree        iree.runtime.load_vm_flatbuffer_file(path, driver=--device), then calls
    vmrt cold   vmrt.load(path, device=--device) with VMRT_CACHE_DIR an empty directory
                (nothing built: the C tier's build of the executables runs now), then calls
    vmrt warm   the same with the cache the cold process left (the C tier loads its build)

and prints, per model, the time from load to the first call's result (load + first
call; excluded: making the inputs, and the imports but those only a build makes),
the best of the --calls later calls, and the issue's ratios: vmrt cold's load + first
call over iree's (bar: <= 2x), and vmrt cold's later calls over vmrt warm's (the C
tier's full speed: ~1x). Every figure is the median over --repeat processes.
Outputs must agree with iree.runtime's within 1e-5 of its max |value| (exit status 1
otherwise). VMRT_TIER is left as the environment has it (default: auto).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import native_models_bench as models  # noqa: E402 (inputs, twins and cached builds)

BAR_COLD_RATIO = 2.0
MODEL_NAMES = ("mlp", "cnn", "transformer")

#: One fresh process (argv: runtime, model name, .vmfb, device, later calls, output
#: .npy): prints {"first": load + first call, "later": [each later call]} as JSON.
CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[7])
import native_models_bench as models
runtime, name, path, device, calls, output = sys.argv[1:7]
inputs = models.MODELS[name][0](np.random.default_rng(0))
if runtime == "iree":
    import iree.runtime as rt
    start = time.perf_counter()
    module = rt.load_vm_flatbuffer_file(path, driver=device)
    call = lambda: np.asarray(module.predict(*inputs))
else:
    import vmrt
    # (what a load and a call import with the cache warm; a build's own imports count)
    import vmrt.api, vmrt.vm.context, vmrt.modules.natives, vmrt.modules.hal
    import vmrt.hal.vmvx_loader, vmrt.hal.vmvx_module, vmrt.vm.ctier.runtime
    start = time.perf_counter()
    module = vmrt.load(path, device=device)
    call = lambda: np.asarray(module.predict(*inputs))
result = call()
first = time.perf_counter() - start
later = []
for _ in range(int(calls)):
    begin = time.perf_counter()
    call()
    later.append(time.perf_counter() - begin)
np.save(output, result)
print(json.dumps({"first": first, "later": later}))
"""


def run_child(runtime: str, name: str, path: Path, args, env: dict, output: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, runtime, name, str(path), args.device,
                           str(args.calls), str(output), str(HERE)],
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"cold_start_bench: {runtime} failed on {name}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(name: str, path: Path, args, scratch: Path) -> dict:
    """Medians over --repeat rounds of the three processes, and whether outputs agree."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    rows: dict[str, list[dict]] = {"iree": [], "cold": [], "warm": []}
    agree = True
    for round_index in range(args.repeat):
        cache = Path(tempfile.mkdtemp(prefix="cache.", dir=scratch))
        os.chmod(cache, 0o700)
        vmrt_env = dict(env, VMRT_CACHE_DIR=str(cache))
        outputs = {kind: scratch / f"{name}.{kind}.{round_index}.npy" for kind in rows}
        rows["iree"].append(run_child("iree", name, path, args, env, outputs["iree"]))
        rows["cold"].append(run_child("vmrt", name, path, args, vmrt_env, outputs["cold"]))
        rows["warm"].append(run_child("vmrt", name, path, args, vmrt_env, outputs["warm"]))
        reference = np.load(outputs["iree"])
        scale = float(np.max(np.abs(reference))) or 1.0
        for kind in ("cold", "warm"):
            error = float(np.max(np.abs(np.load(outputs[kind]) - reference)))
            agree = agree and error <= models.RUNTIME_TOLERANCE * scale
    return {kind: {"first": statistics.median(r["first"] for r in runs),
                   "later": statistics.median(min(r["later"]) for r in runs)}
            for kind, runs in rows.items()} | {"agree": agree}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODEL_NAMES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--device", default="local-sync")
    args = parser.parse_args()
    tool = models.compiler_tool()
    version = models.compiler_version(tool)
    flags = models.build_flags("vmvx", None, False)
    print(f"VMVX models, {args.device}, median of {args.repeat} fresh processes each "
          f"(VMRT_TIER={os.environ.get('VMRT_TIER', 'auto')}); seconds")
    print(f"{'model':<12} {'iree 1st':>9} {'vmrt cold 1st':>14} {'ratio':>6}   "
          f"{'iree later':>10} {'vmrt later':>10} {'vmrt warm later':>15} {'later/warm':>10}")
    failed = False
    with tempfile.TemporaryDirectory(prefix="vmrt-cold-start.") as scratch:
        for name in args.models.split(","):
            path = models.compile_model(tool, version, name, flags)
            got = measure(name, path, args, Path(scratch))
            iree, cold, warm = got["iree"], got["cold"], got["warm"]
            ratio = cold["first"] / iree["first"]
            note = "" if got["agree"] else "  OUTPUTS DIFFER"
            failed = failed or not got["agree"]
            print(f"{name:<12} {iree['first']:9.3f} {cold['first']:14.3f} {ratio:5.2f}x   "
                  f"{iree['later']:10.3f} {cold['later']:10.3f} {warm['later']:15.3f} "
                  f"{cold['later'] / warm['later']:9.2f}x{note}", flush=True)
    print(f"bar: vmrt cold 1st / iree 1st <= {BAR_COLD_RATIO}x; vmrt later ~ vmrt warm later")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
