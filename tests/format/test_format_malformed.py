"""Malformed modules: every failure is a one-line ModuleFormatError.

Also compares acceptance with flatcc's verifier (run by iree-dump-module).
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.format.conftest import make_built_module
from vmrt.errors import ModuleFormatError
from vmrt.format import (
    AttrDef,
    BytecodeModuleDef,
    ExportFunctionDef,
    FileLineColLocDef,
    FunctionDescriptor,
    FunctionSignatureDef,
    ImportFunctionDef,
    ModuleDependencyDef,
    RodataSegmentDef,
    TypeDef,
    check_module_tables,
    module_to_json,
    read_module,
    write_module,
)


def _outcome(data, check=True):
    """None if the module reads (and dumps and rewrites), else the error text.

    Anything but ModuleFormatError fails the test, and so does the reader's
    safety net for unexpected exceptions (message 'reader error').
    """
    try:
        m = read_module(data, check=check)
    except ModuleFormatError as error:
        text = str(error)
        assert "\n" not in text
        assert "reader error" not in text, text
        return text
    module_to_json(m)
    write_module(m)
    return None


def _fails(data, match, check=True):
    outcome = _outcome(data, check)
    assert outcome is not None, "expected a ModuleFormatError"
    assert match in outcome, outcome


@pytest.fixture(scope="module")
def small_modules(built_bytes, format_corpus):
    return {"built": built_bytes, "mul": format_corpus["mul"].read_bytes(),
            "asm_basic": format_corpus["asm_basic"].read_bytes(),
            "rich": format_corpus["rich"].read_bytes()}


def _bytes_needed(data: bytes) -> int:
    m = read_module(data)
    a = m.archive
    needed = a.flatbuffer_offset + a.flatbuffer_length
    for seg in m.rodata_segments:
        if seg.external:
            needed = max(needed, a.rodata_offset + seg.external_data_offset
                         + seg.external_data_length)
    return needed


def test_truncated_at_every_offset(built_bytes, small_modules):
    for name, data in small_modules.items():
        needed = _bytes_needed(data)
        for n in range(len(data)):
            outcome = _outcome(data[:n])
            # Only what follows the FlatBuffer and its rodata (padding, a ZIP
            # central directory) may go.
            assert (outcome is None) == (n >= needed), (name, n, needed, outcome)


def test_truncated_built_no_tools(built_bytes):
    for n in range(len(built_bytes)):
        _outcome(built_bytes[:n])


def test_byte_flips_at_every_offset(small_modules):
    """Every byte of the size prefix and FlatBuffer, flipped two ways."""
    for name, data in small_modules.items():
        a = read_module(data).archive
        for i in range(a.flatbuffer_offset - 4, a.flatbuffer_offset + a.flatbuffer_length):
            for value in (data[i] ^ 0xFF, data[i] ^ 0x01):
                _outcome(data[:i] + bytes([value]) + data[i + 1:])


def test_empty_and_tiny():
    for data in (b"", b"\0", b"PK\x03\x04", bytes(15), bytes(16), b"\xff" * 64):
        assert _outcome(data) is not None


def test_wrong_identifier(built_bytes):
    data = bytearray(built_bytes)
    assert data[8:12] == b"IREE"
    data[8:12] = b"IREF"
    _fails(bytes(data), "identifier mismatch")


def test_size_prefix_out_of_bounds(built_bytes):
    data = bytearray(built_bytes)
    struct.pack_into("<I", data, 0, len(data))
    _fails(bytes(data), "length prefix out of bounds")
    struct.pack_into("<I", data, 0, 0xFFFFFFFF)
    _fails(bytes(data), "length prefix out of bounds")
    struct.pack_into("<I", data, 0, 4)
    _fails(bytes(data), "buffer header too small")


def _zip_header(name: bytes, extra: bytes) -> bytes:
    return (b"PK\x03\x04" + struct.pack("<HHHHHIIIHH", 45, 0, 0, 0, 0, 0, 0, 0,
                                        len(name), len(extra)) + name + extra)


def test_zip_header(built_bytes):
    # A header whose lengths run past the end.
    _fails(_zip_header(b"x" * 100, b"")[:60], "self-reports as a zip")
    head = _zip_header(b"m.fb", b"\0" * 30)
    assert len(head) % 4 == 0
    m = read_module(head + built_bytes)
    assert m.archive.zip_header_size == len(head) and m.name == "built"
    # A FlatBuffer that starts unaligned (flatcc rejects such a buffer).
    _fails(_zip_header(b"m.fb", b"\0" * 31) + built_bytes, "not aligned")


def _find(data: bytes, needle: bytes) -> int:
    at = data.find(needle)
    assert at >= 0 and data.find(needle, at + 1) < 0, needle
    return at


def test_absurd_counts():
    m = make_built_module()
    m.bytecode_data = b"\xAB\xCD\xEF\x01" * 4
    data = write_module(m)
    at = _find(data, struct.pack("<I", 16) + b"\xAB\xCD\xEF\x01")
    for count in (0xFFFFFFFF, 0x40000000, 0x10000000, len(data)):
        mutated = bytearray(data)
        struct.pack_into("<I", mutated, at, count)
        _fails(bytes(mutated), "vector")
    # A table vector (exports) with an absurd count.
    m = make_built_module()
    m.exported_functions = [ExportFunctionDef(local_name=f"e{i}") for i in range(3)]
    data = write_module(m)
    check = read_module(data)
    assert len(check.exported_functions) == 3
    # Find the exports vector: its count (3) followed by 3 offsets.
    positions = [i for i in range(0, len(data) - 4, 4)
                 if struct.unpack_from("<I", data, i)[0] == 3]
    hit = False
    for at in positions:
        mutated = bytearray(data)
        struct.pack_into("<I", mutated, at, 0x3FFFFFFF)
        outcome = _outcome(bytes(mutated))
        hit |= outcome is not None and "vector" in outcome
    assert hit
    # A struct vector count that overflows count * 20 in 32 bits.
    m = make_built_module()
    data = write_module(m)
    desc = FunctionDescriptor(bytecode_offset=0, bytecode_length=14, block_count=1,
                              i32_register_count=2)
    packed = struct.pack("<iiIhhhh", *[getattr(desc, n) for n in desc.__dataclass_fields__])
    at = _find(data, struct.pack("<I", 1) + packed)
    for count in (0xFFFFFFFF // 20 + 1, 0x0CCCCCCD, 1000):
        mutated = bytearray(data)
        struct.pack_into("<I", mutated, at, count)
        _fails(bytes(mutated), "vector")


def test_bad_strings():
    m = make_built_module()
    m.name = "abcdefg"
    data = write_module(m)
    at = _find(data, b"\x07\x00\x00\x00abcdefg\x00")
    bad = bytearray(data)
    bad[at + 11] = ord("!")  # terminator overwritten
    _fails(bytes(bad), "string not zero terminated")
    bad = bytearray(data)
    bad[at + 5] = 0xFF  # invalid UTF-8
    _fails(bytes(bad), "not valid UTF-8")
    bad = bytearray(data)
    bad[at + 4:at + 6] = b"\xC3\x28"  # invalid continuation byte
    _fails(bytes(bad), "not valid UTF-8")
    bad = bytearray(data)
    struct.pack_into("<I", bad, at, 0x7FFFFFFF)
    _fails(bytes(bad), "string out of range")


def test_union_type_out_of_range():
    m = make_built_module()
    data = write_module(m)
    # location_table_type is [2, 0, 1, 3, 4] for make_built_module.
    at = _find(data, struct.pack("<I", 5) + bytes([2, 0, 1, 3, 4]))
    for value in (5, 9, 255):
        bad = bytearray(data)
        bad[at + 4] = value
        _fails(bytes(bad), "union type out of range")
    bad = bytearray(data)
    bad[at + 5] = 1  # NONE element given a type
    _fails(bytes(bad), "union element absent without type NONE")
    bad = bytearray(data)
    bad[at + 4] = 0  # element given NONE
    _fails(bytes(bad), "union element present with type NONE")
    # The single union field (compression_type) with an unknown type.
    seg = read_module(data).rodata_segments[2]
    assert seg.compression_type is not None


def test_external_rodata_out_of_range():
    for offset, length in ((2**64 - 1, 2), (0, 2**64 - 1), (2**63, 2**63), (10_000, 0),
                           (0, 10_000)):
        m = make_built_module()
        m.rodata_segments = [RodataSegmentDef(external_data_offset=offset,
                                              external_data_length=length)]
        _fails(write_module(m), "rodata[0] external reference out of range")
    m = make_built_module()
    m.rodata_segments = [RodataSegmentDef(external=True, external_data=b"x" * 64)]
    data = write_module(m)
    read_module(data)
    _fails(data[:-1], "rodata[0] external reference out of range")


def test_vtable_and_table_offsets(built_bytes):
    data = bytearray(built_bytes)
    (root,) = struct.unpack_from("<I", data, 4)
    for value in (0, 1, 2, len(data), 0xFFFFFFFC):
        bad = bytearray(data)
        struct.pack_into("<I", bad, 4, value)
        _fails(bytes(bad), "table header out of range or unaligned")
    table = 4 + root
    for soff in (table + 4, -len(data), 0x7FFFFFFF, 1):
        bad = bytearray(data)
        struct.pack_into("<i", bad, table, soff)
        assert _outcome(bytes(bad)) is not None
    (soff,) = struct.unpack_from("<i", data, table)
    vt = table - soff
    for vsize in (0, 2, 3, 0xFFFE):
        bad = bytearray(data)
        struct.pack_into("<H", bad, vt, vsize)
        _fails(bytes(bad), "vtable")
    bad = bytearray(data)
    struct.pack_into("<H", bad, vt + 2, 0xFFFF)
    _fails(bytes(bad), "table size out of range")
    bad = bytearray(data)
    struct.pack_into("<H", bad, vt + 4, 0xFFF0)  # name field beyond the table
    _fails(bytes(bad), "table field out of range")
    bad = bytearray(data)
    struct.pack_into("<H", bad, vt + 4, 0)  # required name missing
    _fails(bytes(bad), "required field missing")


def test_aliased_vectors_bounded():
    """Every signature slot aimed at one signature with many attrs: refused
    quickly instead of expanding n * m tables."""
    n = m_attrs = 3000
    module = BytecodeModuleDef(
        name="alias", bytecode_version=17 << 16,
        function_signatures=[FunctionSignatureDef(
            calling_convention="c",
            attrs=[AttrDef() for _ in range(m_attrs)])]
        + [FunctionSignatureDef() for _ in range(n - 1)],
        function_descriptors=[FunctionDescriptor(bytecode_length=1, block_count=1)] * n,
        bytecode_data=b"\0")
    data = bytearray(write_module(module))
    (root_slot,) = _field_slots(bytes(data), "BytecodeModuleDef", 8)
    (off,) = struct.unpack_from("<I", data, root_slot)
    assert struct.unpack_from("<I", data, root_slot + off)[0] == n
    slots = root_slot + off + 4
    (first,) = struct.unpack_from("<I", data, slots)
    target = slots + first
    for i in range(n):
        struct.pack_into("<I", data, slots + 4 * i, target - (slots + 4 * i))
    _fails(bytes(data), "too many table references")


def _field_slots(data: bytes, table: str, field_id: int) -> list[int]:
    """Positions of the uoffset of field ``field_id`` in every ``table``."""
    from vmrt.format.archive import parse_archive
    from vmrt.format.flatbuffer_reader import FlatBufferReader
    info = parse_archive(memoryview(data))
    reader = FlatBufferReader(data, info.flatbuffer_offset,
                              info.flatbuffer_offset + info.flatbuffer_length)
    reader.read_root(BytecodeModuleDef, "IREE")
    slots = []
    for name, positions in reader.visited:
        if name != table:
            continue
        for t in positions.tolist():
            (soff,) = struct.unpack_from("<i", data, t)
            (vte,) = struct.unpack_from("<H", data, t - soff + 4 + 2 * field_id)
            slots.append(t + vte)
    return slots


def test_aliased_strings_are_cheap():
    """2000 keys aimed at one 200 KB string: decoded (and UTF-8 checked) once."""
    import time
    n = 2000
    module = BytecodeModuleDef(
        name="s", bytecode_version=17 << 16,
        attrs=[AttrDef(key=f"k{i}") for i in range(n - 1)] + [AttrDef(key="x" * 200_000)])
    data = bytearray(write_module(module))
    slots = _field_slots(bytes(data), "AttrDef", 0)
    assert len(slots) == n
    (off,) = struct.unpack_from("<I", data, slots[-1])
    target = slots[-1] + off
    for slot in slots:
        struct.pack_into("<I", data, slot, target - slot)
    # Not a speed claim: a hang guard (aliasing must not make reading blow up).
    start = time.perf_counter()
    m = read_module(bytes(data))
    assert time.perf_counter() - start < 30.0
    assert all(a.key is m.attrs[0].key for a in m.attrs)


# --------------------------------------------------------------------------
# Module-level table checks
# --------------------------------------------------------------------------


def _check_fails(module, match):
    with pytest.raises(ModuleFormatError, match=match):
        check_module_tables(module)
    with pytest.raises(ModuleFormatError, match=match):
        read_module(write_module(module))
    read_module(write_module(module), check=False)


def test_module_table_checks():
    check_module_tables(make_built_module())
    m = make_built_module()
    m.name = ""
    _check_fails(m, "module missing name field")
    m = make_built_module()
    m.types = [TypeDef(full_name="i32"), TypeDef()]
    _check_fails(m, r"types\[1\] missing name")
    m = make_built_module()
    m.dependencies = [ModuleDependencyDef(name="")]
    _check_fails(m, r"dependencies\[0\] has no module name")
    m = make_built_module()
    m.imported_functions = [ImportFunctionDef(full_name=None)]
    _check_fails(m, r"imports\[0\] missing full_name")
    m = make_built_module()
    m.function_signatures = m.function_signatures * 2
    _check_fails(m, "length mismatch")
    m = make_built_module()
    m.exported_functions = [ExportFunctionDef(local_name="", internal_ordinal=0)]
    _check_fails(m, r"exports\[0\] missing local_name")
    for ordinal in (1, -1, 2**31 - 1):
        m = make_built_module()
        m.exported_functions = [ExportFunctionDef(local_name="f", internal_ordinal=ordinal)]
        _check_fails(m, r"exports\[0\] internal_ordinal out of bounds")
    for version in (0, 16 << 16, (17 << 16) | 1, 18 << 16):
        m = make_built_module()
        m.bytecode_version = version
        _check_fails(m, "bytecode version mismatch")
    cases = [
        (dict(block_count=0), "block count"),
        (dict(block_count=-1), "block count"),
        (dict(bytecode_length=0), "0 length"),
        (dict(bytecode_length=-2), "length"),
        (dict(bytecode_offset=-1), "span out of range"),
        (dict(bytecode_offset=10), "span out of range"),
        (dict(bytecode_length=17), "span out of range"),
        (dict(i32_register_count=0x7FFF), None),
        (dict(ref_register_count=0x3FFF), None),
        (dict(ref_register_count=0x4000), "register count out of range"),
        (dict(i32_register_count=-1), "register count out of range"),
    ]
    for change, match in cases:
        m = make_built_module()
        fields = dict(bytecode_offset=0, bytecode_length=14, block_count=1,
                      i32_register_count=2)
        fields.update(change)
        m.function_descriptors = [FunctionDescriptor(**fields)]
        if match is None:
            check_module_tables(m)
            read_module(write_module(m))
        else:
            _check_fails(m, match)


# --------------------------------------------------------------------------
# Agreement with flatcc's verifier, and property-based mutation
# --------------------------------------------------------------------------

#: Checks we make that flatcc's verifier does not (see vmrt.format.flatbuffer_reader).
_STRICTER = ("not valid UTF-8", "union type out of range", "external reference out of range")


def test_agrees_with_flatcc_verifier(small_modules, dump_module, tmp_path):
    rng = random.Random(1234)
    names = sorted(small_modules)
    disagreements = []
    path = tmp_path / "mutant.vmfb"
    for _ in range(250):
        data = bytearray(small_modules[rng.choice(names)])
        if rng.random() < 0.1:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(data))
                data[i] = rng.choice([0, 0xFF, rng.randrange(256), data[i] ^ (1 << rng.randrange(8))])
        data = bytes(data)
        ours = _outcome(data, check=False)
        path.write_bytes(data)
        code, _, stderr = dump_module(path, "--output=flatbuffer-binary")
        if (ours is None) != (code == 0):
            if ours is not None and any(s in ours for s in _STRICTER):
                continue
            disagreements.append((ours, stderr.strip()[-120:]))
    assert not disagreements, disagreements[:5]


def _python_inputs() -> list[bytes]:
    built = write_module(make_built_module())
    small = make_built_module()
    small.debug_database = None
    small.rodata_segments = []
    with_loc = make_built_module()
    with_loc.debug_database.location_table.append(
        FileLineColLocDef(filename="\u00e9" * 3, line=-1, column=2**31 - 1))
    return [built, write_module(small), write_module(with_loc)]


mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 1 << 20), st.integers(0, 255)),
    st.tuples(st.just("xor"), st.integers(0, 1 << 20), st.integers(1, 255)),
    st.tuples(st.just("u32"), st.integers(0, 1 << 20),
              st.sampled_from([0, 1, 2, 3, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                               0xFFFFFFFC, 0x10000, 64])),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 20), st.integers(0, 255)),
)


@pytest.fixture(scope="module")
def mutation_inputs(maybe_corpus) -> list[bytes]:
    """Small real modules (when the tools exist) and Python-built ones."""
    real = [maybe_corpus[n].read_bytes() for n in ("mul", "asm_basic", "rich", "branchy")
            if n in maybe_corpus]
    return real + _python_inputs()


@settings(max_examples=5000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(which=st.integers(0, 63), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_modules_only_raise_module_format_error(mutation_inputs, which, mutations):
    data = bytearray(mutation_inputs[which % len(mutation_inputs)])
    for kind, at, value in mutations:
        at %= len(data) + 1
        if kind == "set" and at < len(data):
            data[at] = value
        elif kind == "xor" and at < len(data):
            data[at] ^= value
        elif kind == "u32":
            at &= ~3
            if at + 4 <= len(data):
                struct.pack_into("<I", data, at, value)
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = bytes([value])
        if not data:
            break
    _outcome(bytes(data))
