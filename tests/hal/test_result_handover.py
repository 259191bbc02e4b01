"""Large results are handed to the host without a copy only when nothing else can
reach their memory (vmrt.hal.buffer_view_io.handed_over_memory): the array then
owns the buffer's memory and no one can tell it from a copy. Anything else that
holds the view, its buffer, a subspan, a mapping or a sibling allocation makes it
a copy."""

from __future__ import annotations

import numpy as np
import pytest

import vmrt
from vmrt.hal import HeapAllocator, MemoryType, create_device
from vmrt.hal.buffer import MAPPED_ALLOCATION_BYTES, Buffer
from vmrt.hal.buffer_view import BufferView
from vmrt.hal.buffer_view_io import (
    HANDOVER_BYTES, buffer_view_from_numpy, buffer_view_to_numpy, handed_over_memory)
from vmrt.elements import ElementType
from vmrt.hal.types import BufferUsage, MemoryAccess
from vmrt.modules.hal import HalModule

SHAPE = (128, 256)  # 128 KiB of f32: over HANDOVER_BYTES
X = np.full(SHAPE, 1.5, np.float32)
READ = int(MemoryAccess.READ)


def _fresh_view(size: int = HANDOVER_BYTES, zeroed: bool = True) -> BufferView:
    buffer = Buffer.allocate(size, int(MemoryType.HOST_LOCAL), int(MemoryAccess.ALL),
                             int(BufferUsage.DEFAULT), zeroed=zeroed)
    return BufferView.of_dense(buffer, (size,), int(ElementType.UINT_8), size)


@pytest.mark.parametrize("zeroed", [True, False])
@pytest.mark.parametrize("size", [HANDOVER_BYTES, 3 << 20, MAPPED_ALLOCATION_BYTES])
def test_a_view_nothing_shares_is_handed_over(size, zeroed):
    view = _fresh_view(size, zeroed)
    memory = handed_over_memory(view)
    assert memory is not None and len(memory) == size
    del memory  # (held, it is one more reference: the next look copies)
    array = buffer_view_to_numpy(view, sole=True)
    assert not array.flags.owndata and array.flags.writeable
    array[-1] = 9  # the buffer's own memory
    assert view.buffer.map_read(size - 1, 1) == b"\x09"


def test_anything_else_holding_the_memory_makes_a_copy():
    def copied(view) -> bool:
        return handed_over_memory(view) is None

    view = _fresh_view()
    held = view.buffer
    assert copied(view)
    del held
    subspan = view.buffer.subspan(0, 16)
    assert copied(view)
    del subspan
    mapping = view.buffer.map_range(READ)
    assert copied(view)
    del mapping
    storage = view.buffer.storage
    assert copied(view)
    del storage
    assert not copied(view)  # all of them gone: handed over again

    siblings = Buffer.allocate_copies([bytes(HANDOVER_BYTES)] * 2, int(MemoryType.HOST_LOCAL),
                                      int(MemoryAccess.ALL), int(BufferUsage.DEFAULT))
    view = BufferView.of_dense(siblings.pop(), (HANDOVER_BYTES,), int(ElementType.UINT_8),
                               HANDOVER_BYTES)
    assert copied(view)  # the other sibling shares its allocation

    array = np.zeros(HANDOVER_BYTES, np.uint8)
    imported = HeapAllocator().import_buffer(array, int(MemoryType.HOST_LOCAL),
                                             int(BufferUsage.DEFAULT), int(MemoryAccess.ALL))
    view = BufferView.of_dense(imported, (HANDOVER_BYTES,), int(ElementType.UINT_8),
                               HANDOVER_BYTES)
    assert copied(view)  # the host's array still holds it


def test_subspans_read_only_and_small_views_are_copied():
    view = _fresh_view()
    part = BufferView.of_dense(view.buffer.subspan(64, HANDOVER_BYTES - 64),
                               (HANDOVER_BYTES - 64,), int(ElementType.UINT_8),
                               HANDOVER_BYTES - 64)
    assert handed_over_memory(part) is None
    constant = Buffer(memoryview(bytes(HANDOVER_BYTES)), int(MemoryType.HOST_LOCAL),
                      int(MemoryAccess.ALL), int(BufferUsage.DEFAULT))
    assert handed_over_memory(BufferView.of_dense(
        constant, (HANDOVER_BYTES,), int(ElementType.UINT_8), HANDOVER_BYTES)) is None
    small = _fresh_view(HANDOVER_BYTES - 1)
    assert buffer_view_to_numpy(small, sole=True).flags.owndata


@pytest.fixture(scope="module")
def results_module(corpus):
    return str(next(m for m in corpus if m.name == "tensor_results").vmfb)


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_fresh_results_come_back_without_a_copy(results_module, device):
    with vmrt.load(results_module, modules=[HalModule(device=device)]) as m:
        first = m.double(X)
        second = m.double(first)
        assert not first.flags.owndata and not second.flags.owndata
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
        assert same.flags.owndata
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


def test_handed_over_results_are_not_charged_to_the_context(results_module):
    with vmrt.load(results_module, modules=[HalModule()],
                   limits=vmrt.Limits(max_memory=1 << 20)) as m:
        baseline = m.context.memory_in_use
        kept = [m.double(X) for _ in range(12)]  # 1.5 MiB of results, more than the limit
        assert not kept[0].flags.owndata
        assert m.context.memory_in_use == baseline
