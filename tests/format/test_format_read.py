"""vmrt.format reader: object model, zero-copy, laziness, inputs."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from tests.format.conftest import make_built_module
from vmrt.errors import ModuleFormatError, StatusCode
from vmrt.format import (
    BytecodeModuleDef,
    CallSiteLocDef,
    ExportFunctionDef,
    FileLineColLocDef,
    FunctionDescriptor,
    FunctionSignatureDef,
    FusedLocDef,
    NameLocDef,
    UncompressedDataDef,
    column,
    is_vector_present,
    module_to_json,
    read_module,
    write_module,
)


def test_built_module_object_model(built_bytes):
    m = read_module(built_bytes)
    assert m.name == "built" and m.version == 7 and m.requirements == 0
    assert [(a.key, a.value) for a in m.attrs] == [("k", "v\u00e9\n")]
    assert [t.full_name for t in m.types] == ["i32", "!vm.buffer"]
    dep = m.dependencies[0]
    assert (dep.name, dep.minimum_version, dep.flags) == ("dep", 2, 2)
    imp = m.imported_functions[0]
    assert imp.full_name == "dep.fn" and imp.flags == 2
    assert imp.signature.calling_convention == "0i_i" and list(imp.signature.attrs) == []
    assert [(e.local_name, e.internal_ordinal) for e in m.exported_functions] == [
        ("mul", 0), ("times", 0)]
    sig = m.function_signatures[0]
    assert sig.calling_convention == "0ii_i" and sig.attrs[0].key == "a"
    seg0, seg1, seg2 = m.rodata_segments
    assert bytes(seg0.data) == b"\x01\x02\x03" and not seg0.external
    assert seg1.external and bytes(seg1.data) == bytes(range(100))
    assert seg1.external_data_length == 100 and len(seg1.embedded_data) == 0
    assert isinstance(seg2.compression_type, UncompressedDataDef)
    assert seg0.compression_type is None
    assert m.rwdata_segments[0].byte_size == 16
    assert (m.module_state.global_bytes_capacity, m.module_state.global_ref_count) == (8, 1)
    d = m.function_descriptors[0]
    assert isinstance(d, FunctionDescriptor)
    assert (d.bytecode_offset, d.bytecode_length, d.requirements, d.reserved, d.block_count,
            d.i32_register_count, d.ref_register_count) == (0, 14, 0, 0, 1, 2, 0)
    assert m.bytecode_version == 17 << 16 and len(m.bytecode_data) == 16
    db = m.debug_database
    kinds = [type(x) for x in db.location_table]
    assert kinds == [FileLineColLocDef, type(None), CallSiteLocDef, FusedLocDef, NameLocDef]
    assert db.location_table[3].locations == [0, 2]
    assert db.functions[0].local_name == "mul"
    assert [(x.bytecode_offset, x.location) for x in db.functions[0].locations] == [
        (1, 0), (8, 4)]
    built = make_built_module()
    assert m.debug_database == built.debug_database
    assert m.function_signatures == built.function_signatures


def test_absent_fields_read_as_defaults():
    data = write_module(BytecodeModuleDef(name="m", bytecode_version=17 << 16))
    m = read_module(data)
    for name in ("attrs", "types", "dependencies", "imported_functions",
                 "exported_functions", "function_signatures", "rodata_segments",
                 "rwdata_segments", "function_descriptors", "bytecode_data"):
        assert len(getattr(m, name)) == 0, name
    assert m.module_state is None and m.debug_database is None
    assert m.version == 0 and m.requirements == 0
    assert module_to_json(m) == '{"name":"m","bytecode_version":1114112}'
    sig = read_module(write_module(BytecodeModuleDef(
        name="m", bytecode_version=17 << 16,
        function_signatures=[FunctionSignatureDef()],
        function_descriptors=[FunctionDescriptor(bytecode_length=1, block_count=1)],
        bytecode_data=b"\0"))).function_signatures[0]
    assert sig.calling_convention is None and list(sig.attrs) == []


def test_present_empty_vector_survives(built_bytes):
    m = BytecodeModuleDef(name="m", bytecode_version=17 << 16, attrs=[])
    m._present = frozenset({"attrs"})  # (as a read table marks it; no public setter)
    back = read_module(write_module(m))
    assert is_vector_present(back, "attrs") and len(back.attrs) == 0
    assert not is_vector_present(read_module(write_module(
        BytecodeModuleDef(name="m", bytecode_version=17 << 16, attrs=[]))), "attrs")
    assert module_to_json(back) == '{"name":"m","attrs":[],"bytecode_version":1114112}'
    again = read_module(write_module(back))
    assert module_to_json(again) == module_to_json(back)


def test_zero_copy_views(built_bytes):
    data = bytes(built_bytes)
    m = read_module(data)
    assert isinstance(m.bytecode_data, memoryview) and m.bytecode_data.obj is data
    for seg in m.rodata_segments:
        assert seg.data.obj is data
    arr = m.function_descriptors.numpy()
    assert arr["block_count"][0] == 1 and arr.base is not None


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap", "path", "str"])
def test_input_kinds(tmp_path, built_bytes, kind):
    path = tmp_path / "m.vmfb"
    path.write_bytes(built_bytes)
    if kind == "bytes":
        data = bytes(built_bytes)
    elif kind == "bytearray":
        data = bytearray(built_bytes)
    elif kind == "memoryview":
        data = memoryview(b"xx" + built_bytes)[2:]
    elif kind == "mmap":
        f = open(path, "rb")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        f.close()
    elif kind == "path":
        data = path
    else:
        data = str(path)
    m = read_module(data)
    assert m.name == "built" and bytes(m.rodata_segments[1].data) == bytes(range(100))
    assert m.archive.total_size == len(built_bytes)


def test_missing_file(tmp_path):
    with pytest.raises(ModuleFormatError) as info:
        read_module(tmp_path / "nope.vmfb")
    assert info.value.code == StatusCode.NOT_FOUND
    empty = tmp_path / "empty.vmfb"
    empty.write_bytes(b"")
    with pytest.raises(ModuleFormatError, match="less than 16 bytes"):
        read_module(empty)


def test_archive_info(format_corpus):
    m = read_module(format_corpus["tensor_add"])
    a = m.archive
    assert a.zip_header_size > 0  # iree-compile writes a polyglot ZIP header
    assert a.flatbuffer_offset == a.zip_header_size + 4
    assert a.rodata_offset % 64 == 0
    assert a.rodata_offset >= a.flatbuffer_offset + a.flatbuffer_length
    assert a.total_size == format_corpus["tensor_add"].stat().st_size
    external = [s for s in m.rodata_segments if s.external]
    assert external, "expected the executable to be stored as external rodata"
    raw = format_corpus["tensor_add"].read_bytes()
    for s in external:
        start = a.rodata_offset + s.external_data_offset
        assert bytes(s.data) == raw[start:start + s.external_data_length]
    nozip = read_module(format_corpus["mul_nozip"]).archive
    assert nozip.zip_header_size == 0 and nozip.flatbuffer_offset == 4


def test_debug_info_from_compiler(format_corpus):
    m = read_module(format_corpus["rich"])
    table = m.debug_database.location_table
    fused = [x for x in table if isinstance(x, FusedLocDef)]
    named = [x for x in table if isinstance(x, NameLocDef)]
    assert fused and fused[0].metadata == '"meta"' and len(fused[0].locations) == 2
    assert named and named[0].name == "named"
    assert m.debug_database.functions[0].local_name == "fn"
    assert m.imported_functions[0].flags == 2  # OPTIONAL
    assert {d.name: d.flags for d in m.dependencies}["opt_dep"] == 2
    assert m.version == 3
    assert [a.key for a in m.attrs] == ["num", "some.key"]


def test_lazy_vectors_and_column(built_bytes):
    m = read_module(built_bytes)
    exports = m.exported_functions
    assert column(exports, "local_name") == ["mul", "times"]
    exports[1] = ExportFunctionDef(local_name="x", internal_ordinal=0)
    assert column(exports, "local_name") == ["mul", "x"]
    exports[0].local_name = "y"
    assert column(exports, "local_name") == ["y", "x"]
    assert exports[-1].local_name == "x" and [e.local_name for e in exports[:1]] == ["y"]
    with pytest.raises(IndexError):
        exports[2]
    assert exports == [ExportFunctionDef("y", 0), ExportFunctionDef("x", 0)]
    assert read_module(write_module(m)).exported_functions == exports


def test_many_functions_read():
    """read + touch every descriptor and signature of 10,000 functions."""
    import importlib.util
    import pathlib
    spec = importlib.util.spec_from_file_location(
        "format_bench", pathlib.Path(__file__).parents[2] / "benchmarks" / "format_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = bench.build_module(10_000, debug=True)
    # Speed is reported by benchmarks/format_bench.py, not asserted here.
    bench.read_and_touch(data)
    m = read_module(data)
    assert len(m.function_descriptors) == 10_000
    assert m.function_signatures[9999].calling_convention == "0ii_i"
    arr = m.function_descriptors.numpy()
    assert np.all(arr["bytecode_length"] == 14)


def test_many_functions_assembled(tmp_path):
    """The same with a module assembled by iree-as-module (if installed)."""
    import shutil
    import subprocess
    tool = shutil.which("iree-as-module")
    if not tool:
        pytest.skip("iree-as-module not installed")
    lines = ["vm.module @many version 1", "vm.type i32"]
    for i in range(10_000):
        lines += [f"vm.export @f{i}", f"vm.func @f{i}(%i0: i32, %i1: i32) -> (i32) {{",
                  "^bb0:", "  %i0 = vm.mul.i32 %i0, %i1", "  vm.return %i0", "}"]
    src = tmp_path / "many.vmasm"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "many.vmfb"
    subprocess.run([tool, f"--output={out}", str(src)], check=True)
    data = out.read_bytes()
    m = read_module(data)
    assert all(d.bytecode_length > 0 for d in m.function_descriptors)
    assert all(s.calling_convention for s in m.function_signatures)
    assert len(m.exported_functions) == 10_000
