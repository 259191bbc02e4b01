"""Benchmark: the interpreter on eight micro-benchmarks and two VMVX models, vmrt beside
the reference runtime.

    python benchmarks/vm_bench.py [--quick] [--json] [--repeat N] [--target SECONDS]
                                  [--only NAME[,NAME...]] [--no-reference]

Assembles benchmarks/vm_bench.vmasm with iree-as-module and compiles
benchmarks/models/tiny.mlir and matmul64.mlir for VMVX with iree-compile (into a temporary
directory), and runs each export in vmrt and in iree.runtime in the same run
(VMRT_TIER picks vmrt's tier):

    empty_func               one invocation from Python         ns per invocation
    call_internal_func(n)    n rounds of 21 internal calls      ns per call
    call_imported_func(n)    n rounds of 21 calls of an import  ns per call
                             served by a native module written in Python
    loop_sum(n)              add, compare, branch, n times      ns per iteration
                             (a self-loop: one block)
    loop_two_blocks(n)       the same loop as two blocks        ns per iteration
                             (compare, branch; add, branch back)
    loop_nested(n)           n rounds of a two-block loop of    ns per inner iteration
                             16 iterations
    buffer_reduce(n)         sum of n i32 buffer elements       ns per element
    buffer_reduce_unrolled(n) the same, unrolled by 8           ns per element
    vmvx_model               the 4-8-3 MLP of models/tiny.mlir,  ns per call
                             compiled for VMVX (numpy in and out, local-sync: HAL
                             calls and two dispatches whose VM code vmrt runs)
    vmvx_matmul              models/matmul64.mlir for VMVX: one  ns per call
                             dispatch of 64x64x64 multiply-adds (its VM code's time)

The work loops inside the VM, so the cost of entering it from Python is spread
over many iterations (except for empty_func, which measures exactly that). For
each runtime the iteration count is grown until one measurement takes at least
--target seconds; the best of --repeat measurements is reported (the garbage
collector is off while timing). Result values must agree between the runtimes;
a mismatch is printed loudly and makes the exit status 1.

With limits (the default; --no-limits skips it) vmrt runs a second time in a
context with Limits(fuel=10**15, timeout=3600): fuel counted and a deadline
checked, neither ever reached (the model's dispatches spend the same fuel). The
second table gives that overhead as a ratio to vmrt without limits (the issue's
bar: <= 1.10). Both contexts run the same arguments and take turns, measurement
by measurement, so that a change in the machine's load (a shared machine) weighs
on both alike; `ratio` is best over best. `paired` is the median, over 60 rounds
of ~20 ms, of the two times' ratio measured back to back: on a noisy machine it
spreads less between runs (two runs of the same context against each other, the
way best over best spread by 7%, paired by 2.5%).

Bars (for vmrt): loop_sum <= 200 ns/iteration, buffer_reduce <= 400 ns/element,
an import call into Python <= 260 ns per call. A missed bar is reported but
does not change the exit status.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# Import vmrt from this checkout: with the editable install as set up here, running a
# script from benchmarks/ can otherwise resolve `vmrt` as an empty namespace package.
sys.path.insert(0, str(HERE.parent))
VMASM = HERE / "vm_bench.vmasm"
MODULE = "vm_bench"
HOST = "bench_host"
I32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class Bench:
    name: str
    unit: str               # what one measured unit is
    per_unit: int           # units of work per unit of the argument n (0: no argument)
    start_n: int            # first argument tried while calibrating
    max_n: int              # largest argument passed (then invocations repeat)
    bar_ns: float | None    # vmrt's bar in ns per unit, if the issue sets one
    multiple_of: int = 1    # n is rounded up to a multiple of this

    def expected(self, n: int):
        """The result the module must return for argument n."""
        if self.name in MODELS:
            model = MODELS[self.name]
            return model.twin(*model.inputs())
        if self.name == "empty_func":
            return None
        if self.name.startswith("call_"):
            return _wrap_i32(21 * n)
        if self.name == "loop_sum":
            return max(n, 1)
        if self.name == "loop_two_blocks":
            return max(n, 0)
        if self.name == "loop_nested":
            return _wrap_i32(16 * n)
        return _wrap_i32(3 * n)


BENCHES = [
    Bench("empty_func", "invocation", 0, 0, 0, None),
    Bench("call_internal_func", "call", 21, 16, 1 << 20, None),
    Bench("call_imported_func", "call", 21, 16, 1 << 20, 260.0),
    Bench("loop_sum", "iteration", 1, 1000, I32_MAX, 200.0),
    Bench("loop_two_blocks", "iteration", 1, 1000, I32_MAX, None),
    Bench("loop_nested", "iteration", 16, 64, I32_MAX // 16, None),
    Bench("buffer_reduce", "element", 1, 1000, 1 << 22, 400.0),
    Bench("buffer_reduce_unrolled", "element", 1, 1000, 1 << 22, None, multiple_of=8),
    Bench("vmvx_model", "call", 0, 0, 0, None),
    Bench("vmvx_matmul", "call", 0, 0, 0, None),
]


@dataclass
class Model:
    """A model compiled for VMVX: its MLIR in models/, the function run, its inputs
    (float32, fixed seed) and what it computes, in numpy."""
    mlir: str
    function: str
    shapes: tuple
    twin: object

    def inputs(self) -> list:
        rng = np.random.default_rng(0)
        return [rng.standard_normal(shape).astype(np.float32) for shape in self.shapes]


MODELS = {
    "vmvx_model": Model("tiny.mlir", "predict", ((1, 4), (4, 8), (8,), (8, 3), (3,)),
                        lambda x, w1, b1, w2, b2: np.maximum(x @ w1 + b1, 0) @ w2 + b2),
    "vmvx_matmul": Model("matmul64.mlir", "matmul", ((64, 64), (64, 64)), lambda a, b: a @ b),
}


def same_value(got, want) -> bool:
    """Results agree: exactly, or (arrays) within float32 rounding (of sums taken in
    another order than numpy's: relative to the largest magnitude)."""
    if isinstance(got, np.ndarray) or isinstance(want, np.ndarray):
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        return np.shape(got) == np.shape(want) and bool(
            np.allclose(got, want, rtol=1e-5, atol=1e-6 * scale))
    return got == want


def _wrap_i32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


# -- building the module ------------------------------------------------------------------------
def _tool(name: str, args: list[str], output: Path) -> bytes:
    """Runs an IREE tool (`args` naming `output`); the bytes it wrote there."""
    tool = shutil.which(name)
    if tool is None:
        raise SystemExit(f"vm_bench: {name} not found on PATH "
                         "(pip install iree-base-compiler==3.13.0)")
    proc = subprocess.run([tool, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"vm_bench: {name} failed:\n{proc.stderr}")
    return output.read_bytes()


def assemble(outdir: Path) -> bytes:
    output = outdir / "vm_bench.vmfb"
    return _tool("iree-as-module", [str(VMASM), f"--output={output}"], output)


def compile_models(outdir: Path) -> dict[str, bytes]:
    """Each of MODELS compiled for VMVX on the local device, by bench name."""
    compiled = {}
    for name, model in MODELS.items():
        output = outdir / f"{name}.vmfb"
        compiled[name] = _tool("iree-compile", [
            "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx",
            str(HERE / "models" / model.mlir), "-o", str(output)], output)
    return compiled


# -- the two runtimes ------------------------------------------------------------------------
class VmrtRunner:
    label = "vmrt"

    def __init__(self, data: bytes, models: dict[str, bytes], limits=None):
        import vmrt
        from vmrt.modules.hal import HalModule

        class BenchHost(vmrt.NativeModule, name=HOST, version=0):
            @vmrt.export("0i_i")
            def add_1(self, x):
                return x + 1

        self.context = vmrt.Context(vmrt.Instance(),
                                    modules=[BenchHost(), vmrt.load_module(data)], limits=limits)
        self.hals = {name: HalModule(device="local-sync") for name in models}
        self.models = {name: vmrt.Context(vmrt.Instance(), limits=limits, modules=[
            self.hals[name], vmrt.load_module(data)]) for name, data in models.items()}

    def caller(self, name: str, n: int | None):
        if name in MODELS:
            fn = self.models[name].function(f"module.{MODELS[name].function}")
            inputs = MODELS[name].inputs()
            return lambda: fn(*inputs)
        fn = self.context.function(f"{MODULE}.{name}")
        if n is None:
            return fn
        return lambda: fn(n)

    def close(self) -> None:
        self.context.close()
        for name, context in self.models.items():
            context.close()
            for device in self.hals[name].devices:
                device.close()


class ReferenceRunner:
    label = "iree"

    def __init__(self, data: bytes, models: dict[str, bytes]):
        import iree.runtime as rt

        class HostState:
            def __init__(self, iface):
                pass

            def add_1(self, x):
                return x + 1

        self.rt = rt
        self.instance = rt.VmInstance()
        self.module = rt.VmModule.copy_buffer(self.instance, data)
        self.iface = rt.PyModuleInterface(HOST, HostState)
        self.iface.export("add_1", "0i_i", HostState.add_1)
        self.host = self.iface.create()
        self.context = rt.VmContext(self.instance, modules=[self.host, self.module])
        self.models = {}
        for name, model in models.items():
            context = self.models[name] = rt.SystemContext(config=rt.Config("local-sync"))
            context.add_vm_module(rt.VmModule.copy_buffer(context.instance, model))

    def caller(self, name: str, n: int | None):
        rt = self.rt
        if name in MODELS:
            fn = self.models[name].modules.module[MODELS[name].function]
            inputs = MODELS[name].inputs()
            return lambda: fn(*inputs).to_host()
        fn = self.module.lookup_function(name)
        if fn is None:
            raise LookupError(f"reference module has no function {name}")
        args = rt.VmVariantList(1)
        if n is not None:
            args.push_int(n)
        results = rt.VmVariantList(1)   # invoke resets it on every call
        invoke = self.context.invoke

        def call():
            invoke(fn, args, results)
            return results.get_variant(0) if results.size else None
        return call

    def close(self) -> None:
        # Drop every reference (the native module's interface holds its ctor) so
        # that nanobind does not report leaks at exit.
        self.context = self.host = self.iface = self.module = self.instance = None
        self.models = {}
        gc.collect()


def load_reference(data: bytes, models: dict[str, bytes]):
    try:
        import iree.runtime  # noqa: F401
    except ImportError:
        return None
    return ReferenceRunner(data, models)


# -- measuring -----------------------------------------------------------------------------------
@dataclass
class Measurement:
    ns_per_unit: float
    n: int                # argument of each invocation
    invocations: int      # invocations per measurement
    seconds: float        # duration of the best measurement
    result: object        # value returned by the last invocation


def _time_calls(call, invocations: int) -> tuple[float, object]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = None
        start = time.perf_counter()
        for _ in range(invocations):
            result = call()
        elapsed = time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()
    return elapsed, result


def _round_n(bench: Bench, n: int) -> int:
    m = bench.multiple_of
    return min(bench.max_n // m * m, max(m, (n + m - 1) // m * m))


def measure(runners: list, bench: Bench, target: float, repeat: int) -> list[Measurement]:
    """The runners on the same work, n (then the invocation count) grown until one
    measurement of the first takes >= target s; they take turns, best of `repeat` each."""
    takes_n = bench.per_unit > 0
    n = _round_n(bench, bench.start_n) if takes_n else 0
    invocations = 1 if takes_n else 100
    calls = [runner.caller(bench.name, n if takes_n else None) for runner in runners]
    for call in calls:
        call()  # warm up (first-call code generation, allocator growth)
    while True:
        elapsed, _ = _time_calls(calls[0], invocations)
        if elapsed >= target:
            break
        scale = min(100.0, max(2.0, 1.2 * target / max(elapsed, 1e-7)))
        if takes_n and n < bench.max_n:
            n = _round_n(bench, int(n * scale))
            calls = [runner.caller(bench.name, n) for runner in runners]
        else:
            invocations = int(invocations * scale) + 1
    best = [(elapsed, None)] + [(float("inf"), None)] * (len(runners) - 1)
    for _ in range(repeat):
        for i, call in enumerate(calls):
            elapsed, result = _time_calls(call, invocations)
            best[i] = (min(best[i][0], elapsed), result)
    units = invocations * (n * bench.per_unit if takes_n else 1)
    return [Measurement(seconds * 1e9 / units, n, invocations, seconds, result)
            for seconds, result in best]


#: The limits table's paired estimate: this many rounds of about PAIRED_SECONDS for
#: each runner, back to back (the order alternating).
PAIRED_ROUNDS = 60
PAIRED_SECONDS = 0.02


def paired_ratio(runners: list, bench: Bench, measured: Measurement, target: float,
                 rounds: int = PAIRED_ROUNDS) -> float:
    """The median over `rounds` of (second runner's time / first's) for the same work
    run back to back: a shared machine's load changes between rounds more than
    within one, and the median leaves out the rounds a change split. (Best of each
    runner, the table's other ratio, pairs two measurements taken apart.)"""
    scale = PAIRED_SECONDS / target
    invocations, n = measured.invocations, None
    if bench.per_unit > 0:
        n = _round_n(bench, int(measured.n * scale))
    else:
        invocations = max(1, int(invocations * scale))
    first, second = [runner.caller(bench.name, n) for runner in runners]
    ratios = []
    for number in range(rounds):
        if number % 2:
            a, b = _time_calls(first, invocations)[0], _time_calls(second, invocations)[0]
        else:
            b, a = _time_calls(second, invocations)[0], _time_calls(first, invocations)[0]
        ratios.append(b / a)
    return statistics.median(ratios)


def check_value(bench: Bench, n: int, value, label: str) -> str | None:
    expected = bench.expected(n)
    if not same_value(value, expected):
        return f"{label} {bench.name}({n if bench.per_unit else ''}) returned {value!r}, " \
               f"expected {expected!r}"
    return None


def cross_check(vm, ref, bench: Bench) -> list[str]:
    """Both runtimes on a few small arguments: same values, and the expected ones."""
    problems = []
    args = [None] if bench.per_unit == 0 else [8, 16, 1000, 4096]
    for n in args:
        got = vm.caller(bench.name, n)()
        problem = check_value(bench, n or 0, got, "vmrt")
        if problem:
            problems.append(problem)
        if ref is not None:
            want = ref.caller(bench.name, n)()
            if not same_value(got, want):
                problems.append(f"{bench.name}({'' if n is None else n}): vmrt returned "
                                f"{got!r}, iree.runtime returned {want!r}")
    return problems


# -- reporting -----------------------------------------------------------------------------------
def _fmt_ns(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def print_table(rows: list[dict], out=sys.stdout) -> None:
    header = (f"{'benchmark':<24} {'unit':<10} {'vmrt ns':>10} {'iree ns':>10} "
              f"{'ratio':>8}  {'bar (vmrt)':<18}")
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in rows:
        ratio = f"{row['ratio']:.1f}x" if row["ratio"] is not None else "-"
        if row["bar_ns"] is None:
            bar = ""
        else:
            verdict = "ok" if row["meets_bar"] else "MISSED"
            bar = f"<= {row['bar_ns']:.0f} ns  {verdict}"
        print(f"{row['name']:<24} {row['unit']:<10} {_fmt_ns(row['vmrt_ns']):>10} "
              f"{_fmt_ns(row['iree_ns']):>10} {ratio:>8}  {bar:<18}", file=out)


def print_limits_table(rows: list[dict], out=sys.stdout) -> None:
    header = (f"{'benchmark':<24} {'unit':<10} {'vmrt ns':>10} {'+limits ns':>11} "
              f"{'ratio':>7} {'paired':>7}")
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in rows:
        print(f"{row['name']:<24} {row['unit']:<10} {_fmt_ns(row['vmrt_ns']):>10} "
              f"{_fmt_ns(row['limits_ns']):>11} {row['limits_ratio']:>6.3f}x "
              f"{row['limits_paired_ratio']:>6.3f}x", file=out)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: short measurements, 1 repeat")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--repeat", type=int, default=None,
                        help="measurements per benchmark, best kept (default 5; quick 1)")
    parser.add_argument("--target", type=float, default=None,
                        help="seconds one measurement should take (default 0.25; quick 0.02)")
    parser.add_argument("--only", default=None,
                        help="comma-separated benchmark names to run")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip iree.runtime (vmrt figures only)")
    parser.add_argument("--no-limits", action="store_true",
                        help="skip the run of vmrt with limits on")
    args = parser.parse_args(argv)
    args.repeat = args.repeat if args.repeat is not None else (1 if args.quick else 5)
    args.target = args.target if args.target is not None else (0.02 if args.quick else 0.25)
    args.benches = BENCHES
    if args.only:
        wanted = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = set(wanted) - {b.name for b in BENCHES}
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        args.benches = [b for b in BENCHES if b.name in wanted]
    return args


def measure_row(bench: Bench, vm, limited, ref, target: float, repeat: int,
                rounds: int = PAIRED_ROUNDS):
    """(the table row of one benchmark, the mismatches seen)."""
    problems = cross_check(vm, ref, bench)
    if limited is not None:
        problems += cross_check(limited, None, bench)
    mine, with_limits = (measure([vm, limited], bench, target, repeat) if limited is not None
                         else measure([vm], bench, target, repeat) + [None])
    paired = (paired_ratio([vm, limited], bench, mine, target, rounds)
              if limited is not None else None)
    checked = [(mine, "vmrt"), (with_limits, "vmrt+limits")]
    theirs = None
    if ref is not None:
        theirs, = measure([ref], bench, target, repeat)
        checked.append((theirs, "iree.runtime"))
        if not same_value(theirs.result, mine.result) and theirs.n == mine.n:
            problems.append(f"{bench.name}({mine.n}): vmrt returned {mine.result!r}, "
                            f"iree.runtime returned {theirs.result!r}")
    problems += [problem for measured, label in checked if measured is not None
                 for problem in [check_value(bench, measured.n, measured.result, label)]
                 if problem]
    return {
        "name": bench.name,
        "unit": bench.unit,
        "vmrt_ns": mine.ns_per_unit,
        "iree_ns": theirs.ns_per_unit if theirs else None,
        "ratio": mine.ns_per_unit / theirs.ns_per_unit if theirs else None,
        "limits_ns": with_limits.ns_per_unit if with_limits else None,
        "limits_ratio": with_limits.ns_per_unit / mine.ns_per_unit if with_limits else None,
        "limits_paired_ratio": paired,
        "bar_ns": bench.bar_ns,
        "meets_bar": None if bench.bar_ns is None else mine.ns_per_unit <= bench.bar_ns,
        "vmrt": {"n": mine.n, "invocations": mine.invocations, "seconds": mine.seconds},
        "iree": None if theirs is None else {
            "n": theirs.n, "invocations": theirs.invocations, "seconds": theirs.seconds},
    }, problems


def report(args, rows: list[dict], problems: list[str], limits: bool) -> int:
    missed = [row["name"] for row in rows if row["meets_bar"] is False]
    if args.json:
        json.dump({
            "quick": args.quick, "repeat": args.repeat, "target_seconds": args.target,
            "python": sys.version.split()[0], "benchmarks": rows,
            "mismatches": problems, "missed_bars": missed,
        }, sys.stdout, indent=2)
        print()
    else:
        print_table(rows)
        print(f"(best of {args.repeat}, each measurement >= {args.target} s; "
              f"ratio = vmrt / iree.runtime)")
        if limits:
            print()
            print_limits_table(rows)
            print("(ratio = vmrt with Limits(fuel, timeout) / vmrt without limits: best of "
                  f"each; paired = median of {PAIRED_ROUNDS} rounds of ~{PAIRED_SECONDS} s "
                  "each, back to back)")
        if missed:
            print(f"bars missed: {', '.join(missed)}")
    if problems:
        print("\n!!! RESULT MISMATCH !!!", file=sys.stderr)
        for problem in problems:
            print(f"!!! {problem}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    args = parse_arguments(argv)
    with tempfile.TemporaryDirectory(prefix="vmrt-vm-bench-") as tmp:
        data, models = assemble(Path(tmp)), compile_models(Path(tmp))

    vm = VmrtRunner(data, models)
    limited = None
    if not args.no_limits:
        from vmrt.vm.limits import Limits
        limited = VmrtRunner(data, models, Limits(fuel=10**15, timeout=3600.0))
        limited.label = "vmrt+limits"
    ref = None if args.no_reference else load_reference(data, models)
    if ref is None and not args.no_reference:
        print("vm_bench: iree.runtime is not importable; vmrt figures only",
              file=sys.stderr if args.json else sys.stdout)

    rows, problems = [], []
    for bench in args.benches:
        row, seen = measure_row(bench, vm, limited, ref, args.target, args.repeat,
                                3 if args.quick else PAIRED_ROUNDS)
        rows.append(row)
        problems += seen
        if not args.json:
            print(f"  measured {bench.name}", file=sys.stderr)
    for runner in (vm, limited, ref):
        if runner is not None:
            runner.close()
    return report(args, rows, problems, limited is not None)


if __name__ == "__main__":
    sys.exit(main())
