"""Paths kept cheap for per-call speed behave like the general ones: large
allocations (anonymous mappings) are zeroed and writable, cached command buffer
regions and merged slot requirements match what was recorded."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from vmrt.errors import StatusCode
from vmrt.hal import BufferUsage, HalError, HeapAllocator, MemoryType, create_device
from vmrt.hal.buffer import MAPPED_ALLOCATION_BYTES, zeroed_memory
from vmrt.hal.types import WHOLE_BUFFER, CommandBufferMode, CommandCategory, MemoryAccess

DEVICE_LOCAL = int(MemoryType.DEVICE_LOCAL)
DEFAULT = int(BufferUsage.DEFAULT)
ANY_CATEGORY = int(CommandCategory.ANY)


@pytest.mark.parametrize("size", [0, 1, 4096, MAPPED_ALLOCATION_BYTES - 1,
                                  MAPPED_ALLOCATION_BYTES, 3 * MAPPED_ALLOCATION_BYTES + 5])
def test_zeroed_memory_is_zero_and_writable(size):
    data = np.frombuffer(memoryview(zeroed_memory(size)), np.uint8)
    assert data.size == size and not data.any()
    if size:
        data[-1] = 7
        assert data[-1] == 7


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 4096, 100_003])
def test_aligned_memory_is_the_same_in_c_and_in_python(size):
    # Buffers' small allocations come from vmrt._cnative.aligned_bytearray, or its
    # Python twin: both give `size` zero bytes of their own at a BUFFER_ALIGNMENT
    # boundary, writable, and the address those bytes are really at.
    import ctypes
    from vmrt.hal.buffer import BUFFER_ALIGNMENT, _ALIGNED_IN_C, aligned_bytearray_python
    if _ALIGNED_IN_C is None:
        pytest.skip("no C extension")
    made = [make(size) for make in (lambda n: _ALIGNED_IN_C(n, BUFFER_ALIGNMENT),
                                    aligned_bytearray_python) for _ in range(3)]
    for view, address in made:
        assert isinstance(view, memoryview) and not view.readonly
        assert (view.format, view.ndim, len(view)) == ("B", 1, size) and not any(view)
        assert address % BUFFER_ALIGNMENT == 0
        if size:
            assert ctypes.addressof(ctypes.c_char.from_buffer(view)) == address
            view[-1] = 9
    assert len({address for _, address in made}) == len(made) or size == 0
    assert all(bytes(view[-1:]) == b"\x09" for view, _ in made if size)
    with pytest.raises(ValueError):
        _ALIGNED_IN_C(-1, BUFFER_ALIGNMENT)
    with pytest.raises(ValueError):
        _ALIGNED_IN_C(8, 48)  # not a power of two


def test_large_buffer_is_zeroed_and_round_trips_through_mapping():
    buffer = HeapAllocator().allocate_buffer(DEVICE_LOCAL, DEFAULT, MAPPED_ALLOCATION_BYTES + 3)
    assert buffer.map_read(MAPPED_ALLOCATION_BYTES - 2, 5) == bytes(5)
    buffer.map_write(MAPPED_ALLOCATION_BYTES - 2, b"abcde")
    assert buffer.map_read(MAPPED_ALLOCATION_BYTES - 2, 5) == b"abcde"
    view = buffer.subspan(MAPPED_ALLOCATION_BYTES, 3).map_range(int(MemoryAccess.READ))
    assert bytes(view) == b"cde"


def test_regions_are_cached_only_once_finalized():
    device = create_device("local-sync")
    buffer = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 16)
    command_buffer = device.create_command_buffer(int(CommandBufferMode.ONE_SHOT), ANY_CATEGORY)
    command_buffer.begin()
    command_buffer.fill_buffer((buffer, 0, 0, 4), b"\x01")
    assert len(command_buffer.regions()) == 1
    command_buffer.execution_barrier()
    command_buffer.fill_buffer((buffer, 0, 4, 4), b"\x02")
    command_buffer.end()
    assert len(command_buffer.regions()) == 2
    assert command_buffer.regions() is command_buffer.regions()
    for _ in range(2):  # a reusable command buffer runs its cached regions again
        device.queue_execute(-1, None, None, command_buffer)
    assert buffer.map_read(0, 8) == b"\x01" * 4 + b"\x02" * 4


def test_indirect_slot_requirements_merge_across_commands():
    device = create_device("local-sync")
    command_buffer = device.create_command_buffer(0, ANY_CATEGORY, binding_capacity=2)
    command_buffer.begin()
    command_buffer.fill_buffer((None, 1, 8, 8), b"\0\0\0\0")
    command_buffer.copy_buffer((None, 1, 0, 4), (None, 0, 0, 4))
    command_buffer.end()
    assert command_buffer.binding_count == 2
    merged = command_buffer.slot_requirements[1]
    assert merged.max_byte_offset == 16 and merged.alignment == 4
    assert merged.usage == int(BufferUsage.TRANSFER)
    small = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 12)
    large = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 16)
    with pytest.raises(HalError) as failure:
        device.queue_execute(-1, None, None, command_buffer, [(large, 0, 16), (small, 0, 12)])
    assert failure.value.code == StatusCode.OUT_OF_RANGE
    device.queue_execute(-1, None, None, command_buffer, [(small, 0, 12), (large, 0, 16)])


def test_copies_into_one_target_slot_require_their_furthest_end():
    """An initializer's hundreds of copies into one slot: the slot needs the end of
    the furthest (whatever the order), and a copy of the whole buffer needs no end."""
    device = create_device("local-sync")
    source = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 64)
    command_buffer = device.create_command_buffer(0, ANY_CATEGORY, binding_capacity=1)
    command_buffer.begin()
    for offset in (8, 40, 16, 0):
        command_buffer.copy_buffer((source, 0, offset, 8), (None, 0, offset, 8))
    command_buffer.copy_buffer((source, 0, 0, WHOLE_BUFFER), (None, 0, 0, WHOLE_BUFFER))
    command_buffer.end()
    assert command_buffer.slot_requirements[0].max_byte_offset == 48
    short = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 47)
    with pytest.raises(HalError) as failure:
        device.queue_execute(-1, None, None, command_buffer, [(short, 0, 47)])
    assert failure.value.code == StatusCode.OUT_OF_RANGE
    target = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 48)
    source.map_range(2, 0, 64)[:] = bytes(range(64))
    device.queue_execute(-1, None, None, command_buffer, [(target, 0, 48)])
    assert target.map_read(0, 48) == bytes(range(48))


# -- binding addresses (native dispatches bind by address, not through views) ----------------------
def _address_of(view) -> int:
    return np.frombuffer(view, np.uint8).ctypes.data if len(view) else 0


@pytest.mark.parametrize("size", [1, 100, 70_000, MAPPED_ALLOCATION_BYTES])
def test_binding_span_addresses_are_those_of_the_mapped_bytes(size):
    buffer = HeapAllocator().allocate_buffer(DEVICE_LOCAL, DEFAULT, size)
    assert buffer.storage_address() % 64 == 0  # IREE's heap alignment, small or large
    for target, offset, length in [(buffer, 0, -1), (buffer, size // 2, -1),
                                   (buffer.subspan(size // 3, size - size // 3), 1 % size, 0)]:
        root, start, mapped = target.binding_span(offset, length)
        assert root is buffer
        view = target.map_binding(offset, length)
        assert mapped == len(view)
        if mapped:
            assert buffer.storage_address() + start == _address_of(view)


def test_binding_span_checks_what_map_binding_checks():
    allocator = HeapAllocator()
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 16)
    with pytest.raises(HalError) as failure:
        buffer.binding_span(8, 12)
    assert failure.value.code == StatusCode.OUT_OF_RANGE
    buffer.decommit()
    with pytest.raises(HalError) as failure:
        buffer.binding_span(0, -1)
    assert failure.value.code == StatusCode.FAILED_PRECONDITION


def test_read_only_memory_has_an_address_and_moves_when_bound_for_writing():
    data = bytes(range(64)) * 2
    buffer = HeapAllocator().import_buffer(data, DEVICE_LOCAL, DEFAULT, int(MemoryAccess.READ))
    assert buffer.storage_address() == _address_of(memoryview(data))
    buffer.copy_on_write = True  # as module constants are
    root, start, length = buffer.binding_span(0, -1)
    assert not root.storage.readonly  # a private copy, written by dispatches, not `data`
    assert buffer.storage_address() == _address_of(root.storage) != _address_of(memoryview(data))
    assert bytes(root.storage[start:start + length]) == data


# -- remembered checks: each still fails for what it did not see ------------------------------------
def test_allocator_remembers_parameters_each_for_itself():
    allocator = HeapAllocator()
    for _ in range(2):
        for memory_type, usage in [(DEVICE_LOCAL, DEFAULT), (DEVICE_LOCAL, 0),
                                   (int(MemoryType.HOST_LOCAL), int(BufferUsage.DISPATCH)),
                                   (0, int(BufferUsage.TRANSFER))]:
            buffer = allocator.allocate_buffer(memory_type, usage, 8)
            expected = allocator.query_compatibility(memory_type or int(MemoryType.OPTIMAL),
                                                     usage or DEFAULT)
            assert (buffer.memory_type, buffer.allowed_usage) == expected[1:]
    # A module asking for ever new combinations: what the allocator keeps stays bounded.
    def allocate_each(usages) -> int:
        """Bytes still held after a buffer of each usage was allocated and dropped."""
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for usage in usages:
            assert allocator.allocate_buffer(DEVICE_LOCAL, usage, 1).allowed_usage & usage == usage
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    tracemalloc.start()
    try:
        allocate_each(range(1, 300))  # (past any bound the allocator keeps)
        held = allocate_each(range(300, 20_300))
    finally:
        tracemalloc.stop()
    assert held < 64 << 10, f"{held} bytes kept for 20,000 usages"  # (unbounded: megabytes)


def test_submission_checks_each_buffer_whatever_passed_before():
    device = create_device("local-sync")
    command_buffer = device.create_command_buffer(0, ANY_CATEGORY, binding_capacity=1)
    command_buffer.begin()
    command_buffer.fill_buffer((None, 0, 0, 4), b"\x07")
    command_buffer.end()
    good = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 4)
    device.queue_execute(-1, None, None, command_buffer, [(good, 0, 4)])
    assert good.map_read(0, 4) == b"\x07" * 4
    read_only = device.allocator.import_buffer(bytearray(4), DEVICE_LOCAL, DEFAULT,
                                               int(MemoryAccess.READ))
    for _ in range(2):
        with pytest.raises(HalError) as failure:
            device.queue_execute(-1, None, None, command_buffer, [(read_only, 0, 4)])
        assert failure.value.code == StatusCode.PERMISSION_DENIED
    device.queue_execute(-1, None, None, command_buffer, [(good, 0, 4)])



def test_recorded_direct_bindings_are_admitted_for_each_need_by_itself():
    """What passed for one kind of command (a copy source, an advice needing
    nothing) or with other properties is checked again for another."""
    device = create_device("local-sync")
    read_only = device.allocator.import_buffer(bytearray(8), DEVICE_LOCAL, DEFAULT,
                                               int(MemoryAccess.READ))
    writable = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 8)
    command_buffer = device.create_command_buffer(0, ANY_CATEGORY)
    command_buffer.begin()
    for _ in range(2):  # the second time from what was admitted
        command_buffer.copy_buffer((read_only, 0, 0, 4), (writable, 0, 0, 4))
        command_buffer.advise_buffer((read_only, 0, 0, -1))
    for record in (lambda: command_buffer.copy_buffer((writable, 0, 0, 4), (read_only, 0, 4, 4)),
                   lambda: command_buffer.fill_buffer((read_only, 0, 0, 4), b"\x01")):
        with pytest.raises(HalError) as failure:
            record()
        assert failure.value.code == StatusCode.PERMISSION_DENIED
    writable.allowed_usage &= ~int(BufferUsage.TRANSFER_TARGET)  # properties never admitted
    with pytest.raises(HalError) as failure:
        command_buffer.copy_buffer((read_only, 0, 0, 4), (writable, 0, 0, 4))
    assert failure.value.code == StatusCode.PERMISSION_DENIED


def test_slot_requirements_that_grow_check_admitted_buffers_again():
    from vmrt.hal.command_buffer import BindingNeeds, Requirements, validate_bindings
    from vmrt.hal.types import BufferCompatibility
    allocator = HeapAllocator()
    read, write = int(MemoryAccess.READ), int(MemoryAccess.WRITE)
    read_only = allocator.import_buffer(bytearray(8), DEVICE_LOCAL, DEFAULT, read)
    transfer, visible = int(BufferCompatibility.QUEUE_TRANSFER), int(MemoryType.DEVICE_VISIBLE)
    source = BindingNeeds(transfer, int(BufferUsage.TRANSFER_SOURCE), read, visible)
    target = BindingNeeds(transfer, int(BufferUsage.TRANSFER_TARGET), write, visible)
    requirements = Requirements()
    requirements.merge(source, 8, 0)
    for _ in range(2):  # the second time from what was admitted
        validate_bindings(allocator, [(read_only, 0, 8)], {0: requirements})
    requirements.merge(source, 4, 0)  # needs nothing more: what passed stays admitted
    assert requirements.admitted
    with pytest.raises(HalError) as failure:  # the range is checked whatever was admitted
        validate_bindings(allocator, [(read_only, 0, 6)], {0: requirements})
    assert failure.value.code == StatusCode.OUT_OF_RANGE
    requirements.merge(target, 8, 0)
    with pytest.raises(HalError) as failure:
        validate_bindings(allocator, [(read_only, 0, 8)], {0: requirements})
    assert failure.value.code == StatusCode.PERMISSION_DENIED

# -- host arrays in and out ----------------------------------------------------------------------
class _ArrayLike:
    """An object exposing __array_interface__ itself (not through its class)."""

    def __init__(self, array):
        self.__array_interface__ = array.__array_interface__
        self._array = array


def test_host_adapter_converts_arrays_at_ref_positions_only():
    from vmrt.hal.buffer_view import BufferView
    from vmrt.modules.hal import HostAdapter
    from vmrt.vm.cconv import signature_of
    adapter = HostAdapter(create_device("local-sync"))
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    converted = adapter.convert_arguments(signature_of("0rir_r"),
                                          (array, 5, _ArrayLike(array + 1)))
    assert isinstance(converted[0], BufferView) and converted[1] == 5
    assert isinstance(converted[2], BufferView)
    assert (adapter.convert_results(None, converted[2]) == array + 1).all()
    unchanged = (converted[0], 5, None)
    assert adapter.convert_arguments(signature_of("0rir_r"), unchanged) is unchanged


@pytest.mark.parametrize("array", [
    np.arange(6, dtype=np.float32).reshape(2, 3), np.array(2.5), np.zeros((0, 4), np.int8),
    np.array([True, False]), np.arange(4, dtype=">i4"), np.arange(12, dtype=np.int16)[::2],
    np.arange(70_000, dtype=np.uint8).reshape(7, 10_000)])
def test_numpy_round_trip_keeps_values_dtype_and_shape(array):
    from vmrt.hal.buffer_view_io import buffer_view_from_numpy, buffer_view_to_numpy
    view = buffer_view_from_numpy(array, create_device("local-sync"))
    assert view.byte_length == array.nbytes and view.shape == array.shape
    assert view.buffer.storage_address() % 64 == 0
    back = buffer_view_to_numpy(view)
    assert back.shape == array.shape and back.dtype == array.dtype.newbyteorder("=")
    assert (back == array).all()


def test_a_calls_small_inputs_share_one_allocation_and_stay_independent():
    """buffer_views_from_numpy: small arrays are carved out of one allocation, each
    aligned and holding its own bytes (writing one leaves the others); a large one
    has its own; all round-trip like buffer_view_from_numpy's."""
    from vmrt.hal.buffer_view_io import (SHARED_INPUT_BYTES, buffer_view_to_numpy,
                                         buffer_views_from_numpy)
    arrays = [np.arange(5, dtype=np.float32), np.zeros((0, 3), np.int8), np.array(7, np.int64),
              np.arange(SHARED_INPUT_BYTES + 1, dtype=np.uint8), np.arange(9, dtype=">i2")[::2],
              np.full((3, 3), 2.5)]
    views = buffer_views_from_numpy(arrays, create_device("local-sync"))
    for array, view in zip(arrays, views):
        back = buffer_view_to_numpy(view)
        assert back.shape == array.shape and back.dtype == array.dtype.newbyteorder("=")
        assert (back == array).all() and view.buffer.storage_address() % 64 == 0
    small = [view.buffer for view, array in zip(views, arrays)
             if array.nbytes <= SHARED_INPUT_BYTES]
    assert len({id(buffer.storage.obj) for buffer in small}) == 1  # one allocation
    assert views[3].buffer.storage.obj is not small[0].storage.obj
    views[0].buffer.map_write(0, b"\xff" * 20)
    for array, view in zip(arrays[1:], views[1:]):
        assert (buffer_view_to_numpy(view) == array).all()


def test_initial_data_of_another_size_is_refused():
    for size in (8, 100_000):  # the small and the large allocation paths
        with pytest.raises(HalError) as failure:
            HeapAllocator().allocate_buffer(DEVICE_LOCAL, DEFAULT, size,
                                            initial_data=bytes(size - 1))
        assert failure.value.code == StatusCode.INVALID_ARGUMENT
        buffer = HeapAllocator().allocate_buffer(DEVICE_LOCAL, DEFAULT, size,
                                                 initial_data=b"\x05" * size)
        assert buffer.map_read(size - 2, 2) == b"\x05\x05"


def test_a_reached_fence_still_reports_a_later_failure():
    from vmrt.hal.semaphore import Fence, Semaphore
    semaphore = Semaphore(0)
    fence = Fence.at(semaphore, 1)
    assert not fence.is_reached()
    semaphore.signal(1)
    assert fence.is_reached()
    fence.wait()
    semaphore.fail(HalError("lost", StatusCode.ABORTED))
    for check in (fence.is_reached, fence.wait):  # reached, but the semaphore failed since
        with pytest.raises(HalError) as failure:
            check()
        assert failure.value.code == StatusCode.ABORTED


def test_device_id_patterns_are_upstreams_stars_and_question_marks():
    import fnmatch
    import random
    from vmrt.hal.device import match_pattern
    rng = random.Random(7)
    for _ in range(3000):  # without classes, fnmatch is the same language
        value = "".join(rng.choice("ab") for _ in range(rng.randint(0, 7)))
        pattern = "".join(rng.choice("ab*?") for _ in range(rng.randint(0, 7)))
        assert match_pattern(value, pattern) == fnmatch.fnmatchcase(value, pattern)
    device = create_device("local-sync")
    for key, found in [("local-sync", 1), ("local*", 1), ("local-?ync", 1), ("*", 1),
                       ("local", 0), ("local-[st]ync", 0), ("*task", 0)]:
        assert device.query_i64("hal.device.id", key) == found, key
    assert match_pattern("a[b]", "a[b]") and not match_pattern("ab", "a[b]")


def test_recorded_direct_bindings_are_checked_whatever_passed_before():
    device = create_device("local-sync")
    good = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 4)
    read_only = device.allocator.import_buffer(bytearray(4), DEVICE_LOCAL, DEFAULT,
                                               int(MemoryAccess.READ))
    for _ in range(2):
        command_buffer = device.create_command_buffer(0, ANY_CATEGORY)
        command_buffer.begin()
        command_buffer.fill_buffer((good, 0, 0, 4), b"\x01")
        with pytest.raises(HalError) as failure:
            command_buffer.fill_buffer((read_only, 0, 0, 4), b"\x01")
        assert failure.value.code == StatusCode.PERMISSION_DENIED
