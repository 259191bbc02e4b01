"""Calling-convention strings (`0ii_r`, `0rIiCiD_v`): parsing into fragments.

The string is a version character ('0'), the argument types, '_', the result
types. Types: i (i32), I (i64), f (f32), F (f64), r (ref), v (void); a span
C...D repeats its contents a variadic number of times (imports only).
"""

from __future__ import annotations

from vmrt.errors import StatusCode, VmrtError

VOID, I32, I64, F32, F64, REF, SPAN_START, SPAN_END = "v", "i", "I", "f", "F", "r", "C", "D"
SCALAR_TYPES = frozenset("iIfFr")
ALL_TYPES = frozenset("viIfFrCD")


class CConvError(VmrtError):
    default_code = StatusCode.INVALID_ARGUMENT


def split_fragments(cconv: str | None) -> tuple[str, str]:
    """(arguments, results) of a cconv string; 'v' fragments become empty.

    An absent or empty string means `() -> ()` as upstream treats it.
    """
    if not cconv:
        return "", ""
    if cconv[0] != "0":
        raise CConvError(f"unsupported cconv version {cconv[0]!r}", StatusCode.UNIMPLEMENTED)
    body = cconv[1:]
    arguments, sep, results = body.partition("_")
    if arguments == "v":
        arguments = ""
    if results == "v":
        results = ""
    return arguments, results


def check_well_formed(cconv: str | None) -> None:
    """Raises CConvError unless every character is a known type and spans nest."""
    arguments, results = split_fragments(cconv)
    for fragment in (arguments, results):
        depth = 0
        for ch in fragment:
            if ch not in ALL_TYPES:
                raise CConvError(f"unsupported cconv fragment char {ch!r} in {cconv!r}")
            if ch == SPAN_START:
                depth += 1
                if depth > 1:
                    raise CConvError(f"nested spans are not supported in {cconv!r}")
            elif ch == SPAN_END:
                depth -= 1
                if depth < 0:
                    raise CConvError(f"unbalanced span end in {cconv!r}")
        if depth:
            raise CConvError(f"unterminated span in {cconv!r}")


def count_registers(fragment: str) -> tuple[int, int]:
    """(i32 registers, ref registers) a non-variadic fragment occupies in a frame.

    i64/f64 values take an aligned pair, padding one i32 register when needed.
    """
    i32_count = ref_count = 0
    for ch in fragment:
        if ch in "if":
            i32_count += 1
        elif ch in "IF":
            i32_count += (i32_count & 1) + 2
        elif ch == "r":
            ref_count += 1
        elif ch == "v":
            continue
        elif ch == "C":
            raise CConvError("internal functions cannot accept variadic arguments")
        else:
            raise CConvError(f"unsupported cconv fragment char {ch!r}")
    return i32_count, ref_count
