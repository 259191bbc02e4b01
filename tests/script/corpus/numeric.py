"""Numeric loops: a xorshift generator, gcd, collatz, primes, integer square roots."""

MASK32 = 0xFFFFFFFF


def xorshift32(seed: int, rounds: int) -> int:
    x = seed
    total = 0
    for _ in range(rounds):
        x ^= (x << 13) & MASK32
        x ^= x >> 17
        x ^= (x << 5) & MASK32
        total = (total + x) % 1000003
    return total


def gcd(a: int, b: int) -> int:
    while b != 0:
        a, b = b, a % b
    return a


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def count_primes(limit: int) -> int:
    count = 0
    for n in range(2, limit):
        d = 2
        prime = True
        while d * d <= n:
            if n % d == 0:
                prime = False
                break
            d += 1
        if prime:
            count += 1
    return count


def isqrt(n: int) -> int:
    if n < 2:
        return n
    x = n
    y = (x + 1) // 2
    while y < x:
        x = y
        y = (x + n // x) // 2
    return x


def countdown(start: int, stop: int, step: int) -> tuple[int, int]:
    total = 0
    last = -1
    for i in range(start, stop, step):
        total += i
        last = i
    return total, last


def float_series(n: int) -> float:
    total = 0.0
    sign = 1.0
    for k in range(n):
        total += sign / (2 * k + 1)
        sign = -sign
    return 4.0 * total


def mandelbrot(size: int, limit: int) -> int:
    inside = 0
    for py in range(size):
        for px in range(size):
            cr = 3.0 * px / size - 2.0
            ci = 2.0 * py / size - 1.0
            zr = 0.0
            zi = 0.0
            n = 0
            while n < limit and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            if n == limit:
                inside += 1
    return inside


def chained(a: int, b: int, c: int) -> tuple[bool, bool, int]:
    return a < b < c, a == b or not c, (a and b) or c


def mixed(a: int, b: float, flag: bool) -> tuple[float, int, float]:
    x = a + b
    y = a + flag
    z = a / 4 + (b if flag else -b)
    return x, y, z


def truthiness(a: int, b: float) -> tuple[bool, bool, int]:
    return bool(a), bool(b), int(bool(a)) + 2 * int(bool(b))
