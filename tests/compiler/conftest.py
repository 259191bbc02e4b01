"""Models for the compiler tests, built with onnx.helper (compiles are slow: each model
is compiled once per session, its cache entry shared by the tests)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="vmrt.compile needs iree-base-compiler")
onnx = pytest.importorskip("onnx", reason="the ONNX tests need the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(36)
#: The two-input model: y = relu(features @ W + bias), z = sum(y, axis 1).
WEIGHTS = RNG.standard_normal((8, 4)).astype(np.float32)


def affine_model(nodes_after=(), outputs=None, name="affine"):
    """features[2,8] @ W[8,4] + bias[4] -> relu -> y; plus `nodes_after`."""
    nodes = [helper.make_node("MatMul", ["features", "W"], ["product"]),
             helper.make_node("Add", ["product", "bias"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["y"]), *nodes_after]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("bias", TensorProto.FLOAT, [4])],
        outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        initializer=[numpy_helper.from_array(WEIGHTS, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def affine_reference(features, bias):
    return np.maximum(features @ WEIGHTS + bias, 0)


@pytest.fixture(scope="session")
def affine_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "affine.onnx"
    onnx.save(affine_model(), path)
    return path


@pytest.fixture(scope="session")
def affine_loaded(affine_onnx):
    """The affine model through vmrt.load (compiled once: the session's cache keeps it)."""
    import vmrt
    with vmrt.load(affine_onnx) as module:
        yield module


def example_inputs():
    return (RNG.standard_normal((2, 8)).astype(np.float32),
            RNG.standard_normal(4).astype(np.float32))
