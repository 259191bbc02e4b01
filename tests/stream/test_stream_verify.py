"""The schedule verifier (vmrt.stream.verify): it passes every plan vmrt makes, and it
catches a schedule or slab that breaks the program, judged against the independent
hazard reference of test_stream_properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stream_properties import programs, reference_hazard

from vmrt.stream import Favor, load_program, plan
from vmrt.stream.allocation import live_ranges, pack
from vmrt.stream.partition import Schedule
from vmrt.stream.verify import ScheduleError, verified_stats, verify_plan

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlp_train_step.stream"
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _replanned(original, waves):
    """The plan with other waves, and a slab packed for them (as the packer would)."""
    schedule = Schedule(original.schedule.func, original.schedule.favor, waves)
    layout = pack(live_ranges(original.analysis, schedule))
    return type(original)(original.analysis, schedule, layout)


def _reference_valid(func, waves) -> bool:
    wave_of = {index: number for number, wave in enumerate(waves) for index in wave}
    for j, op in enumerate(func.ops):
        for use in op.operands:
            if use.value.op is not None and wave_of[use.value.op.index] > wave_of[j]:
                return False
        for i in range(j):
            if reference_hazard(func.ops[i], op) and wave_of[i] >= wave_of[j]:
                return False
    return True


@SETTINGS
@given(programs())
def test_every_plan_vmrt_makes_passes(program):
    for favor in Favor:
        verify_plan(plan(program.funcs[0], favor))


@SETTINGS
@given(programs(), st.data())
def test_a_moved_op_fails_exactly_when_it_breaks_an_order(program, data):
    func = program.funcs[0]
    if not func.ops:
        return
    original = plan(func, data.draw(st.sampled_from(list(Favor))))
    waves = [list(wave) for wave in original.schedule.waves]
    moved = data.draw(st.integers(0, len(func.ops) - 1))
    for wave in waves:
        if moved in wave:
            wave.remove(moved)
    target = data.draw(st.integers(0, len(waves)))
    if target == len(waves):
        waves.append([moved])
    else:
        waves[target] = sorted(waves[target] + [moved])
    waves = [wave for wave in waves if wave]
    candidate = _replanned(original, waves)
    if _reference_valid(func, waves):
        verify_plan(candidate)
    else:
        with pytest.raises(ScheduleError):
            verify_plan(candidate)


@pytest.fixture(scope="module")
def example_plan():
    program = load_program(EXAMPLE)
    return plan(program.funcs[-1], Favor.MAX_CONCURRENCY)


def test_an_op_before_its_producer_is_named(example_plan):
    waves = [list(wave) for wave in example_plan.schedule.waves]
    last = waves.pop()
    waves.insert(0, last)           # the last wave's ops now run first
    with pytest.raises(ScheduleError, match=r"runs later|hazard") as failure:
        verify_plan(_replanned(example_plan, waves))
    assert failure.value.code.name == "INTERNAL"
    assert f"@{example_plan.analysis.func.name} (max-concurrency)" in str(failure.value)


def test_a_missing_or_repeated_op_is_named(example_plan):
    waves = [list(wave) for wave in example_plan.schedule.waves]
    with pytest.raises(ScheduleError, match=r"in no wave"):
        verify_plan(_replanned(example_plan, waves[:-1]))
    with pytest.raises(ScheduleError, match=r"is in waves 0 and"):
        verify_plan(_replanned(example_plan,
                                [waves[0]] + [sorted(waves[0] + waves[1])] + waves[2:]))


def test_live_transients_sharing_bytes_are_named(example_plan):
    layout = example_plan.layout
    first, second = next((a, b) for a in layout.slices for b in layout.slices
                         if a is not b and a.intersects(b))
    saved = second.offset
    second.offset = first.offset
    try:
        with pytest.raises(ScheduleError, match=r"share slab bytes"):
            verify_plan(example_plan)
    finally:
        second.offset = saved
    verify_plan(example_plan)


def test_verified_stats_covers_every_function_and_favor():
    program = load_program(EXAMPLE)
    stats = verified_stats(program)
    assert set(stats) == {func.name for func in program.funcs}
    assert all(set(per_favor) == set(Favor) for per_favor in stats.values())
