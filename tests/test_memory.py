"""vmrt.memory: the C helpers and their Python twin give identical results."""

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from vmrt import memory
from vmrt.errors import StatusCode, VmrtError

PATHS = ["native", "python"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    if request.param == "native":
        if not memory.NATIVE:
            pytest.skip("C helpers not built or disabled by VMRT_NO_NATIVE")
        monkeypatch.setattr(memory, "_NATIVE_MIN_BYTES", 0)
    else:
        monkeypatch.setattr(memory, "_lib", None)
    return request.param


def reference_copy(target, t_off, source, s_off, length):
    data = bytes(source[s_off:s_off + length])
    target[t_off:t_off + length] = data


def reference_fill(target, off, length, pattern):
    for i in range(length):
        target[off + i] = pattern[i % len(pattern)]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_copy_matches_reference(data):
    size = data.draw(st.integers(0, 700))
    source = bytearray(data.draw(st.binary(min_size=size, max_size=size)))
    target = bytearray(data.draw(st.binary(min_size=size, max_size=size)))
    length = data.draw(st.integers(0, size))
    s_off = data.draw(st.integers(0, size - length))
    t_off = data.draw(st.integers(0, size - length))
    results = []
    for use_native in (True, False):
        out = bytearray(target)
        saved = memory._lib, memory._NATIVE_MIN_BYTES
        try:
            if not use_native:
                memory._lib = None
            memory._NATIVE_MIN_BYTES = 0
            memory.copy_bytes(out, t_off, source, s_off, length)
        finally:
            memory._lib, memory._NATIVE_MIN_BYTES = saved
        results.append(out)
    expected = bytearray(target)
    reference_copy(expected, t_off, source, s_off, length)
    assert results[0] == expected
    assert results[1] == expected


@pytest.mark.parametrize("pattern_length", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("length_units", [0, 1, 7, 300])
def test_fill_pattern(path, pattern_length, length_units):
    pattern = bytes(range(1, pattern_length + 1))
    length = pattern_length * length_units
    target = bytearray(b"\xAA" * (length + 10))
    memory.fill_pattern(target, 5, length, pattern)
    expected = bytearray(b"\xAA" * (length + 10))
    reference_fill(expected, 5, length, pattern)
    assert target == expected


def test_overlapping_copy_is_memmove(path):
    buf = bytearray(range(256)) * 4
    expected = bytearray(buf)
    reference_copy(expected, 10, bytes(expected), 0, 900)
    memory.copy_bytes(buf, 10, buf, 0, 900)
    assert buf == expected


@pytest.mark.parametrize("args", [
    (0, 0, 11), (5, 0, 6), (0, 5, 6), (-1, 0, 1), (0, -1, 1), (0, 0, -1),
])
def test_copy_out_of_range(path, args):
    t_off, s_off, length = args
    with pytest.raises(VmrtError) as info:
        memory.copy_bytes(bytearray(10), t_off, bytes(10), s_off, length)
    assert info.value.code == StatusCode.OUT_OF_RANGE


def test_fill_rejects_bad_pattern_and_length(path):
    with pytest.raises(VmrtError):
        memory.fill_pattern(bytearray(16), 0, 16, b"")
    with pytest.raises(VmrtError):
        memory.fill_pattern(bytearray(64), 0, 17, b"\x01" * 17)
    with pytest.raises(VmrtError):
        memory.fill_pattern(bytearray(16), 0, 6, b"\x01\x02\x03\x04")
    with pytest.raises(VmrtError) as info:
        memory.fill_pattern(bytearray(16), 12, 8, b"\x01\x02")
    assert info.value.code == StatusCode.OUT_OF_RANGE


def test_read_only_target_rejected(path):
    with pytest.raises(VmrtError) as info:
        memory.copy_bytes(bytes(8), 0, bytes(8), 0, 8)
    assert info.value.code == StatusCode.PERMISSION_DENIED


def test_numpy_buffers(path):
    np = pytest.importorskip("numpy")
    target = np.zeros(100, dtype=np.float32)
    source = np.arange(100, dtype=np.float32)
    memory.copy_bytes(target, 40, source, 0, 200)
    assert (target[10:60] == source[:50]).all()
    assert (target[:10] == 0).all()


def test_env_var_forces_python_twin():
    code = "import vmrt.memory as m; print(m.NATIVE)"
    env = dict(os.environ, VMRT_NO_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "False"
