"""vmrt.compile of a PyTorch module and a JAX function: outputs equal the framework's
(skipped where torch or jax is not installed)."""

from __future__ import annotations

import numpy as np
import pytest

import vmrt


def test_torch_module():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.head = torch.nn.Linear(4 * 6 * 6, 5)

        def forward(self, image):
            return self.head(torch.relu(self.conv(image)).flatten(1))

    net = Net().eval()
    image = torch.randn(2, 3, 8, 8)
    compiled = vmrt.compile(net, example_args=(image,))
    assert [v.name for v in compiled.inputs] == ["image"]
    with vmrt.load(compiled) as m:
        got = m.function(compiled.function)(image=image.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(got, net(image).numpy(), rtol=1e-4, atol=1e-5)


def test_jax_function():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def scaled_tanh(weights, features):
        return jnp.tanh(features @ weights) * 2

    weights = np.random.default_rng(1).standard_normal((4, 2)).astype(np.float32)
    features = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    compiled = vmrt.compile(scaled_tanh, example_args=(weights, features))
    assert [v.name for v in compiled.inputs] == ["weights", "features"]
    with vmrt.load(compiled) as m:
        got = m.function(compiled.function)(features=features, weights=weights)
    np.testing.assert_allclose(got, np.asarray(scaled_tanh(weights, features)),
                               rtol=1e-5, atol=1e-6)


def test_torch_module_needs_example_args():
    torch = pytest.importorskip("torch")
    with pytest.raises(vmrt.VmrtError, match="needs example_args"):
        vmrt.compile(torch.nn.Linear(2, 2))
