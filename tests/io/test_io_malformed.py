"""Bad input: truncated or corrupt archives fail with a clear vmrt error, never a crash.

Every failure must be a VmrtError (ArchiveError for format problems) with a
meaningful status code: no IndexError, struct.error, ValueError or
construct errors escape, whatever the bytes.
"""

import json
import random
import struct

import pytest

from vmrt.errors import ArchiveError, StatusCode, VmrtError
from vmrt.io import FileHandle, ParameterIndex
from vmrt.io.formats import parse_handle
from vmrt.io.formats.irpa import HEADER_V0


def parse_bytes(data: bytes, fmt: str) -> ParameterIndex:
    index = ParameterIndex()
    parse_handle(FileHandle.wrap(bytes(data)), index, fmt)
    return index


def irpa_sample() -> bytes:
    index = ParameterIndex()
    index.add_splat("s", b"\x01\x02\x03\x04", 64, metadata=b"meta")
    index.add_buffer("a", bytes(range(100)))
    index.add_buffer("b", b"bb", metadata=b"mm")
    from vmrt.io.formats.irpa import IrpaPlan
    plan = IrpaPlan(list(index))
    blob = bytearray(plan.total_size)
    header = plan.header_bytes()
    blob[:len(header)] = header
    return bytes(blob[:plan.storage_segment[0] + 200])


def safetensors_sample() -> bytes:
    from vmrt.io.formats.safetensors import safetensors_plan
    index = ParameterIndex()
    index.add_buffer("t0", bytes(16), info={"dtype": "F32", "shape": (2, 2)})
    index.add_buffer("t1", bytes(6), info={"dtype": "I16", "shape": (3,)})
    header, _ = safetensors_plan(list(index), {"format": "pt"})
    return header + bytes(22)


def gguf_sample() -> bytes:
    from vmrt.io.formats import gguf
    out = bytearray(struct.pack("<IIQQ", gguf.MAGIC, 3, 2, 3))
    def string(s):
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw
    out += string("general.alignment") + struct.pack("<II", 4, 32)
    out += string("arr") + struct.pack("<IIQ", 9, 8, 2) + string("x") + string("yz")
    out += string("nested") + struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQ", 4, 2) \
        + struct.pack("<2I", 7, 8)
    out += string("w") + struct.pack("<I2Q", 2, 2, 2) + struct.pack("<IQ", 0, 0)
    out += string("q") + struct.pack("<I1Q", 1, 32) + struct.pack("<IQ", 8, 32)
    out += bytes(-len(out) % 32)
    return bytes(out) + bytes(32 + 34)


SAMPLES = {"irpa": irpa_sample, "safetensors": safetensors_sample, "gguf": gguf_sample}


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_samples_are_valid(fmt):
    index = parse_bytes(SAMPLES[fmt](), fmt)
    assert len(index) >= 2
    for entry in index:
        entry.read()


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_every_truncation_fails_cleanly(fmt):
    data = SAMPLES[fmt]()
    for cut in range(len(data)):
        try:
            index = parse_bytes(data[:cut], fmt)
        except VmrtError as error:
            assert error.code in (StatusCode.INVALID_ARGUMENT, StatusCode.OUT_OF_RANGE,
                                  StatusCode.UNIMPLEMENTED), (cut, error)
            continue
        # Whatever parsed must be readable within the truncated bytes.
        for entry in index:
            assert entry.read() is not None


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_random_corruption_fails_cleanly(fmt):
    data = SAMPLES[fmt]()
    rng = random.Random(1234)
    for _ in range(1500):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(mutated))
            mutated[position] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        try:
            index = parse_bytes(bytes(mutated), fmt)
        except VmrtError:
            continue
        for entry in index:
            entry.read(0, min(entry.length, 64))


def test_hypothesis_irpa_headers():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import given, settings, strategies as st
    base = irpa_sample()

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, 15), st.integers(0, 2 ** 64 - 1)), max_size=4))
    def check(fields):
        header = bytearray(base)
        for slot, value in fields:
            struct.pack_into("<Q", header, 8 + 8 * (slot % 10), value)
        try:
            parse_bytes(bytes(header), "irpa")
        except VmrtError:
            pass

    check()


# -- IRPA: specific failures ----------------------------------------------------------------
def _patched(field_path, value) -> bytes:
    data = bytearray(irpa_sample())
    header = HEADER_V0.parse(bytes(data[:88]))
    target = header
    *parents, last = field_path.split(".")
    for name in parents:
        target = target[name]
    target[last] = value
    data[:88] = HEADER_V0.build(header)
    return bytes(data)


@pytest.mark.parametrize("field, value, code", [
    ("prefix.magic", 0x12345678, StatusCode.INVALID_ARGUMENT),
    ("prefix.version_major", 1, StatusCode.UNIMPLEMENTED),
    ("prefix.version_minor", 1, StatusCode.UNIMPLEMENTED),
    ("prefix.header_size", 96, StatusCode.INVALID_ARGUMENT),
    ("prefix.header_size", 1 << 40, StatusCode.OUT_OF_RANGE),
    ("prefix.next_header_offset", 1 << 40, StatusCode.OUT_OF_RANGE),
    ("entry_count", 1000, StatusCode.OUT_OF_RANGE),
    ("entry_segment.length", 1 << 40, StatusCode.OUT_OF_RANGE),
    ("metadata_segment.offset", 1 << 62, StatusCode.OUT_OF_RANGE),
    ("storage_segment.length", 1 << 62, StatusCode.OUT_OF_RANGE),
    ("metadata_segment.length", 2, StatusCode.OUT_OF_RANGE),   # names no longer fit
    ("storage_segment.length", 10, StatusCode.OUT_OF_RANGE),   # entry storage no longer fits
])
def test_irpa_header_errors(field, value, code):
    with pytest.raises(ArchiveError) as info:
        parse_bytes(_patched(field, value), "irpa")
    assert info.value.code == code
    assert str(info.value)  # a one-line message


def _entry_patched(offset_in_entry, fmt, value, entry=0) -> bytes:
    data = bytearray(irpa_sample())
    struct.pack_into(fmt, data, 96 + 96 * entry + offset_in_entry, value)
    return bytes(data)


@pytest.mark.parametrize("offset, fmt, value, code", [
    (0, "<Q", 40, StatusCode.OUT_OF_RANGE),          # entry_size below the base header
    (0, "<Q", 1 << 40, StatusCode.OUT_OF_RANGE),     # entry_size past the table
    (0, "<Q", 70, StatusCode.OUT_OF_RANGE),          # splat entry too small
    (8, "<I", 9, StatusCode.UNIMPLEMENTED),          # unknown entry type
    (20, "<Q", 1 << 50, StatusCode.OUT_OF_RANGE),    # name offset outside metadata
    (28, "<Q", 1 << 50, StatusCode.OUT_OF_RANGE),    # name length outside metadata
    (36, "<Q", 1 << 50, StatusCode.OUT_OF_RANGE),    # metadata offset outside metadata
    (84, "<B", 17, StatusCode.INVALID_ARGUMENT),     # splat pattern longer than 16
    (84, "<B", 0, StatusCode.INVALID_ARGUMENT),      # empty splat pattern
])
def test_irpa_entry_errors(offset, fmt, value, code):
    with pytest.raises(ArchiveError) as info:
        parse_bytes(_entry_patched(offset, fmt, value), "irpa")
    assert info.value.code == code


def test_irpa_data_span_outside_storage():
    # Entry 1 is the first data entry; its storage range is at +60.
    bad_offset = _entry_patched(60, "<Q", 1 << 60, entry=1)
    with pytest.raises(ArchiveError) as info:
        parse_bytes(bad_offset, "irpa")
    assert info.value.code == StatusCode.OUT_OF_RANGE and "storage" in str(info.value)
    bad_length = _entry_patched(68, "<Q", 1 << 20, entry=1)
    with pytest.raises(ArchiveError):
        parse_bytes(bad_length, "irpa")


def test_irpa_empty_and_tiny_files():
    for data in (b"", b"IRPA", b"IRPA" + bytes(20)):
        with pytest.raises(ArchiveError) as info:
            parse_bytes(data, "irpa")
        assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_irpa_failure_adds_nothing_to_the_index():
    index = ParameterIndex()
    index.add_buffer("existing", b"e")
    with pytest.raises(ArchiveError):
        parse_handle(FileHandle.wrap(_entry_patched(8, "<I", 9, entry=2)), index, "irpa")
    assert index.keys() == ["existing"]


# -- safetensors ------------------------------------------------------------------------------
def _safetensors(header, data=bytes(16)) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


@pytest.mark.parametrize("blob, code, words", [
    (b"", StatusCode.OUT_OF_RANGE, "header length"),
    (b"\x01\x02", StatusCode.OUT_OF_RANGE, "header length"),
    (struct.pack("<Q", 1 << 40) + b"{}", StatusCode.OUT_OF_RANGE, "header contents"),
    (_safetensors(b"{not json"), StatusCode.INVALID_ARGUMENT, "JSON"),
    (_safetensors(b"\xff\xfe"), StatusCode.INVALID_ARGUMENT, "JSON"),
    (_safetensors([1, 2]), StatusCode.INVALID_ARGUMENT, "object"),
    (_safetensors({"t": 5}), StatusCode.INVALID_ARGUMENT, "object"),
    (_safetensors({"t": {"dtype": "F32", "shape": [4]}}), StatusCode.INVALID_ARGUMENT,
     "data_offsets"),
    (_safetensors({"t": {"data_offsets": [0]}}), StatusCode.INVALID_ARGUMENT, "offsets"),
    (_safetensors({"t": {"data_offsets": [0, "8"]}}), StatusCode.INVALID_ARGUMENT, "offsets"),
    (_safetensors({"t": {"data_offsets": [-1, 8]}}), StatusCode.INVALID_ARGUMENT, "offsets"),
    (_safetensors({"t": {"data_offsets": [True, 8]}}), StatusCode.INVALID_ARGUMENT, "offsets"),
    (_safetensors({"t": {"data_offsets": [8, 4]}}), StatusCode.INVALID_ARGUMENT, "outside"),
    (_safetensors({"t": {"data_offsets": [0, 17]}}), StatusCode.INVALID_ARGUMENT, "outside"),
    (_safetensors(b"[" * 100000), StatusCode.INVALID_ARGUMENT, "JSON"),
])
def test_safetensors_errors(blob, code, words):
    with pytest.raises(ArchiveError) as info:
        parse_bytes(blob, "safetensors")
    assert info.value.code == code
    assert words in str(info.value)


def test_safetensors_metadata_and_empty():
    assert len(parse_bytes(_safetensors({"__metadata__": {"a": "b"}}, b""), "safetensors")) == 0
    index = parse_bytes(_safetensors({"t": {"dtype": "F32", "shape": [2],
                                            "data_offsets": [8, 16]}}), "safetensors")
    entry = index.lookup("t")
    assert entry.offset == 8 + len(json.dumps({"t": {"dtype": "F32", "shape": [2],
                                                     "data_offsets": [8, 16]}})) + 8
    assert entry.length == 8 and entry.info["dtype"] == "F32" and entry.info["shape"] == (2,)


# -- GGUF -------------------------------------------------------------------------------------
def _gguf(version=3, tensors=1, kvs=b"", kv_count=0, infos=b"", data=bytes(64)) -> bytes:
    head = struct.pack("<IIQQ", 0x46554747, version, tensors, kv_count) + kvs + infos
    return head + bytes(-len(head) % 32) + data


def _info(name=b"t", dims=(4,), ggml_type=0, offset=0) -> bytes:
    return (struct.pack("<Q", len(name)) + name + struct.pack(f"<I{len(dims)}Q", len(dims), *dims)
            + struct.pack("<IQ", ggml_type, offset))


@pytest.mark.parametrize("blob, code", [
    (b"GGU", StatusCode.OUT_OF_RANGE),
    (b"GGML" + bytes(20), StatusCode.INVALID_ARGUMENT),
    (_gguf(version=1), StatusCode.UNIMPLEMENTED),
    (_gguf(version=4), StatusCode.UNIMPLEMENTED),
    (_gguf(infos=_info(dims=(4,), ggml_type=999)), StatusCode.UNIMPLEMENTED),
    (_gguf(infos=_info(dims=(1 << 40,))), StatusCode.INVALID_ARGUMENT),
    (_gguf(infos=_info(offset=1 << 62)), StatusCode.INVALID_ARGUMENT),
    (_gguf(infos=_info(dims=(3,), ggml_type=2)), StatusCode.INVALID_ARGUMENT),  # partial block
    (_gguf(tensors=1 << 60, infos=_info()), StatusCode.OUT_OF_RANGE),
    (_gguf(kv_count=1 << 60), StatusCode.OUT_OF_RANGE),
    (_gguf(kv_count=1, kvs=struct.pack("<Q", 1 << 62)), StatusCode.OUT_OF_RANGE),
    (_gguf(kv_count=1, kvs=struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77)),
     StatusCode.INVALID_ARGUMENT),
    (_gguf(kv_count=1, kvs=struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 1 << 60)),
     StatusCode.OUT_OF_RANGE),
    (_gguf(kv_count=1, kvs=struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 8, 1 << 60)),
     StatusCode.OUT_OF_RANGE),
    (_gguf(kv_count=1, kvs=struct.pack("<Q", 17) + b"general.alignment"
           + struct.pack("<IQ", 10, 64), infos=_info()), StatusCode.INVALID_ARGUMENT),
    (_gguf(kv_count=1, kvs=struct.pack("<Q", 17) + b"general.alignment"
           + struct.pack("<II", 4, 0), infos=_info()), StatusCode.INVALID_ARGUMENT),
    (_gguf(infos=struct.pack("<Q", 1) + b"t" + struct.pack("<I", 1 << 30)),
     StatusCode.OUT_OF_RANGE),
])
def test_gguf_errors(blob, code):
    with pytest.raises(ArchiveError) as info:
        parse_bytes(blob, "gguf")
    assert info.value.code == code


def test_gguf_deeply_nested_arrays_are_refused():
    kv = struct.pack("<Q", 1) + b"k" + struct.pack("<I", 9)
    kv += struct.pack("<IQ", 9, 1) * 20 + struct.pack("<IQ", 4, 0)
    with pytest.raises(ArchiveError) as info:
        parse_bytes(_gguf(kv_count=1, kvs=kv, infos=_info()), "gguf")
    assert "nested" in str(info.value)


def test_gguf_without_tensors_reads_nothing_more():
    # As IREE: with no tensors the rest of the header is not even read.
    assert len(parse_bytes(_gguf(tensors=0, kv_count=5), "gguf")) == 0


# -- files on disk ------------------------------------------------------------------------------
def test_missing_and_unknown_files(tmp_path):
    with pytest.raises(VmrtError) as info:
        ParameterIndex.load(tmp_path / "nope.irpa")
    assert info.value.code == StatusCode.NOT_FOUND
    odd = tmp_path / "weights.bin"
    odd.write_bytes(b"\x00" * 64)
    with pytest.raises(VmrtError) as info:
        ParameterIndex.load(odd)
    assert info.value.code == StatusCode.UNIMPLEMENTED
    with pytest.raises(VmrtError) as info:
        ParameterIndex.load(tmp_path)
    assert info.value.code in (StatusCode.INVALID_ARGUMENT, StatusCode.UNAVAILABLE)


def test_unknown_extension_is_sniffed(tmp_path):
    index = ParameterIndex()
    index.add_buffer("x", b"xx")
    index.save(tmp_path / "real.irpa")
    (tmp_path / "weights.bin").write_bytes((tmp_path / "real.irpa").read_bytes())
    assert ParameterIndex.load(tmp_path / "weights.bin").keys() == ["x"]


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "broken.irpa"
    path.write_bytes(b"IRPA" + bytes(100))
    with pytest.raises(ArchiveError) as info:
        ParameterIndex.load(path)
    assert "broken.irpa" in str(info.value)
