"""Byte-range copy and fill over writable buffers: C through cffi, or a Python twin.

`VMRT_NO_NATIVE=1` in the environment forces the pure-Python twin; both paths run
the same range checks here, so they accept and reject exactly the same calls.
"""

from __future__ import annotations

import os

from vmrt.errors import StatusCode, VmrtError

try:
    if os.environ.get("VMRT_NO_NATIVE", "") not in ("", "0"):
        raise ImportError("disabled by VMRT_NO_NATIVE")
    from vmrt._cnative import ffi as _ffi, lib as _lib
except ImportError:  # not built, or disabled: the Python twin serves
    _ffi = _lib = None

#: True when the C helpers are in use.
NATIVE = _lib is not None

MAX_PATTERN_LENGTH = 16

# Below this many bytes the cffi call costs more than a memoryview slice copy.
_NATIVE_MIN_BYTES = 256


def _check_range(name: str, size: int, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset > size or length > size - offset:
        raise VmrtError(
            f"{name} range [{offset}, {offset}+{length}) out of bounds of {size} bytes",
            StatusCode.OUT_OF_RANGE,
        )


def _writable(buffer) -> memoryview:
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.readonly:
        raise VmrtError("target buffer is read-only", StatusCode.PERMISSION_DENIED)
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _bytes_view(buffer) -> memoryview:
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def copy_bytes(target, target_offset: int, source, source_offset: int, length: int) -> None:
    """Copies `length` bytes from source[source_offset:] to target[target_offset:].

    Overlapping ranges of the same buffer behave as memmove.
    """
    target_view = _writable(target)
    source_view = _bytes_view(source)
    _check_range("source", source_view.nbytes, source_offset, length)
    _check_range("target", target_view.nbytes, target_offset, length)
    if not length:
        return
    if _lib is not None and length >= _NATIVE_MIN_BYTES:
        target_ptr = _ffi.from_buffer("uint8_t[]", target_view, require_writable=True)
        source_ptr = _ffi.from_buffer("uint8_t[]", source_view)
        _lib.vmrt_copy_bytes(target_ptr + target_offset, source_ptr + source_offset, length)
        return
    target_view[target_offset:target_offset + length] = bytes(
        source_view[source_offset:source_offset + length])


def fill_pattern(target, target_offset: int, length: int, pattern: bytes) -> None:
    """Fills target[target_offset:target_offset+length] by repeating `pattern`.

    `pattern` is 1..16 bytes and `length` a multiple of its size (as IREE's
    buffer fill requires).
    """
    target_view = _writable(target)
    pattern = bytes(pattern)
    if not 1 <= len(pattern) <= MAX_PATTERN_LENGTH:
        raise VmrtError(f"fill pattern of {len(pattern)} bytes (must be 1..16)",
                        StatusCode.INVALID_ARGUMENT)
    if length % len(pattern):
        raise VmrtError(
            f"fill length {length} is not a multiple of the {len(pattern)}-byte pattern",
            StatusCode.INVALID_ARGUMENT)
    _check_range("target", target_view.nbytes, target_offset, length)
    if not length:
        return
    if _lib is not None and length >= _NATIVE_MIN_BYTES:
        target_ptr = _ffi.from_buffer("uint8_t[]", target_view, require_writable=True)
        _lib.vmrt_fill_pattern(target_ptr + target_offset, length, pattern, len(pattern))
        return
    target_view[target_offset:target_offset + length] = pattern * (length // len(pattern))
