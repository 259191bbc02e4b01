"""numpy kernels for examples/mlp_train_step.stream (the @mlp::@... dispatches).

    from examples.mlp_kernels import make_kernels
    kernels = make_kernels(classes=10, batch=256)   # {"mlp::matmul": fn, ...}

Every kernel takes its bindings as uint8 arrays (operand ranges, then new
results), as vmrt.hal.python_loader passes them, and works in float32. Matrix
shapes follow from the byte sizes: for a product of [rows, k] and [k, n] into
[rows, n] the three sizes fix rows, k and n. Only the softmax needs to be told
the class count, and the loss the whole batch size (the mean is over it).
"""

from __future__ import annotations

import math

import numpy as np

LEARNING_RATE = np.float32(1e-4)
BETA1, BETA2, EPSILON = np.float32(0.9), np.float32(0.999), np.float32(1e-8)


def f32(array):
    return array.view(np.float32)


def _product_shape(left: int, right: int, out: int) -> tuple[int, int, int]:
    """(rows, inner, cols) with left = rows*inner, right = inner*cols and
    out = rows*cols, counted in elements."""
    rows = math.isqrt(left * out // right)
    if rows == 0 or left % rows or out % rows or (left // rows) * (out // rows) != right:
        raise ValueError(f"no matrix product fits {left}, {right} -> {out} elements")
    return rows, left // rows, out // rows


def matmul(a, w, out):                      # [rows, k] @ [k, n]
    rows, k, n = _product_shape(a.size // 4, w.size // 4, out.size // 4)
    np.matmul(f32(a).reshape(rows, k), f32(w).reshape(k, n), out=f32(out).reshape(rows, n))


def matmul_tn(a, delta, out):               # [rows, k]^T @ [rows, n] -> [k, n]
    k, rows, n = _product_shape(a.size // 4, delta.size // 4, out.size // 4)
    np.matmul(f32(a).reshape(rows, k).T, f32(delta).reshape(rows, n),
              out=f32(out).reshape(k, n))


def matmul_tn_acc(a, delta, grad):
    partial = np.empty(grad.size // 4, np.float32).view(np.uint8)
    matmul_tn(a, delta, partial)
    f32(grad)[:] += f32(partial)


def matmul_nt(delta, w, out):               # [rows, n] @ [k, n]^T -> [rows, k]
    rows, n, k = _product_shape(delta.size // 4, w.size // 4, out.size // 4)
    np.matmul(f32(delta).reshape(rows, n), f32(w).reshape(k, n).T,
              out=f32(out).reshape(rows, k))


def _rows(h, bias):
    return f32(h).reshape(-1, bias.size // 4)


def bias_relu(h, bias):
    rows = _rows(h, bias)
    rows += f32(bias)
    np.maximum(rows, np.float32(0), out=rows)


def bias_add(h, bias):
    _rows(h, bias)[:] += f32(bias)


def relu_grad(da, activation):
    f32(da)[f32(activation) <= 0] = np.float32(0)


def reduce_rows(delta, out):
    np.sum(f32(delta).reshape(-1, out.size // 4), axis=0, out=f32(out))


def reduce_rows_acc(delta, grad):
    f32(grad)[:] += np.sum(f32(delta).reshape(-1, grad.size // 4), axis=0)


def adam_step(step):
    step.view(np.int32)[0] += 1


def adam_moment1(m, grad):
    f32(m)[:] = BETA1 * f32(m) + (np.float32(1) - BETA1) * f32(grad)


def adam_moment2(v, grad):
    g = f32(grad)
    f32(v)[:] = BETA2 * f32(v) + (np.float32(1) - BETA2) * g * g


def adam_apply(w, m, v, step):
    t = int(step.view(np.int32)[0])
    m_hat = f32(m) / (np.float32(1) - BETA1 ** np.float32(t))
    v_hat = f32(v) / (np.float32(1) - BETA2 ** np.float32(t))
    f32(w)[:] -= LEARNING_RATE * m_hat / (np.sqrt(v_hat) + EPSILON)


def make_kernels(classes: int = 10, batch: int = 256) -> dict:
    """The kernels of the training step for `classes` outputs and a `batch`-row step."""
    scale = np.float32(1.0 / batch)

    def softmax(logits, out):
        z = f32(logits).reshape(-1, classes)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        f32(out).reshape(-1, classes)[:] = e / e.sum(axis=1, keepdims=True)

    def cross_entropy_acc(probs, labels, loss):
        p = f32(probs).reshape(-1, classes)
        picked = p[np.arange(p.shape[0]), labels.view(np.int32)]
        f32(loss)[0] += -np.sum(np.log(np.maximum(picked, np.float32(1e-30)))) * scale

    def softmax_xent_grad(probs, labels):
        p = f32(probs).reshape(-1, classes)
        p[np.arange(p.shape[0]), labels.view(np.int32)] -= np.float32(1)
        p *= scale

    kernels = {name: fn for name, fn in globals().items()
               if name in ("matmul", "matmul_tn", "matmul_tn_acc", "matmul_nt", "bias_relu",
                           "bias_add", "relu_grad", "reduce_rows", "reduce_rows_acc",
                           "adam_step", "adam_moment1", "adam_moment2", "adam_apply")}
    kernels.update(softmax=softmax, cross_entropy_acc=cross_entropy_acc,
                   softmax_xent_grad=softmax_xent_grad)
    return {f"mlp::{name}": fn for name, fn in kernels.items()}


#: The kernels for the checked-in example (10 classes, batch 256); `vmrt stream run
#: --kernels examples/mlp_kernels.py` registers these.
KERNELS = make_kernels()
