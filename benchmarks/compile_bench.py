"""Benchmark: vmrt.load(model.onnx) beside onnxruntime and the iree-compile default build.

    python benchmarks/compile_bench.py OUT_DIR --torch-python PYTHON
        [--models resnet18,mobilenet_v3_small,bert] [--tune] [--seconds S]

For real architectures others wrote (torchvision ResNet-18 and MobileNetV3-small,
a 4-layer transformers BERT encoder; benchmarks/export_models.py's export, seeded
random weights, no download), exported to ONNX in `--torch-python` (which also
runs torch for the reference outputs and onnxruntime), side by side in one run:

- ms per call of the module vmrt.load(model.onnx) compiles (flags chosen for this
  host, checked against the default build), of the build `iree-import-onnx` +
  `iree-compile --iree-llvmcpu-target-cpu=host` makes (run by vmrt), both on
  local-sync and local-task, and of onnxruntime with 1 and 2 intra-op threads
  (local-task has one worker per usable CPU: 2 here), and of vmrt's module under
  iree.runtime (what IREE's own runtime makes of the same code);
- the largest difference of each output from torch's (beside the largest torch
  output, which says what the difference is relative to);
- a second process's vmrt.load(model.onnx) (a compile-cache hit) beside one
  loading the same module saved as .vmfb (load and first call, median of 3).

Bars (issue 36): within 1e-4 of torch; never slower than the default build; a
CNN within 2x and the encoder within 1.3x of onnxruntime on local-task; the
cache hit within 1.5x of loading the .vmfb. Files stay in OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from export_models import EXPORT  # noqa: E402

#: Appended to export_models' export: the inputs and torch's outputs, for the checks.
REFERENCE = textwrap.dedent("""
    import numpy as np
    with torch.no_grad():
        result = model(*inputs)
    result = result if isinstance(result, (tuple, list)) else [result]
    np.savez(out + ".inputs.npz", *[t.numpy() for t in inputs])
    np.savez(out + ".torch.npz", *[t.numpy() for t in result])
""")

#: onnxruntime in the torch Python: MODEL INPUTS THREADS SECONDS -> ms per call, outputs.
ONNXRUNTIME = textwrap.dedent("""
    import json, sys, time, numpy as np, onnxruntime as ort
    model, inputs, threads, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    arrays = list(np.load(inputs).values())
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
    outputs = session.run(None, feeds)
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        before = time.perf_counter(); session.run(None, feeds)
        times.append(time.perf_counter() - before)
    np.savez(sys.argv[5], *outputs)
    print(json.dumps({"ms": 1e3 * sorted(times)[len(times) // 2]}))
""")

#: A fresh process timing vmrt.load of MODULE (and its first call).
LOAD_ONCE = textwrap.dedent("""
    import json, sys, time
    start = time.perf_counter()
    import numpy as np, vmrt
    arrays = list(np.load(sys.argv[2]).values())
    loaded = time.perf_counter()
    with vmrt.load(sys.argv[1], device="local-task") as m:
        opened = time.perf_counter()
        m.function(sys.argv[3])(*arrays)
        called = time.perf_counter()
    from vmrt.compiler import session
    print(json.dumps({"load_ms": 1e3 * (opened - loaded), "first_call_ms": 1e3 * (called - loaded),
                      "compiles": session.COUNTS.compiles}))
""")


def export(name: str, out: Path, torch_python: str) -> Path:
    onnx = out / f"{name}.onnx"
    if not (onnx.exists() and Path(f"{onnx}.torch.npz").exists()):
        print(f"exporting {name}", flush=True)
        subprocess.run([torch_python, "-W", "ignore", "-c", EXPORT + REFERENCE, name, str(onnx)],
                       check=True, capture_output=True)
    return onnx


def time_calls(call, seconds: float) -> float:
    """Median ms per call over at least 5 calls and `seconds`."""
    call()
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        before = time.perf_counter()
        call()
        times.append(time.perf_counter() - before)
    return 1e3 * statistics.median(times)


def worst_difference(outputs, reference) -> float:
    import numpy as np
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return max(float(np.max(np.abs(np.asarray(o, np.float64) - r)))
               for o, r in zip(outputs, reference))


def default_build(onnx: Path) -> Path:
    """What a user gets from the IREE tools with the defaults (and the host's CPU)."""
    vmfb = onnx.with_suffix(".default.vmfb")
    if not vmfb.exists():
        mlir = onnx.with_suffix(".mlir")
        subprocess.run(["iree-import-onnx", str(onnx), "-o", str(mlir)], check=True)
        subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                        "--iree-hal-local-target-device-backends=llvm-cpu",
                        "--iree-llvmcpu-target-cpu=host", str(mlir), "-o", str(vmfb)], check=True)
        mlir.unlink()
    return vmfb


def iree_runtime_ms(vmfb: bytes, function: str, arrays: list, device: str,
                    seconds: float) -> float:
    """ms per call of the module under iree.runtime: what IREE's runtime makes of the
    same compiled code (it tells the compiler's share from vmrt's)."""
    import iree.runtime as ireert
    context = ireert.SystemContext(config=ireert.Config(device))
    context.add_vm_module(ireert.VmModule.copy_buffer(context.instance, vmfb))
    call = context.modules.module[function]
    return time_calls(lambda: call(*arrays).to_host(), seconds)


def fresh_process_ms(module: Path, inputs: Path, function: str, repeat: int = 3) -> dict:
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", LOAD_ONCE, str(module), str(inputs),
                               function], capture_output=True, text=True, check=True,
                              cwd=REPO)
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def bench_model(name: str, args) -> dict:
    import numpy as np
    import vmrt
    onnx = export(name, args.out, args.torch_python)
    inputs_file = Path(f"{onnx}.inputs.npz")
    arrays = list(np.load(inputs_file).values())
    reference = list(np.load(f"{onnx}.torch.npz").values())
    row: dict = {"model": name, "torch_scale": max(float(np.max(np.abs(r))) for r in reference)}
    started = time.perf_counter()
    compiled = vmrt.compile(onnx, tune=args.tune, example_args=arrays)
    row["compile_s"] = round(time.perf_counter() - started, 1)
    row["chosen"] = compiled.record["chosen"]
    row["candidates"] = compiled.record["candidates"]
    saved = args.out / f"{name}.vmrt.vmfb"
    compiled.save(saved)
    baseline = default_build(onnx)
    # (tuned, the cache entry vmrt.load(onnx) finds is the untuned one: load the choice)
    for label, source in (("vmrt", compiled if args.tune else onnx), ("default", baseline)):
        for device in ("local-sync", "local-task"):
            with vmrt.load(source, device=device) as m:
                fn = m.function(compiled.function)
                row[f"{label}_{device}_maxdiff"] = worst_difference(fn(*arrays), reference)
                row[f"{label}_{device}_ms"] = time_calls(lambda: fn(*arrays), args.seconds)
    for device in ("local-sync", "local-task"):  # (the same module, IREE's own runtime)
        row[f"iree_{device}_ms"] = iree_runtime_ms(bytes(compiled), compiled.function, arrays,
                                                   device, args.seconds)
    for threads in (1, 2):
        outputs = args.out / f"{name}.ort{threads}.npz"
        done = subprocess.run([args.torch_python, "-c", ONNXRUNTIME, str(onnx), str(inputs_file),
                               str(threads), str(args.seconds), str(outputs)],
                              capture_output=True, text=True, check=True)
        row[f"ort{threads}_ms"] = json.loads(done.stdout.splitlines()[-1])["ms"]
        row[f"ort{threads}_maxdiff"] = worst_difference(list(np.load(outputs).values()),
                                                        reference)
    row["hit"] = fresh_process_ms(onnx, inputs_file, compiled.function)
    row["vmfb"] = fresh_process_ms(saved, inputs_file, compiled.function)
    return row


def print_table(rows: list[dict]) -> None:
    print("\n| model | vmrt.load(.onnx) sync / task | same module, iree.runtime sync / task "
          "| iree-compile default sync / task "
          "| onnxruntime 1 / 2 threads | task vs ORT-2 | max diff vs torch (vmrt, default, ORT) "
          "| max abs torch output | flags chosen | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['vmrt_local-sync_ms']:.2f} / {r['vmrt_local-task_ms']:.2f} "
              f"| {r['iree_local-sync_ms']:.2f} / {r['iree_local-task_ms']:.2f} "
              f"| {r['default_local-sync_ms']:.2f} / {r['default_local-task_ms']:.2f} "
              f"| {r['ort1_ms']:.2f} / {r['ort2_ms']:.2f} "
              f"| {r['vmrt_local-task_ms'] / r['ort2_ms']:.2f}x "
              f"| {r['vmrt_local-task_maxdiff']:.1e}, {r['default_local-task_maxdiff']:.1e}, "
              f"{r['ort2_maxdiff']:.1e} | {r['torch_scale']:.3g} | {r['chosen']} "
              f"| {r['compile_s']} |")
    print("\n| model | 2nd process vmrt.load(.onnx): load / +first call ms (compiles) "
          "| vmrt.load(.vmfb): load / +first call ms | ratio (load+call) |")
    print("|---|---|---|---|")
    for r in rows:
        hit, vmfb = r["hit"], r["vmfb"]
        print(f"| {r['model']} | {hit['load_ms']:.1f} / {hit['first_call_ms']:.1f} "
              f"({hit['compiles']:.0f}) | {vmfb['load_ms']:.1f} / {vmfb['first_call_ms']:.1f} "
              f"| {hit['first_call_ms'] / vmfb['first_call_ms']:.2f}x |")
    for r in rows:
        timed = ", ".join(f"{c['name']} {c['ms_per_call']} ms" if c["ms_per_call"] else
                          f"{c['name']}{' (rejected: ' + c['rejected'] + ')' if c['rejected'] else ''}"
                          for c in r["candidates"])
        print(f"{r['model']} candidates: {timed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--models", default="resnet18,mobilenet_v3_small,bert")
    parser.add_argument("--tune", action="store_true", help="vmrt.compile(tune=True)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing per contender")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()}", flush=True)
    rows = []
    for name in [n for n in args.models.split(",") if n]:
        rows.append(bench_model(name, args))
        print(json.dumps(rows[-1], default=str), flush=True)
    print(f"load average after: {os.getloadavg()}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
