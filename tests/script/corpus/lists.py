"""Lists of numbers: building, appending, sorting, prefix sums, negative indexes."""


def insertion_sort_checksum(n: int, seed: int) -> int:
    xs: list[int] = []
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        xs.append(x % 1000)
    for i in range(1, len(xs)):
        key = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > key:
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = key
    total = 0
    for i in range(len(xs)):
        total = (total * 7 + xs[i]) % 1000003
    return total


def prefix_sums(n: int) -> float:
    values = [0.5] * n
    for i in range(1, n):
        values[i] = values[i - 1] + i / 2
    return values[-1]


def literal(k: int) -> int:
    xs = [3, 1, 4, 1, 5, 9, 2, 6]
    return xs[k] + xs[-k - 1] + len(xs)


def fill_in(values: list[float], scale: float) -> float:
    total = 0.0
    for i in range(len(values)):
        values[i] *= scale
        total += values[i]
    return total


def use_fill(n: int) -> float:
    values = [1.5] * n
    return fill_in(values, 2.0) + values[0]


def make(n: int) -> list[int]:
    xs = [7] * n
    xs.append(n)
    return xs


def at(n: int, index: int) -> int:
    xs = [1] * n
    return xs[index]
