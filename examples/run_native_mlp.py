"""Runs the MNIST-sized MLP (examples/mnist_mlp.mlir) compiled for llvm-cpu: native
dispatches through vmrt on local-task, checked against numpy, with its time per call.
Usage: python examples/run_native_mlp.py [--calls N] [--device local-task|local-sync]"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import vmrt
from vmrt.modules.hal import HalModule

MODULE = Path(__file__).resolve().parent / "mnist_mlp_cpu.vmfb"


def weights(rng):
    def layer(n_in, n_out):
        return (rng.standard_normal((n_in, n_out), dtype=np.float32) / np.float32(np.sqrt(n_in)),
                rng.standard_normal(n_out, dtype=np.float32) * np.float32(0.1))
    return [*layer(784, 512), *layer(512, 512), *layer(512, 10)]


def numpy_predict(x, w1, b1, w2, b2, w3, b3):
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    return h2 @ w3 + b3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--device", default="local-task")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.random((32, 784), dtype=np.float32)
    params = weights(rng)
    hal = HalModule(device=args.device)
    with vmrt.Context(modules=[hal, vmrt.load_module(MODULE)]) as ctx:
        predict = ctx.function("module.predict")
        logits = predict(x, *params)
        error = float(np.max(np.abs(logits - numpy_predict(x, *params))))
        start = time.perf_counter()
        for _ in range(args.calls):
            predict(x, *params)
        per_call = (time.perf_counter() - start) / args.calls
    for device in hal.devices:
        device.close()
    print(f"mnist_mlp predict (32x784 -> 32x10, llvm-cpu, {args.device}): "
          f"{per_call * 1e3:.3f} ms per call over {args.calls} calls; "
          f"max |vmrt - numpy| = {error:.2e}; classes of the first 8 rows: "
          f"{logits.argmax(axis=1)[:8].tolist()}")


if __name__ == "__main__":
    main()
