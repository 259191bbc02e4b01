"""Benchmark: vmrt.ray.ModulePool on a Ray started here, side by side with a local call.

    python benchmarks/ray_bench.py [--dir /tmp] [--calls 200] [--rounds 3] [--skip_memory]

- throughput: a compute-heavy model compiled for llvm-cpu (8 layers of 32x512 @ 512x512
  with relu, its 1 MiB weight from a parameter archive; local-sync, one core per
  actor): calls per second through a pool of 1 actor and of 2 actors, and in this
  process with vmrt.load, each over --calls inputs after a warm-up, taken in turn
  --rounds times (best round of each).
- per-call overhead: the example MLP (examples/mlp.vmfb, microseconds of work) called
  here, then through a 1-actor pool one call at a time (submit + result: a round
  trip) and pipelined (map).
- shared parameters: two actors on this node load a model whose one parameter is a
  1 GiB archive (mapped, not copied) and each sums it (every page read); their
  resident memory from /proc/PID/smaps_rollup: Rss, private (anonymous) and Pss
  (shared pages split between the processes that map them).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import ray

import vmrt
from vmrt.io import ParameterIndex
from vmrt.ray import ModulePool

REPO = Path(__file__).resolve().parent.parent
MLP = REPO / "examples" / "mlp.vmfb"
LLVM_CPU = ["iree-compile", "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=generic"]
LAYERS, ROWS, WIDTH = 8, 32, 512
BIG_ELEMENTS = (1 << 30) // 4


def heavy_mlir() -> str:
    """x -> relu(x @ w) LAYERS times; w (WIDTH x WIDTH) is parameter `model::w`."""
    t, w = f"tensor<{ROWS}x{WIDTH}xf32>", f"tensor<{WIDTH}x{WIDTH}xf32>"
    lines = [f'util.global private @w = #flow.parameter.named<"model"::"w"> : {w}',
             f"func.func @forward(%x0: {t}) -> {t} {{",
             f"  %w = util.global.load @w : {w}",
             "  %zero = arith.constant 0.0 : f32",
             f"  %empty = tensor.empty() : {t}",
             f"  %init = linalg.fill ins(%zero : f32) outs(%empty : {t}) -> {t}"]
    for i in range(LAYERS):
        lines += [f"  %m{i} = linalg.matmul ins(%x{i}, %w : {t}, {w}) outs(%init : {t}) -> {t}",
                  f"  %x{i + 1} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> "
                  f"(i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = [\"parallel\", "
                  f"\"parallel\"]}} ins(%m{i} : {t}) outs(%empty : {t}) {{",
                  "  ^bb0(%a: f32, %o: f32):",
                  "    %r = arith.maximumf %a, %zero : f32",
                  "    linalg.yield %r : f32",
                  f"  }} -> {t}"]
    lines += [f"  return %x{LAYERS} : {t}", "}"]
    return "\n".join(lines) + "\n"


def big_sum_mlir() -> str:
    """total() = the sum of parameter `model::big` (BIG_ELEMENTS f32, 1 GiB)."""
    big = f"tensor<{BIG_ELEMENTS}xf32>"
    return (f'util.global private @big = #flow.parameter.named<"model"::"big"> : {big}\n'
            f"func.func @total() -> tensor<f32> {{\n"
            f"  %b = util.global.load @big : {big}\n"
            "  %zero = arith.constant 0.0 : f32\n"
            "  %e = tensor.empty() : tensor<f32>\n"
            "  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>\n"
            "  %s = linalg.reduce ins(%b : " + big + ") outs(%init : tensor<f32>) "
            "dimensions = [0]\n"
            "    (%in: f32, %acc: f32) {\n"
            "      %t = arith.addf %in, %acc : f32\n"
            "      linalg.yield %t : f32\n"
            "    }\n"
            "  return %s : tensor<f32>\n}\n")


def compile_mlir(folder: Path, name: str, text: str) -> Path:
    source, output = folder / f"{name}.mlir", folder / f"{name}.vmfb"
    source.write_text(text)
    subprocess.run([*LLVM_CPU, str(source), "-o", str(output)], check=True)
    return output


def save_archive(path: Path, key: str, array: np.ndarray) -> Path:
    index = ParameterIndex()
    index.add_buffer(key, array)
    index.save(path)
    return path


def per_second(count: int, seconds: float) -> str:
    return f"{count / seconds:8.1f} calls/s ({seconds / count * 1e3:7.2f} ms/call)"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def throughput(folder: Path, calls: int, rounds: int) -> None:
    """Local calls, a 1-actor pool and a 2-actor pool, taken in turn `rounds` times
    (the best round of each: the machine is shared)."""
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH)
              ).astype(np.float32)
    parameters = {"model": str(save_archive(folder / "heavy.irpa", "w", weight))}
    module = compile_mlir(folder, "heavy", heavy_mlir())
    inputs = [rng.standard_normal((ROWS, WIDTH), dtype=np.float32) for _ in range(calls)]
    best = {"local": float("inf"), 1: float("inf"), 2: float("inf")}
    with vmrt.load(module, device="local-sync", parameters=parameters) as local, \
            ModulePool(module, parameters=parameters, device="local-sync", num_actors=1,
                       num_cpus=0.5) as one, \
            ModulePool(module, parameters=parameters, device="local-sync", num_actors=2,
                       num_cpus=0.5) as two:
        expected = [local.forward(x) for x in inputs[:8]]
        for pool in (one, two):  # (warm: every actor has compiled the function)
            assert all(np.array_equal(a, b) for a, b in
                       zip(pool.map("forward", inputs[:8]), expected))
        for _ in range(rounds):
            best["local"] = min(best["local"], timed(lambda: [local.forward(x)
                                                              for x in inputs]))
            for actors, pool in ((1, one), (2, two)):
                best[actors] = min(best[actors], timed(lambda: list(pool.map("forward",
                                                                             inputs))))
    print(f"throughput, {LAYERS} layers of {ROWS}x{WIDTH} @ {WIDTH}x{WIDTH} (llvm-cpu, "
          f"local-sync), {calls} calls, best of {rounds} rounds:")
    print(f"  local call (this process)  {per_second(calls, best['local'])}")
    print(f"  pool of 1 actor            {per_second(calls, best[1])}")
    print(f"  pool of 2 actors           {per_second(calls, best[2])}")
    print(f"  2 actors / 1 actor: {best[1] / best[2]:.2f}x; "
          f"1 actor / local call: {best['local'] / best[1]:.2f}x")


def overhead(calls: int) -> None:
    x = np.array([[1, 0.5, -0.5, 2]], np.float32)
    with vmrt.load(MLP, device="local-sync") as local:
        local.predict(x)
        seconds_local = timed(lambda: [local.predict(x) for _ in range(calls)])
    with ModulePool(MLP, device="local-sync", num_actors=1) as pool:
        list(pool.map("predict", [x] * 20))
        seconds_round_trip = timed(lambda: [pool.submit("predict", x).result()
                                            for _ in range(calls)])
        seconds_map = timed(lambda: list(pool.map("predict", [x] * calls)))
    local_us = seconds_local / calls * 1e6
    print(f"per-call overhead, examples/mlp.vmfb predict (1x4 -> 1x3), {calls} calls:")
    print(f"  local call                    {local_us:8.1f} us/call")
    for label, seconds in (("pool, submit + result (1 by 1)", seconds_round_trip),
                           ("pool, map (pipelined)", seconds_map)):
        us = seconds / calls * 1e6
        print(f"  {label:30s}{us:8.1f} us/call (Ray adds {us - local_us:8.1f} us)")


def memory_of(pid: int) -> dict[str, int]:
    """Rss, Pss and Anonymous (KiB -> bytes) of a process, from /proc."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as file:
        for line in file:
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss", "Anonymous", "Pss_File"):
                fields[name] = int(rest.split()[0]) * 1024
    return fields


def figures(memory: list[dict[str, int]], field: str, unit: int) -> str:
    return " + ".join(f"{m[field] / unit:.2f}" for m in memory)


def actor_memory(module, parameters=None) -> list[dict[str, int]]:
    """memory_of each actor of a 2-actor pool of `module` once every actor has run
    its function `total` (which reads every page of its parameters)."""
    with ModulePool(module, parameters=parameters, device="local-sync", num_actors=2,
                    num_cpus=1, max_in_flight=2) as pool:
        pids = [info.pid for info in pool.workers()]
        list(pool.map("total", [()] * 2))
        memory = [memory_of(pid) for pid in pids]
        assert [info.pid for info in pool.workers()] == pids, "an actor was replaced"
    return memory


def shared_archive_memory(folder: Path) -> None:
    archive = save_archive(folder / "big.irpa", "big", np.full(BIG_ELEMENTS, 1.0, np.float32))
    bare = compile_mlir(folder, "bare", "func.func @total() -> i32 {\n"
                                        "  %c = arith.constant 0 : i32\n  return %c : i32\n}\n")
    module = compile_mlir(folder, "big_sum", big_sum_mlir())
    baseline = actor_memory(bare)
    loaded = actor_memory(module, {"model": str(archive)})
    gib, mib = 1 << 30, 1 << 20
    print("shared parameters: 2 actors on this node, each with a context of a model whose "
          "parameter is one 1 GiB archive (mapped), each after summing it:")
    for name, memory in (("actors of a model without parameters", baseline),
                         ("actors of the 1 GiB model", loaded)):
        print(f"  {name:38s} Rss {figures(memory, 'Rss', gib)} GiB, private "
              f"{figures(memory, 'Anonymous', mib)} MiB, Pss {figures(memory, 'Pss', gib)} GiB")
    added = sum(m["Pss"] for m in loaded) - sum(m["Pss"] for m in baseline)
    private = sum(m["Anonymous"] for m in loaded) - sum(m["Anonymous"] for m in baseline)
    print(f"  the two actors add {added / gib:.2f} GiB between them (Pss): one page-cache "
          f"copy of the archive, shared (a copy per actor: 2.00 GiB); private memory "
          f"added: {private / mib:+.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip_memory", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="vmrt-ray-bench-", dir=args.dir))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        throughput(folder, args.calls, args.rounds)
        overhead(args.calls * 5)
        if not args.skip_memory:
            shared_archive_memory(folder)
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
