"""Real models on native llvm-cpu executables: vmrt beside iree.runtime, same .vmfb.

    python benchmarks/native_models_bench.py [--target-cpu generic,host] [--system]
        [--vmvx] [--models mlp,cnn,transformer,elementwise]
        [--devices local-sync,local-task] [--rounds N] [--round-time S] [--budget S]
        [--quick] [--no-preflight]

Models (benchmarks/models/*.mlir, weights passed as arguments):

    mlp          784-512-512-10, batch 32, relu
    cnn          1x64x64x3 -> conv3x3 32 -> relu -> conv3x3 32 -> relu -> GAP -> dense 10
    transformer  one pre-norm encoder block, seq 128, d_model 256, 4 heads, MLP 1024, gelu
    elementwise  a 12-op elementwise chain over 1024x1024 f32
    tiny         4-8-3, batch 1 (the example's shape: per-call overhead; bar 3x)

Each model is compiled with iree-compile for llvm-cpu, once per --target-cpu value
(default: both `generic` and `host`), in the default embedded ELF format, or the
system ELF format with --system (--iree-llvmcpu-link-embedded=false); --vmvx adds a
VMVX build (slow: vmrt takes ~20 s per mlp call there; pick models with --models).
Builds are cached under build/native_models/, keyed by the MLIR text, the flags and
the compiler version.

For each build and each device (local-sync, local-task) one process times a call of
`predict` through vmrt and through iree.runtime on the same .vmfb with the same
inputs (random, fixed seed). A call takes numpy arrays in and gives a host numpy
array out on both sides: vmrt returns numpy arrays (copies of the result buffers); iree.runtime's result is pulled with .to_host() (a
mapping of the device buffer on local devices). After
a warm-up call, rounds of calls alternate between the two runtimes (the order
flipping every round) so machine noise hits both; the figure is the best round's
time per call. Native builds are first run once through vmrt in a child process, so
that a crash there becomes a FAILED row instead of ending the run.

Outputs must agree between the runtimes within 1e-5 of the reference's max |value|
(after the first call and after the last timed one), and the reference must match
the model's numpy twin (below, in float64) within 1e-4: a mismatch or a vmrt failure
makes the exit status 1.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

MODELS_DIR = HERE / "models"
CACHE_DIR = ROOT / "build" / "native_models"
MODEL_NAMES = ("mlp", "cnn", "transformer", "elementwise", "tiny")
#: Models that measure per-call overhead (bar 3x), left out of the geomeans (bar 1.15x).
OVERHEAD_MODELS = ("tiny",)
DEVICES = ("local-sync", "local-task")
RUNTIME_TOLERANCE = 1e-5   # vmrt vs iree.runtime, relative to max |reference|
TWIN_TOLERANCE = 1e-4      # iree.runtime vs the numpy twin (float64), same scale


# -- inputs and numpy twins -------------------------------------------------------------------
def _dense(rng, fan_in: int, fan_out: int):
    w = (rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)).astype(np.float32)
    b = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
    return w, b


def mlp_inputs(rng):
    x = rng.standard_normal((32, 784)).astype(np.float32)
    return [x, *_dense(rng, 784, 512), *_dense(rng, 512, 512), *_dense(rng, 512, 10)]


def mlp_twin(x, w1, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    return h @ w3 + b3


def tiny_inputs(rng):
    return [rng.standard_normal((1, 4)).astype(np.float32), *_dense(rng, 4, 8),
            *_dense(rng, 8, 3)]


def tiny_twin(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def cnn_inputs(rng):
    x = rng.standard_normal((1, 64, 64, 3)).astype(np.float32)
    k1 = (rng.standard_normal((3, 3, 3, 32)) / math.sqrt(27)).astype(np.float32)
    k2 = (rng.standard_normal((3, 3, 32, 32)) / math.sqrt(288)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(32)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(32)).astype(np.float32)
    return [x, k1, b1, k2, b2, *_dense(rng, 32, 10)]


def _conv3x3_same(x, k):
    """NHWC x, HWIO k, stride 1, zero padding 1 (cross-correlation, as stablehlo)."""
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, w, k.shape[3]), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            out += padded[:, i:i + h, j:j + w, :] @ k[i, j]
    return out


def cnn_twin(x, k1, b1, k2, b2, w, b):
    h = np.maximum(_conv3x3_same(x, k1) + b1, 0)
    h = np.maximum(_conv3x3_same(h, k2) + b2, 0)
    pooled = h.mean(axis=(1, 2))
    return pooled @ w + b


def transformer_inputs(rng):
    d, f = 256, 1024
    x = rng.standard_normal((1, 128, d)).astype(np.float32)

    def norm():
        return ((1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
                (0.1 * rng.standard_normal(d)).astype(np.float32))
    return [x, *norm(), *_dense(rng, d, d), *_dense(rng, d, d), *_dense(rng, d, d),
            *_dense(rng, d, d), *norm(), *_dense(rng, d, f), *_dense(rng, f, d)]


def _layernorm(x, g, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def transformer_twin(x, ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b,
                     w1, b1, w2, b2, heads=4):
    x = x[0]
    seq, d = x.shape
    n = _layernorm(x, ln1_g, ln1_b)
    q, k, v = ((n @ w + b).reshape(seq, heads, d // heads).transpose(1, 0, 2)
               for w, b in ((wq, bq), (wk, bk), (wv, bv)))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(d // heads)          # [h, i, j]
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = scores / scores.sum(axis=-1, keepdims=True)
    ctx = (p @ v).transpose(1, 0, 2).reshape(seq, d)
    h = x + ctx @ wo + bo
    out = h + _gelu_tanh(_layernorm(h, ln2_g, ln2_b) @ w1 + b1) @ w2 + b2
    return out[None]


def elementwise_inputs(rng):
    return [rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2)]


def elementwise_twin(x, y):
    t = np.tanh(x * y + x)
    e = np.exp(t)
    r = np.sqrt(np.abs(np.maximum(e, y) - x)) / e
    return np.minimum(r * 0.5 + t, 2.0)


MODELS = {name: (globals()[f"{name}_inputs"], globals()[f"{name}_twin"]) for name in MODEL_NAMES}


# -- compiling --------------------------------------------------------------------------------
def compiler_tool() -> str:
    tool = shutil.which("iree-compile")
    if tool is None:
        raise SystemExit("native_models_bench: iree-compile not found "
                         "(pip install iree-base-compiler==3.13.0)")
    return tool


def compiler_version(tool: str) -> str:
    proc = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return proc.stdout.strip()


def build_flags(backend: str, target_cpu: str | None, system: bool) -> list[str]:
    flags = ["--iree-hal-target-device=local",
             f"--iree-hal-local-target-device-backends={backend}"]
    if backend == "llvm-cpu":
        flags.append(f"--iree-llvmcpu-target-cpu={target_cpu}")
        if system:
            flags.append("--iree-llvmcpu-link-embedded=false")
    return flags


def compile_model(tool: str, version: str, model: str, flags: list[str]) -> Path:
    """The cached .vmfb of `model` built with `flags`, compiled if missing."""
    source = MODELS_DIR / f"{model}.mlir"
    text = source.read_text()
    key = hashlib.sha256("\0".join([text, *flags, version]).encode()).hexdigest()[:16]
    output = CACHE_DIR / f"{model}-{key}.vmfb"
    if output.exists():
        return output
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    partial = output.with_suffix(f".{os.getpid()}.tmp")
    proc = subprocess.run([tool, *flags, str(source), "-o", str(partial)],
                          capture_output=True, text=True)
    if proc.returncode:
        partial.unlink(missing_ok=True)
        raise SystemExit(f"native_models_bench: iree-compile failed on {model}.mlir "
                         f"({' '.join(flags)}):\n{proc.stderr}")
    partial.replace(output)
    return output


# -- runners ----------------------------------------------------------------------------------
def _as_arrays(result) -> list[np.ndarray]:
    if isinstance(result, (tuple, list)):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


class VmrtRunner:
    def __init__(self, path: Path, device: str):
        import vmrt
        from vmrt.modules.hal import HalModule
        self.hal = HalModule(device=device)
        self.ctx = None
        try:
            self.ctx = vmrt.Context(modules=[self.hal, vmrt.load_module(path)])
            self.fn = self.ctx.function("module.predict")
        except BaseException:
            self.close()
            raise

    def __call__(self, args):
        return self.fn(*args)  # numpy arrays already on the host

    def close(self) -> None:
        if self.ctx is not None:
            self.ctx.close()
            self.ctx = None
        for d in self.hal.devices:
            d.close()


class IreeRunner:
    def __init__(self, path: Path, device: str):
        import iree.runtime as rt
        self.ctx = rt.SystemContext(config=rt.Config(device))
        self.ctx.add_vm_module(rt.VmModule.copy_buffer(self.ctx.instance, path.read_bytes()))
        self.fn = self.ctx.modules.module["predict"]

    def __call__(self, args):
        result = self.fn(*args)
        if isinstance(result, (tuple, list)):
            return [r.to_host() for r in result]
        return result.to_host()

    def close(self) -> None:
        self.fn = self.ctx = None
        gc.collect()


def _time_round(runner, args, calls: int):
    """(seconds per call over `calls` calls, the last call's result)."""
    start = time.perf_counter()
    for _ in range(calls):
        result = runner(args)
    return (time.perf_counter() - start) / calls, result


def measure(runners, args, rounds: int, round_time: float, budget: float):
    """(best seconds per call, last result) of each runner, already warmed up: one
    timed call each, then up to `rounds` rounds alternating between the runners (the
    order flipping every round) of about `round_time` seconds each, fewer when they
    would take more than `budget` seconds."""
    best, last = [], []
    for runner in runners:
        t, result = _time_round(runner, args, 1)
        best.append(t)
        last.append(result)
    calls = [max(1, int(round_time / max(t, 1e-9))) for t in best]
    per_round = sum(c * t for c, t in zip(calls, best))
    rounds = min(rounds, int(budget / max(per_round, 1e-9)))
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = range(len(runners)) if r % 2 == 0 else reversed(range(len(runners)))
            for i in order:
                t, last[i] = _time_round(runners[i], args, calls[i])
                best[i] = min(best[i], t)
    finally:
        gc.enable()
    return best, last


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:9.3f}" if ms < 1e4 else f"{ms:9.0f}"


def rel_diff(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[float, float]:
    """(max |a - b|, that divided by max |b|)."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return math.inf, math.inf
    diff = max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
               for x, y in zip(a, b))
    scale = max(float(np.max(np.abs(y))) for y in b) or 1.0
    return diff, diff / scale


# -- main -------------------------------------------------------------------------------------
def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-cpu", default="generic,host",
                        help="comma-separated llvm-cpu target CPUs, one build each "
                             "(--iree-llvmcpu-target-cpu=...); default generic,host")
    parser.add_argument("--system", action="store_true",
                        help="system ELF (--iree-llvmcpu-link-embedded=false) instead of "
                             "the default embedded ELF")
    parser.add_argument("--vmvx", action="store_true", help="also a VMVX build (slow)")
    parser.add_argument("--no-llvm-cpu", action="store_true",
                        help="skip the llvm-cpu builds (with --vmvx: VMVX only)")
    parser.add_argument("--models", default=",".join(MODEL_NAMES))
    parser.add_argument("--devices", default=",".join(DEVICES))
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds per runtime")
    parser.add_argument("--round-time", type=float, default=0.2,
                        help="target seconds per round (calls per round derive from it)")
    parser.add_argument("--budget", type=float, default=6.0,
                        help="cap on timed seconds per model/build/device (fewer rounds; "
                             "at least one timed call each)")
    parser.add_argument("--quick", action="store_true", help="2 rounds of ~0.05 s")
    parser.add_argument("--no-preflight", dest="preflight_off", action="store_true",
                        help="do not first run each native build once through vmrt in a "
                             "child process (the check that turns a crash into a FAILED row)")
    parser.add_argument("--preflight", nargs=3, metavar=("MODEL", "VMFB", "DEVICES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.round_time = 2, 0.05
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r} (have {', '.join(MODEL_NAMES)})")
    return args


def preflight_child(model: str, path: str, devices: str) -> int:
    """Runs the build once per device through vmrt (in a child process)."""
    inputs = MODELS[model][0](np.random.default_rng(2024))
    for device in devices.split(","):
        try:
            runner = VmrtRunner(Path(path), device)
        except Exception:
            continue  # reported by the parent, in process
        try:
            runner(inputs)
        except Exception:
            pass
        finally:
            runner.close()
    return 0


def preflight(model: str, path: Path, devices: list[str]) -> dict[str, str]:
    """{device: why} for the devices whose first vmrt call kills the process."""
    proc = subprocess.run([sys.executable, __file__, "--preflight", model, str(path),
                           ",".join(devices)], capture_output=True, text=True)
    if proc.returncode >= 0:
        return {}
    if len(devices) == 1:
        return {devices[0]: f"the process died of signal {-proc.returncode}"}
    crashed = {}
    for device in devices:  # which ones?
        crashed.update(preflight(model, path, [device]))
    return crashed


def run_case(model: str, label: str, path: Path, device: str, inputs, expected, crashed,
             args) -> tuple[str, list[str], float | None, bool]:
    """(table row, notes, vmrt/iree ratio or None, ok) for one build on one device."""
    head = f"{model:<12} {label:<17} {device:<10}"
    notes = []
    reference = IreeRunner(path, device)
    try:
        ref_out = _as_arrays(reference(inputs))  # also the reference's warm-up
        _, twin_rel = rel_diff(ref_out, expected)
        twin_ok = twin_rel <= TWIN_TOLERANCE
        twin_note = f"{twin_rel:8.1e}" + ("" if twin_ok else " BAD")
        candidate = None
        try:
            if device in crashed:
                raise RuntimeError(f"crashed in the preflight: {crashed[device]}")
            candidate = VmrtRunner(path, device)
            out = _as_arrays(candidate(inputs))  # also vmrt's warm-up
            diff, rel = rel_diff(out, ref_out)
            (t_vmrt, t_iree), (last, _) = measure([candidate, reference], inputs,
                                                  args.rounds, args.round_time, args.budget)
            # The last timed call's outputs must agree too.
            diff_after, rel_after = rel_diff(_as_arrays(last), ref_out)
            diff, rel = max(diff, diff_after), max(rel, rel_after)
        except Exception as error:  # e.g. a format vmrt cannot run yet
            (t_iree,), _ = measure([reference], inputs, args.rounds, args.round_time,
                                   args.budget)
            reason = (str(error).splitlines() or [""])[0][:160]
            notes.append(f"vmrt: {type(error).__name__}: {reason}")
            row = (f"{head} {'FAILED':>9} {_ms(t_iree)} {'':>6}  {'':>14} {'':>8}  "
                   f"{twin_note}")
            return row, notes, None, False
        finally:
            if candidate is not None:
                candidate.close()
    finally:
        reference.close()
    rel_ok = rel <= RUNTIME_TOLERANCE
    row = (f"{head} {_ms(t_vmrt)} {_ms(t_iree)} {t_vmrt / t_iree:5.2f}x  "
           f"{diff:14.3e} {rel:8.1e}{'' if rel_ok else ' MISMATCH'}  {twin_note}")
    return row, notes, t_vmrt / t_iree, rel_ok and twin_ok


def main() -> int:
    args = parse_args()
    if args.preflight:
        return preflight_child(*args.preflight)
    sys.stdout.reconfigure(line_buffering=True)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    import iree.runtime  # noqa: F401  (the reference is required)
    tool = compiler_tool()
    version = compiler_version(tool)
    lines = version.splitlines()
    print(f"compiler: {lines[1].strip() if len(lines) > 1 else version}; "
          f"{os.cpu_count()} CPUs")
    fmt = "system" if args.system else "embedded"
    builds = []  # (label, iree-compile flags, native code)
    if not args.no_llvm_cpu:
        for cpu in args.target_cpu.split(","):
            builds.append((f"{cpu}/{fmt}", build_flags("llvm-cpu", cpu, args.system), True))
    if args.vmvx:
        builds.append(("vmvx", build_flags("vmvx", None, False), False))
    for label, flags, _ in builds:
        print(f"build {label}: iree-compile {' '.join(flags)}")

    devices = args.devices.split(",")
    header = (f"{'model':<12} {'build':<17} {'device':<10} {'vmrt ms':>9} {'iree ms':>9} "
              f"{'ratio':>6}  {'max|vmrt-iree|':>14} {'rel':>8}  {'twin rel':>8}")
    print()
    print(header)
    print("-" * len(header))
    failures = 0
    ratios: dict[tuple[str, str], list[float]] = {}
    for model in args.models.split(","):
        make_inputs, twin = MODELS[model]
        inputs = make_inputs(np.random.default_rng(2024))
        expected = [np.asarray(twin(*[a.astype(np.float64) for a in inputs]))]
        for label, flags, native in builds:
            path = compile_model(tool, version, model, flags)
            crashed = preflight(model, path, devices) if native and not args.preflight_off else {}
            for device in devices:
                row, notes, ratio, ok = run_case(model, label, path, device, inputs, expected,
                                                 crashed, args)
                print(row)
                for note in notes:
                    print(f"{'':<12} {note}")
                failures += not ok
                if ratio is not None and model not in OVERHEAD_MODELS:
                    ratios.setdefault((label, device), []).append(ratio)
    print()
    for (label, device), values in ratios.items():
        geomean = math.exp(sum(map(math.log, values)) / len(values))
        print(f"geomean ratio {label:<17} {device:<10} {geomean:5.2f}x over {len(values)} models"
              " (not tiny)")
    print("ratio = vmrt / iree.runtime per call (lower is better for vmrt); rel = max "
          f"difference / max |iree output| (bar {RUNTIME_TOLERANCE:g}); twin rel = iree "
          f"output vs the float64 numpy twin (bar {TWIN_TOLERANCE:g}).")
    if failures:
        print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
