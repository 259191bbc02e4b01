"""Results are the host's own numpy arrays: whatever the host does to them, the
module does not see, and whatever the module does later, they do not change."""

from __future__ import annotations

import numpy as np
import pytest

import vmrt
from vmrt.hal import create_device
from vmrt.hal.buffer_view_io import buffer_view_from_numpy, buffer_view_to_numpy
from vmrt.modules.hal import HalModule

SHAPE = (128, 256)
X = np.full(SHAPE, 1.5, np.float32)


@pytest.fixture(scope="module")
def results_module(corpus):
    return str(next(m for m in corpus if m.name == "tensor_results").vmfb)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_results_are_the_hosts_own(results_module, device):
    with vmrt.load(results_module, modules=[HalModule(device=device)]) as m:
        first = m.double(X)
        second = m.double(first)
        np.testing.assert_array_equal(first, 2 * X)
        np.testing.assert_array_equal(second, 4 * X)
        assert not np.shares_memory(first, second)
        first[0, 0] = -1  # the host's to change: nothing else sees it
        np.testing.assert_array_equal(m.double(X), 2 * X)


def test_a_result_returned_twice_is_two_copies(results_module):
    with vmrt.load(results_module, modules=[HalModule()]) as m:
        a, b = m.twice(X)
        assert not np.shares_memory(a, b)
        a[:] = 0
        np.testing.assert_array_equal(b, 2 * X)


def test_a_view_the_host_holds_is_copied(results_module):
    with vmrt.load(results_module, modules=[HalModule()]) as m:
        view = buffer_view_from_numpy(X, m.context.host_adapter.device)
        same = m.identity(view)
        same[:] = 0
        np.testing.assert_array_equal(buffer_view_to_numpy(view), X)
        np.testing.assert_array_equal(m.identity(X), X)


def test_results_kept_by_module_state_stay_its_own(results_module):
    with vmrt.load(results_module, modules=[HalModule()]) as m:
        first = m.accumulate(X)
        first[:] = 100  # whatever the host does to its result...
        np.testing.assert_array_equal(m.recall(), X)  # ...the global keeps its value
        np.testing.assert_array_equal(m.accumulate(X), 2 * X)
        np.testing.assert_array_equal(first, 100)


def test_results_the_host_keeps_are_not_charged_to_the_context(results_module):
    with vmrt.load(results_module, modules=[HalModule()],
                   limits=vmrt.Limits(max_memory=1 << 20)) as m:
        baseline = m.context.memory_in_use
        kept = [m.double(X) for _ in range(12)]  # 1.5 MiB of results, more than the limit
        assert m.context.memory_in_use == baseline
