"""Every cconv element (i, I, f, F, r, v, spans of tuples, multiple results)
through a Python export and a C export, called from bytecode: the module
rt_<callee> (native_helpers.ROUNDTRIP_VMASM) imports the same exports from the
Python module `pyex` and from the C module `cexample`, and both must give the
same answers. The C module runs once through its fast path (the C Caller) and once through
the generic (Python twin) marshalling."""

from __future__ import annotations

import math
import sys

import gc

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import vmrt
from vmrt.errors import StatusCode
from vmrt.native import cmodule
from vmrt.vm.buffer import VMBuffer

from native_helpers import (
    I32_MAX, I32_MIN, I64_MAX, I64_MIN, PyExample, f32, roundtrip_module, s32, s64,
)

CALLEES = ["pyex", "cexample", "cexample-generic"]

i32s = st.integers(I32_MIN, I32_MAX)
i64s = st.integers(I64_MIN, I64_MAX)
f32s = st.floats(width=32, allow_nan=False)
f64s = st.floats(allow_nan=False)


def _callee_module(kind: str):
    if kind == "pyex":
        return PyExample()
    if cmodule.lib is None:
        pytest.skip("vmrt._cnative is not built")
    from vmrt.native.example import example_module
    return example_module()


class Setup:
    def __init__(self, kind: str, workdir, monkeypatch):
        self.kind = kind
        self.callee = "pyex" if kind == "pyex" else "cexample"
        if kind == "cexample-generic":
            monkeypatch.setattr(cmodule, "FAST_PATH", False)
        self.module = roundtrip_module(self.callee, workdir)
        self.contexts = []

    def context(self):
        ctx = vmrt.Context(vmrt.Instance(), modules=[_callee_module(self.kind), self.module])
        self.contexts.append(ctx)
        return ctx

    def close(self):
        for ctx in self.contexts:
            ctx.close()


@pytest.fixture(params=CALLEES)
def setup(request, workdir, monkeypatch):
    s = Setup(request.param, workdir, monkeypatch)
    yield s
    s.close()


@pytest.fixture
def call(setup):
    ctx = setup.context()
    name = f"rt_{setup.callee}"
    return lambda fn, *args: ctx.function(f"{name}.{fn}")(*args)


def same_float(a, b) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


# -- scalars -----------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(x=i32s, a=i32s, b=i32s.filter(bool))
def test_i32(call, x, a, b):
    assert call("add_1", x) == s32(x + 1)
    q = abs(a) // abs(b)
    assert call("div_i", a, b) == s32(q if (a < 0) == (b < 0) else -q)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=i64s, b=i64s.filter(bool))
def test_i64(call, a, b):
    assert call("add_I", a, b) == s64(a + b)
    if a == I64_MIN and b == -1:
        expected = I64_MIN
    else:
        q = abs(a) // abs(b)
        expected = q if (a < 0) == (b < 0) else -q
    assert call("div_I", a, b) == expected


def test_i64_extreme_result(call):
    assert call("min_I") == I64_MIN


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=f32s, b=f32s, x=f32s.filter(bool))
def test_f32(call, a, b, x):
    assert same_float(call("mul_f", a, b), f32(a * b))
    assert same_float(call("recip_f", x), f32(1.0 / x))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=f64s, b=f64s, x=f64s.filter(bool))
def test_f64(call, a, b, x):
    assert same_float(call("mul_F", a, b), a * b)
    assert same_float(call("recip_F", x), 1.0 / x)


def test_nan_result_is_a_value(call):
    assert math.isnan(call("nan_F"))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(i=i32s, big=i64s, f=f32s, d=f64s)
def test_every_scalar_type_both_ways(call, i, big, f, d):
    got = call("reverse", big, d, i, f)
    assert got[2:] == (big, i)
    assert same_float(got[0], d) and same_float(got[1], f)


def test_void(call):
    assert call("nothing") is None


# -- failures carry their status, the export's name and the VM stack ------------------------------
@pytest.mark.parametrize("fn,args,code,text", [
    ("div_i", (1, 0), StatusCode.INVALID_ARGUMENT, "div_i: 1 / 0"),
    ("div_I", (7, 0), StatusCode.INVALID_ARGUMENT, "div_I: 7 / 0"),
    ("recip_f", (0.0,), StatusCode.OUT_OF_RANGE, "recip_f of zero"),
    ("recip_F", (0.0,), StatusCode.OUT_OF_RANGE, "recip_F of zero"),
    ("check", (3,), StatusCode.INVALID_ARGUMENT, "check failed with 3"),
    ("check", (11,), StatusCode.OUT_OF_RANGE, None),
])
def test_failure_status(setup, fn, args, code, text):
    ctx = setup.context()
    with pytest.raises(vmrt.VMError) as info:
        ctx.function(f"rt_{setup.callee}.{fn}")(*args)
    error = info.value
    assert error.code == code
    assert f"{setup.callee}.{fn}" in str(error)
    if text:
        assert text in str(error)
    assert any(frame.startswith(f"rt_{setup.callee}.{fn}") for frame in error.stack)
    # The context is still usable.
    assert ctx.function(f"rt_{setup.callee}.add_1")(1) == 2


@pytest.mark.parametrize("code", range(1, 17))
def test_every_status_code(call, code):
    with pytest.raises(vmrt.VMError) as info:
        call("check", code)
    assert info.value.code == code


# -- per-context state -----------------------------------------------------------------------------
def test_state_is_per_context(setup):
    a, b = setup.context(), setup.context()
    fa = a.function(f"rt_{setup.callee}.counter")
    fb = b.function(f"rt_{setup.callee}.counter")
    assert [fa(), fa(), fb(), fa(), fb()] == [1, 2, 1, 3, 2]


def test_state_released_at_teardown(setup):
    if setup.callee == "cexample":
        from vmrt.native.example import live_states

        # The counter is process-wide: collect dropped contexts of earlier tests
        # and keep the collector out of the window being measured.
        gc.collect()
        gc.disable()
        try:
            before = live_states()
            ctx = setup.context()
            assert live_states() == before + 1
            ctx.close()
            assert live_states() == before
        finally:
            gc.enable()
    else:
        ctx = setup.context()
        state = ctx.module("pyex").state
        assert not state.released
        ctx.close()
        assert state.released


# -- refs -------------------------------------------------------------------------------------------
def test_refs(call):
    buffer = VMBuffer.from_bytes(b"\x01\x02\x03")
    other = VMBuffer.from_bytes(b"\x05")
    assert call("ref_echo", buffer) is buffer
    assert call("ref_move", buffer) is buffer
    assert call("ref_echo", None) is None
    assert call("ref_swap", buffer, other) == (other, buffer)
    assert call("ref_swap", None, other) == (other, None)
    assert call("ref_is_null", None) == 1
    assert call("ref_is_null", buffer) == 0
    assert call("buffer_sum", buffer) == 6
    made = call("make_buffer", 5, 7)
    assert isinstance(made, VMBuffer) and made.to_bytes() == b"\x07" * 5 and made.mutable
    assert call("make_and_sum", 10, 255) == 2550


def test_ref_of_wrong_type(call):
    with pytest.raises(vmrt.VMError) as info:
        call("buffer_sum", None)
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "not a vm.buffer" in str(info.value)


def test_read_only_buffer_stays_read_only(setup):
    if setup.callee != "cexample":
        pytest.skip("the C host service check")
    ctx = setup.context()
    fill = ctx.function("cexample.buffer_fill")
    rodata = VMBuffer.from_bytes(b"abc", mutable=False)
    with pytest.raises(vmrt.VMError) as info:
        fill(rodata, 1)
    assert info.value.code == StatusCode.PERMISSION_DENIED
    writable = VMBuffer.from_bytes(b"abc")
    fill(writable, 0x41)
    assert writable.to_bytes() == b"AAA"


# -- spans ------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=i32s, b=i32s, c=i32s)
def test_span_of_i32(call, a, b, c):
    assert call("span_sum3", a, b, c) == s32(a + b + c)
    assert call("span_sum0") == 0


tuples = st.tuples(i32s, i64s, f32s, f64s)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=tuples, second=tuples, index=st.integers(0, 1))
def test_span_of_tuples_with_refs(call, first, second, index):
    buffers = [VMBuffer.from_bytes(b"x"), None]
    (i0, big0, f0, d0), (i1, big1, f1, d1) = first, second
    got = call("span_get2", big0, d0, big1, d1, index, i0, f0, i1, f1, *buffers)
    want = (first, second)[index]
    assert got[0] == want[0] and got[1] == want[1]
    assert same_float(got[2], want[2]) and same_float(got[3], want[3])
    assert got[4] is buffers[index]


def test_span_index_out_of_range(call):
    with pytest.raises(vmrt.VMError) as info:
        call("span_get2", 0, 0.0, 0, 0.0, 2, 0, 0.0, 0, 0.0, None, None)
    assert info.value.code == StatusCode.OUT_OF_RANGE
    assert "index 2 of 2" in str(info.value)


def test_span_of_refs(call):
    a, b = VMBuffer.from_bytes(b"1234"), VMBuffer.from_bytes(b"12")
    assert call("span_refs2", a, 3, b, -5) == 4 * 3 - 2 * 5


def test_span_called_from_python(setup):
    """Spans passed from the host arrive as lists of tuples in both kinds."""
    ctx = setup.context()
    get = ctx.function(f"{setup.callee}.span_get")
    buffer = VMBuffer.from_bytes(b"z")
    items = [(1, 2, 3.5, 4.25, None), (-1, -(1 << 40), -0.5, 1e300, buffer)]
    assert get(1, items) == (-1, -(1 << 40), -0.5, 1e300, buffer)
    assert ctx.function(f"{setup.callee}.span_sum")([]) == 0


# -- counts stay exact across many calls ------------------------------------------------------------
def test_churn_keeps_counts(call):
    buffer = VMBuffer.from_bytes(b"abcd")
    before = sys.getrefcount(buffer)
    held = cmodule.held_ref_count() if cmodule.lib is not None else 0
    for _ in range(3):
        assert call("churn", buffer, 200) is buffer
    assert sys.getrefcount(buffer) == before
    if cmodule.lib is not None:
        assert cmodule.held_ref_count() == held
