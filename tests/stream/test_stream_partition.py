"""Favors, hazards, tied operands and transient packing on small hand-written programs.

The first cases are the scenarios of IREE's schedule_concurrency.mlir test
(favor=min-peak-memory, favor=max-concurrency, tied operands kept apart), written
in vmrt's stream form; the expected waves follow what those scenarios describe.
"""

import pytest

from vmrt.stream import (DEFAULT_FAVOR, Favor, FuncAnalysis, ProgramBuilder, StreamError,
                         pack, parse_favor, parse_program, partition, plan, resolve_favor)
from vmrt.stream.allocation import Slice

UPSTREAM_SHAPE = """
program @p {
  func @f(%arg0: external<20>, %arg1: external<80>) -> (external<20>) {
    %1 = splat 255 : i32 -> transient<1280>
    %2 = dispatch @ex::@dispatch_0(%1, %arg1) -> %1
    %3 = splat 255 : i32 -> transient<20>
    %4 = dispatch @ex::@dispatch_1(%arg0, %3) -> %3
    %5 = dispatch @ex::@dispatch_2(%2, %4) -> external<20>
    return %5
  }
}
"""


def waves_by_name(schedule):
    func = schedule.func
    return [[",".join(v.name for v in func.ops[i].results) for i in wave]
            for wave in schedule.waves]


def test_debug_is_one_op_per_wave_in_order():
    func = parse_program(UPSTREAM_SHAPE).funcs[0]
    assert waves_by_name(partition(func, "debug")) == [["1"], ["2"], ["3"], ["4"], ["5"]]


def test_min_peak_memory_keeps_program_order():
    func = parse_program(UPSTREAM_SHAPE).funcs[0]
    # The splat of %3 only runs beside the dispatch before it; nothing is reordered.
    assert waves_by_name(partition(func, "min-peak-memory")) == [
        ["1"], ["2", "3"], ["4"], ["5"]]


def test_max_concurrency_reorders():
    func = parse_program(UPSTREAM_SHAPE).funcs[0]
    # Both splats together, then both independent dispatches, then the join.
    assert waves_by_name(partition(func, "max-concurrency")) == [
        ["1", "3"], ["2", "4"], ["5"]]


def test_tied_operand_read_before_in_place_update_is_kept_apart():
    program = parse_program("""
    program @p {
      func @f(%arg0: external<4>) -> (external<4>, external<4>) {
        %1 = dispatch @ex::@dispatch_0(%arg0) -> external<4>
        %2 = dispatch @ex::@dispatch_1(%arg0) -> %arg0
        return %1, %2
      }
    }""")
    for favor in Favor:
        assert waves_by_name(partition(program.funcs[0], favor)) == [["1"], ["2"]], favor


def test_disjoint_in_place_updates_share_a_wave():
    program = parse_program("""
    program @p {
      func @f(%b: external<128>) -> (external<128>) {
        %b1 = fill 0 : i32 -> %b[0 for 64]
        %b2 = fill 1 : i32 -> %b1[64 for 64]
        %b3 = fill 2 : i32 -> %b2[32 for 64]
        return %b3
      }
    }""")
    func = program.funcs[0]
    analysis = FuncAnalysis(func)
    assert not analysis.has_hazard(0, 1)
    assert analysis.has_hazard(0, 2) and analysis.has_hazard(1, 2)
    for favor in ("min-peak-memory", "max-concurrency"):
        assert waves_by_name(partition(func, favor)) == [["b1", "b2"], ["b3"]]


def test_read_after_write_write_after_read_write_after_write():
    program = parse_program("""
    program @p {
      func @f(%x: external<64>, %y: external<64>) -> (external<64>, external<64>) {
        %r = dispatch @k::@read(%x) -> transient<64>
        %x1 = copy %y -> %x
        %y1 = fill 0 : i8 -> %y
        %s = dispatch @k::@sink(%r, %x1) -> external<64>
        return %s, %y1
      }
    }""")
    func = program.funcs[0]
    a = FuncAnalysis(func)
    assert a.has_hazard(0, 1)        # WAR on %x
    assert a.has_hazard(1, 2)        # copy reads %y, fill writes it: WAR
    assert a.has_hazard(1, 3) and a.has_hazard(0, 3)   # RAW
    assert not a.has_hazard(0, 2)
    for favor in Favor:
        s = partition(func, favor)
        assert s.wave_of[0] < s.wave_of[1] < s.wave_of[2]
        assert s.wave_of[1] < s.wave_of[3]


def test_min_peak_memory_does_not_overlap_a_dying_transient_with_a_newborn_one():
    # %a dies at op 1; op 2 creates %c. Merging ops 1 and 2 would make %a and %c live
    # at once (they can share bytes in program order), so min-peak keeps them apart.
    program = parse_program("""
    program @p {
      func @f(%x: external<1024>) -> (external<1024>, external<1024>) {
        %a = dispatch @k::@f(%x) -> transient<1024>
        %b = dispatch @k::@g(%a) -> external<1024>
        %c = dispatch @k::@h(%x) -> transient<1024>
        %d = dispatch @k::@i(%c) -> external<1024>
        return %b, %d
      }
    }""")
    func = program.funcs[0]
    debug = plan(func, "debug")
    low = plan(func, "min-peak-memory")
    high = plan(func, "max-concurrency")
    assert debug.stats.transient_bytes == 1024
    assert waves_by_name(low.schedule) == [["a"], ["b"], ["c"], ["d"]]
    assert low.stats.transient_bytes == 1024
    assert waves_by_name(high.schedule) == [["a", "c"], ["b", "d"]]
    assert high.stats.transient_bytes == 2048
    assert high.stats.concurrent_dispatches == 4 and high.stats.widest_wave == 2


def test_favor_resolution_function_wins_then_program_then_default():
    text = """
    program @p attributes {partitioning = "debug"} {
      func @a() attributes {partitioning = "min-peak-memory"} { return }
      func @b() { return }
    }"""
    program = parse_program(text)
    assert resolve_favor(program, program.func("a")) is Favor.MIN_PEAK_MEMORY
    assert resolve_favor(program, program.func("b"), "max-concurrency") is Favor.DEBUG
    bare = parse_program("program @q { func @c() { return } }")
    assert resolve_favor(bare, bare.func("c")) is DEFAULT_FAVOR is Favor.MAX_CONCURRENCY
    assert resolve_favor(bare, bare.func("c"), "debug") is Favor.DEBUG
    with pytest.raises(StreamError):
        parse_favor("fastest")


def test_empty_function():
    func = parse_program("program @q { func @c() { return } }").funcs[0]
    for favor in Favor:
        result = plan(func, favor)
        assert result.schedule.waves == []
        assert result.stats.transient_bytes == 0 and result.stats.widest_wave == 0


def make_slice(storage, size, start, end, pos=None):
    pos = storage if pos is None else pos
    return Slice(storage, f"t{storage}", size, (size + 63) // 64 * 64, start, end, pos, pos)


def test_pack_reuses_dead_space_and_aligns():
    slices = [make_slice(0, 100, 0, 1), make_slice(1, 10, 1, 2), make_slice(2, 64, 2, 3)]
    layout = pack(slices)
    offsets = {s.storage: s.offset for s in layout.slices}
    assert offsets[0] == 0 and offsets[1] == 128    # 100 -> 128 bytes, overlaps slice 1
    assert offsets[2] == 0                          # slice 0 is dead by wave 2
    assert layout.size == 192
    assert all(s.offset % 64 == 0 for s in layout.slices)


def test_pack_takes_the_smallest_gap_that_fits():
    slices = [make_slice(0, 256, 0, 1),    # @0, dies at wave 1
              make_slice(1, 64, 0, 9),     # @256
              make_slice(2, 128, 0, 1),    # @320, dies at wave 1
              make_slice(3, 64, 0, 9),     # @448
              make_slice(4, 128, 2, 9)]    # gaps [0, 256) and [320, 448): takes the smaller
    layout = pack(slices)
    offsets = {s.storage: s.offset for s in layout.slices}
    assert offsets == {0: 0, 1: 256, 2: 320, 3: 448, 4: 320}
    assert layout.size == 512


def test_builder_errors_without_locations():
    pb = ProgramBuilder("p")
    f = pb.func("f", args=[("x", "external", 16)])
    x = f.args[0]
    f.fill((0, "i32"), x)
    with pytest.raises(StreamError, match="used after it was updated in place"):
        f.dispatch("k", [x], [("transient", 4)])
    with pytest.raises(StreamError, match="unknown lifetime 'heap'"):
        f.splat((0, "i8"), "heap", 4)
    other = pb.func("g", args=[("y", "external", 4)])
    with pytest.raises(StreamError, match="belongs to @g"):
        f.dispatch("k", [other.args[0]])
    with pytest.raises(StreamError, match="no return"):
        pb.func("h", results=[("external", 4)])
        pb.build()


GAP_AFTER_A_BIG_TRANSIENT = """
program @p {
  func @f(%x: external<64>) -> (external<64>) {
    %big = dispatch @ex::@grow(%x) -> transient<4096>
    %s = dispatch @ex::@shrink(%big) -> transient<64>
    %a = dispatch @ex::@next(%s) -> transient<64>
    %c = dispatch @ex::@side(%x) -> transient<64>
    %y = dispatch @ex::@join(%a, %c) -> external<64>
    return %y
  }
}
"""


def test_min_peak_memory_takes_a_merge_that_fits_in_the_slab():
    # %a's op ends %s and would share a wave creating %c: the transient rule alone
    # refuses, yet %c fits in the bytes %big left free, so the slab stays debug's.
    func = parse_program(GAP_AFTER_A_BIG_TRANSIENT).funcs[0]
    strict = partition(func, Favor.MIN_PEAK_MEMORY)
    assert waves_by_name(strict) == [["big"], ["s"], ["a"], ["c"], ["y"]]
    low, debug = plan(func, Favor.MIN_PEAK_MEMORY), plan(func, Favor.DEBUG)
    assert waves_by_name(low.schedule) == [["big"], ["s"], ["a", "c"], ["y"]]
    assert low.stats.transient_bytes == debug.stats.transient_bytes == 4096 + 64
    assert low.stats.concurrent_dispatches == 2


EARLY_SIDE_USER = """
program @p {
  func @f(%x: external<64>) -> (external<64>, external<64>) {
    %t = dispatch @ex::@a(%x) -> transient<4096>
    %u = dispatch @ex::@b(%t) -> transient<1024>
    %v = dispatch @ex::@c(%u) -> transient<1024>
    %y = dispatch @ex::@d(%v) -> external<64>
    %z = dispatch @ex::@side(%t) -> external<64>
    return %y, %z
  }
}
"""


def test_max_concurrency_runs_ops_early_when_that_packs_smaller():
    # As late as possible (upstream), @side joins the last wave and keeps the 4 KiB %t
    # alive beside %u and %v; as soon as possible it runs beside @b and %t dies there.
    func = parse_program(EARLY_SIDE_USER).funcs[0]
    latest = partition(func, Favor.MAX_CONCURRENCY)
    assert waves_by_name(latest) == [["t"], ["u"], ["v"], ["y", "z"]]
    high = plan(func, Favor.MAX_CONCURRENCY)
    assert waves_by_name(high.schedule) == [["t"], ["u", "z"], ["v"], ["y"]]
    assert high.stats.transient_bytes == 4096 + 1024
    assert high.stats.concurrent_dispatches == 2 and high.stats.waves == 4


def test_plan_names_an_unknown_favor():
    func = parse_program(UPSTREAM_SHAPE).funcs[0]
    with pytest.raises(StreamError, match="partitioning favor"):
        plan(func, "fastest")
