"""Async-external exports (iree.abi.model = coarse-fences) called from Python:
the fences are appended and waited on, as iree.runtime's invoker does."""

from __future__ import annotations

import numpy as np
import pytest

import vmrt
from vmrt.errors import VMError
from vmrt.hal import create_device
from vmrt.modules.hal import HalModule
from vmrt.vm.context import AsyncFunction

A = np.array([1, 2, 3, 4], np.float32)
B = np.array([0.5, 0.5, -1, 10], np.float32)


@pytest.fixture(scope="module")
def async_module(corpus):
    return next(m for m in corpus if m.name == "tensor_async")


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_async_export_called_with_its_tensors_only(async_module, device):
    hal_device = create_device(device)
    try:
        with vmrt.load(str(async_module.vmfb), modules=[HalModule([hal_device])]) as m:
            fn = m.context.function("module.scale_add")
            assert isinstance(fn, AsyncFunction)
            np.testing.assert_array_equal(m.scale_add(A, B), 2 * A + B)
            sums, same = m.sum_rows(np.arange(1, 7, dtype=np.int32).reshape(2, 3))
            np.testing.assert_array_equal(sums, [6, 15])
            assert same.shape == (2, 3)
            assert m.count(41) == 42
    finally:
        hal_device.close()


def test_async_export_with_explicit_fences(async_module):
    with vmrt.load(str(async_module.vmfb), modules=[HalModule()]) as m:
        device = m.context.host_adapter.device
        signal = device.create_fence()
        result = m.scale_add(A, B, None, signal)
        signal.wait()
        np.testing.assert_array_equal(result, 2 * A + B)


def test_wrong_argument_count_is_still_an_error(async_module):
    with vmrt.load(str(async_module.vmfb), modules=[HalModule()]) as m:
        with pytest.raises(VMError):
            m.scale_add(A)


def test_sync_exports_are_plain_functions(corpus):
    module = next(m for m in corpus if m.name == "tensor_elementwise")
    with vmrt.load(str(module.vmfb), modules=[HalModule()]) as m:
        assert type(m.context.function(f"{m.context.instances[-1].module.name}.add_f32")) \
            is not AsyncFunction
