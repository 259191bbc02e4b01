"""Benchmark: start-up of vmrt beside its references, in one run ("first contact").

    python benchmarks/startup_bench.py [--repeat 10] [--dir /tmp] [--keep] [--skip-model]

Prints, best of --repeat fresh processes each:

1. the wall time of `vmrt run` of examples/scalar.vmfb (code cache warm) against
   `python -c "import numpy"`, and their ratio (bar: <= 1.5x);
2. the time `import vmrt` takes of its own: the cumulative figure of
   `python -X importtime -c "import vmrt"`, and the wall time of that process
   minus `python -c pass` (bar: <= 60 ms);
3. the 256-parameter model of benchmarks/params_bench.py (256 x 4 MiB
   parameters, a 1 GiB IRPA built under --dir): the time from a fresh process to
   its first context, measured inside the process around loading the module and
   creating the context with the hal and io_parameters modules (the device and
   the parameter index are made before), in vmrt with a warm code cache and with
   an empty one (vmrt.vm.code_cache), against iree.runtime (VmModule.mmap +
   create_hal_module + create_io_parameters_module + VmContext); ratio warm /
   reference (bar: <= 5x). "since spawn" adds the interpreter start and imports.

Every vmrt process uses a code cache directory of this benchmark's own
(VMRT_CACHE_DIR under a temporary directory), never the user's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

SCALAR = REPO_ROOT / "examples" / "scalar.vmfb"
SCALAR_ARGS = ["run", f"--module={SCALAR}", "--function=demo", "--input=48", "--input=18",
               "--input=27", "--input=2.0"]
BAR_RUN_RATIO = 1.5
BAR_IMPORT_MS = 60.0
BAR_CONTEXT_RATIO = 5.0

#: The first context of the model, in a fresh process (argv: model, archive, spawn
#: time). Prints the seconds around load + context creation and since the spawn.
VMRT_CONTEXT = r"""
import json, sys, time
from vmrt.hal import create_device
from vmrt.io import FileCache, IndexProvider, ParameterIndex
from vmrt.modules.hal import HalModule
from vmrt.modules.io_parameters import IoParametersModule
from vmrt.vm.context import Context, Instance
from vmrt.vm.module import load_module
from vmrt.vm import code_cache

model, archive, spawned = sys.argv[1], sys.argv[2], float(sys.argv[3])
index = ParameterIndex.load(archive, cache=FileCache())
device = create_device("local-sync")
start = time.perf_counter()
module = load_module(model)
context = Context(Instance(), [HalModule([device], host_arrays=False),
                               IoParametersModule([IndexProvider("model", index)]), module])
region = time.perf_counter() - start
since_spawn = time.time() - spawned
stats = code_cache.STATS
print(json.dumps({"region": region, "since_spawn": since_spawn, "hits": stats.hits,
                  "misses": stats.misses}))
"""

REFERENCE_CONTEXT = r"""
import json, sys, time
import iree.runtime as rt

model, archive, spawned = sys.argv[1], sys.argv[2], float(sys.argv[3])
index = rt.ParameterIndex()
index.load(archive)
instance = rt.VmInstance()
device = rt.get_device("local-sync")
start = time.perf_counter()
module = rt.VmModule.mmap(instance, model)
hal = rt.create_hal_module(instance, device)
params = rt.create_io_parameters_module(instance, index.create_provider(scope="model"))
context = rt.VmContext(instance, modules=[hal, params, module])
region = time.perf_counter() - start
since_spawn = time.time() - spawned
print(json.dumps({"region": region, "since_spawn": since_spawn}))
"""


def environment(cache_dir: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VMRT_CACHE")}
    if cache_dir is not None:
        env["VMRT_CACHE_DIR"] = cache_dir
    return env


def best_wall(command: list[str], repeat: int, env: dict) -> float:
    """Seconds of the fastest of `repeat` runs of a command (after one warm-up run)."""
    best = float("inf")
    for i in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, cwd=REPO_ROOT)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr.decode()}")
        if i:
            best = min(best, elapsed)
    return best


def vmrt_command() -> list[str]:
    """`vmrt` as pip installs it (the console script beside this Python, not a shell
    shim in front of it), else the module it runs."""
    script = Path(sys.executable).with_name("vmrt")
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "vmrt.tools.cli"]


def verdict(value: float, bar: float) -> str:
    return f"<= {bar:g} ok" if value <= bar else f"> {bar:g} MISSED"


# -- 1 and 2 ------------------------------------------------------------------------------------
def report_run(repeat: int, cache_dir: str) -> None:
    env = environment(cache_dir)
    numpy = best_wall([sys.executable, "-c", "import numpy"], repeat, env)
    run = best_wall(vmrt_command() + SCALAR_ARGS, repeat, env)
    ratio = run / numpy
    print(f"1. vmrt run scalar.vmfb {run * 1e3:7.1f} ms | python -c 'import numpy' "
          f"{numpy * 1e3:7.1f} ms | ratio {ratio:4.2f}x  {verdict(ratio, BAR_RUN_RATIO)}")


def import_vmrt_cumulative(env: dict) -> float:
    """Seconds `import vmrt` takes by -X importtime (its cumulative line)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import vmrt"],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=True)
    match = re.search(r"^import time:\s+\d+ \|\s+(\d+) \| vmrt$", proc.stderr, re.M)
    return int(match.group(1)) / 1e6


def report_import(repeat: int, cache_dir: str) -> None:
    env = environment(cache_dir)
    own = min(import_vmrt_cumulative(env) for _ in range(repeat))
    bare = best_wall([sys.executable, "-c", "pass"], repeat, env)
    with_vmrt = best_wall([sys.executable, "-c", "import vmrt"], repeat, env)
    print(f"2. import vmrt: -X importtime {own * 1e3:6.1f} ms | process minus "
          f"'python -c pass' {(with_vmrt - bare) * 1e3:6.1f} ms  "
          f"{verdict(max(own, with_vmrt - bare) * 1e3, BAR_IMPORT_MS)}")


# -- 3 ------------------------------------------------------------------------------------------
def first_context(script: str, model: str, archive: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, model, archive, repr(time.time())],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"first context failed:\n{proc.stderr}")
    return json.loads(proc.stdout.splitlines()[-1])


def best_first_context(script: str, model: str, archive: str, repeat: int, cache_dir) -> dict:
    """Fastest region and since-spawn times of `repeat` fresh processes; `cache_dir`
    None gives each process an empty cache directory of its own (a cold start)."""
    runs = []
    for _ in range(repeat):
        directory = cache_dir or tempfile.mkdtemp(prefix="cold-", dir=os.path.dirname(model))
        runs.append(first_context(script, model, archive, environment(directory)))
        if cache_dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    return {"region": min(r["region"] for r in runs),
            "since_spawn": min(r["since_spawn"] for r in runs),
            "hits": runs[-1].get("hits"), "misses": runs[-1].get("misses")}


def build_model(workdir: str) -> tuple[str, str]:
    from params_bench import BIG_COUNT, BIG_SIZE, build_archives, compile_inputs

    print(f"building the {BIG_COUNT} x {BIG_SIZE >> 20} MiB parameter model in {workdir} ...",
          flush=True)
    big, _ = build_archives(workdir)
    model, _ = compile_inputs(workdir)
    return model, big


def report_model(repeat: int, workdir: str) -> None:
    import importlib.util

    if shutil.which("iree-compile") is None or importlib.util.find_spec("iree.runtime") is None:
        print("3. skipped: needs iree-compile and iree.runtime (pip install vmrt[test])")
        return
    model, archive = build_model(workdir)
    warm_dir = os.path.join(workdir, "warm-cache")
    first_context(VMRT_CONTEXT, model, archive, environment(warm_dir))  # fills the cache
    warm = best_first_context(VMRT_CONTEXT, model, archive, repeat, warm_dir)
    cold = best_first_context(VMRT_CONTEXT, model, archive, repeat, None)
    reference = best_first_context(REFERENCE_CONTEXT, model, archive, repeat, None)
    ratio = warm["region"] / reference["region"]
    print(f"3. first context of the 256-parameter model (1 GiB IRPA), fresh process, "
          f"load + context [since spawn]:")
    print(f"   vmrt, warm code cache  {warm['region'] * 1e3:8.2f} ms "
          f"[{warm['since_spawn'] * 1e3:7.1f} ms]  (cache hits {warm['hits']}, "
          f"misses {warm['misses']})")
    print(f"   vmrt, empty code cache {cold['region'] * 1e3:8.2f} ms "
          f"[{cold['since_spawn'] * 1e3:7.1f} ms]")
    print(f"   iree.runtime           {reference['region'] * 1e3:8.2f} ms "
          f"[{reference['since_spawn'] * 1e3:7.1f} ms]")
    print(f"   warm / reference: {ratio:5.1f}x  {verdict(ratio, BAR_CONTEXT_RATIO)} "
          f"(since spawn: {warm['since_spawn'] / reference['since_spawn']:4.2f}x; "
          f"empty cache / warm: {cold['region'] / warm['region']:4.1f}x)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--dir", default=tempfile.gettempdir(),
                        help="where the model and its 1 GiB archive are built")
    parser.add_argument("--keep", action="store_true", help="keep the built model")
    parser.add_argument("--skip-model", action="store_true", help="only items 1 and 2")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="vmrt-startup-bench-", dir=args.dir)
    try:
        cache_dir = os.path.join(workdir, "cache")
        print(f"python {sys.version.split()[0]}, best of {args.repeat} fresh processes")
        report_run(args.repeat, cache_dir)
        report_import(args.repeat, cache_dir)
        if not args.skip_model:
            free = shutil.disk_usage(args.dir).free
            if free < 2 << 30:
                raise SystemExit(f"need 2 GiB free in {args.dir}, have {free >> 20} MiB")
            report_model(args.repeat, workdir)
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
