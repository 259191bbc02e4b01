"""Helpers the compiler adds to a module when a script needs them, written in the
script subset itself (with three intrinsics only the prelude may call)."""

SOURCE = '''
def __vmrt_int_pow(base: int, exponent: int) -> int:
    result = 1
    while exponent > 0:
        if exponent & 1:
            result *= base
        base *= base
        exponent >>= 1
    return result


def __vmrt_float_divmod(a: float, b: float) -> tuple[float, float]:
    # CPython's float_divmod (Objects/floatobject.c), for // and % of floats.
    mod = __fmod(a, b)
    div = (a - mod) / b
    if mod != 0.0:
        if (b < 0.0) != (mod < 0.0):
            mod += b
            div -= 1.0
    else:
        mod = __copysign(0.0, b)
    if div != 0.0:
        floordiv = __floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
    else:
        floordiv = __copysign(0.0, a / b)
    return floordiv, mod
'''
