"""Property tests over random stream programs (hypothesis).

For every favor, any schedule produced
- holds every op exactly once;
- is a valid topological order: an op using another's result never runs before it,
  and two ops with a read/write hazard (overlapping ranges of one storage, one of
  them writing; tied results write their operand's range) run in strictly ordered
  waves, in program order;
- never gives two transients overlapping bytes while both are live;
and min-peak-memory keeps program order and at most debug's slab size (in no more
waves than its transient rule alone), debug runs one op
per wave, max-concurrency uses the fewest waves the dependencies allow.

The hazard reference here is written independently of vmrt.stream.analysis.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vmrt.stream import (Favor, ProgramBuilder, format_program, parse_program, partition,
                         plan)

SIZES = (16, 32, 64, 96, 128, 256)
LIFETIMES_NEW = ("transient", "transient", "transient", "external", "parameter")


def draw_range(data, value):
    size = value.type.size
    if data.draw(st.booleans()):
        return value
    units = size // 4
    offset = data.draw(st.integers(0, units - 1))
    length = data.draw(st.integers(1, units - offset))
    return (value, offset * 4, length * 4)


@st.composite
def programs(draw):
    data = draw(st.data())
    pb = ProgramBuilder("random")
    arg_specs = [(f"a{i}", data.draw(st.sampled_from(("external", "parameter", "constant"))),
                  data.draw(st.sampled_from(SIZES)))
                 for i in range(data.draw(st.integers(0, 3)))]
    f = pb.func("f", arg_specs)
    live = list(f.args)

    def pick(writable=False):
        pool = [v for v in live if not writable or v.type.lifetime.value != "constant"]
        return data.draw(st.sampled_from(pool)) if pool else None

    def retire(old, new):
        live.remove(old)
        live.append(new)

    for _ in range(data.draw(st.integers(1, 22))):
        kind = data.draw(st.sampled_from(("splat", "fill", "copy", "dispatch", "dispatch",
                                          "dispatch", "param.load", "param.gather")))
        if kind == "splat" or not live:
            live.append(f.splat((0, "i32"), data.draw(st.sampled_from(LIFETIMES_NEW)),
                                data.draw(st.sampled_from(SIZES))))
        elif kind == "fill":
            target = pick(writable=True)
            if target is None:
                continue
            spec = draw_range(data, target)
            if isinstance(spec, tuple):
                result = f.fill((1, "i32"), target, spec[1], spec[2])
            else:
                result = f.fill((1, "i32"), target)
            retire(target, result)
        elif kind == "copy":
            source = pick()
            target = pick(writable=True)
            if target is None or target is source:
                continue
            length = min(source.type.size, target.type.size) // 4
            length = data.draw(st.integers(1, length)) * 4
            s_off = data.draw(st.integers(0, (source.type.size - length) // 4)) * 4
            t_off = data.draw(st.integers(0, (target.type.size - length) // 4)) * 4
            result = f.copy(source, target, source_offset=s_off, target_offset=t_off,
                            length=length)
            retire(target, result)
        elif kind == "dispatch":
            count = data.draw(st.integers(0, min(3, len(live))))
            operands = data.draw(st.lists(st.sampled_from(live), min_size=count,
                                          max_size=count, unique_by=id))
            uses = [draw_range(data, v) for v in operands]
            results = []
            tied = []
            for _ in range(data.draw(st.integers(0, 2))):
                tie_pool = [v for v in operands if v.type.lifetime.value != "constant"
                            and v not in tied]
                if tie_pool and data.draw(st.booleans()):
                    value = data.draw(st.sampled_from(tie_pool))
                    tied.append(value)
                    results.append(value)
                else:
                    results.append((data.draw(st.sampled_from(LIFETIMES_NEW)),
                                    data.draw(st.sampled_from(SIZES))))
            outs = f.dispatch(f"ex::k{len(f.func.ops)}", uses, results)
            for spec, out in zip(results, outs):
                if spec in tied:
                    retire(spec, out)
                else:
                    live.append(out)
        elif kind == "param.load":
            live.append(f.param_load("scope", f"k{len(f.func.ops)}",
                                     data.draw(st.sampled_from(("constant", "parameter",
                                                                "transient"))),
                                     data.draw(st.sampled_from(SIZES))))
        else:
            target = pick(writable=True)
            if target is None:
                continue
            half = target.type.size // 2
            entries = [("k0", target, 0, half)]
            if data.draw(st.booleans()):
                entries.append(("k1", target, half, target.type.size - half))
            retire(target, f.param_gather("scope", entries))
    f.ret()
    return pb.build()


# -- an independent reference for storages, accesses and hazards ---------------------------
def storage_root(value):
    while value.op is not None and value.op.ties[value.index] is not None:
        value = value.op.operands[value.op.ties[value.index]].value
    return value


def reference_accesses(op):
    """(root value, lo, hi, writes) per touched range."""
    out = []
    for position, use in enumerate(op.operands):
        root = storage_root(use.value)
        tied = position in op.ties
        if op.kind in ("fill", "param.gather") or (op.kind == "copy" and position == 1):
            out.append((root, use.offset, use.end, True))
        else:
            out.append((root, use.offset, use.end, op.kind == "dispatch" and tied))
    for result, tie in zip(op.results, op.ties):
        if tie is None:
            out.append((result, 0, result.type.size, True))
    return out


def reference_hazard(a, b):
    for root_a, lo_a, hi_a, w_a in reference_accesses(a):
        for root_b, lo_b, hi_b, w_b in reference_accesses(b):
            if root_a is root_b and lo_a < hi_b and lo_b < hi_a and (w_a or w_b):
                return True
    return False


def longest_path_waves(func):
    """Fewest waves possible: the longest chain of hazards (SSA-only edges are free)."""
    ops = func.ops
    level = [0] * len(ops)
    for j, op in enumerate(ops):
        for i in range(j):
            if reference_hazard(ops[i], op):
                level[j] = max(level[j], level[i] + 1)
            elif any(use.value.op is ops[i] for use in op.operands):
                level[j] = max(level[j], level[i])
    return max(level) + 1 if ops else 0


SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(programs())
def test_every_schedule_is_valid(program):
    func = program.funcs[0]
    ops = func.ops
    n = len(ops)
    plans = {favor: plan(func, favor) for favor in Favor}
    for favor, result in plans.items():
        schedule = result.schedule
        order = schedule.order
        # Every op exactly once.
        assert sorted(order) == list(range(n)), favor
        position = {index: pos for pos, index in enumerate(order)}
        for j, op in enumerate(ops):
            for use in op.operands:
                producer = use.value.op
                if producer is not None:
                    # SSA: the producer runs no later (and earlier in the flat order).
                    assert schedule.wave_of[producer.index] <= schedule.wave_of[j], favor
                    assert position[producer.index] < position[j], favor
            for i in range(j):
                if reference_hazard(ops[i], op):
                    assert schedule.wave_of[i] < schedule.wave_of[j], (favor, i, j)
        # Within a wave, ops are listed in program order.
        for wave in schedule.waves:
            assert wave == sorted(wave) and wave
        # Transients never share bytes while both are live.
        slices = result.layout.slices
        transient_count = len({id(storage_root(v)) for op in ops for v in op.results
                               if v.type.lifetime.value == "transient"})
        assert len(slices) == transient_count
        for s in slices:
            assert s.offset % 64 == 0 and s.offset + s.aligned_size <= result.layout.size
            assert s.aligned_size >= s.size
        for a_index, a in enumerate(slices):
            for b in slices[a_index + 1:]:
                if a.start_wave <= b.end_wave and b.start_wave <= a.end_wave:
                    assert (a.offset + a.aligned_size <= b.offset
                            or b.offset + b.aligned_size <= a.offset), (favor, a, b)
        # The slab holds at least the most bytes live at once.
        assert result.layout.size >= result.stats.live_transient_peak

    debug = plans[Favor.DEBUG]
    low = plans[Favor.MIN_PEAK_MEMORY]
    high = plans[Favor.MAX_CONCURRENCY]
    assert debug.schedule.waves == [[i] for i in range(n)]
    assert debug.stats.concurrent_dispatches == 0
    # min-peak-memory: program order, no more than debug's slab (greedy packing may
    # do better on other waves), in no more waves than the partitioner's transient
    # rule alone gives (which keeps debug's live overlaps, hence its slab exactly).
    assert low.schedule.order == list(range(n))
    assert low.stats.transient_bytes <= debug.stats.transient_bytes
    strict = partition(func, Favor.MIN_PEAK_MEMORY)
    assert low.stats.waves <= len(strict.waves)
    if low.stats.waves == len(strict.waves):
        assert low.schedule.waves == strict.waves
    # max-concurrency: all the concurrency the dependencies allow.
    assert high.stats.waves == longest_path_waves(func)
    assert high.stats.waves <= low.stats.waves <= debug.stats.waves


@SETTINGS
@given(programs())
def test_text_round_trip(program):
    text = format_program(program)
    again = parse_program(text)
    assert format_program(again) == text
    for favor in Favor:
        assert (plan(again.funcs[0], favor).schedule.waves
                == plan(program.funcs[0], favor).schedule.waves)
