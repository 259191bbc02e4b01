"""Benchmark: the C tier's build and start-up, per module, beside the Python tier.

    python benchmarks/ctier_bench.py [MODULE.vmfb ...] [--repeat N]

For each module (default: benchmarks/vm_bench.vmasm assembled by vmrt, the modules
of build/corpus, and the VMVX executables inside the models of
build/native_models/*vmvx*.vmfb when present), each measurement in a fresh process:

    cold C      VMRT_TIER=c, empty cache: generate C, compile, load, bind every export
    warm C      VMRT_TIER=c, the build cached: load the module, bind every export
    warm Python VMRT_TIER=python, its code cached: the same

and how many of the module's functions the C tier compiles. The issue's bar: warm C
at most 2x warm Python. Prints a table; the time is the best of --repeat runs.
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

#: Loads a module and binds each export (for C: builds or loads its extension).
PROBE = r"""
import sys, time
start = time.perf_counter()
from vmrt.vm.module import load_module
from vmrt.vm.context import Context, Instance
module = load_module(open(sys.argv[1], 'rb').read())
instance = module.instantiate(Context(Instance()))
for name in module.export_names():
    ordinal = module.export_ordinal(name)
    if ordinal not in module.generators:
        instance.function(ordinal)
print(time.perf_counter() - start)
"""


def vmvx_executables(model: Path, out: Path) -> list[Path]:
    """The VMVX executables (zipped VM modules) in a model's rodata."""
    from vmrt.vm.module import load_module

    found = []
    for i, segment in enumerate(load_module(model.read_bytes()).definition.rodata_segments):
        data = bytes(segment.data)
        if data[:2] == b"PK":
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                if any(n.endswith(".fb") for n in archive.namelist()):
                    path = out / f"{model.stem}.exe{i}.vmfb"
                    path.write_bytes(data)
                    found.append(path)
    return found


def default_modules(out: Path) -> list[Path]:
    from vmrt.asm import assemble

    bench = out / "vm_bench.vmfb"
    bench.write_bytes(assemble((HERE / "vm_bench.vmasm").read_text()))
    modules = [bench] + [Path(p) for p in sorted(glob.glob(str(ROOT / "build/corpus/*.vmfb")))]
    for model in sorted(glob.glob(str(ROOT / "build/native_models/*.vmfb"))):
        try:
            modules += vmvx_executables(Path(model), out)
        except Exception:  # (llvm-cpu builds hold no VM modules)
            continue
    return modules


def timed(module: Path, tier: str, cache: Path) -> float:
    env = dict(os.environ, VMRT_TIER=tier, VMRT_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(module)], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise SystemExit(f"{module}: {proc.stderr.strip().splitlines()[-1]}")
    return float(proc.stdout.split()[-1])


def compiled_share(module: Path) -> tuple[int, int]:
    from vmrt.vm.ctier.analysis import compilable_functions
    from vmrt.vm.module import load_module

    loaded = load_module(module.read_bytes())
    shapes, _ = compilable_functions(loaded)
    return len(shapes), len(loaded.verified)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        modules = args.modules or default_modules(tmp)
        print(f"{'module':44} {'in C':>9} {'cold C s':>9} {'warm C s':>9} {'warm Py s':>9} "
              f"{'C/Py':>6}")
        for module in modules:
            cache = Path(tempfile.mkdtemp(dir=tmp))
            cache.chmod(0o700)
            cold = timed(module, "c", cache)
            warm_c = min(timed(module, "c", cache) for _ in range(args.repeat))
            timed(module, "python", cache)
            warm_py = min(timed(module, "python", cache) for _ in range(args.repeat))
            done, total = compiled_share(module)
            print(f"{module.name[:44]:44} {f'{done}/{total}':>9} {cold:9.3f} {warm_c:9.3f} "
                  f"{warm_py:9.3f} {warm_c / warm_py:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
