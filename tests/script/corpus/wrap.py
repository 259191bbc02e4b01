"""Wrap-around at 64 bits: CPython's ints grow, the module's wrap (two's complement)."""


def factorial(n: int) -> int:
    result = 1
    for k in range(2, n + 1):
        result *= k
    return result


def lcg(seed: int, rounds: int) -> int:
    x = seed
    for _ in range(rounds):
        x = x * 6364136223846793005 + 1442695040888963407
    return x


def shift_out(a: int) -> int:
    return a << 40


def big_range(start: int, stop: int, step: int) -> int:
    count = 0
    for _ in range(start, stop, step):
        count += 1
    return count
