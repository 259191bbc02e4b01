"""Paths kept cheap for per-call speed behave like the general ones: large
allocations (anonymous mappings) are zeroed and writable, cached command buffer
regions and merged slot requirements match what was recorded."""

from __future__ import annotations

import numpy as np
import pytest

from vmrt.errors import StatusCode
from vmrt.hal import BufferUsage, HalError, HeapAllocator, MemoryType, create_device
from vmrt.hal.buffer import MAPPED_ALLOCATION_BYTES, zeroed_memory
from vmrt.hal.types import CommandBufferMode, CommandCategory, MemoryAccess

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
