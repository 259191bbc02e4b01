"""Scripts run under vmrt.Limits as any module: a runaway loop stops by fuel and by
timeout, unbounded allocation at max_memory, deep recursion at max_depth; the
context stays usable after each."""

from __future__ import annotations

import pytest

import vmrt
import vmrt.script

from script_helpers import corpus_source

RUNAWAY = """
def spin(n: int) -> int:
    while True:
        n = (n * 31 + 7) % 1000003
    return n


def recurse(n: int) -> int:
    return recurse(n + 1) + 1


def ok(n: int) -> int:
    return n + 1
"""


def load(source: str, tier: str, **limits):
    return vmrt.load(vmrt.script.compile(source, filename="runaway.py"), tier=tier,
                     limits=vmrt.Limits(**limits))


def test_runaway_loop_stops_by_fuel(tier):
    module = load(RUNAWAY, tier, fuel=100_000)
    with pytest.raises(vmrt.FuelExhausted) as info:
        module.spin(1)
    assert info.value.stack[0].startswith("script.spin+")
    module.context.refuel(1_000)
    assert module.ok(1) == 2


def test_runaway_loop_stops_by_timeout(tier):
    module = load(RUNAWAY, tier, timeout=0.2)
    with pytest.raises(vmrt.DeadlineExceeded):
        module.spin(1)
    assert module.ok(2) == 3


def test_unbounded_allocation_stops_at_max_memory(tier):
    data = vmrt.script.compile(corpus_source("buffers"), filename="buffers.py")
    module = vmrt.load(data, tier=tier, limits=vmrt.Limits(max_memory=1 << 20, timeout=30))
    with pytest.raises(vmrt.MemoryLimitExceeded):
        module.grow(16)
    assert module.context.memory_in_use <= 1 << 20
    assert module.last_byte(3) == 45


def test_runaway_recursion_stops_at_max_depth(tier):
    module = load(RUNAWAY, tier, max_depth=200)
    with pytest.raises(vmrt.DepthExceeded):
        module.recurse(0)
    assert module.ok(3) == 4
