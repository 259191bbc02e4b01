"""The `check` native module (version 0): the assertions of IREE's end-to-end op
tests, with the comparisons, tolerances and messages of upstream's
runtime/src/iree/modules/check/module.cc.

Exports (the compiler's `check.expect_*_const` ops lower onto these):

- `expect_true(i32)`, `expect_false(i32)`
- `expect_all_true(device, view)`: every element nonzero (integers and f32/f64)
- `expect_eq(device, lhs, rhs)`: same element type, shape and bytes
- `expect_almost_eq(device, lhs, rhs, atol, rtol)`: floats with
  |lhs - rhs| <= atol + rtol * |rhs| (NaN equals NaN; a non-finite rhs only
  equals itself), compared in f64 after widening f16/bf16/f8 to f32

A failed check does not stop the function, as a failed gtest EXPECT does not:
its message is recorded in the context's state (`CheckState.failures`, or the
`on_failure` callback) and the call goes on. An element type a check cannot
compare is an INVALID_ARGUMENT error, as upstream's.

The comparisons are plain functions of `Tensor` (shape, element type, bytes), so
a host that reads tensors some other way (iree.runtime) can use them too.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from vmrt.elements import (
    NARROW_FLOATS, e8m0_to_f32, format_element_type, format_shape_and_type, to_f32,
)
from vmrt.elements import ElementType as E
from vmrt.errors import HalError, StatusCode, VmrtError
from vmrt.hal.buffer_view import BufferView
from vmrt.hal.buffer_view_io import buffer_view_bytes, format_elements
from vmrt.native import NativeModule, export
from vmrt.vm.ref import null_ref_error

#: Elements iree_hal_buffer_view_format prints in a failure message.
MAX_PRINTED_ELEMENTS = 1024

_ALL_TRUE_DTYPES = {
    E.INT_8: "<i1", E.SINT_8: "<i1", E.UINT_8: "<u1", E.INT_16: "<i2", E.SINT_16: "<i2",
    E.UINT_16: "<u2", E.INT_32: "<i4", E.SINT_32: "<i4", E.UINT_32: "<u4", E.INT_64: "<i8",
    E.SINT_64: "<i8", E.UINT_64: "<u8", E.FLOAT_32: "<f4", E.FLOAT_64: "<f8",
}
#: The 8-bit float element types (converted through a table of all 256 values).
_BYTE_FLOATS = frozenset([int(E.FLOAT_8_E8M0_FNU)] + [
    element_type for element_type, (code, _) in NARROW_FLOATS.items() if code == "B"])


class Tensor(NamedTuple):
    """What a check reads of a buffer view: shape, IREE element type, dense bytes."""

    shape: tuple
    element_type: int
    data: bytes

    @classmethod
    def of(cls, view) -> "Tensor":
        """The contents of a vmrt buffer view (a copy to host, as upstream transfers)."""
        if not isinstance(view, BufferView):
            raise null_ref_error("buffer_view", view)
        return cls(tuple(view.shape), int(view.element_type), bytes(buffer_view_bytes(view)))

    def format(self) -> str:
        """iree_hal_buffer_view_format with upstream's 1024-element cap."""
        return (format_shape_and_type(self.shape, self.element_type) + "=" +
                format_elements(self.data, self.shape, self.element_type, MAX_PRINTED_ELEMENTS))


def _unsupported(element_type: int) -> HalError:
    return HalError(f"unsupported element type {format_element_type(element_type)}",
                    StatusCode.INVALID_ARGUMENT)


@functools.lru_cache(maxsize=None)
def _byte_float_table(element_type: int):
    """f32 values of all 256 encodings of an 8-bit float type."""
    import numpy as np
    narrow = NARROW_FLOATS.get(element_type)
    convert = e8m0_to_f32 if narrow is None else functools.partial(to_f32, fmt=narrow[1])
    return np.array([convert(bits) for bits in range(256)], dtype=np.float32)


def float_values(tensor: Tensor):
    """The elements as a float64 numpy array, widened as upstream's FloatTypeInfo
    loads them (f16/bf16/f8 through f32); INVALID_ARGUMENT for other types."""
    import numpy as np
    element_type, data = tensor.element_type, tensor.data
    if element_type == E.FLOAT_64:
        return np.frombuffer(data, "<f8")
    if element_type == E.FLOAT_32:
        values = np.frombuffer(data, "<f4")
    elif element_type == E.FLOAT_16:
        values = np.frombuffer(data, "<f2").astype(np.float32)
    elif element_type == E.BFLOAT_16:
        values = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
    elif element_type in _BYTE_FLOATS:
        values = _byte_float_table(element_type)[np.frombuffer(data, np.uint8)]
    else:
        raise _unsupported(element_type)
    return values.astype(np.float64)


# -- the comparisons: each returns None (passed) or the failure message ----------------------------
def true_failure(operand: int) -> str | None:
    return None if operand else f"Expected {operand} to be nonzero."


def false_failure(operand: int) -> str | None:
    return None if not operand else f"Expected {operand} to be zero."


def all_true_failure(tensor: Tensor) -> str | None:
    import numpy as np
    dtype = _ALL_TRUE_DTYPES.get(tensor.element_type)
    if dtype is None:
        raise _unsupported(tensor.element_type)
    zeros = np.flatnonzero(np.frombuffer(tensor.data, dtype) == 0)
    if not zeros.size:
        return None
    return (f"Expected all elements to be nonzero; element #{int(zeros[0])} is 0.\n"
            f"  operand:\n    {tensor.format()}")


def _mismatch(headline: str, lhs: Tensor, rhs: Tensor) -> str:
    return f"{headline}\n  lhs:\n    {lhs.format()}\n  rhs:\n    {rhs.format()}"


def eq_failure(lhs: Tensor, rhs: Tensor) -> str | None:
    types_eq = lhs.element_type == rhs.element_type
    shape_eq = tuple(lhs.shape) == tuple(rhs.shape)
    contents_eq = lhs.data == rhs.data
    if types_eq and shape_eq and contents_eq:
        return None
    headline = "Expected equality of these values."
    headline += "" if types_eq else " Element types do not match."
    headline += "" if shape_eq else " Shapes do not match."
    headline += "" if contents_eq else " Contents does not match."
    return _mismatch(headline, lhs, rhs)


def first_far_element(actual, expected, atol: float, rtol: float) -> int | None:
    """Index of the first element failing iree_math_fuzzy_compare_f64, or None."""
    import numpy as np
    with np.errstate(invalid="ignore", over="ignore"):
        close = (actual == expected) | (np.isnan(actual) & np.isnan(expected)) | (
            np.isfinite(expected) & (np.abs(actual - expected) <= atol + rtol * np.abs(expected)))
    far = np.flatnonzero(~close)
    return int(far[0]) if far.size else None


def almost_eq_failure(lhs: Tensor, rhs: Tensor, atol: float, rtol: float) -> str | None:
    types_eq = lhs.element_type == rhs.element_type
    shape_eq = tuple(lhs.shape) == tuple(rhs.shape)
    index = None
    if types_eq and shape_eq:
        actual, expected = float_values(lhs), float_values(rhs)
        index = first_far_element(actual, expected, atol, rtol)
    if types_eq and shape_eq and index is None:
        return None
    headline = "Expected near equality of these values."
    headline += "" if types_eq else " Element types do not match."
    headline += "" if shape_eq else " Shapes do not match."
    if index is not None:
        a, b = float(actual[index]), float(expected[index])
        headline += (f" Contents does not match to tolerance parameters atol={atol:g}, "
                     f"rtol={rtol:g}. The first failure occurs at index {index} as the lhs "
                     f"value {a:g} differs from the rhs value {b:g} by {b - a:.3e}.")
    return _mismatch(headline, lhs, rhs)


# -- the module ------------------------------------------------------------------------------------
class CheckState:
    """Per-context state: the messages of the checks that failed, in order."""

    def __init__(self, context, on_failure=None):
        self.context = context
        self.failures: list[str] = []
        self.on_failure = on_failure

    def record(self, check: str, message: str | None) -> None:
        if message is None:
            return
        message = f"check.{check}: {message}"
        self.failures.append(message)
        if self.on_failure is not None:
            self.on_failure(message)

    def release(self) -> None:
        self.on_failure = None


class CheckModule(NativeModule, name="check", version=0):
    """The `check` module; `on_failure(message)` is also told of every failed check."""

    def __init__(self, on_failure=None):
        self.on_failure = on_failure

    def create_state(self, context):
        return CheckState(context, self.on_failure)

    @export("0i_v", state=True)
    def expect_true(self, state, operand):
        state.record("expect_true", true_failure(operand))

    @export("0i_v", state=True)
    def expect_false(self, state, operand):
        state.record("expect_false", false_failure(operand))

    @export("0rr_v", state=True)
    def expect_all_true(self, state, device, operand):
        state.record("expect_all_true", all_true_failure(Tensor.of(operand)))

    @export("0rrr_v", state=True)
    def expect_eq(self, state, device, lhs, rhs):
        state.record("expect_eq", eq_failure(Tensor.of(lhs), Tensor.of(rhs)))

    @export("0rrrff_v", state=True)
    def expect_almost_eq(self, state, device, lhs, rhs, atol, rtol):
        state.record("expect_almost_eq",
                     almost_eq_failure(Tensor.of(lhs), Tensor.of(rhs), atol, rtol))


def failures_of(context) -> list[str]:
    """The failed checks recorded so far in a context holding the check module."""
    try:
        state = context.module("check").state
    except VmrtError:  # no check module registered
        return []
    return list(getattr(state, "failures", ()))
