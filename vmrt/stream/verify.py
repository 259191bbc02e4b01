"""Checking a plan instead of trusting it: that a favor's waves keep every dependency and
hazard of the program, and that no two live transients share bytes of the slab.

    verify_plan(plan(func, favor))        # raises ScheduleError naming the first breach

The checks start from what each op touches (`FuncAnalysis.accesses`, the program's
meaning) and the values it uses, never from the partitioner's own edge sets or the
packer's live ranges, so a bug in either shows up here:

- every op is in exactly one wave, and each wave lists its ops in program order;
- an op that uses a value another op defines runs in the same wave or a later one;
- two ops touching overlapping bytes of one storage, one of them writing, run in
  strictly ordered waves, in program order (read-after-write, write-after-read,
  write-after-write);
- every transient has a slice; a slice is aligned and inside the slab; two transients
  whose live waves (first to last wave touching them, recomputed here) intersect
  occupy disjoint bytes.
"""

from __future__ import annotations

from vmrt.errors import StatusCode, StreamError
from vmrt.stream.allocation import FuncStats, Plan, plan
from vmrt.stream.analysis import FuncAnalysis
from vmrt.stream.partition import FAVORS, Favor


class ScheduleError(StreamError):
    """A schedule or slab layout that breaks the program's order or overlaps transients."""

    default_code = StatusCode.INTERNAL


def _fail(plan: Plan, message: str):
    func, favor = plan.analysis.func, plan.schedule.favor.value
    raise ScheduleError(f"@{func.name} ({favor}): {message}")


def _op(func, index: int) -> str:
    return f"op {index} ({func.ops[index].describe()})"


def _wave_of(plan: Plan) -> list[int]:
    """Each op's wave, checking that every op is in exactly one wave, in program order."""
    count = len(plan.analysis.func.ops)
    wave_of = [-1] * count
    for number, wave in enumerate(plan.schedule.waves):
        if not wave:
            _fail(plan, f"wave {number} is empty")
        if list(wave) != sorted(wave):
            _fail(plan, f"wave {number} does not list its ops in program order")
        for index in wave:
            if not 0 <= index < count:
                _fail(plan, f"wave {number} names op {index}, which does not exist")
            if wave_of[index] >= 0:
                _fail(plan, f"op {index} is in waves {wave_of[index]} and {number}")
            wave_of[index] = number
    missing = [index for index, wave in enumerate(wave_of) if wave < 0]
    if missing:
        _fail(plan, f"{len(missing)} op(s) in no wave (first: op {missing[0]})")
    return wave_of


def _check_uses(plan: Plan, wave_of: list[int]) -> None:
    func = plan.analysis.func
    for op in func.ops:
        for use in op.operands:
            producer = use.value.op
            if producer is not None and wave_of[producer.index] > wave_of[op.index]:
                _fail(plan, f"{_op(func, op.index)} in wave {wave_of[op.index]} uses "
                            f"%{use.value.name} of {_op(func, producer.index)}, which runs "
                            f"later (wave {wave_of[producer.index]})")


def _check_hazards(plan: Plan, analysis: FuncAnalysis, wave_of: list[int]) -> None:
    func = plan.analysis.func
    by_storage: dict[int, list] = {}
    for index, accesses in enumerate(analysis.accesses):
        for access in accesses:
            by_storage.setdefault(access.storage, []).append((index, access))
    for storage, entries in by_storage.items():
        for position, (i, a) in enumerate(entries):
            for j, b in entries[position + 1:]:
                if i == j or not (a.write or b.write) or not (a.lo < b.hi and b.lo < a.hi):
                    continue
                if wave_of[i] >= wave_of[j]:
                    kind = "write-after-write" if a.write and b.write else (
                        "read-after-write" if a.write else "write-after-read")
                    _fail(plan, f"{kind} hazard on %{analysis.storages[storage].name} "
                                f"[{max(a.lo, b.lo)}, {min(a.hi, b.hi)}): "
                                f"{_op(func, j)} in wave {wave_of[j]} does not run after "
                                f"{_op(func, i)} in wave {wave_of[i]}")


def _check_slab(plan: Plan, analysis: FuncAnalysis, wave_of: list[int]) -> None:
    layout = plan.layout
    slices = {piece.storage: piece for piece in layout.slices}
    touching: dict[int, set[int]] = {}
    for index, accesses in enumerate(analysis.accesses):
        for access in accesses:
            touching.setdefault(access.storage, set()).add(index)
    live: list[tuple[int, int, int, int, str]] = []     # first, last wave, lo, hi, name
    for storage in analysis.transients:
        if storage.id not in touching:
            continue
        piece = slices.get(storage.id)
        if piece is None:
            _fail(plan, f"transient %{storage.name} has no place in the slab")
        if piece.offset < 0 or piece.offset % layout.alignment or \
                piece.aligned_size < storage.size or \
                piece.offset + piece.aligned_size > layout.size:
            _fail(plan, f"transient %{storage.name} at [{piece.offset}, "
                        f"{piece.offset + piece.aligned_size}) is misaligned or outside "
                        f"the {layout.size}-byte slab")
        waves = [wave_of[index] for index in touching[storage.id]]
        live.append((min(waves), max(waves), piece.offset,
                     piece.offset + piece.aligned_size, storage.name))
    live.sort()
    for position, (first, last, lo, hi, name) in enumerate(live):
        for other_first, other_last, other_lo, other_hi, other in live[position + 1:]:
            if other_first > last:
                break       # sorted by first wave: no later one is live with this one
            if lo < other_hi and other_lo < hi:
                _fail(plan, f"transients %{name} (waves {first}-{last}) and %{other} (waves "
                            f"{other_first}-{other_last}) share slab bytes "
                            f"[{max(lo, other_lo)}, {min(hi, other_hi)})")


def verify_plan(plan: Plan) -> None:
    """Raises ScheduleError unless the plan's waves and slab keep the program's meaning."""
    analysis = FuncAnalysis(plan.analysis.func)
    wave_of = _wave_of(plan)
    _check_uses(plan, wave_of)
    _check_hazards(plan, analysis, wave_of)
    _check_slab(plan, analysis, wave_of)


def verified_stats(program, favors=FAVORS) -> dict[str, dict[Favor, FuncStats]]:
    """program_stats, with every function's plan under every favor verified first."""
    out: dict[str, dict[Favor, FuncStats]] = {}
    for func in program.funcs:
        analysis = FuncAnalysis(func)
        per_favor = out.setdefault(func.name, {})
        for favor in favors:
            func_plan = plan(func, favor, analysis)
            verify_plan(func_plan)
            per_favor[Favor(favor)] = func_plan.stats
    return out
