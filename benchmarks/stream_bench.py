"""Stream programs lowered to VM modules, per favor and device, side by side in one
run: does max-concurrency on local-task beat debug when kernels are heavy enough?

    python benchmarks/stream_bench.py [--rounds N] [--chains W] [--depth D]
        [--n N] [--workers N] [--no-mlp]

Two programs: `wide`, W independent chains of D kernels each an N x N float32
matrix product (numpy releases the GIL in it), and the MLP training step of
examples/mlp_train_step.stream. OpenBLAS runs one thread per call here (set before
numpy loads) so the matrix products of one wave spread over the device's workers
instead of fighting over BLAS threads. Every favor's results are checked equal to
the first favor's before timing. These machines are noisy: read the ratio; each
figure is the best of --rounds calls, favors interleaved round by round.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vmrt.stream import FAVORS, Favor, ProgramBuilder, load_program  # noqa: E402
from vmrt.stream.lower import compile_program  # noqa: E402
from vmrt.stream.runtime import StreamRunner  # noqa: E402


def heavy(x, out):
    """out = x @ x / n for an n x n float32 matrix: compute-bound, GIL released."""
    n = math.isqrt(x.size // 4)
    v = x.view(np.float32).reshape(n, n)
    o = out.view(np.float32).reshape(n, n)
    np.matmul(v, v, out=o)
    o *= np.float32(1.0 / n)


def wide_program(chains: int, depth: int, n: int):
    size = n * n * 4
    pb = ProgramBuilder("wide")
    f = pb.func("run", [(f"x{c}", "external", size) for c in range(chains)],
                [("external", size)] * chains)
    outs = []
    for c, value in enumerate(f.args):
        for d in range(depth):
            lifetime = "external" if d + 1 == depth else "transient"
            value, = f.dispatch("bench::heavy", [value], [(lifetime, size)],
                                names=[f"c{c}.{d}"])
        outs.append(value)
    f.ret(*outs)
    return pb.build()


def time_favors(program, function, inputs, kernels, rounds, workers, devices):
    """{(favor, device): best seconds}; checks every run against the first."""
    runners = {}
    try:
        for favor in FAVORS:
            vmfb = compile_program(program, favor, force=True)
            for device in devices:
                runners[favor, device] = StreamRunner(vmfb, kernels, device=device,
                                                      worker_count=workers)
        expected = None
        for runner in runners.values():
            results = runner.call(function, inputs)
            if expected is None:
                expected = results
            elif not all(np.array_equal(a, b) for a, b in zip(results, expected)):
                raise SystemExit("favors disagree: results differ")
        best = {key: float("inf") for key in runners}
        for _ in range(rounds):
            for key, runner in runners.items():
                start = time.perf_counter()
                runner.call(function, inputs)
                best[key] = min(best[key], time.perf_counter() - start)
        return best
    finally:
        for runner in runners.values():
            runner.close()


def report(title, best, devices) -> float:
    print(title)
    for favor in FAVORS:
        cells = "  ".join(f"{device} {best[favor, device] * 1e3:8.1f} ms" for device in devices)
        print(f"  {favor.value:<16} {cells}")
    ratio = best[Favor.DEBUG, "local-task"] / best[Favor.MAX_CONCURRENCY, "local-task"]
    print(f"  local-task: debug / max-concurrency = {ratio:.2f}x")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--n", type=int, default=640, help="matrix size of the wide kernels")
    parser.add_argument("--workers", type=int, default=None,
                        help="local-task worker threads (default: min(8, cores))")
    parser.add_argument("--no-mlp", action="store_true", help="skip the training step")
    args = parser.parse_args()
    devices = ("local-sync", "local-task")
    # Concurrency needs idle cores: another busy process halves what 2 workers can do.
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")

    rng = np.random.default_rng(0)
    program = wide_program(args.chains, args.depth, args.n)
    inputs = [rng.standard_normal((args.n, args.n)).astype(np.float32)
              for _ in range(args.chains)]
    best = time_favors(program, "run", inputs, {"bench::heavy": heavy}, args.rounds,
                       args.workers, devices)
    report(f"wide: {args.chains} chains x {args.depth} matmuls of {args.n}x{args.n} f32 "
           "(best of rounds)", best, devices)

    if not args.no_mlp:
        from examples.mlp_kernels import KERNELS
        from vmrt.stream.evaluate import evaluate
        mlp = load_program(ROOT / "examples" / "mlp_train_step.stream")
        layers = (784, 1024, 1024, 512, 10)
        params = {"model": {}}
        for l in range(4):
            params["model"][f"layer{l + 1}.weight"] = (rng.standard_normal(
                (layers[l], layers[l + 1])) * np.sqrt(2 / layers[l])).astype(np.float32)
            params["model"][f"layer{l + 1}.bias"] = np.zeros(layers[l + 1], np.float32)
        state = evaluate(mlp, "initialize", [], KERNELS, params)
        x = rng.standard_normal((256, 784)).astype(np.float32)
        labels = rng.integers(0, 10, 256).astype(np.int32)
        best = time_favors(mlp, "train_step", [x, labels, *state], KERNELS, args.rounds,
                           args.workers, devices)
        report("mlp_train_step @train_step (best of rounds)", best, devices)


if __name__ == "__main__":
    main()
