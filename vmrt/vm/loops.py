"""The cycles of a function's control-flow graph that vmrt/vm/codegen.py emits as
Python loops: short simple cycles, each from the block code enters it at, those
nested in others first."""

from __future__ import annotations

#: The longest cycle (in blocks) emitted as a Python loop (see codegen's
#: MAX_LOOP_INSTRUCTIONS for why loops stay short).
MAX_LOOP_BLOCKS = 4


def simple_cycles(successors: list[set[int]]) -> list[tuple[int, ...]]:
    """Each cycle of up to MAX_LOOP_BLOCKS blocks (once, from its lowest block) in
    which every block continues in the next or out of the cycle, the last in the
    first; only through blocks of at most two successors (so that the search stays
    short whatever the branch tables)."""
    cycles = []
    for start in range(len(successors)):
        paths = [(start,)]
        while paths:
            path = paths.pop()
            following = successors[path[-1]]
            if len(following) > 2:
                continue
            if start in following and all(successors[b] & set(path) <= {path[(k + 1) % len(path)]}
                                          for k, b in enumerate(path)):
                cycles.append(path)
            if len(path) < MAX_LOOP_BLOCKS:
                paths.extend(path + (b,) for b in following if b > start and b not in path)
    return cycles


def entered_at(cycle: tuple[int, ...], predecessors: list[set[int]]) -> tuple[int, ...]:
    """`cycle` from its first block that a block outside it branches to."""
    for position, block in enumerate(cycle):
        if predecessors[block] - set(cycle):
            return cycle[position:] + cycle[:position]
    return cycle


def inner_first(cycles: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """`cycles` (each from its entry), those nested in others first, then the shorter:
    a cycle through the first block of another, not through all of its blocks, holds
    it, so comes after it."""
    depths: dict[int, int] = {}

    def depth(i: int, seen: frozenset) -> int:
        if i not in depths:
            held = [j for j, other in enumerate(cycles) if j not in seen and j != i
                    and other[0] in cycles[i] and not set(other) <= set(cycles[i])]
            depths[i] = 1 + max((depth(j, seen | {i}) for j in held), default=0)
        return depths[i]
    order = sorted(range(len(cycles)), key=lambda i: (depth(i, frozenset()), len(cycles[i]),
                                                      cycles[i]))
    return [cycles[i] for i in order]
