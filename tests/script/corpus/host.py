"""Host imports: functions of a native module the host provides (tests/script/
test_host.py defines it: `host.scale`, `host.record`, `host.checksum`)."""

import host
from host import record


def scaled_sum(n: int) -> int:
    total = 0
    for i in range(n):
        total += host.scale(i)
    return total


def log_values(n: int) -> int:
    for i in range(n):
        record(i * i)
    return n


def checksum_of(n: int) -> int:
    data = bytearray(n)
    for i in range(n):
        data[i] = i % 251
    return host.checksum(data)


def halves(x: float) -> float:
    return host.half(x) + host.half(x)
