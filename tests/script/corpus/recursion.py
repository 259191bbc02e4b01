"""Recursion: fib, ackermann, mutual recursion, a recursive power."""


def fib(n: int) -> int:
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def ackermann(m: int, n: int) -> int:
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


def is_even(n: int) -> bool:
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n: int) -> bool:
    if n == 0:
        return False
    return is_even(n - 1)


def power(base: float, exponent: int) -> float:
    if exponent == 0:
        return 1.0
    half = power(base, exponent // 2)
    if exponent % 2:
        return half * half * base
    return half * half


def divmod_pair(a: int, b: int) -> tuple[int, int]:
    return a // b, a % b


def sum_of_divmods(a: int, b: int) -> int:
    q, r = divmod_pair(a, b)
    return q * b + r
