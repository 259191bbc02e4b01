"""Snapshots of verified reads (FlatBufferReader.snapshot, module_from_snapshot): the
module made again from a snapshot, without verifying, is the one that was read, for
every table kind (unions and NONE members, structs, scalar and byte vectors)."""

from __future__ import annotations

import marshal

from vmrt.format import BytecodeModuleDef, module_to_json, write_module
from vmrt.format.module_def import (
    module_from_snapshot, open_module_buffer, read_module_and_snapshot,
)


def read_twice(data):
    """(the module read, the module made from the read's snapshot as stored: marshalled)."""
    buf = open_module_buffer(data)
    read, snapshot = read_module_and_snapshot(buf)
    return read, module_from_snapshot(buf, marshal.loads(marshal.dumps(snapshot)))


def assert_same_module(again, read, name=""):
    assert again == read, name
    for field in BytecodeModuleDef.__fb__.fields:
        assert getattr(again, field.name) == getattr(read, field.name), (name, field.name)
    assert [bytes(s.data) for s in again.rodata_segments] == \
        [bytes(s.data) for s in read.rodata_segments], name
    assert again.archive == read.archive, name
    # Field presence is kept too: the dump and the written bytes are the same.
    assert module_to_json(again) == module_to_json(read), name
    assert write_module(again) == write_module(read), name


def test_built_module_made_from_its_snapshot_is_the_one_read(built_bytes):
    read, again = read_twice(built_bytes)
    assert_same_module(again, read)
    assert write_module(again) == built_bytes
    assert again.debug_database.location_table[1] is None  # a NONE union member


def test_compiled_modules_made_from_their_snapshots_are_the_ones_read(format_corpus):
    for name, path in format_corpus.items():
        read, again = read_twice(path)
        assert_same_module(again, read, name)


def test_tables_made_from_a_snapshot_view_the_new_buffer(built_bytes):
    buf = open_module_buffer(built_bytes)
    _, snapshot = read_module_and_snapshot(buf)
    copy = bytearray(built_bytes)
    module = module_from_snapshot(memoryview(copy), snapshot)
    assert module.rodata_segments[1].data.obj is copy  # external rodata: a view, no copy
