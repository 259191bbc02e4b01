"""Partitioning favors on real programs others wrote: IREE's three favors beside vmrt's,
per function with dispatches, and whether each favor keeps its promise.

    python benchmarks/stream_real_programs.py [--torch-python PYTHON] [--work DIR]
        [--models jax_mlp_step,resnet18,mobilenet_v3_small,bert] [--json]

The programs are built in a temporary folder (or --work) and never kept here:
`jax_mlp_step`, a JAX MLP training step (784-512-256-10, batch 64) exported the usual
way (`jax.jit(step).lower(...).as_text()`) with private functions (`call @relu`,
`@log_softmax`); `resnet18` and `mobilenet_v3_small` from torchvision and `bert` (a
2-layer BertModel from transformers, hidden 256, 64 tokens) exported to ONNX and
imported with iree-import-onnx. The export runs in --torch-python (torch, torchvision,
transformers and, for the JAX step, jax). Each program goes through
`vmrt.stream.compare.compare_model` (iree-compile --compile-to=stream per favor, VMVX
target), which also verifies every vmrt plan. The promises checked per function:
vmrt debug within 10% of IREE debug; vmrt min-peak-memory at most IREE's min-peak-memory
and at most vmrt's debug; vmrt max-concurrency at least IREE's concurrent dispatches.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vmrt.stream.compare import compare_model, has_dispatches  # noqa: E402
from vmrt.stream.partition import Favor  # noqa: E402

MODELS = ("jax_mlp_step", "resnet18", "mobilenet_v3_small", "bert")

#: run by --torch-python: NAME OUT.onnx
EXPORT_ONNX = textwrap.dedent("""
    import sys, torch
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if name == "bert":
        import transformers
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=256,
                                         num_attention_heads=4, intermediate_size=1024)
        class Encoder(torch.nn.Module):   # the exporter passes arguments by position
            def __init__(self):
                super().__init__()
                self.bert = transformers.BertModel(config)
            def forward(self, input_ids):
                return self.bert(input_ids=input_ids).last_hidden_state
        model, inputs = Encoder().eval(), (torch.randint(0, config.vocab_size, (1, 64)),)
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None).eval()
        inputs = (torch.randn(1, 3, 224, 224),)
    with torch.no_grad():
        torch.onnx.export(model, inputs, out, opset_version=17, dynamo=False)
""")

#: run by --torch-python: OUT.mlir
EXPORT_JAX = textwrap.dedent("""
    import sys, jax, jax.numpy as jnp
    @jax.jit
    def relu(x):
        return jnp.maximum(x, 0.0)
    @jax.jit
    def log_softmax(x):
        shifted = x - jnp.max(x, axis=-1, keepdims=True)
        return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = relu(h @ w + b)
        w, b = params[-1]
        return -jnp.mean(jnp.sum(log_softmax(h @ w + b) * y, axis=-1))
    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb)
                for (w, b), (gw, gb) in zip(params, grads)], value
    sizes = [784, 512, 256, 10]
    params = [(jnp.zeros((a, b), jnp.float32), jnp.zeros((b,), jnp.float32))
              for a, b in zip(sizes, sizes[1:])]
    x, y = jnp.zeros((64, 784), jnp.float32), jnp.zeros((64, 10), jnp.float32)
    open(sys.argv[1], "w").write(jax.jit(step).lower(params, x, y).as_text())
""")


def build(name: str, folder: Path, python: str) -> Path:
    """The program's MLIR in `folder` (built once)."""
    mlir = folder / f"{name}.mlir"
    if mlir.exists():
        return mlir
    if name == "jax_mlp_step":
        subprocess.run([python, "-c", EXPORT_JAX, str(mlir)], check=True)
        return mlir
    onnx = folder / f"{name}.onnx"
    subprocess.run([python, "-c", EXPORT_ONNX, name, str(onnx)], check=True,
                   capture_output=True)
    subprocess.run(["iree-import-onnx", str(onnx), "-o", str(mlir)], check=True)
    onnx.unlink()
    return mlir


def promises(iree: dict, vmrt: dict) -> dict[str, bool]:
    """Each favor's promise on one function (figures per Favor)."""
    debug, low = vmrt[Favor.DEBUG], vmrt[Favor.MIN_PEAK_MEMORY]
    iree_debug = iree[Favor.DEBUG].transient_bytes
    return {
        "debug within 10% of IREE's": abs(debug.transient_bytes - iree_debug)
        <= iree_debug / 10,
        "min-peak-memory <= IREE's": low.transient_bytes
        <= iree[Favor.MIN_PEAK_MEMORY].transient_bytes,
        "min-peak-memory <= vmrt debug": low.transient_bytes <= debug.transient_bytes,
        "max-concurrency >= IREE's concurrency":
            vmrt[Favor.MAX_CONCURRENCY].concurrent_dispatches
            >= max(stats.concurrent_dispatches for stats in iree.values()),
    }


def rows(name: str, comparison) -> list[dict]:
    out = []
    for function in comparison.functions:
        if not has_dispatches(comparison, function):
            continue
        iree, vmrt = comparison.iree[function], comparison.vmrt[function]
        kept = promises(iree, vmrt)
        for favor in Favor:
            out.append({"program": name, "function": function, "favor": favor.value,
                        "iree": iree[favor].as_dict(), "vmrt": vmrt[favor].as_dict(),
                        "promises": kept})
    return out


def table(results: list[dict]) -> str:
    lines = ["| program | function | favor | transient bytes IREE | vmrt | concurrent "
             "dispatches IREE | vmrt | waves IREE | vmrt |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in results:
        iree, vmrt = row["iree"], row["vmrt"]
        lines.append(f"| {row['program']} | @{row['function']} | {row['favor']} | "
                     f"{iree['transient_bytes']:,} | {vmrt['transient_bytes']:,} | "
                     f"{iree['concurrent_dispatches']} | {vmrt['concurrent_dispatches']} | "
                     f"{iree['waves']} | {vmrt['waves']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--work", type=Path, help="keep the built programs here")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vmrt-stream-real-") as scratch:
        folder = args.work or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        results = []
        for name in [n for n in args.models.split(",") if n]:
            print(f"building and comparing {name}", file=sys.stderr, flush=True)
            results += rows(name, compare_model(build(name, folder, args.torch_python)))
    broken = sorted({f"{row['program']} @{row['function']}: {promise}" for row in results
                     for promise, kept in row["promises"].items() if not kept})
    if args.json:
        print(json.dumps({"rows": results, "broken": broken}, indent=2))
    else:
        print(table(results))
        print("\nevery promise kept" if not broken else "\nbroken:\n" + "\n".join(broken))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
