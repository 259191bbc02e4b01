"""Writes StableHLO training steps of an MLP (ReLU, softmax cross-entropy, plain SGD).

    python examples/gen_mlp_train_mlir.py            # both models below, in examples/
    python examples/gen_mlp_train_mlir.py --layers 784,256,10 --batch 8 -o small.mlir

examples/mlp_train_sgd.mlir       784-512-512-10, batch 32 (the model of issue 20)
examples/mlp_train_sgd_deep.mlir  784-1024-1024-1024-10, batch 64

`@train_step(w1, b1, ..., wN, bN, x, labels)` returns the updated weights and
biases and the mean loss, the way a JAX `value_and_grad` + SGD step lowers: the
forward pass, a log-softmax cross-entropy against one-hot labels, the backward pass
layer by layer from the last, and `w - lr * grad` for every parameter.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEARNING_RATE = 0.01
#: (file name, layer widths, batch) of the checked-in models.
MODELS = (("mlp_train_sgd.mlir", (784, 512, 512, 10), 32),
          ("mlp_train_sgd_deep.mlir", (784, 1024, 1024, 1024, 10), 64))


def tensor(*shape: int, element: str = "f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{element}>"


class Writer:
    """Numbered SSA values of one function body, one StableHLO op per line."""

    def __init__(self):
        self.lines: list[str] = []
        self.count = 0

    def op(self, text: str, hint: str = "v") -> str:
        name = f"%{hint}{self.count}"
        self.count += 1
        self.lines.append(f"  {name} = {text}")
        return name

    def constant(self, value: float, *shape: int) -> str:
        return self.op(f"stablehlo.constant dense<{value!r}> : {tensor(*shape)}", "cst")

    def binary(self, name: str, left: str, right: str, *shape: int) -> str:
        return self.op(f"stablehlo.{name} {left}, {right} : {tensor(*shape)}")

    def broadcast(self, value: str, dims: list[int], source: tuple, *shape: int) -> str:
        return self.op(f"stablehlo.broadcast_in_dim {value}, dims = {dims} : "
                       f"({tensor(*source)}) -> {tensor(*shape)}")

    def dot(self, left: str, right: str, contract: tuple[int, int], lshape: tuple,
            rshape: tuple, out: tuple) -> str:
        return self.op(f"stablehlo.dot_general {left}, {right}, contracting_dims = "
                       f"[{contract[0]}] x [{contract[1]}] : ({tensor(*lshape)}, "
                       f"{tensor(*rshape)}) -> {tensor(*out)}")

    def reduce(self, value: str, init: str, combiner: str, dims: list[int], source: tuple,
               *shape: int) -> str:
        return self.op(f"stablehlo.reduce({value} init: {init}) applies stablehlo.{combiner} "
                       f"across dimensions = {dims} : ({tensor(*source)}, {tensor()}) -> "
                       f"{tensor(*shape)}")


def forward(out: Writer, layers, batch: int, params, x: str):
    """Per layer: (input activation, pre-activation); and the logits."""
    saved = []
    activation = x
    for index, (fan_in, fan_out) in enumerate(zip(layers, layers[1:])):
        weight, bias = params[index]
        product = out.dot(activation, weight, (1, 0), (batch, fan_in), (fan_in, fan_out),
                          (batch, fan_out))
        bias_rows = out.broadcast(bias, [1], (fan_out,), batch, fan_out)
        pre = out.binary("add", product, bias_rows, batch, fan_out)
        saved.append((activation, pre))
        if index + 1 < len(layers) - 1:
            zero = out.constant(0.0, batch, fan_out)
            activation = out.binary("maximum", pre, zero, batch, fan_out)
        else:
            activation = pre
    return saved, activation


def softmax_cross_entropy(out: Writer, logits: str, labels: str, batch: int, classes: int):
    """(mean loss, gradient of the loss with respect to the logits)."""
    shape = (batch, classes)
    lowest = out.op(f"stablehlo.constant dense<0xFF800000> : {tensor()}", "cst")
    zero = out.constant(0.0)
    peak = out.reduce(logits, lowest, "maximum", [1], shape, batch)
    shifted = out.binary("subtract", logits, out.broadcast(peak, [0], (batch,), *shape),
                         *shape)
    exp = out.op(f"stablehlo.exponential {shifted} : {tensor(*shape)}")
    total = out.reduce(exp, zero, "add", [1], shape, batch)
    log_total = out.op(f"stablehlo.log {total} : {tensor(batch)}")
    log_probs = out.binary("subtract", shifted,
                           out.broadcast(log_total, [0], (batch,), *shape), *shape)
    picked = out.binary("multiply", labels, log_probs, *shape)
    summed = out.reduce(picked, zero, "add", [0, 1], shape)
    loss = out.binary("multiply", summed, out.constant(-1.0 / batch))
    probs = out.binary("divide", exp, out.broadcast(total, [0], (batch,), *shape), *shape)
    delta = out.binary("subtract", probs, labels, *shape)
    return loss, out.binary("multiply", delta, out.constant(1.0 / batch, *shape), *shape)


def backward(out: Writer, layers, batch: int, params, saved, delta: str):
    """Per layer, from the last: (weight gradient, bias gradient)."""
    zero = out.constant(0.0)
    grads = []
    for index in reversed(range(len(layers) - 1)):
        fan_in, fan_out = layers[index], layers[index + 1]
        activation, _ = saved[index]
        weight, _ = params[index]
        grad_w = out.dot(activation, delta, (0, 0), (batch, fan_in), (batch, fan_out),
                         (fan_in, fan_out))
        grad_b = out.reduce(delta, zero, "add", [0], (batch, fan_out), fan_out)
        grads.append((grad_w, grad_b))
        if index == 0:
            break
        back = out.dot(delta, weight, (1, 1), (batch, fan_out), (fan_in, fan_out),
                       (batch, fan_in))
        _, pre = saved[index - 1]
        zeros = out.constant(0.0, batch, fan_in)
        positive = out.op(f"stablehlo.compare GT, {pre}, {zeros}, FLOAT : "
                          f"({tensor(batch, fan_in)}, {tensor(batch, fan_in)}) -> "
                          f"{tensor(batch, fan_in, element='i1')}")
        delta = out.op(f"stablehlo.select {positive}, {back}, {zeros} : "
                       f"{tensor(batch, fan_in, element='i1')}, {tensor(batch, fan_in)}")
    return list(reversed(grads))


def sgd(out: Writer, layers, params, grads) -> list[str]:
    updated = []
    rate = out.constant(LEARNING_RATE)
    for (fan_in, fan_out), (weight, bias), (grad_w, grad_b) in zip(
            zip(layers, layers[1:]), params, grads):
        for value, grad, shape in ((weight, grad_w, (fan_in, fan_out)),
                                   (bias, grad_b, (fan_out,))):
            rates = out.broadcast(rate, [], (), *shape)
            step = out.binary("multiply", grad, rates, *shape)
            updated.append(out.binary("subtract", value, step, *shape))
    return updated


def train_step_mlir(layers, batch: int) -> str:
    layers = tuple(layers)
    classes = layers[-1]
    params = [(f"%w{i + 1}", f"%b{i + 1}") for i in range(len(layers) - 1)]
    args, results = [], []
    for (weight, bias), (fan_in, fan_out) in zip(params, zip(layers, layers[1:])):
        args += [f"{weight}: {tensor(fan_in, fan_out)}", f"{bias}: {tensor(fan_out)}"]
        results += [tensor(fan_in, fan_out), tensor(fan_out)]
    args += [f"%x: {tensor(batch, layers[0])}", f"%labels: {tensor(batch, classes)}"]
    out = Writer()
    saved, logits = forward(out, layers, batch, params, "%x")
    loss, delta = softmax_cross_entropy(out, logits, "%labels", batch, classes)
    grads = backward(out, layers, batch, params, saved, delta)
    updated = sgd(out, layers, params, grads)
    returned = ", ".join(updated + [loss])
    types = ", ".join(results + [tensor()])
    widths = "-".join(map(str, layers))
    header = [f"// One SGD training step of an MLP {widths}, batch {batch} (ReLU, softmax",
              "// cross-entropy on one-hot labels, learning rate "
              f"{LEARNING_RATE}). Generated by examples/gen_mlp_train_mlir.py.",
              f"func.func @train_step({', '.join(args)})",
              f"    -> ({types}) {{"]
    return "\n".join(header + out.lines + [f"  return {returned} : {types}", "}", ""])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", help="comma-separated widths, e.g. 784,512,10")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("-o", "--output", help="the file to write (with --layers)")
    parser.add_argument("--directory", default=str(HERE),
                        help="where the checked-in models are written (default examples/)")
    args = parser.parse_args(argv)
    if args.layers:
        text = train_step_mlir([int(w) for w in args.layers.split(",")], args.batch)
        Path(args.output or "train_step.mlir").write_text(text)
        return 0
    for name, layers, batch in MODELS:
        (Path(args.directory) / name).write_text(train_step_mlir(layers, batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
