"""module_to_json vs ``iree-dump-module --output=flatbuffer-json`` (byte for byte)."""

from __future__ import annotations

import struct

from tests.format.conftest import make_built_module
from vmrt.errors import ModuleFormatError
from vmrt.format import (
    AttrDef,
    BytecodeModuleDef,
    FunctionDescriptor,
    ImportFunctionDef,
    ModuleDependencyDef,
    module_to_json,
    read_module,
    write_module,
)
from vmrt.format.flatbuffer_reader import FlatBufferReader
from vmrt.format.archive import parse_archive


def _same_as_tool(dump_module, path, data=None):
    m = read_module(data if data is not None else path, check=False)
    for flags in ((), ("--pretty",)):
        code, stdout, stderr = dump_module(path, "--output=flatbuffer-json", *flags)
        assert code == 0, stderr
        mine = module_to_json(m, pretty=bool(flags)).encode()
        assert mine == stdout, (path, flags, _first_difference(mine, stdout))


def _first_difference(a: bytes, b: bytes) -> str:
    i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    return f"at {i}: ours {a[max(0, i - 60):i + 40]!r} vs tool {b[max(0, i - 60):i + 40]!r}"


def test_json_corpus(format_corpus, dump_module):
    for name, path in format_corpus.items():
        _same_as_tool(dump_module, path)


def test_json_built(built_bytes, dump_module, tmp_path):
    path = tmp_path / "built.vmfb"
    path.write_bytes(built_bytes)
    _same_as_tool(dump_module, path)


def test_json_defaults_present(dump_module, tmp_path):
    """Scalars written although equal to the default are still not printed
    (iree-dump-module sets skip_default)."""
    path = tmp_path / "forced.vmfb"
    path.write_bytes(write_module(make_built_module(), force_defaults=True))
    _same_as_tool(dump_module, path)


STRINGS = [
    "",
    "plain",
    'quote " and backslash \\ slash /',
    "controls \t\n\r\f\b \x00 \x01 \x1f \x7f end",
    "unicode \u00e9 \u4e2d \U0001f600",
]


def test_json_strings_and_flags(dump_module, tmp_path):
    features = [0, 1, 2, 3, 4, 8, 12, 15, 16, 17, 0x80000000, 0xFFFFFFFF]
    for i, value in enumerate(features):
        m = make_built_module()
        m.requirements = value
        m.attrs = [AttrDef(key=s, value=s[::-1]) for s in STRINGS]
        m.function_descriptors = [FunctionDescriptor(
            bytecode_length=14, block_count=1, i32_register_count=2,
            requirements=value, reserved=-3)]
        flags = value & 3
        m.dependencies = [ModuleDependencyDef(name="d", flags=flags, minimum_version=value)]
        m.imported_functions = [ImportFunctionDef(full_name="d.f", flags=flags)]
        path = tmp_path / f"flags{i}.vmfb"
        path.write_bytes(write_module(m))
        _same_as_tool(dump_module, path)


def _vtables(data: bytes):
    """(vtable position, entry count) of every table the reader verified."""
    info = parse_archive(memoryview(data))
    reader = FlatBufferReader(data, info.flatbuffer_offset,
                              info.flatbuffer_offset + info.flatbuffer_length)
    reader.archive = info
    reader.read_root(BytecodeModuleDef, "IREE")
    seen = {}
    for _, positions in reader.visited:
        for t in positions.tolist():
            (soff,) = struct.unpack_from("<i", data, t)
            vt = t - soff
            (vsize,) = struct.unpack_from("<H", data, vt)
            seen[vt] = (vsize - 4) // 2
    return sorted(seen.items())


def test_json_absent_fields(format_corpus, built_bytes, dump_module, tmp_path):
    """Drop each field of each vtable in turn: ours and the tool agree on
    acceptance and on the JSON (absent strings, vectors, tables, unions...)."""
    inputs = {"built": built_bytes, "rich": format_corpus["rich"].read_bytes(),
              "tensor_add": format_corpus["tensor_add"].read_bytes()}
    checked = 0
    for name, data in inputs.items():
        for vt, entries in _vtables(data):
            for e in range(entries):
                at = vt + 4 + 2 * e
                if data[at:at + 2] == b"\0\0":
                    continue
                mutated = data[:at] + b"\0\0" + data[at + 2:]
                path = tmp_path / f"{name}_{vt}_{e}.vmfb"
                path.write_bytes(mutated)
                code, stdout, stderr = dump_module(path, "--output=flatbuffer-json")
                try:
                    m = read_module(mutated, check=False)
                except ModuleFormatError as error:
                    if "external reference out of range" in str(error):
                        continue  # a module-level check the tool does not make
                    assert code != 0, (name, vt, e, str(error))
                    continue
                assert code == 0, (name, vt, e, stderr)
                assert module_to_json(m).encode() == stdout, (name, vt, e)
                checked += 1
    assert checked > 50
