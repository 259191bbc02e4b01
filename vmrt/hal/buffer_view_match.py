"""Comparing buffer views as iree-run-module's --expected_output does
(IREE 3.13.0's runtime/src/iree/tooling/buffer_view_matchers.c).

A view matches when its shape and element type are the expected view's and
every element matches: floats (f16, bf16, f32, f64) approximately by default,
`abs(actual - expected) <= atol + rtol * abs(expected)` with NaN equal to NaN
(`Equality(mode="exact")` compares bytes), every other type byte for byte.
A mismatch is described in upstream's words: the first differing element, or
the metadata, then what the view was expected to be.
"""

from __future__ import annotations

from dataclasses import dataclass

from vmrt.elements import ElementType, element_byte_count, format_shape_and_type
from vmrt.errors import HalError, StatusCode
from vmrt.hal.buffer_view import BufferView
from vmrt.hal.buffer_view_io import buffer_view_bytes, element_formatter
from vmrt.hal.types import EncodingType

E = ElementType

__all__ = ["Equality", "match_equal"]


@dataclass(frozen=True)
class Equality:
    """How elements are compared; the defaults are iree-run-module's flags'
    (--equality_mode, --expected_{f16,bf16,f32,f64}_threshold, --expected_rtol)."""

    mode: str = "approximate"
    f16_atol: float = 0.001
    bf16_atol: float = 0.01
    f32_atol: float = 0.0001
    f64_atol: float = 0.0001
    rtol: float = 1e-5

    def __post_init__(self):
        if self.mode not in ("approximate", "exact"):
            raise ValueError(f"equality mode must be 'approximate' or 'exact', not "
                             f"{self.mode!r}")

    def atol(self, element_type: int) -> float | None:
        """The absolute tolerance of a float type (None: compared byte for byte)."""
        if self.mode == "exact":
            return None
        return {int(E.FLOAT_16): self.f16_atol, int(E.BFLOAT_16): self.bf16_atol,
                int(E.FLOAT_32): self.f32_atol, int(E.FLOAT_64): self.f64_atol}.get(
            int(element_type))


def _as_floats(data, element_type: int):
    """The elements of f16/bf16/f32/f64 bytes as a float64 numpy array."""
    import numpy as np
    if element_type == E.BFLOAT_16:  # (a bf16 is the high half of an f32)
        high = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return high.view(np.float32).astype(np.float64)
    dtype = {int(E.FLOAT_16): "<f2", int(E.FLOAT_32): "<f4", int(E.FLOAT_64): "<f8"}
    return np.frombuffer(data, dtype=dtype[int(element_type)]).astype(np.float64)


def _first_mismatch(expected, actual, element_type: int, equality: Equality) -> int | None:
    """The index of the first element that does not match, or None."""
    import numpy as np
    atol = equality.atol(element_type)
    if atol is not None:
        want, got = _as_floats(expected, element_type), _as_floats(actual, element_type)
        with np.errstate(invalid="ignore", over="ignore"):
            near = np.abs(got - want) <= atol + equality.rtol * np.abs(want)
        same = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.isfinite(want) & near)
        bad = np.flatnonzero(~same)
        return int(bad[0]) if bad.size else None
    size = max(1, element_byte_count(element_type))
    for index in range(0, len(expected), size):
        if bytes(expected[index:index + size]) != bytes(actual[index:index + size]):
            return index // size
    return None


def match_equal(expected: BufferView, actual: BufferView,
                equality: Equality = Equality()) -> str | None:
    """None when `actual` matches `expected`; otherwise why not, as upstream says it
    (`element at index 2 (0.758145) does not match the expected (0.758); expected
    that the view is equal to contents of a view of 1x3xf32`)."""
    if actual.encoding_type != EncodingType.DENSE_ROW_MAJOR:
        raise HalError("non-dense encodings not supported for matching",
                       StatusCode.UNIMPLEMENTED)
    wanted = format_shape_and_type(expected.shape, expected.element_type)
    tail = f"; expected that the view is equal to contents of a view of {wanted}"
    if tuple(actual.shape) != tuple(expected.shape) or \
            int(actual.element_type) != int(expected.element_type):
        shown = format_shape_and_type(actual.shape, actual.element_type)
        return f"metadata is {shown}; expected that the view matches {wanted}{tail}"
    want, got = buffer_view_bytes(expected), buffer_view_bytes(actual)
    index = _first_mismatch(want, got, int(actual.element_type), equality)
    if index is None:
        return None
    size = max(1, element_byte_count(actual.element_type))
    element = element_formatter(actual.element_type)
    part = slice(index * size, (index + 1) * size)
    return (f"element at index {index} ({element(got[part])}) does not match the expected "
            f"({element(want[part])}){tail}")
