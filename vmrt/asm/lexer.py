"""Lines and scalars of vmasm text, read the way iree-as-module reads them.

vmasm is line oriented: comments (`//` or `#` outside a string) and a leading
`[XXXXXXXX]` bytecode offset (as `--bytecode-offsets` prints) are dropped,
then each line is one directive, label or instruction. Numbers follow C's
strtol/strtoul with base 0 (so `0x10` is 16 and `010` is 8), floats C's
strtof/strtod (hex floats, `inf`, `nan`; values out of range are errors,
subnormal ones are kept).
"""

from __future__ import annotations

from vmrt.elements import parse_c_float, parse_c_integer


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


# -- floats ---------------------------------------------------------------------
#: Float literals this long or longer are refused.
_MAX_FLOAT_TEXT = 64


def parse_f32(text: str) -> float | None:
    """strtof of the whole (stripped) text; overflow and underflow to zero fail,
    subnormal values are kept: the disassembler prints them and they must
    assemble back."""
    return parse_c_float(text, 32) if len(text.strip()) < _MAX_FLOAT_TEXT else None


def parse_f64(text: str) -> float | None:
    """strtod of the whole (stripped) text, as parse_f32."""
    return parse_c_float(text, 64) if len(text.strip()) < _MAX_FLOAT_TEXT else None
