"""Transfer plans: moves sorted and coalesced, split into bounded batches that cover every
byte exactly once, run from mappings or with pread."""

import pytest

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import FileCache, FileMode, ParameterIndex
from vmrt.io.transfer import (MAX_CONCURRENCY, MIN_BATCH_BYTES, READ, Move, TransferPlan,
                              check_disjoint_writes)


def open_file(tmp_path, mode=FileMode.MMAP):
    index = ParameterIndex()
    index.add_buffer("blob", bytes(i % 251 for i in range(3 * MIN_BATCH_BYTES + 1000)))
    index.save(tmp_path / "blob.irpa")
    return ParameterIndex.load(tmp_path / "blob.irpa", mode=mode, cache=FileCache())["blob"]


def test_adjacent_moves_coalesce_in_file_order(tmp_path):
    entry = open_file(tmp_path)
    f, o = entry.file, entry.offset
    plan = TransferPlan(READ, [Move(f, o + 200, 0, 200, 100), Move(f, o, 0, 0, 100),
                               Move(f, o + 100, 0, 100, 100), Move(f, o + 300, 0, 50, 10),
                               Move(f, o + 400, 0, 400, 0)])
    assert [(m.file_offset - o, m.buffer_offset, m.length) for m in plan.moves] == \
        [(0, 0, 300), (300, 50, 10)]


@pytest.mark.parametrize("mode", [FileMode.MMAP, FileMode.FILE])
@pytest.mark.parametrize("concurrency", [1, 2, 3, MAX_CONCURRENCY, 100])
def test_batches_are_bounded_and_cover_every_byte_once(tmp_path, mode, concurrency):
    entry = open_file(tmp_path, mode)
    f, o, n = entry.file, entry.offset, entry.length
    half = n // 2
    plan = TransferPlan(READ, [Move(f, o + half, 0, 0, n - half), Move(f, o, 0, n - half, half),
                               Move(None, 0, 0, n, 7, b"\x01\x02\x03", 1)])
    batches = plan.batches(concurrency)
    assert 1 <= len(batches) <= min(max(1, concurrency), MAX_CONCURRENCY)
    assert sum(b.nbytes for b in batches) == n + 7
    target = bytearray(n + 7)
    plan.run([memoryview(target)], max_concurrency=concurrency)
    data = bytes(i % 251 for i in range(n))
    assert target == data[half:] + data[:half] + b"\x02\x03\x01\x02\x03\x01\x02"


def test_overlapping_writes_are_refused(tmp_path):
    entry = open_file(tmp_path)
    f = entry.file
    check_disjoint_writes([Move(f, 0, 0, 0, 10), Move(f, 10, 0, 10, 10)])
    with pytest.raises(VmrtError) as info:
        check_disjoint_writes([Move(f, 0, 0, 0, 10), Move(f, 9, 0, 10, 10)])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
