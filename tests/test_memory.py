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


# -- batched spans: copy_spans / fill_spans / compare_spans ---------------------------------------
def _both_paths(fn):
    """(result or error, bytes touched) of `fn()` with the C helpers and with the twin."""
    outcomes = []
    for use_native in (True, False):
        saved = memory._lib
        try:
            if not use_native:
                memory._lib = None
            try:
                outcomes.append(("ok", fn()))
            except VmrtError as error:
                outcomes.append(("error", (error.code, error.message)))
        finally:
            memory._lib = saved
    return outcomes


def _reference_copy_spans(target, source, spans):
    for t, s, length in spans:
        if not (0 <= t <= len(target) and 0 <= length <= len(target) - t
                and 0 <= s <= len(source) and length <= len(source) - s):
            return False
    for t, s, length in spans:
        target[t:t + length] = bytes(source[s:s + length])
    return True


span_values = st.integers(-3, 80)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_copy_spans_matches_reference_both_ways(data):
    source = bytes(data.draw(st.binary(min_size=0, max_size=64)))
    target = data.draw(st.binary(min_size=0, max_size=64))
    spans = data.draw(st.lists(st.tuples(span_values, span_values, st.integers(-2, 40)),
                               max_size=8))
    same_buffer = data.draw(st.booleans())
    results = []
    for use_native in (True, False):
        out = bytearray(target)
        src = out if same_buffer else source
        saved = memory._lib
        try:
            if not use_native:
                memory._lib = None
            try:
                memory.copy_spans(out, src, spans)
                outcome = "ok"
            except VmrtError as error:
                outcome = (error.code, error.message)
        finally:
            memory._lib = saved
        results.append((outcome, bytes(out)))
    assert results[0] == results[1]
    expected = bytearray(target)
    ok = _reference_copy_spans(expected, expected if same_buffer else source, spans)
    assert (results[0][0] == "ok") == ok
    assert results[0][1] == bytes(expected)
    if not ok:
        assert results[0][0][0] == StatusCode.OUT_OF_RANGE
        assert results[0][0][1].startswith("span ")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fill_spans_matches_reference_both_ways(data):
    target = data.draw(st.binary(min_size=0, max_size=64))
    pattern = data.draw(st.binary(min_size=1, max_size=4))
    spans = data.draw(st.lists(st.tuples(span_values, st.integers(-1, 24)), max_size=6))
    results = []
    for use_native in (True, False):
        out = bytearray(target)
        saved = memory._lib
        try:
            if not use_native:
                memory._lib = None
            try:
                memory.fill_spans(out, spans, pattern)
                outcome = "ok"
            except VmrtError as error:
                outcome = (error.code, error.message)
        finally:
            memory._lib = saved
        results.append((outcome, bytes(out)))
    assert results[0] == results[1]
    valid = all(0 <= o <= len(target) and 0 <= n <= len(target) - o and n % len(pattern) == 0
                for o, n in spans)
    expected = bytearray(target)
    if valid:
        for o, n in spans:
            reference_fill(expected, o, n, pattern)
    assert (results[0][0] == "ok") == valid
    assert results[0][1] == bytes(expected)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_compare_spans_matches_reference_both_ways(data):
    lhs = data.draw(st.binary(min_size=0, max_size=32))
    rhs = bytearray(lhs) if data.draw(st.booleans()) else bytearray(
        data.draw(st.binary(min_size=0, max_size=32)))
    if rhs and data.draw(st.booleans()):
        rhs[data.draw(st.integers(0, len(rhs) - 1))] ^= 1
    spans = data.draw(st.lists(st.tuples(span_values, span_values, st.integers(-1, 20)),
                               max_size=6))
    outcomes = _both_paths(lambda: memory.compare_spans(lhs, rhs, spans))
    assert outcomes[0] == outcomes[1]
    valid = all(0 <= a <= len(lhs) and 0 <= n <= len(lhs) - a and
                0 <= b <= len(rhs) and n <= len(rhs) - b for a, b, n in spans)
    if valid:
        first = next((k for k, (a, b, n) in enumerate(spans)
                      if bytes(lhs[a:a + n]) != bytes(rhs[b:b + n])), -1)
        assert outcomes[0] == ("ok", first)
    else:
        assert outcomes[0][0] == "error" and outcomes[0][1][0] == StatusCode.OUT_OF_RANGE


def test_span_input_forms(path):
    from array import array

    np = pytest.importorskip("numpy")
    source = bytes(range(64))
    rows = [(0, 8, 4), (4, 0, 4), (8, 60, 4)]
    forms = [rows, [list(r) for r in rows], np.array(rows, dtype=np.int64),
             np.array(rows, dtype=np.int64).T.copy().T,       # not C-contiguous
             array("q", [v for r in rows for v in r]), np.array(rows, dtype=np.int32)]
    expected = bytearray(12)
    _reference_copy_spans(expected, source, rows)
    for form in forms:
        out = bytearray(12)
        memory.copy_spans(out, source, form)
        assert out == expected, type(form)


def test_span_width_is_checked(path):
    with pytest.raises(VmrtError) as info:
        memory.copy_spans(bytearray(8), bytes(8), [(0, 0)])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(VmrtError) as info:
        memory.fill_spans(bytearray(8), [(0, 1, 2)], b"\x00")
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(VmrtError):
        memory.copy_spans(bytearray(8), bytes(8), [(0, 0, 1 << 70)])


def test_span_errors_leave_target_untouched(path):
    target = bytearray(16)
    with pytest.raises(VmrtError) as info:
        memory.copy_spans(target, b"\x01" * 16, [(0, 0, 8), (12, 0, 8)])
    assert info.value.message == "span 1: target range [12, 12+8) out of bounds of 16 bytes"
    assert target == bytearray(16)
    with pytest.raises(VmrtError) as info:
        memory.fill_spans(target, [(0, 4), (4, 3)], b"\x01\x02")
    assert info.value.code == StatusCode.INVALID_ARGUMENT and "span 1" in info.value.message
    assert target == bytearray(16)
    with pytest.raises(VmrtError) as info:
        memory.copy_spans(bytes(4), b"", [])
    assert info.value.code == StatusCode.PERMISSION_DENIED


def test_gather_many_spans(path):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(5)
    source = rng.integers(0, 256, 1 << 20, dtype=np.uint8)
    blocks = rng.permutation(256)[:200]
    spans = np.stack([np.arange(200) * 4096, blocks * 4096, np.full(200, 4096)],
                     axis=1).astype(np.int64)
    target = np.zeros(200 * 4096, dtype=np.uint8)
    memory.copy_spans(target, source, spans)
    expected = source.reshape(256, 4096)[blocks].reshape(-1)
    assert (target == expected).all()
    assert memory.compare_spans(target, source, spans) == -1
    target[5 * 4096 + 7] ^= 0xFF
    assert memory.compare_spans(target, source, spans) == 5
    memory.fill_spans(target, spans[:, [0, 2]].copy(), b"\xAB\xCD")
    assert (target[:200 * 4096].reshape(-1, 2) == [0xAB, 0xCD]).all()
