"""Lines and scalars of vmasm text, read the way iree-as-module reads them.

vmasm is line oriented: comments (`//` or `#` outside a string) and a leading
`[XXXXXXXX]` bytecode offset (as `--bytecode-offsets` prints) are dropped,
then each line is one directive, label or instruction. Numbers follow C's
strtol/strtoul with base 0 (so `0x10` is 16 and `010` is 8), floats C's
strtof/strtod (hex floats, `inf`, `nan`; values out of range are errors,
subnormal ones are kept).
"""

from __future__ import annotations

import ctypes
import math
import re
import struct

_INT_RE = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def strip_line(raw: str) -> tuple[str, int]:
    """(content, column offset of content in raw): comments and offset prefix removed."""
    text = raw
    if "//" in text or "#" in text:
        text = _cut_comment(text)
    stripped = text.lstrip()
    offset = len(text) - len(stripped)
    if stripped.startswith("["):
        close = stripped.find("]")
        if close >= 0:
            rest = stripped[close + 1:]
            rest_stripped = rest.lstrip()
            offset += close + 1 + (len(rest) - len(rest_stripped))
            stripped = rest_stripped
    return stripped.rstrip(), offset


def _cut_comment(line: str) -> str:
    if '"' not in line:
        cut = len(line)
        i = line.find("#")
        if i >= 0:
            cut = i
        j = line.find("//")
        if 0 <= j < cut:
            cut = j
        return line[:cut]
    in_string = False
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == '"':
            in_string = not in_string
        elif not in_string:
            if c == "#" or (c == "/" and i + 1 < n and line[i + 1] == "/"):
                return line[:i]
        i += 1
    return line


def parse_c_integer(text: str) -> int | None:
    """The integer a base-0 strtol reads from the whole of `text`, or None."""
    m = _INT_RE.fullmatch(text.rstrip())
    if m is None:
        return None
    sign, digits = m.groups()
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif digits.startswith("0") and len(digits) > 1:
        value = int(digits[1:], 8)
    else:
        value = int(digits)
    return -value if sign == "-" else value


def parse_int32(text: str) -> int | None:
    """iree_string_view_atoi_int32: a C long (64-bit) truncated to 32 bits."""
    value = parse_c_integer(text)
    if value is None or not -(1 << 63) <= value < (1 << 63):
        return None
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def parse_int64(text: str) -> int | None:
    value = parse_c_integer(text)
    if value is None or not -(1 << 63) <= value < (1 << 63):
        return None
    return value


def parse_uint32(text: str) -> int | None:
    """iree_string_view_atoi_uint32: a C unsigned long truncated to 32 bits."""
    value = parse_c_integer(text)
    if value is None or not -(1 << 64) < value < (1 << 64):
        return None
    return value & 0xFFFFFFFF


# -- floats: the C library's own strtof/strtod when reachable ------------------

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _strtof = _libc.strtof
    _strtof.restype = ctypes.c_float
    _strtof.argtypes = (ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p))
    _strtod = _libc.strtod
    _strtod.restype = ctypes.c_double
    _strtod.argtypes = (ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p))
except (OSError, AttributeError):  # pragma: no cover - no C library reachable
    _strtof = _strtod = None

ERANGE = 34


def _c_float(function, text: str) -> float | None:
    data = text.encode("ascii", "replace")
    if not data or len(data) >= 64:
        return None
    buffer = ctypes.create_string_buffer(data)
    end = ctypes.c_char_p()
    ctypes.set_errno(0)
    value = function(buffer, ctypes.byref(end))
    errno = ctypes.get_errno()
    consumed = ctypes.cast(end, ctypes.c_void_p).value - ctypes.addressof(buffer)
    if consumed == 0 or consumed != len(data):
        return None
    if errno == ERANGE and (value == 0.0 or math.isinf(value)):
        # Overflow, or underflow to zero. (C also flags subnormal results, which
        # iree-as-module then rejects; vmrt keeps them: the disassembler prints
        # them and they must assemble back.)
        return None
    return value


def _py_float(text: str, single: bool) -> float | None:  # pragma: no cover - fallback
    try:
        value = float.fromhex(text) if "0x" in text.lower() else float(text)
    except ValueError:
        return None
    if single:
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            return None
    if math.isinf(value) and "inf" not in text.lower():
        return None
    return value


def parse_f32(text: str) -> float | None:
    text = text.strip()
    if _strtof is not None:
        return _c_float(_strtof, text)
    return _py_float(text, True)  # pragma: no cover


def parse_f64(text: str) -> float | None:
    text = text.strip()
    if _strtod is not None:
        return _c_float(_strtod, text)
    return _py_float(text, False)  # pragma: no cover
