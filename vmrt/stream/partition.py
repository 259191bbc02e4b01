"""Partitioning a function's ops into waves of concurrent work, by favor.

The favors are IREE's (Stream dialect `#stream.partitioning_config`, and the
concurrency partitioner of Stream/Analysis/Partitioning/ReferencePartitioning.cpp):

debug
    No concurrency: every op is a wave of its own, in program order.

min-peak-memory
    Program order is kept. Walking the ops backwards, an op joins the wave formed
    just after it (the most recently formed one) when it has no hazard with that
    wave or anything after it; otherwise it starts a new wave. On top of upstream's
    rule an op only joins when that creates no new overlap between transient live
    ranges: it may not both be the last user of a transient and join a wave that
    creates one (the one way a merge of adjacent ops makes two transients that
    could share memory live at once). So the transient slab stays at debug's size.
    vmrt.stream.allocation then lets refused ops in one by one (`exempt`) where the
    repacked slab stays debug's size.

max-concurrency
    Ops are reordered to extract all the concurrency the dependencies allow:
    walking backwards, each op goes into the latest-executing wave that none of its
    dependents (transitively) occupy, i.e. as late as possible. Independent work
    gathers in shared waves, and values live longer (more memory).

Waves are formed in reverse (ordinal 0 executes last), each op carrying the set of
waves that transitively depend on it, exactly as upstream; they are emitted in
execution order with each wave's ops in program order.

Where the favor comes from: a `partitioning` attribute on the function, else on the
program, else the caller's default (`--partitioning-favor`, max-concurrency).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from vmrt.stream.analysis import FuncAnalysis
from vmrt.stream.ir import Func, Loc, Program, enum_member


class Favor(str, enum.Enum):
    DEBUG = "debug"
    MIN_PEAK_MEMORY = "min-peak-memory"
    MAX_CONCURRENCY = "max-concurrency"


#: the default when neither the function nor the program says (--partitioning-favor).
DEFAULT_FAVOR = Favor.MAX_CONCURRENCY
FAVORS = (Favor.DEBUG, Favor.MIN_PEAK_MEMORY, Favor.MAX_CONCURRENCY)


def parse_favor(value, loc: Loc | None = None) -> Favor:
    return enum_member(Favor, value, "partitioning favor", loc)


def resolve_favor(program: Program | None, func: Func,
                  default: Favor | str = DEFAULT_FAVOR) -> Favor:
    """The function's `partitioning` attribute wins, then the program's, then `default`."""
    if "partitioning" in func.attributes:
        return parse_favor(func.attributes["partitioning"], func.loc)
    if program is not None and "partitioning" in program.attributes:
        return parse_favor(program.attributes["partitioning"], program.loc)
    return parse_favor(default)


@dataclass
class Schedule:
    """Waves in execution order; each wave lists op indices in program order."""

    func: Func
    favor: Favor
    waves: list[list[int]]
    wave_of: list[int] = field(default_factory=list)
    #: min-peak-memory: ops kept out of a wave by the transient rule, in visit order.
    blocked: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.wave_of:
            self.wave_of = [-1] * len(self.func.ops)
            for number, wave in enumerate(self.waves):
                for index in wave:
                    self.wave_of[index] = number

    @property
    def order(self) -> list[int]:
        """The ops flattened in execution order."""
        return [index for wave in self.waves for index in wave]


def partition(func: Func, favor: Favor | str, analysis: FuncAnalysis | None = None,
              exempt: frozenset[int] = frozenset()) -> Schedule:
    """The favor's waves. min-peak-memory lets the ops in `exempt` join a wave despite
    the transient rule (vmrt.stream.allocation tries them against the slab)."""
    favor = parse_favor(favor)
    n = len(func.ops)
    if favor is Favor.DEBUG:
        return Schedule(func, favor, [[i] for i in range(n)])
    analysis = analysis or FuncAnalysis(func)
    deaths = analysis.transient_deaths()
    births = analysis.transient_births()

    builders: list[list[int]] = []        # ordinal 0 executes last
    builder_births: list[bool] = []       # does the wave create a transient?
    membership = [-1] * n
    hazards = [0] * n                     # bit w: wave w transitively depends on the op
    blocked: list[int] = []
    for i in reversed(range(n)):
        dependents = 0
        for j in analysis.successors[i]:
            if j in analysis.hazards[i]:
                # A hazard with the user: it may not share the user's wave.
                dependents |= 1 << membership[j]
            # Always inherit what the user must precede.
            dependents |= hazards[j]
        count = len(builders)
        candidates = ((1 << count) - 1) & ~dependents
        chosen = -1
        if candidates:
            if favor is Favor.MAX_CONCURRENCY:
                chosen = (candidates & -candidates).bit_length() - 1   # lowest: latest wave
            else:
                chosen = candidates.bit_length() - 1                   # highest: newest wave
                if deaths[i] and builder_births[chosen] and i not in exempt:
                    blocked.append(i)
                    chosen = -1   # would make a dying transient overlap a newborn one
        if chosen >= 0:
            builders[chosen].append(i)
            builder_births[chosen] = builder_births[chosen] or bool(births[i])
            membership[i] = chosen
            hazards[i] = (dependents | ((1 << chosen) - 1)) & ~(1 << chosen)
        else:
            membership[i] = count
            hazards[i] = (1 << count) - 1
            builders.append([i])
            builder_births.append(bool(births[i]))
    waves = [sorted(ops) for ops in reversed(builders)]
    return Schedule(func, favor, waves, blocked=blocked)


def earliest_waves(func: Func, analysis: FuncAnalysis | None = None) -> Schedule:
    """max-concurrency's other extreme: every op in the earliest wave it may run in (a
    user in its producer's wave, one after a hazard), i.e. as soon as possible. It has
    as few waves as the as-late-as-possible partition (both are the longest chain of
    hazards) but other live ranges; vmrt.stream.allocation keeps the better of the two."""
    analysis = analysis or FuncAnalysis(func)
    level = [0] * len(func.ops)
    for i in range(len(func.ops)):
        for j in analysis.successors[i]:
            level[j] = max(level[j], level[i] + (1 if j in analysis.hazards[i] else 0))
    waves: list[list[int]] = [[] for _ in range(max(level, default=-1) + 1)]
    for index, number in enumerate(level):
        waves[number].append(index)
    return Schedule(func, Favor.MAX_CONCURRENCY, waves)
