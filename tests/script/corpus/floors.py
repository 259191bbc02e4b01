"""Floor division and modulo on negative numbers, ints and floats; powers; shifts."""


def int_floor(a: int, b: int) -> tuple[int, int]:
    return a // b, a % b


def float_floor(a: float, b: float) -> tuple[float, float]:
    return a // b, a % b


def mixed_floor(a: int, b: float) -> tuple[float, float]:
    return a // b, a % b


def true_div(a: int, b: int) -> float:
    return a / b


def int_pow(a: int, b: int) -> int:
    return a ** b


def shifts(a: int, n: int) -> tuple[int, int]:
    return a << n, a >> n


def bits(a: int, b: int) -> tuple[int, int, int, int]:
    return a & b, a | b, a ^ b, ~a


def to_int(x: float) -> int:
    return int(x)


def extremes(a: int, b: float) -> tuple[float, float, int]:
    return min(a, b), max(a, b, 0.5), abs(a)
