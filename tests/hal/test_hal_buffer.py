"""Host HAL buffers, allocator and buffer views: ranges, subspans, mapping checks."""

from __future__ import annotations

import numpy as np
import pytest

from vmrt.errors import StatusCode
from vmrt.hal import (
    BufferUsage, BufferView, HalError, HeapAllocator, MemoryAccess, MemoryType,
)
from vmrt.hal.buffer import MAPPING_MODE_PERSISTENT, buffers_overlap, map_copy
from vmrt.hal.buffer_view import compute_view_size
from vmrt.elements import ElementType, element_types_compatible
from vmrt.hal.types import format_memory_type

DEVICE_LOCAL = int(MemoryType.DEVICE_LOCAL)
DEFAULT = int(BufferUsage.DEFAULT)


@pytest.fixture
def allocator():
    return HeapAllocator()


def test_allocation_is_zeroed_host_visible_and_mappable(allocator):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 16)
    assert buffer.byte_length == 16 and bytes(buffer.view()) == bytes(16)
    assert buffer.memory_type & int(MemoryType.HOST_VISIBLE)
    assert buffer.memory_type & DEVICE_LOCAL == DEVICE_LOCAL
    assert not buffer.memory_type & int(MemoryType.OPTIMAL)
    assert buffer.allowed_usage & int(BufferUsage.MAPPING_PERSISTENT)
    assert buffer.allowed_access == int(MemoryAccess.ALL)
    assert allocator.statistics.buffers_allocated == 1


def test_zero_params_take_upstream_defaults(allocator):
    buffer = allocator.allocate_buffer(0, 0, 4)
    assert buffer.allowed_usage & DEFAULT == DEFAULT
    assert buffer.allowed_access == int(MemoryAccess.ALL)


def test_subspans_share_storage_and_collapse_onto_the_allocation(allocator):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 32)
    sub = buffer.subspan(8, 16)
    subsub = sub.subspan(4, 4)
    assert subsub.allocated is buffer and subsub.byte_offset == 12
    subsub.map_write(0, b"\x01\x02\x03\x04")
    assert bytes(buffer.view()[12:16]) == b"\x01\x02\x03\x04"
    assert buffer.subspan(0, -1) is buffer
    assert sub.subspan(4, -1).byte_length == 12


@pytest.mark.parametrize("offset,length", [(33, 0), (30, 4), (-1, 2), (0, 40)])
def test_subspan_out_of_range(allocator, offset, length):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 32)
    with pytest.raises(HalError) as info:
        buffer.subspan(offset, length)
    assert info.value.code == StatusCode.OUT_OF_RANGE


def test_mapping_checks_access_memory_type_and_usage(allocator):
    data = bytes(range(8))
    readonly = allocator.import_buffer(data, DEVICE_LOCAL, DEFAULT, int(MemoryAccess.READ))
    assert readonly.map_read(2, 3) == b"\x02\x03\x04"
    with pytest.raises(HalError) as info:
        readonly.map_write(0, b"x")
    assert info.value.code == StatusCode.PERMISSION_DENIED
    with pytest.raises(HalError) as info:
        readonly.map_range(0)
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 8)
    buffer.allowed_usage = DEFAULT
    with pytest.raises(HalError) as info:
        buffer.map_range(int(MemoryAccess.READ), mode=MAPPING_MODE_PERSISTENT)
    assert "MAPPING_PERSISTENT" in info.value.message


def test_import_of_read_only_memory_for_writing_is_refused(allocator):
    with pytest.raises(HalError) as info:
        allocator.import_buffer(b"abcd", DEVICE_LOCAL, DEFAULT, int(MemoryAccess.ALL))
    assert info.value.code == StatusCode.PERMISSION_DENIED


def test_importer_imports_each_memory_as_import_buffer_does(allocator):
    read = int(MemoryAccess.READ)
    import_memory = allocator.importer(DEVICE_LOCAL, DEFAULT, read)
    imported = [import_memory(bytes([i]) * 4) for i in range(3)]
    single = allocator.import_buffer(b"\x07" * 4, DEVICE_LOCAL, DEFAULT, read)
    assert [bytes(b.view()) for b in imported] == [bytes([i]) * 4 for i in range(3)]
    assert {(b.memory_type, b.allowed_usage, b.allowed_access) for b in imported} == {
        (single.memory_type, single.allowed_usage, single.allowed_access)}
    assert allocator.statistics.buffers_imported == 4
    with pytest.raises(HalError) as info:  # each memory is still checked
        allocator.importer(DEVICE_LOCAL, DEFAULT, int(MemoryAccess.ALL))(b"abcd")
    assert info.value.code == StatusCode.PERMISSION_DENIED
    defaults = allocator.importer(0, 0)(bytearray(4))  # zero parameters take the defaults
    assert defaults.allowed_access == int(MemoryAccess.ALL)
    assert defaults.allowed_usage & DEFAULT == DEFAULT


def test_views_handed_over_are_kept_and_checked_as_wrapped_memory_is(allocator):
    read = int(MemoryAccess.READ)
    import_view = allocator.importer(DEVICE_LOCAL, DEFAULT, read, views_handed_over=True)
    view = memoryview(bytes(range(8)))[2:6]
    buffer = import_view(view)
    assert buffer.storage is view and bytes(buffer.view()) == bytes(range(2, 6))
    assert allocator.statistics.buffers_imported == 1
    words = import_view(memoryview(np.arange(4, dtype=np.int16)))  # bytes, as wrap sees them
    assert words.byte_length == 8 and words.storage.format == "B"
    with pytest.raises(HalError) as info:
        import_view(memoryview(bytes(8))[::2])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(HalError) as info:
        allocator.importer(DEVICE_LOCAL, DEFAULT, int(MemoryAccess.ALL),
                           views_handed_over=True)(view)
    assert info.value.code == StatusCode.PERMISSION_DENIED
    lent_bytes = import_view(b"\x01\x02\x03")  # (a provider lending other memory: viewed)
    assert lent_bytes.map_read(0, 3) == b"\x01\x02\x03"


def test_import_views_imports_each_view_as_the_importer_does(allocator):
    read = int(MemoryAccess.READ)
    data = memoryview(bytes(range(16))).toreadonly()
    views = [data[i:i + 4] for i in range(0, 16, 4)]
    buffers = allocator.import_views(views, DEVICE_LOCAL, DEFAULT, read)
    single = allocator.importer(DEVICE_LOCAL, DEFAULT, read, views_handed_over=True)(data[:4])
    assert [buffer.storage for buffer in buffers] == views
    assert all(buffer.storage is view for buffer, view in zip(buffers, views))
    assert {(b.memory_type, b.allowed_usage, b.allowed_access) for b in buffers} == {
        (single.memory_type, single.allowed_usage, single.allowed_access)}
    assert allocator.statistics.buffers_imported == 5
    assert allocator.import_views([], DEVICE_LOCAL, DEFAULT, read) == []
    for bad, code in (([views[0], memoryview(bytes(8))[::2]], StatusCode.INVALID_ARGUMENT),
                      (views, StatusCode.PERMISSION_DENIED)):  # (read-only, for writing)
        access = read if code == StatusCode.INVALID_ARGUMENT else int(MemoryAccess.ALL)
        with pytest.raises(HalError) as info:  # each view is still checked
            allocator.import_views(bad, DEVICE_LOCAL, DEFAULT, access)
        assert info.value.code == code
    words = allocator.import_views([memoryview(np.arange(4, dtype=np.int16))], DEVICE_LOCAL,
                                   DEFAULT, read)[0]  # bytes, as adopt sees them
    assert words.byte_length == 8 and words.storage.format == "B"


def test_wrapped_memory_outlives_the_view_the_caller_passed(allocator):
    view = memoryview(bytearray(b"abcd"))
    buffer = allocator.import_buffer(view, DEVICE_LOCAL, DEFAULT)
    view.release()
    assert buffer.map_read(0, 4) == b"abcd"


def test_imported_memory_is_not_copied(allocator):
    array = np.zeros(4, np.float32)
    buffer = allocator.import_buffer(array, DEVICE_LOCAL, DEFAULT)
    buffer.map_write(4, np.float32(2.5).tobytes())
    assert array[1] == 2.5


def test_fill_patterns_and_alignment(allocator):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 12)
    buffer.map_fill(4, 8, b"\x01\x02\x03\x04")
    assert bytes(buffer.view()) == bytes(4) + b"\x01\x02\x03\x04" * 2
    buffer.map_fill(0, 2, b"\xff")
    assert bytes(buffer.view()[:4]) == b"\xff\xff\x00\x00"
    for pattern, offset in ((b"\x01\x02\x03", 0), (b"\x01\x02", 1)):
        with pytest.raises(HalError) as info:
            buffer.map_fill(offset, 4, pattern)
        assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_copy_between_and_within_allocations(allocator):
    a = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 8)
    b = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 8)
    a.map_write(0, bytes(range(8)))
    map_copy(a, 2, b, 0, 4)
    assert bytes(b.view()[:4]) == b"\x02\x03\x04\x05"
    map_copy(a, 0, a, 4, 4)  # disjoint halves of one allocation
    assert bytes(a.view()) == bytes([0, 1, 2, 3, 0, 1, 2, 3])
    assert buffers_overlap(a, 0, 4, a.subspan(2, 4), 0, 4)
    with pytest.raises(HalError) as info:
        map_copy(a, 0, a, 2, 4)
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_allocation_preservation_counts(allocator):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 4)
    sub = buffer.subspan(0, 2)
    assert buffer.allocation_is_terminal()
    sub.allocation_preserve()
    assert not buffer.allocation_is_terminal()
    assert not buffer.allocation_discard()
    assert buffer.allocation_discard()


def test_decommitted_buffers_cannot_be_mapped(allocator):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 4)
    buffer.subspan(0, 2).decommit()
    with pytest.raises(HalError) as info:
        buffer.map_read(0, 1)
    assert info.value.code == StatusCode.FAILED_PRECONDITION


def test_buffer_view_sizes_and_dims(allocator):
    buffer = allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 24)
    view = BufferView(buffer, (2, 3), ElementType.FLOAT_32)
    assert view.rank == 2 and view.dim(1) == 3 and view.byte_length == 24
    assert view.element_count == 6
    with pytest.raises(HalError):
        view.dim(2)
    assert compute_view_size((3, 5), ElementType.INT_4) == 8  # i4 packs two a byte
    with pytest.raises(HalError) as info:
        compute_view_size((2,), ElementType.NONE)
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert repr(view) == "<hal.buffer_view 2x3xf32>"


def test_element_type_compatibility_rules():
    assert element_types_compatible(ElementType.SINT_32, ElementType.INT_32)
    assert element_types_compatible(ElementType.UINT_8, ElementType.BOOL_8)
    assert element_types_compatible(ElementType.OPAQUE_32, ElementType.FLOAT_32)
    assert not element_types_compatible(ElementType.INT_32, ElementType.FLOAT_32)
    assert not element_types_compatible(ElementType.INT_16, ElementType.INT_32)
    assert not element_types_compatible(ElementType.FLOAT_16, ElementType.BFLOAT_16)


def test_bitfield_names_follow_upstream():
    assert format_memory_type(int(MemoryType.DEVICE_LOCAL | MemoryType.HOST_VISIBLE)) == \
        "DEVICE_LOCAL|HOST_VISIBLE"
    assert format_memory_type(0) == "NONE"
