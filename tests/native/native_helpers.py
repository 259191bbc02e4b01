"""Shared pieces of the native-module tests: assembling vmasm, a Python module
with the exports of the C example module, and the bytecode that calls them."""

from __future__ import annotations

import hashlib
import math
import shutil
import subprocess
from array import array
from pathlib import Path

import pytest

import vmrt
from vmrt.errors import StatusCode, VmrtError
from vmrt.native import NativeModule, NativeState, export
from vmrt.vm.buffer import VMBuffer

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def s32(x: int) -> int:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def s64(x: int) -> int:
    return ((x + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def f32(x: float) -> float:
    """x rounded to f32 (overflowing to infinity, as C's conversion does)."""
    slot = array("f", [0.0])
    slot[0] = x
    return slot[0]


_CACHE: dict[str, bytes] = {}


def assemble(text: str, workdir: Path) -> bytes:
    """The .vmfb for vmasm `text` (iree-as-module), cached by content."""
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    if key in _CACHE:
        return _CACHE[key]
    tool = shutil.which("iree-as-module")
    if tool is None:
        pytest.skip("iree-as-module not found (pip install iree-base-compiler==3.13.0)")
    source = workdir / f"{key}.vmasm"
    output = workdir / f"{key}.vmfb"
    source.write_text(text)
    proc = subprocess.run([tool, str(source), f"--output={output}"],
                          capture_output=True, text=True)
    if proc.returncode:
        raise AssertionError(f"iree-as-module failed:\n{proc.stderr}\n{text}")
    _CACHE[key] = output.read_bytes()
    return _CACHE[key]


class ExampleState(NativeState):
    def __init__(self, context):
        super().__init__(context)
        self.counter = 0
        self.released = False

    def release(self):
        self.released = True
        super().release()


class PyExample(NativeModule, name="pyex", version=1):
    """The exports of csrc/vmrt_example.c written in Python."""

    def create_state(self, context):
        return ExampleState(context)

    @export("0i_i")
    def add_1(self, x):
        return s32(x + 1)

    @export("0ii_i")
    def div_i(self, a, b):
        if b == 0:
            raise VmrtError(f"div_i: {a} / 0", StatusCode.INVALID_ARGUMENT)
        q = abs(a) // abs(b)
        return s32(q if (a < 0) == (b < 0) else -q)

    @export("0II_I")
    def add_I(self, a, b):
        return s64(a + b)

    @export("0II_I")
    def div_I(self, a, b):
        if b == 0:
            raise VmrtError(f"div_I: {a} / 0", StatusCode.INVALID_ARGUMENT)
        if a == I64_MIN and b == -1:
            return I64_MIN
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    @export("0v_I")
    def min_I(self):
        return I64_MIN

    @export("0ff_f")
    def mul_f(self, a, b):
        return a * b

    @export("0f_f")
    def recip_f(self, x):
        if x == 0:
            raise VmrtError("recip_f of zero", StatusCode.OUT_OF_RANGE)
        return 1.0 / x

    @export("0FF_F")
    def mul_F(self, a, b):
        return a * b

    @export("0F_F")
    def recip_F(self, x):
        if x == 0:
            raise VmrtError("recip_F of zero", StatusCode.OUT_OF_RANGE)
        return 1.0 / x

    @export("0v_F")
    def nan_F(self):
        return math.nan

    @export("0i_v")
    def check(self, code):
        if code:
            raise VmrtError(f"check failed with {code}", StatusCode(code))

    @export("0v_v")
    def nothing(self):
        return None

    @export("0v_i", state=True)
    def counter(self, state):
        state.counter += 1
        return state.counter

    @export("0iIfF_FfIi")
    def reverse(self, i, big, f, d):
        return d, f, big, i

    @export("0r_r")
    def ref_echo(self, ref):
        return ref

    @export("0r_r")
    def ref_move(self, ref):
        return ref

    @export("0rr_rr")
    def ref_swap(self, a, b):
        return b, a

    @export("0r_i")
    def ref_is_null(self, ref):
        return 1 if ref is None else 0

    @export("0ii_r")
    def make_buffer(self, length, value):
        return VMBuffer.from_bytes(bytes([value & 0xFF]) * length)

    @export("0r_I")
    def buffer_sum(self, buffer):
        if not isinstance(buffer, VMBuffer):
            raise VmrtError("buffer_sum: not a vm.buffer", StatusCode.INVALID_ARGUMENT)
        return sum(buffer.view)

    @export("0ri_v")
    def buffer_fill(self, buffer, value):
        buffer.map_rw(0, buffer.length)[:] = bytes([value & 0xFF]) * buffer.length

    @export("0CiD_i")
    def span_sum(self, items):
        return s32(sum(v for (v,) in items))

    @export("0iCiIfFrD_iIfFr")
    def span_get(self, index, items):
        if not 0 <= index < len(items):
            raise VmrtError(f"span_get: index {index} of {len(items)} elements",
                            StatusCode.OUT_OF_RANGE)
        return tuple(items[index])

    @export("0CrID_I")
    def span_refs(self, items):
        return sum(buffer.length * weight for buffer, weight in items)


#: The caller: one wrapper export per import, plus loops. {M} is the callee module.
ROUNDTRIP_VMASM = """
vm.module @rt_{M} version 1
vm.type i32
vm.type i64
vm.type f32
vm.type f64
vm.type !vm.buffer
vm.import @{M}.add_1 cconv "0i_i"
vm.import @{M}.div_i cconv "0ii_i"
vm.import @{M}.add_I cconv "0II_I"
vm.import @{M}.div_I cconv "0II_I"
vm.import @{M}.min_I cconv "0v_I"
vm.import @{M}.mul_f cconv "0ff_f"
vm.import @{M}.recip_f cconv "0f_f"
vm.import @{M}.mul_F cconv "0FF_F"
vm.import @{M}.recip_F cconv "0F_F"
vm.import @{M}.nan_F cconv "0v_F"
vm.import @{M}.check cconv "0i_v"
vm.import @{M}.nothing cconv "0v_v"
vm.import @{M}.counter cconv "0v_i"
vm.import @{M}.reverse cconv "0iIfF_FfIi"
vm.import @{M}.ref_echo cconv "0r_r"
vm.import @{M}.ref_move cconv "0r_r"
vm.import @{M}.ref_swap cconv "0rr_rr"
vm.import @{M}.ref_is_null cconv "0r_i"
vm.import @{M}.make_buffer cconv "0ii_r"
vm.import @{M}.buffer_sum cconv "0r_I"
vm.import @{M}.span_sum cconv "0CiD_i"
vm.import @{M}.span_get cconv "0iCiIfFrD_iIfFr"
vm.import @{M}.span_refs cconv "0CrID_I"

vm.export @add_1
vm.func @add_1(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @{M}.add_1(%i0)
  vm.return %i1
}

vm.export @div_i
vm.func @div_i(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.call @{M}.div_i(%i0, %i1)
  vm.return %i2
}

vm.export @add_I
vm.func @add_I(%i0:1: i64, %i2:3: i64) -> (i64) {
^bb0:
  %i4:5 = vm.call @{M}.add_I(%i0:1, %i2:3)
  vm.return %i4:5
}

vm.export @div_I
vm.func @div_I(%i0:1: i64, %i2:3: i64) -> (i64) {
^bb0:
  %i4:5 = vm.call @{M}.div_I(%i0:1, %i2:3)
  vm.return %i4:5
}

vm.export @min_I
vm.func @min_I() -> (i64) {
^bb0:
  %i0:1 = vm.call @{M}.min_I()
  vm.return %i0:1
}

vm.export @mul_f
vm.func @mul_f(%i0: f32, %i1: f32) -> (f32) {
^bb0:
  %i2 = vm.call @{M}.mul_f(%i0, %i1)
  vm.return %i2
}

vm.export @recip_f
vm.func @recip_f(%i0: f32) -> (f32) {
^bb0:
  %i1 = vm.call @{M}.recip_f(%i0)
  vm.return %i1
}

vm.export @mul_F
vm.func @mul_F(%i0:1: f64, %i2:3: f64) -> (f64) {
^bb0:
  %i4:5 = vm.call @{M}.mul_F(%i0:1, %i2:3)
  vm.return %i4:5
}

vm.export @recip_F
vm.func @recip_F(%i0:1: f64) -> (f64) {
^bb0:
  %i2:3 = vm.call @{M}.recip_F(%i0:1)
  vm.return %i2:3
}

vm.export @nan_F
vm.func @nan_F() -> (f64) {
^bb0:
  %i0:1 = vm.call @{M}.nan_F()
  vm.return %i0:1
}

vm.export @check
vm.func @check(%i0: i32) -> () {
^bb0:
  vm.call @{M}.check(%i0)
  vm.return
}

vm.export @nothing
vm.func @nothing() -> () {
^bb0:
  vm.call @{M}.nothing()
  vm.return
}

vm.export @counter
vm.func @counter() -> (i32) {
^bb0:
  %i0 = vm.call @{M}.counter()
  vm.return %i0
}

vm.export @reverse
// Function arguments are wide-first (the assembler wants them sequential, the
// verifier wants pairs aligned); the call passes them in the import's order.
vm.func @reverse(%i0:1: i64, %i2:3: f64, %i4: i32, %i5: f32) -> (f64, f32, i64, i32) {
^bb0:
  %i8:9, %i10, %i12:13, %i14 = vm.call @{M}.reverse(%i4, %i0:1, %i5, %i2:3)
  vm.return %i8:9, %i10, %i12:13, %i14
}

vm.export @ref_echo
vm.func @ref_echo(%r0: !vm.buffer) -> (!vm.buffer) {
^bb0:
  %r1 = vm.call @{M}.ref_echo(%r0)
  vm.return %r1
}

vm.export @ref_move
vm.func @ref_move(%r0: !vm.buffer) -> (!vm.buffer) {
^bb0:
  %r1 = vm.call @{M}.ref_move(%R0)
  vm.return %r1
}

vm.export @ref_swap
vm.func @ref_swap(%r0: !vm.buffer, %r1: !vm.buffer) -> (!vm.buffer, !vm.buffer) {
^bb0:
  %r2, %r3 = vm.call @{M}.ref_swap(%r0, %r1)
  vm.return %r2, %r3
}

vm.export @ref_is_null
vm.func @ref_is_null(%r0: !vm.buffer) -> (i32) {
^bb0:
  %i0 = vm.call @{M}.ref_is_null(%r0)
  vm.return %i0
}

vm.export @make_and_sum
vm.func @make_and_sum(%i0: i32, %i1: i32) -> (i64) {
^bb0:
  %r0 = vm.call @{M}.make_buffer(%i0, %i1)
  %i2:3 = vm.call @{M}.buffer_sum(%R0)
  vm.return %i2:3
}

vm.export @make_buffer
vm.func @make_buffer(%i0: i32, %i1: i32) -> (!vm.buffer) {
^bb0:
  %r0 = vm.call @{M}.make_buffer(%i0, %i1)
  vm.return %r0
}

vm.export @buffer_sum
vm.func @buffer_sum(%r0: !vm.buffer) -> (i64) {
^bb0:
  %i0:1 = vm.call @{M}.buffer_sum(%r0)
  vm.return %i0:1
}

vm.export @span_sum0
vm.func @span_sum0() -> (i32) {
^bb0:
  %i0 = vm.call.variadic @{M}.span_sum segments[0]()
  vm.return %i0
}

vm.export @span_sum3
vm.func @span_sum3(%i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  %i3 = vm.call.variadic @{M}.span_sum segments[3](%i0, %i1, %i2)
  vm.return %i3
}

vm.export @span_get2
// (big0, d0, big1, d1, index, i0, f0, i1, f1, r0, r1): element `index` of the span
// [(i0, big0, f0, d0, r0), (i1, big1, f1, d1, r1)].
vm.func @span_get2(%i0:1: i64, %i2:3: f64, %i4:5: i64, %i6:7: f64, %i8: i32, %i9: i32, %i10: f32, %i11: i32, %i12: f32, %r0: !vm.buffer, %r1: !vm.buffer) -> (i32, i64, f32, f64, !vm.buffer) {
^bb0:
  %i16, %i18:19, %i20, %i22:23, %r2 = vm.call.variadic @{M}.span_get segments[1, 2](%i8, %i9, %i0:1, %i10, %i2:3, %r0, %i11, %i4:5, %i12, %i6:7, %r1)
  vm.return %i16, %i18:19, %i20, %i22:23, %r2
}

vm.export @span_refs2
vm.func @span_refs2(%r0: !vm.buffer, %i0:1: i64, %r1: !vm.buffer, %i2:3: i64) -> (i64) {
^bb0:
  %i4:5 = vm.call.variadic @{M}.span_refs segments[2](%r0, %i0:1, %r1, %i2:3)
  vm.return %i4:5
}

// %i0 rounds of: echo (retain), move, swap, a span with the ref. Returns the last echo.
vm.export @churn
vm.func @churn(%r0: !vm.buffer, %i0: i32) -> (!vm.buffer) {
^bb0:
  %i1 = vm.const.i32.zero
  %i2 = vm.const.i32 1
  %i4:5 = vm.const.i64 1
  vm.br ^bb1()
^bb1:
  %r1 = vm.call @{M}.ref_echo(%r0)
  %r1 = vm.call @{M}.ref_move(%R1)
  %r2, %r3 = vm.call @{M}.ref_swap(%r0, %r1)
  %i6:7 = vm.call.variadic @{M}.span_refs segments[2](%r2, %i4:5, %r3, %i4:5)
  vm.discard.refs %r2, %r3
  %i1 = vm.add.i32 %i1, %i2
  %i3 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i3, ^bb1(), ^bb2()
^bb2:
  vm.return %r1
}

// %i0 calls of ref_echo on one buffer: the plain ref path, for counting.
vm.export @echo_loop
vm.func @echo_loop(%r0: !vm.buffer, %i0: i32) -> () {
^bb0:
  %i1 = vm.const.i32.zero
  %i2 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %r1 = vm.call @{M}.ref_echo(%r0)
  %i1 = vm.add.i32 %i1, %i2
  %i3 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i3, ^bb1(), ^bb2()
^bb2:
  vm.return
}
"""


def roundtrip_module(callee: str, workdir: Path) -> vmrt.BytecodeModule:
    return vmrt.load_module(assemble(ROUNDTRIP_VMASM.replace("{M}", callee), workdir))
