"""Byte buffers: a sieve, a checksum, negative indexes."""


def sieve(limit: int) -> int:
    composite = bytearray(limit)
    count = 0
    for n in range(2, limit):
        if composite[n] == 0:
            count += 1
            for m in range(n * n, limit, n):
                composite[m] = 1
    return count


def fill_and_sum(n: int) -> int:
    data = bytearray(n)
    for i in range(n):
        data[i] = (i * 7 + 3) % 256
    data[-1] = 255
    data[0] += 1
    total = 0
    for i in range(len(data)):
        total = total * 31 + data[i]
        total %= 1000000007
    return total


def last_byte(n: int) -> int:
    data = bytearray(n)
    data[n - 1] = 42
    return data[-1] + len(data)


def get(n: int, index: int) -> int:
    data = bytearray(n)
    return data[index]


def put(n: int, value: int) -> int:
    data = bytearray(n)
    data[0] = value
    return data[0]


def grow(step: int) -> int:
    kept: list[int] = []
    while True:
        chunk = bytearray(step)
        kept.append(len(chunk))
