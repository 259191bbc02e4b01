"""Byte-range copy and fill over writable buffers, and the same over many spans in one
call (copy_spans, fill_spans, compare_spans): C through cffi, or a Python twin.

`VMRT_NO_NATIVE=1` in the environment forces the pure-Python twin; both paths run
the same range checks here, so they accept and reject exactly the same calls.
"""

from __future__ import annotations

import os

from vmrt.errors import StatusCode, VmrtError

#: Why vmrt._cnative is missing from an installation (setup.py builds it optionally).
MISSING_C_EXTENSION = ("this vmrt was installed without it (no C compiler at install time); "
                       "install a C compiler and reinstall vmrt with pip --no-cache-dir")

try:
    if os.environ.get("VMRT_NO_NATIVE", "") not in ("", "0"):
        raise ImportError("disabled by VMRT_NO_NATIVE")
    from vmrt._cnative import ffi as _ffi, lib as _lib
    _UNAVAILABLE = None
except ImportError as error:  # not built, or disabled: the Python twin serves
    _ffi = _lib = None
    _UNAVAILABLE = f"vmrt's C extension is not available ({error})"
    if isinstance(error, ModuleNotFoundError) and error.name == "vmrt._cnative":
        _UNAVAILABLE = f"vmrt's C extension is not available: {MISSING_C_EXTENSION}"
        # Said here, once per process, because pip shows setup.py's warning only with
        # -v; VMRT_NO_NATIVE=1 (running without it on purpose) keeps it quiet.
        import warnings
        warnings.warn(f"{_UNAVAILABLE} (native llvm-cpu executables and C native modules "
                      "need it; the rest runs in Python; VMRT_NO_NATIVE=1 hides this "
                      "warning)", RuntimeWarning)

#: True when the C helpers are in use.
NATIVE = _lib is not None


def c_extension():
    """(ffi, lib, None) of vmrt._cnative, or (None, None, why not): the one place
    that decides whether vmrt's C code is in use (VMRT_NO_NATIVE=1 turns it off)."""
    return _ffi, _lib, _UNAVAILABLE

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


# -- batched spans -------------------------------------------------------------------------------
# Many (offset, length) ranges in one call: io_parameters gathers and scatters, large
# vm.buffer copies. `spans` is an (n, k) int64 array (numpy, or any C-contiguous buffer of
# int64 such as array('q') holding n*k values), or a sequence of k-tuples. The C path
# checks every span, then works through them with the GIL released (cffi releases it for
# every call); the twin checks the same way first, so both accept, reject and change
# exactly the same bytes.

def _span_array(spans, width: int) -> memoryview:
    """`spans` as a flat memoryview of int64 (n * width values)."""
    try:
        view = memoryview(spans)
    except TypeError:
        view = None
    if view is not None and view.c_contiguous and view.itemsize == 8 and \
            view.format in ("q", "l", "<q", "<l", "=q", "=l"):
        flat = view.cast("B").cast("q")
        if len(flat) % width:
            raise VmrtError(f"span array of {len(flat)} values is not a multiple of {width}",
                            StatusCode.INVALID_ARGUMENT)
        return flat
    from array import array

    items = list(spans)
    flat = array("q")
    try:
        for index, item in enumerate(items):
            if len(item) != width:
                raise VmrtError(f"span {index} has {len(item)} values, expected {width}",
                                StatusCode.INVALID_ARGUMENT)
            flat.extend(item)
    except (TypeError, OverflowError) as error:
        raise VmrtError(f"spans must be {width}-tuples of int64: {error}",
                        StatusCode.INVALID_ARGUMENT) from None
    return memoryview(flat)


def _span_error(index: int, what: str, size: int, offset: int, length: int) -> VmrtError:
    return VmrtError(f"span {index}: {what} range [{offset}, {offset}+{length}) out of bounds "
                     f"of {size} bytes", StatusCode.OUT_OF_RANGE)


def _in_range(offset: int, length: int, size: int) -> bool:
    return 0 <= offset <= size and 0 <= length <= size - offset


def _bad_pair_span(flat, index: int, names, sizes) -> VmrtError:
    a, b, length = flat[3 * index:3 * index + 3]
    if not _in_range(a, length, sizes[0]):
        return _span_error(index, names[0], sizes[0], a, length)
    return _span_error(index, names[1], sizes[1], b, length)


def _first_bad_pair(flat, count: int, size_a: int, size_b: int) -> int:
    for i in range(count):
        a, b, length = flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]
        if not (_in_range(a, length, size_a) and _in_range(b, length, size_b)):
            return i
    return -1


def _pair_spans(spans, a_view, b_view):
    """(flat int64 array, count, (a size, b size)) of spans (a_offset, b_offset, length)."""
    flat = _span_array(spans, 3)
    return flat, len(flat) // 3, (a_view.nbytes, b_view.nbytes)


def copy_spans(target, source, spans) -> None:
    """For each span (target_offset, source_offset, length), in order: copies
    source[source_offset:+length] to target[target_offset:+length] (memmove, so
    target may be source). Any span out of range: OUT_OF_RANGE naming it, and
    nothing is copied."""
    target_view = _writable(target)
    source_view = _bytes_view(source)
    flat, count, sizes = _pair_spans(spans, target_view, source_view)
    if not count:
        return
    if _lib is not None:  # checks every span, then copies
        bad = _lib.vmrt_copy_spans(
            _ffi.from_buffer("uint8_t[]", target_view, require_writable=True), sizes[0],
            _ffi.from_buffer("uint8_t[]", source_view), sizes[1],
            _ffi.from_buffer("int64_t[]", flat), count)
    else:
        bad = _first_bad_pair(flat, count, *sizes)
        for i in range(count if bad < 0 else 0):
            t, s, length = flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]
            if length:
                target_view[t:t + length] = bytes(source_view[s:s + length])
    if bad >= 0:
        raise _bad_pair_span(flat, bad, ("target", "source"), sizes)


def fill_spans(target, spans, pattern: bytes) -> None:
    """For each span (offset, length): fills target[offset:+length] by repeating
    `pattern` (1..16 bytes; each length a multiple of its size). Any bad span:
    an error naming it, and nothing is written."""
    target_view = _writable(target)
    pattern = bytes(pattern)
    if not 1 <= len(pattern) <= MAX_PATTERN_LENGTH:
        raise VmrtError(f"fill pattern of {len(pattern)} bytes (must be 1..16)",
                        StatusCode.INVALID_ARGUMENT)
    flat = _span_array(spans, 2)
    count = len(flat) // 2
    size = target_view.nbytes

    def error(index):
        offset, length = flat[2 * index], flat[2 * index + 1]
        if not _in_range(offset, length, size):
            return _span_error(index, "target", size, offset, length)
        return VmrtError(f"span {index}: fill length {length} is not a multiple of the "
                         f"{len(pattern)}-byte pattern", StatusCode.INVALID_ARGUMENT)

    if _lib is not None:
        if not count:
            return
        bad = _lib.vmrt_fill_spans(
            _ffi.from_buffer("uint8_t[]", target_view, require_writable=True), size,
            _ffi.from_buffer("int64_t[]", flat), count, pattern, len(pattern))
        if bad >= 0:
            raise error(bad)
        return
    for i in range(count):
        offset, length = flat[2 * i], flat[2 * i + 1]
        if not _in_range(offset, length, size) or length % len(pattern):
            raise error(i)
    for i in range(count):
        offset, length = flat[2 * i], flat[2 * i + 1]
        if length:
            target_view[offset:offset + length] = pattern * (length // len(pattern))


def compare_spans(lhs, rhs, spans) -> int:
    """For spans (lhs_offset, rhs_offset, length): the index of the first span
    whose bytes differ, or -1 when all are equal. Any span out of range:
    OUT_OF_RANGE naming it (checked before comparing)."""
    lhs_view = _bytes_view(lhs)
    rhs_view = _bytes_view(rhs)
    flat, count, sizes = _pair_spans(spans, lhs_view, rhs_view)
    if not count:
        return -1
    if _lib is not None:  # checks every span, then compares
        mismatch = _ffi.new("int64_t*")
        bad = _lib.vmrt_compare_spans(
            _ffi.from_buffer("uint8_t[]", lhs_view), sizes[0],
            _ffi.from_buffer("uint8_t[]", rhs_view), sizes[1],
            _ffi.from_buffer("int64_t[]", flat), count, mismatch)
        first_difference = mismatch[0]
    else:
        bad = _first_bad_pair(flat, count, *sizes)
        first_difference = next((i for i in range(count if bad < 0 else 0)
                                 if _differs(lhs_view, rhs_view, *flat[3 * i:3 * i + 3])), -1)
    if bad >= 0:
        raise _bad_pair_span(flat, bad, ("lhs", "rhs"), sizes)
    return first_difference


def _differs(lhs_view, rhs_view, a: int, b: int, length: int) -> bool:
    return lhs_view[a:a + length] != rhs_view[b:b + length]
