"""Transient allocation: every transient packed into one slab by live range, and stats.

A transient is live from the wave that creates it through the last wave that
touches it (inclusive: every op of a wave may run at any time during the wave).
Two transients whose wave intervals intersect may not share bytes.

Packing is IREE's static slice layout (Stream/Transforms/LayoutSlices.cpp, greedy
strip packing as in TFLite's simple memory arena): slices are taken in ascending
order of their interval (here positions in the flattened schedule, which makes
the order the same for any two schedules that keep program order), each placed in
the smallest gap between already placed slices whose lifetimes intersect its own,
or above all of them; offsets and sizes aligned to 64 bytes (upstream's default
`--iree-stream-resource-min-offset-alignment`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vmrt.stream.analysis import FuncAnalysis
from vmrt.stream.ir import Func, Program
from vmrt.stream.partition import (FAVORS, Favor, Schedule, earliest_waves, parse_favor,
                                   partition)

ALIGNMENT = 64


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass
class Slice:
    storage: int
    name: str
    size: int
    aligned_size: int
    start_wave: int
    end_wave: int
    start_pos: int
    end_pos: int
    offset: int = -1

    def intersects(self, other: "Slice") -> bool:
        return self.start_wave <= other.end_wave and other.start_wave <= self.end_wave


@dataclass
class SlabLayout:
    slices: list[Slice]
    size: int
    alignment: int


def live_ranges(analysis: FuncAnalysis, schedule: Schedule,
                alignment: int = ALIGNMENT) -> list[Slice]:
    position = [0] * len(schedule.func.ops)
    for pos, index in enumerate(schedule.order):
        position[index] = pos
    slices = []
    for storage in analysis.transients:
        touching = analysis.touching[storage.id]
        waves = [schedule.wave_of[i] for i in touching]
        positions = [position[i] for i in touching]
        slices.append(Slice(storage.id, storage.name, storage.size,
                            align(storage.size, alignment), min(waves), max(waves),
                            min(positions), max(positions)))
    return slices


def pack(slices: list[Slice], alignment: int = ALIGNMENT) -> SlabLayout:
    placed: list[Slice] = []            # sorted by offset
    high_water = 0
    for piece in sorted(slices, key=lambda s: (s.start_pos, s.end_pos, s.storage)):
        best_offset = None
        best_gap = None
        cursor = 0
        start, end = piece.start_wave, piece.end_wave
        for other in placed:
            if other.start_wave > end or start > other.end_wave:    # not live together
                continue
            candidate = align(cursor, alignment)
            gap = other.offset - candidate
            if candidate + piece.aligned_size <= other.offset and (
                    best_gap is None or gap < best_gap):
                best_offset, best_gap = candidate, gap
            cursor = max(cursor, other.offset + other.aligned_size)
        if best_offset is None:
            best_offset = align(cursor, alignment)
        piece.offset = best_offset
        at = 0
        while at < len(placed) and placed[at].offset < piece.offset:
            at += 1
        placed.insert(at, piece)
        high_water = max(high_water, piece.offset + piece.aligned_size)
    return SlabLayout(slices, align(high_water, alignment), alignment)


@dataclass
class FuncStats:
    function: str
    favor: Favor
    ops: int
    dispatches: int
    #: size of the packed transient slab.
    transient_bytes: int
    #: the most transient bytes live in one wave (a lower bound for the slab).
    live_transient_peak: int
    waves: int
    #: dispatches that share their wave with at least one other op.
    concurrent_dispatches: int
    #: the most ops in one wave.
    widest_wave: int

    ROWS = (("transient bytes", "transient_bytes"),
            ("live transient peak", "live_transient_peak"),
            ("waves", "waves"),
            ("concurrent dispatches", "concurrent_dispatches"),
            ("widest wave", "widest_wave"))

    def as_dict(self) -> dict:
        return {"function": self.function, "favor": self.favor.value, "ops": self.ops,
                "dispatches": self.dispatches, "transient_bytes": self.transient_bytes,
                "live_transient_peak": self.live_transient_peak, "waves": self.waves,
                "concurrent_dispatches": self.concurrent_dispatches,
                "widest_wave": self.widest_wave}


@dataclass
class Plan:
    """A function scheduled under one favor, with its transient slab."""

    analysis: FuncAnalysis
    schedule: Schedule
    layout: SlabLayout

    @property
    def stats(self) -> FuncStats:
        func = self.analysis.func
        waves = self.schedule.waves
        concurrent = sum(1 for wave in waves if len(wave) > 1
                         for i in wave if func.ops[i].is_dispatch)
        live_peak = 0
        for number in range(len(waves)):
            live = sum(s.aligned_size for s in self.layout.slices
                       if s.start_wave <= number <= s.end_wave)
            live_peak = max(live_peak, live)
        return FuncStats(func.name, self.schedule.favor, len(func.ops), func.dispatch_count,
                         self.layout.size, live_peak, len(waves), concurrent,
                         max((len(w) for w in waves), default=0))


def _packed(analysis: FuncAnalysis, schedule: Schedule, alignment: int) -> Plan:
    return Plan(analysis, schedule, pack(live_ranges(analysis, schedule, alignment),
                                         alignment))


class _MergeTrials:
    """min-peak-memory's trials: refused ops let in (exempt from the transient rule)
    while the repacked slab stays within the budget and the waves get fewer."""

    def __init__(self, func: Func, analysis: FuncAnalysis, alignment: int):
        self.func, self.analysis, self.alignment = func, analysis, alignment
        self.exempt: frozenset[int] = frozenset()
        self.best = self.packed(self.exempt)
        self.budget = self.best.layout.size

    def packed(self, exempt: frozenset[int]) -> Plan:
        return _packed(self.analysis, partition(self.func, Favor.MIN_PEAK_MEMORY,
                                                self.analysis, exempt), self.alignment)

    def attempt(self, group: list[int]) -> bool:
        """Lets `group` in together if the result fits and has fewer waves."""
        trial = self.packed(self.exempt | frozenset(group))
        if trial.layout.size <= self.budget and \
                len(trial.schedule.waves) < len(self.best.schedule.waves):
            self.best, self.exempt = trial, self.exempt | frozenset(group)
            return True
        return False


def _min_peak_memory_plan(func: Func, analysis: FuncAnalysis, alignment: int) -> Plan:
    """min-peak-memory with the merges its transient rule refused where the slab allows
    them: the rule keeps debug's slab by never letting a dying transient share a wave
    with a newborn one, which also refuses merges whose overlap fits in the slab's
    gaps. The refused ops are let in on trial, all together first and, when that does
    not fit, half by half down to single ops (so a function where most merges fit
    takes few repackings); a trial is kept when the repacked slab is no larger and the
    waves fewer. Each op is settled once: let in, or refused on its own."""
    trials = _MergeTrials(func, analysis, alignment)
    settled: set[int] = set()
    while True:
        pending = [i for i in trials.best.schedule.blocked if i not in settled]
        if not pending:
            return trials.best
        groups = [pending]
        while groups:
            blocked = set(trials.best.schedule.blocked)
            group = [i for i in groups.pop() if i in blocked and i not in settled]
            if not group:
                continue
            if trials.attempt(group) or len(group) == 1:
                settled.update(group)
                continue
            half = len(group) // 2
            groups += [group[half:], group[:half]]      # the first half is tried first


def _max_concurrency_plan(func: Func, analysis: FuncAnalysis, alignment: int) -> Plan:
    """max-concurrency as upstream (every op as late as possible), unless running every
    op as soon as possible gives as many concurrent dispatches in a smaller slab (both
    have the fewest waves the hazards allow)."""
    latest = _packed(analysis, partition(func, Favor.MAX_CONCURRENCY, analysis), alignment)
    earliest = _packed(analysis, earliest_waves(func, analysis), alignment)
    if earliest.layout.size < latest.layout.size and \
            earliest.stats.concurrent_dispatches >= latest.stats.concurrent_dispatches:
        return earliest
    return latest


def plan(func: Func, favor: Favor | str, analysis: FuncAnalysis | None = None,
         alignment: int = ALIGNMENT) -> Plan:
    favor = parse_favor(favor)
    analysis = analysis or FuncAnalysis(func)
    if favor is Favor.MIN_PEAK_MEMORY:
        return _min_peak_memory_plan(func, analysis, alignment)
    if favor is Favor.MAX_CONCURRENCY:
        return _max_concurrency_plan(func, analysis, alignment)
    return _packed(analysis, partition(func, favor, analysis), alignment)


def program_stats(program: Program, favors=FAVORS) -> dict[str, dict[Favor, FuncStats]]:
    """Per function, per favor: the stats."""
    out: dict[str, dict[Favor, FuncStats]] = {}
    for func in program.funcs:
        analysis = FuncAnalysis(func)
        out[func.name] = {Favor(f): plan(func, f, analysis).stats for f in favors}
    return out
