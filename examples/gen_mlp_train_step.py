"""Generates examples/mlp_train_step.stream: one training step of a small MLP.

    python examples/gen_mlp_train_step.py [-o examples/mlp_train_step.stream]
        [--batch 256] [--microbatches 2] [--layers 784,1024,1024,512,10]

The program has two functions:

@initialize   loads the weights from the "model" parameter scope (param.load), gathers
              every layer's bias into one packed buffer (param.gather) and zeroes the
              Adam moments (splat).
@train_step   one Adam step over a batch split into micro-batches (gradient
              accumulation). Per micro-batch, in program order: forward (matmul, then
              bias + ReLU in place), softmax cross-entropy (loss accumulated in place),
              backward layer by layer from the last (weight and bias gradients created
              by the first micro-batch, accumulated in place by the next ones). After
              the last micro-batch's gradients of a layer come that layer's Adam
              updates, as an optimizer fused into the step would: the memory-friendly
              order a frontend emits. Biases and their moments live packed in one
              buffer each, every layer updating its own range in place (so those
              updates do not conflict); inputs and labels are read by row ranges.

The micro-batches are independent until their gradients meet, which is the
concurrency max-concurrency finds (at the price of both micro-batches' activations
being live at once); debug and min-peak-memory run them one after the other.

Kernels are named @mlp::@<kernel>; sizes are bytes of f32 data.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from vmrt.stream import ProgramBuilder, format_program  # noqa: E402

F32 = 4


def build(batch: int = 256, layers: tuple[int, ...] = (784, 1024, 1024, 512, 10),
          microbatches: int = 2):
    depth = len(layers) - 1
    weight_bytes = [layers[i] * layers[i + 1] * F32 for i in range(depth)]
    bias_bytes = [layers[i + 1] * F32 for i in range(depth)]
    bias_offsets = [sum(bias_bytes[:i]) for i in range(depth)]
    bias_total = sum(bias_bytes)
    pb = ProgramBuilder("mlp_train")

    # -- @initialize -------------------------------------------------------------------------
    state_types = ([("external", n) for n in weight_bytes] + [("external", bias_total)]
                   + [("external", n) for n in weight_bytes] * 2
                   + [("external", bias_total)] * 2 + [("external", 4)])
    init = pb.func("initialize", results=state_types)
    weights = [init.param_load("model", f"layer{l + 1}.weight", "external", weight_bytes[l],
                               name=f"w{l + 1}") for l in range(depth)]
    zero_biases = init.splat((0.0, "f32"), "external", bias_total, name="b_zero")
    biases = init.param_gather("model", [(f"layer{l + 1}.bias", zero_biases, bias_offsets[l],
                                          bias_bytes[l]) for l in range(depth)], name="b")
    m_w = [init.splat((0.0, "f32"), "external", weight_bytes[l], name=f"m_w{l + 1}")
           for l in range(depth)]
    v_w = [init.splat((0.0, "f32"), "external", weight_bytes[l], name=f"v_w{l + 1}")
           for l in range(depth)]
    m_b = init.splat((0.0, "f32"), "external", bias_total, name="m_b")
    v_b = init.splat((0.0, "f32"), "external", bias_total, name="v_b")
    step = init.splat((0, "i32"), "external", 4, name="step")
    init.ret(*weights, biases, *m_w, *v_w, m_b, v_b, step)

    # -- @train_step -------------------------------------------------------------------------
    args = ([("x", "external", batch * layers[0] * F32),
             ("labels", "external", batch * 4)]
            + [(f"w{l + 1}", "external", weight_bytes[l]) for l in range(depth)]
            + [("b", "external", bias_total)]
            + [(f"m_w{l + 1}", "external", weight_bytes[l]) for l in range(depth)]
            + [(f"v_w{l + 1}", "external", weight_bytes[l]) for l in range(depth)]
            + [("m_b", "external", bias_total), ("v_b", "external", bias_total),
               ("step", "external", 4)])
    f = pb.func("train_step", args, [("external", 4)] + state_types)
    values = {v.name: v for v in f.args}
    x, labels = values["x"], values["labels"]
    w = [values[f"w{l + 1}"] for l in range(depth)]
    m_w = [values[f"m_w{l + 1}"] for l in range(depth)]
    v_w = [values[f"v_w{l + 1}"] for l in range(depth)]
    b, m_b, v_b = values["b"], values["m_b"], values["v_b"]

    step, = f.dispatch("mlp::adam_step", [values["step"]], [values["step"]], names=["step1"])
    loss = f.splat((0.0, "f32"), "external", 4, name="loss0")

    rows = batch // microbatches

    def act(l):   # bytes of one micro-batch's activation after layer l (1-based)
        return rows * layers[l] * F32

    grads_w: list = [None] * depth
    grads_b: list = [None] * depth
    new_w, new_mw, new_vw = [None] * depth, [None] * depth, [None] * depth
    for mb in range(microbatches):
        last = mb + 1 == microbatches
        tag = f".mb{mb}" if microbatches > 1 else ""
        x_rows = (x, mb * rows * layers[0] * F32, rows * layers[0] * F32)
        label_rows = (labels, mb * rows * 4, rows * 4)

        # Forward.
        acts = [x_rows]
        for l in range(depth):
            h, = f.dispatch("mlp::matmul", [acts[-1], w[l]], [("transient", act(l + 1))],
                            names=[f"h{l + 1}{tag}"])
            kernel = "mlp::bias_relu" if l + 1 < depth else "mlp::bias_add"
            name = f"a{l + 1}{tag}" if l + 1 < depth else f"logits{tag}"
            a, = f.dispatch(kernel, [h, (b, bias_offsets[l], bias_bytes[l])], [h],
                            names=[name])
            acts.append(a)

        # Loss, accumulated over the micro-batches.
        probs, = f.dispatch("mlp::softmax", [acts[-1]], [("transient", act(depth))],
                            names=[f"probs{tag}"])
        loss, = f.dispatch("mlp::cross_entropy_acc", [probs, label_rows, loss], [loss],
                           names=[f"loss{mb + 1}"])
        delta, = f.dispatch("mlp::softmax_xent_grad", [probs, label_rows], [probs],
                            names=[f"d{depth}{tag}"])

        # Backward: gradients accumulate across micro-batches; after the last one each
        # layer's Adam update follows its gradients right away.
        for l in reversed(range(depth)):
            n = l + 1
            if grads_w[l] is None:
                gw, = f.dispatch("mlp::matmul_tn", [acts[l], delta],
                                 [("transient", weight_bytes[l])], names=[f"gw{n}{tag}"])
                gb, = f.dispatch("mlp::reduce_rows", [delta], [("transient", bias_bytes[l])],
                                 names=[f"gb{n}{tag}"])
            else:
                gw, = f.dispatch("mlp::matmul_tn_acc", [acts[l], delta, grads_w[l]],
                                 [grads_w[l]], names=[f"gw{n}{tag}"])
                gb, = f.dispatch("mlp::reduce_rows_acc", [delta, grads_b[l]], [grads_b[l]],
                                 names=[f"gb{n}{tag}"])
            grads_w[l], grads_b[l] = gw, gb
            if l > 0:
                da, = f.dispatch("mlp::matmul_nt", [delta, w[l]], [("transient", act(l))],
                                 names=[f"da{l}{tag}"])
                next_delta, = f.dispatch("mlp::relu_grad", [da, acts[l]], [da],
                                         names=[f"d{l}{tag}"])
            if last:
                mw, = f.dispatch("mlp::adam_moment1", [m_w[l], gw], [m_w[l]],
                                 names=[f"m_w{n}.1"])
                vw, = f.dispatch("mlp::adam_moment2", [v_w[l], gw], [v_w[l]],
                                 names=[f"v_w{n}.1"])
                new_w[l], = f.dispatch("mlp::adam_apply", [w[l], mw, vw, step], [w[l]],
                                       names=[f"w{n}.1"])
                new_mw[l], new_vw[l] = mw, vw
                rng = (bias_offsets[l], bias_bytes[l])
                m_b, = f.dispatch("mlp::adam_moment1", [(m_b, *rng), gb], [m_b],
                                  names=[f"m_b.{n}"])
                v_b, = f.dispatch("mlp::adam_moment2", [(v_b, *rng), gb], [v_b],
                                  names=[f"v_b.{n}"])
                b, = f.dispatch("mlp::adam_apply", [(b, *rng), (m_b, *rng), (v_b, *rng), step],
                                [b], names=[f"b.{n}"])
            if l > 0:
                delta = next_delta
    f.ret(loss, *new_w, b, *new_mw, *new_vw, m_b, v_b, step)
    return pb.build()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(HERE / "mlp_train_step.stream"))
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--layers", default="784,1024,1024,512,10")
    args = parser.parse_args(argv)
    layers = tuple(int(n) for n in args.layers.split(","))
    if args.microbatches < 1 or args.batch % args.microbatches:
        parser.error("--batch must be a multiple of --microbatches")
    program = build(args.batch, layers, args.microbatches)
    header = ("// One training step of an MLP "
              f"({' -> '.join(map(str, layers))}, batch {args.batch} in "
              f"{args.microbatches} micro-batches, Adam).\n"
              "// Generated by examples/gen_mlp_train_step.py; do not edit.\n"
              "// Try: vmrt stream stats examples/mlp_train_step.stream\n")
    Path(args.output).write_text(header + format_program(program), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
