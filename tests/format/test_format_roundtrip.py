"""vmrt.format writer: read -> write -> read, and modules that IREE loads and runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.format.conftest import make_built_module
from vmrt.errors import ModuleFormatError
from vmrt.format import (
    BytecodeModuleDef,
    ExportFunctionDef,
    FunctionDescriptor,
    FunctionSignatureDef,
    RodataSegmentDef,
    TypeDef,
    module_to_json,
    read_module,
    write_module,
)


def _roundtrip(data):
    m = read_module(data)
    out = write_module(m)
    back = read_module(out)
    return m, out, back


def test_roundtrip_corpus(format_corpus, dump_module, tmp_path):
    for name, path in format_corpus.items():
        m, out, back = _roundtrip(path)
        assert back == m, name
        for field in BytecodeModuleDef.__fb__.fields:
            assert getattr(back, field.name) == getattr(m, field.name), (name, field.name)
        # Field presence is kept, so the JSON dump is unchanged.
        assert module_to_json(back) == module_to_json(m), name
        # flatcc's verifier (in iree-dump-module) accepts what we wrote.
        rewritten = tmp_path / f"{name}.rt.vmfb"
        rewritten.write_bytes(out)
        code, stdout, stderr = dump_module(rewritten, "--output=flatbuffer-json")
        assert code == 0, stderr
        assert stdout.decode() == module_to_json(m)
        # Writing again is stable.
        assert write_module(back) == out, name


def test_roundtrip_built(built_bytes, dump_module, tmp_path):
    m, out, back = _roundtrip(built_bytes)
    assert out == built_bytes and back == m
    path = tmp_path / "built.vmfb"
    path.write_bytes(built_bytes)
    code, stdout, stderr = dump_module(path, "--output=flatbuffer-json")
    assert code == 0, stderr
    assert stdout.decode() == module_to_json(m)


def test_written_layout(built_bytes):
    m = read_module(built_bytes)
    a = m.archive
    assert a.zip_header_size == 0 and a.flatbuffer_offset == 4
    assert built_bytes[8:12] == b"IREE"
    assert a.rodata_offset % 64 == 0 and a.rodata_offset >= 4 + a.flatbuffer_length
    seg = m.rodata_segments[1]
    assert seg.external and (a.rodata_offset + seg.external_data_offset) % 64 == 0
    # Embedded rodata keeps (at least) its alignment.
    aligned = make_built_module()
    aligned.rodata_segments[0].alignment = 64
    blob = write_module(aligned)
    m2 = read_module(blob)
    data = m2.rodata_segments[0].data
    offset = (np.frombuffer(data, np.uint8).ctypes.data
              - np.frombuffer(blob, np.uint8).ctypes.data)
    assert offset % 64 == 0 and bytes(data) == b"\x01\x02\x03"
    assert m2.rodata_segments[0].alignment == 64


def test_defaults_omitted_unless_forced(built_bytes):
    plain = make_built_module()
    plain.exported_functions[0].internal_ordinal = 0
    small = write_module(plain)
    forced = write_module(plain, force_defaults=True)
    assert len(forced) >= len(small)
    assert read_module(forced) == read_module(small)
    assert module_to_json(read_module(forced)) == module_to_json(read_module(small))


def test_external_offsets_kept_or_planned():
    m = make_built_module()
    m.rodata_segments = [
        RodataSegmentDef(external=True, external_data=b"a" * 10),
        RodataSegmentDef(external=True, external_data=b"b" * 70),
        RodataSegmentDef(external=True, external_data=b""),
    ]
    back = read_module(write_module(m))
    offsets = [s.external_data_offset for s in back.rodata_segments]
    assert offsets == [0, 64, 0]  # the empty one keeps its (zero) offset
    assert [bytes(s.data) for s in back.rodata_segments] == [b"a" * 10, b"b" * 70, b""]
    # Offsets as read are kept on rewrite even when unaligned.
    back.rodata_segments[1] = dataclasses.replace(
        back.rodata_segments[1], external_data_offset=16, external_data_length=70)
    again = read_module(write_module(back))
    assert again.rodata_segments[1].external_data_offset == 16
    assert bytes(again.rodata_segments[1].data) == b"b" * 70
    # A conflicting (overlapping) offset is replaced by a fresh one.
    again.rodata_segments[0] = dataclasses.replace(
        again.rodata_segments[0], external_data_offset=20, external_data_length=10)
    third = read_module(write_module(again))
    assert [bytes(s.data) for s in third.rodata_segments] == [b"a" * 10, b"b" * 70, b""]


def test_writer_rejects_bad_values():
    base = dict(name="m", bytecode_version=17 << 16)
    with pytest.raises(ModuleFormatError, match="out of range for uint32"):
        write_module(BytecodeModuleDef(**base, version=-1))
    with pytest.raises(ModuleFormatError, match="required"):
        write_module(BytecodeModuleDef(bytecode_version=1))
    with pytest.raises(ModuleFormatError, match="must be a str"):
        write_module(BytecodeModuleDef(**base, types=[TypeDef(full_name=3)]))
    with pytest.raises(ModuleFormatError, match="FunctionDescriptor"):
        write_module(BytecodeModuleDef(**base, function_descriptors=[
            FunctionDescriptor(block_count=1 << 20)]))
    with pytest.raises(ModuleFormatError, match="not a member of union"):
        write_module(BytecodeModuleDef(**base, rodata_segments=[
            RodataSegmentDef(compression_type=TypeDef())]))


# --------------------------------------------------------------------------
# Loading and running in IREE
# --------------------------------------------------------------------------

ireert = pytest.importorskip("iree.runtime")


def _run_scalar(data, function, *args):
    instance = ireert.VmInstance()
    module = ireert.VmModule.copy_buffer(instance, data)
    context = ireert.VmContext(instance, modules=[module])
    fn = module.lookup_function(function)
    assert fn is not None, f"no function {function}"
    invoker = ireert.FunctionInvoker(context, ireert.get_device("local-task"), fn)
    return invoker(*args)


def test_rewritten_module_runs(format_corpus):
    data = format_corpus["mul"].read_bytes()
    m = read_module(data)
    assert _run_scalar(write_module(m), "mul", 6, 7) == _run_scalar(data, "mul", 6, 7) == 42
    m.exported_functions[0].local_name = "times"
    renamed = write_module(m)
    assert _run_scalar(renamed, "times", -3, 9) == -27
    flat = ireert.VmModule.from_flatbuffer(ireert.VmInstance(), renamed, warn_if_copy=False)
    assert "times" in str(flat.function_names) and "mul" not in flat.function_names


def test_module_built_from_python_runs(format_corpus):
    """A module assembled from plain objects (bytecode taken from a compiled one)."""
    compiled = read_module(format_corpus["mul"])
    d = compiled.function_descriptors[0]
    body = bytes(compiled.bytecode_data[d.bytecode_offset:d.bytecode_offset + d.bytecode_length])
    module = BytecodeModuleDef(
        name="scratch",
        types=[TypeDef(full_name="i32")],
        exported_functions=[ExportFunctionDef(local_name="product", internal_ordinal=0)],
        function_signatures=[FunctionSignatureDef(calling_convention="0ii_i")],
        function_descriptors=[dataclasses.replace(d, bytecode_offset=0)],
        bytecode_version=compiled.bytecode_version,
        bytecode_data=body,
    )
    assert _run_scalar(write_module(module), "product", 5, 8) == 40


def test_relayout_rodata_runs(format_corpus):
    """Embedded <-> external rodata swapped; the HAL program computes the same."""
    data = format_corpus["tensor_add"].read_bytes()
    m = read_module(data)
    for seg in m.rodata_segments:
        if seg.external:
            payload = bytes(seg.data)
            seg.external, seg.embedded_data, seg.alignment = False, payload, 64
        else:
            seg.external_data, seg.external, seg.embedded_data = bytes(seg.data), True, b""
    out = write_module(m)
    back = read_module(out)
    assert [s.external for s in back.rodata_segments] == [s.external for s in m.rodata_segments]
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 0.5, np.float32)
    results = []
    for blob in (data, out):
        config = ireert.Config("local-task")
        ctx = ireert.SystemContext(config=config)
        ctx.add_vm_module(ireert.VmModule.copy_buffer(config.vm_instance, blob))
        results.append(ctx.modules.module.add(a, b).to_host())
    np.testing.assert_array_equal(results[0], a + b)
    np.testing.assert_array_equal(results[1], a + b)
