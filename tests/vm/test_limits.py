"""Context limits: fuel (exact per block, deterministic, refuelable), call depth,
memory, deadlines and cancellation; each failure leaves the context usable."""

import gc
import sys
import threading
import time

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.errors import StatusCode, VMError
from vmrt.vm.limits import MAX_SUPPORTED_DEPTH, Limits

# Instruction counts in the tests below are counted from this text.
SOURCE = """
vm.module @lim version 0
vm.type i32
vm.type !vm.buffer
vm.type !vm.list<i32>
vm.import @host.tick cconv "0i_i"
vm.global.i32 private mutable @count

vm.export @count_up
vm.func @count_up(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i3
  vm.global.store.i32 %i1, @count
  %i2 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i2, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

vm.export @get_count
vm.func @get_count() -> (i32) {
^bb0:
  %i0 = vm.global.load.i32 @count
  vm.return %i0
}

vm.func @plus_one(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 1
  %i0 = vm.add.i32 %i0, %i1
  vm.return %i0
}

vm.export @call_up
vm.func @call_up(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  vm.br ^bb1()
^bb1:
  %i1 = vm.call @plus_one(%i1)
  %i2 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i2, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

vm.export @two_block_loop
vm.func @two_block_loop(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %i1 = vm.add.i32 %i1, %i3
  vm.br ^bb2()
^bb2:
  %i2 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i2, ^bb1(), ^bb3()
^bb3:
  vm.return %i1
}

vm.export @depth
vm.func @depth(%i0: i32) -> (i32) {
^bb0:
  vm.cond_br %i0, ^bb1(), ^bb2()
^bb1:
  %i1 = vm.const.i32 1
  %i2 = vm.sub.i32 %i0, %i1
  %i2 = vm.call @depth(%i2)
  %i2 = vm.add.i32 %i2, %i1
  vm.return %i2
^bb2:
  vm.return %i0
}

vm.export @spin
vm.func @spin() -> () {
^bb0:
  vm.br ^bb0()
}

vm.export @spin_two_blocks
vm.func @spin_two_blocks() -> () {
^bb0:
  vm.br ^bb1()
^bb1:
  vm.br ^bb0()
}

vm.export @tick_forever
vm.func @tick_forever() -> () {
^bb0:
  %i0 = vm.const.i32.zero
  vm.br ^bb1()
^bb1:
  %i0 = vm.call @host.tick(%i0)
  vm.br ^bb1()
}

vm.export @alloc
vm.func @alloc(%i0: i32) -> (!vm.buffer) {
^bb0:
  %i2:3 = vm.ext.i32.i64.s %i0
  %i4 = vm.const.i32 16
  %r0 = vm.buffer.alloc %i2:3, %i4
  vm.return %r0
}

// n buffers of 1000 bytes, each dropped before the next.
vm.export @alloc_many
vm.func @alloc_many(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i2:3 = vm.const.i64 1000
  %i4 = vm.const.i32 16
  %i5 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
  %r0 = vm.buffer.alloc %i2:3, %i4
  vm.discard.refs %r0
  %i1 = vm.add.i32 %i1, %i5
  %i6 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i6, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

vm.export @list_of
vm.func @list_of(%i0: i32) -> (!vm.list<i32>) {
^bb0:
  %i1 = vm.const.i32.zero
  %r0 = vm.list.alloc %i1 : !vm.list<i32>
  vm.list.resize %r0, %i0
  vm.return %r0
}
"""


class Host(vmrt.NativeModule, name="host", version=0):
    def __init__(self, on_tick=None):
        self.ticks = 0
        self.on_tick = on_tick

    @vmrt.export("0i_i")
    def tick(self, x):
        self.ticks += 1
        if self.on_tick is not None:
            self.on_tick(self.ticks)
        return x + 1


@pytest.fixture(scope="module")
def module():
    return vmrt.load_module(assemble(SOURCE))


def context(module, host=None, **limits):
    return vmrt.Context(vmrt.Instance(), modules=[host or Host(), module], limits=Limits(**limits))


def fuel_used(module, name, *args):
    ctx = context(module, fuel=10**9)
    result = ctx.function(f"lim.{name}")(*args)
    return result, 10**9 - ctx.fuel_remaining


# -- fuel ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, per_iteration, fixed", [
    ("count_up", 4, 3 + 1),        # batched self-loop
    ("call_up", 3 + 3, 2 + 1),     # self-loop calling a straight-line function (3 instrs)
    ("two_block_loop", 2 + 2, 3 + 1),
])
def test_fuel_counts_each_executed_instruction(module, name, per_iteration, fixed):
    for n in (1, 7, 1000, 100_000):
        result, used = fuel_used(module, name, n)
        assert result == n
        assert used == fixed + per_iteration * n


def test_recursion_and_straight_line_exports_are_charged(module):
    # depth(n): n frames of 1 + 5 instructions, and the last frame's 1 + 1.
    assert fuel_used(module, "depth", 10) == (10, 6 * 10 + 2)
    assert fuel_used(module, "get_count") == (0, 2)


@pytest.mark.parametrize("name", ["count_up", "call_up", "two_block_loop"])
def test_fuel_exhaustion_is_exact_and_refuel_resumes(module, name):
    _, needed = fuel_used(module, name, 500)
    ctx = context(module, fuel=needed)
    assert ctx.function(f"lim.{name}")(500) == 500
    assert ctx.fuel_remaining == 0
    ctx = context(module, fuel=needed - 1)
    with pytest.raises(VMError) as info:
        ctx.function(f"lim.{name}")(500)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert f"lim.{name}" in str(info.value)
    # The block that could not be paid for did not run, and its fuel is left.
    assert 0 <= ctx.fuel_remaining < 7
    ctx.refuel(needed)
    assert ctx.function(f"lim.{name}")(500) == 500


def test_exhaustion_point_is_deterministic(module):
    points = set()
    for _ in range(3):
        ctx = context(module, fuel=12_345)
        with pytest.raises(VMError):
            ctx.function("lim.count_up")(10**6)
        ctx.refuel(10)
        points.add(ctx.function("lim.get_count")())
    # 3 in the entry block, then 4 per iteration: the global holds the iterations run.
    assert points == {(12_345 - 3) // 4}


def test_fuel_is_shared_by_a_host_reentering_the_context(module):
    calls = []

    def reenter(ticks):
        if ticks < 5:
            calls.append(ctx.function("lim.count_up")(10))
        else:
            raise VMError("stop", StatusCode.ABORTED)
    ctx = context(module, host=Host(reenter), fuel=10**6)
    with pytest.raises(VMError):
        ctx.function("lim.tick_forever")()
    assert calls == [10] * 4
    # tick_forever: 2 + 2 (first iteration) per tick, 5 ticks; count_up(10): 44 each.
    assert 10**6 - ctx.fuel_remaining == 2 + 2 * 5 + 4 * 44


# -- depth -----------------------------------------------------------------------------------------
def test_depth_limit_counts_frames(module):
    ctx = context(module, max_depth=50)
    assert ctx.function("lim.depth")(49) == 49   # 50 frames
    with pytest.raises(VMError) as info:
        ctx.function("lim.depth")(50)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert "depth" in str(info.value)
    assert ctx.function("lim.depth")(49) == 49


def test_depth_limit_has_a_safe_maximum(module):
    with pytest.raises(VMError) as info:
        Limits(max_depth=MAX_SUPPORTED_DEPTH + 1)
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    ctx = context(module, max_depth=MAX_SUPPORTED_DEPTH)
    assert ctx.function("lim.depth")(MAX_SUPPORTED_DEPTH - 1) == MAX_SUPPORTED_DEPTH - 1
    with pytest.raises(VMError) as info:
        ctx.function("lim.depth")(10 * MAX_SUPPORTED_DEPTH)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED


YIELDING_RECURSION = """
vm.module @gen version 0
vm.type i32
vm.export @down
vm.func @down(%i0: i32) -> (i32) {
^bb0:
  vm.cond_br %i0, ^bb1(), ^bb3()
^bb1:
  %i1 = vm.const.i32 1
  %i2 = vm.sub.i32 %i0, %i1
  vm.call.yieldable @down(%i2) -> ^bb2(%i3)
^bb2:
  %i3 = vm.add.i32 %i3, %i1
  vm.return %i3
^bb3:
  vm.yield ^bb4()
^bb4:
  vm.return %i0
}
"""


def test_deep_yielding_recursion_fails_cleanly_on_a_thread():
    # Generator frames use the C stack: the depth cap must stop them before it overflows.
    try:
        module = vmrt.load_module(assemble(YIELDING_RECURSION))
    except VMError as error:  # pragma: no cover - depends on the assembler's syntax
        pytest.skip(f"yieldable recursion does not assemble: {error}")
    outcome = []

    def run():
        ctx = vmrt.Context(modules=[module], limits=Limits(max_depth=MAX_SUPPORTED_DEPTH))
        fn = ctx.function("gen.down")
        outcome.append(fn(100))
        try:
            fn(10**6)
        except VMError as error:
            outcome.append(error.code)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert outcome == [100, StatusCode.RESOURCE_EXHAUSTED]


# -- deadline and cancellation ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["spin", "spin_two_blocks", "tick_forever"])
def test_timeout_interrupts_endless_code(module, name):
    ctx = context(module, timeout=0.05)
    with pytest.raises(VMError) as info:
        ctx.function(f"lim.{name}")()
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    assert ctx.function("lim.count_up")(10) == 10  # each call has its own timeout


def test_absolute_deadline(module):
    ctx = context(module)
    ctx.set_deadline(time.monotonic() + 0.05)
    with pytest.raises(VMError) as info:
        ctx.function("lim.spin")()
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    with pytest.raises(VMError) as info:  # passed: later calls fail at once
        ctx.function("lim.get_count")()
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    ctx.set_deadline(None)
    assert ctx.function("lim.count_up")(10) == 10


def test_slow_imports_do_not_delay_the_deadline(module):
    # Each import takes 5 ms: the slice of fuel between checks shrinks to match.
    ctx = context(module, host=Host(lambda ticks: time.sleep(0.005)), timeout=0.2)
    with pytest.raises(VMError) as info:
        ctx.function("lim.tick_forever")()
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    assert ctx.function("lim.count_up")(10) == 10


@pytest.mark.parametrize("name", ["spin", "tick_forever"])
def test_cancel_from_another_thread(module, name):
    started = threading.Event()
    host = Host(lambda ticks: started.set())
    ctx = context(module, host=host)
    canceller = threading.Thread(target=lambda: (started.wait(5), time.sleep(0.01),
                                                 ctx.cancel()))
    canceller.start()
    if name == "spin":
        started.set()
    with pytest.raises(VMError) as info:
        ctx.function(f"lim.{name}")()
    canceller.join()
    assert info.value.code == StatusCode.CANCELLED
    with pytest.raises(VMError) as info:  # sticky until cleared
        ctx.function("lim.get_count")()
    assert info.value.code == StatusCode.CANCELLED
    ctx.clear_cancel()
    assert ctx.function("lim.count_up")(10) == 10


# -- memory --------------------------------------------------------------------------------------
def test_memory_counted_from_many_threads_adds_up():
    """Charges and releases from four threads switching every microsecond leave the
    exact count (the counter is under a lock)."""
    from vmrt.vm.limits import Meter

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    meter = Meter(Limits(max_memory=10**12), 100)

    def work():
        for _ in range(20_000):
            meter.charge_memory(3)
            hold = meter.hold(5)
            meter.release_memory(1)
            del hold
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert meter.memory_in_use == 4 * 20_000 * 2
    with pytest.raises(VMError) as info:  # (and a refused charge counts nothing)
        meter.charge_memory(10**12)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert meter.memory_in_use == 4 * 20_000 * 2


def test_buffer_memory_is_charged_while_alive(module):
    ctx = context(module, max_memory=10_000)
    buffer = ctx.function("lim.alloc")(4000)
    assert ctx.memory_in_use == 4000
    with pytest.raises(VMError) as info:
        ctx.function("lim.alloc")(7000)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert ctx.memory_in_use == 4000
    del buffer
    assert ctx.memory_in_use == 0
    assert len(ctx.function("lim.alloc")(7000)) == 7000
    # Buffers dropped inside the VM give their bytes back at once.
    assert ctx.function("lim.alloc_many")(100) == 100
    assert ctx.memory_in_use == 0


def test_huge_buffer_is_refused_before_allocating(module):
    ctx = context(module, max_memory=1 << 20)
    with pytest.raises(VMError) as info:
        ctx.function("lim.alloc")(2**31 - 1)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED


def test_list_capacity_is_charged(module):
    ctx = context(module, max_memory=100_000)
    small = ctx.function("lim.list_of")(100)
    charged = ctx.memory_in_use
    assert charged >= 100 * 4
    with pytest.raises(VMError) as info:
        ctx.function("lim.list_of")(1_000_000)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert ctx.memory_in_use == charged
    del small
    gc.collect()
    assert ctx.memory_in_use == 0


HAL_PROGRAM = """
vm.module @halmem version 0
vm.type !hal.device
vm.type !hal.allocator
vm.type !hal.buffer
vm.import @hal.devices.get cconv "0i_r"
vm.import @hal.device.allocator cconv "0r_r"
vm.import @hal.allocator.allocate cconv "0rIiiI_r"
vm.export @allocate
vm.func @allocate(%i0: i32) -> (!hal.buffer) {
^bb0:
  %i1 = vm.const.i32.zero
  %r0 = vm.call @hal.devices.get(%i1)
  %r1 = vm.call @hal.device.allocator(%r0)
  %i2:3 = vm.const.i64 -1
  %i4 = vm.const.i32 48
  %i5 = vm.const.i32 3075
  %i6:7 = vm.ext.i32.i64.s %i0
  %r2 = vm.call @hal.allocator.allocate(%r1, %i2:3, %i4, %i5, %i6:7)
  vm.return %r2
}
"""


def test_hal_allocations_are_charged():
    from vmrt.modules.hal import HalModule
    module = vmrt.load_module(assemble(HAL_PROGRAM))
    ctx = vmrt.Context(modules=[HalModule(host_arrays=False), module],
                       limits=Limits(max_memory=10_000))
    buffer = ctx.function("halmem.allocate")(6000)
    assert ctx.memory_in_use == 6000
    with pytest.raises(VMError) as info:
        ctx.function("halmem.allocate")(6000)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    del buffer
    gc.collect()  # a HAL buffer refers to itself: the collector frees it
    assert ctx.memory_in_use == 0
    ctx.function("halmem.allocate")(6000)


def test_contexts_without_limits_refuse_limit_calls(module):
    ctx = vmrt.Context(modules=[Host(), module])
    assert ctx.limits is None and ctx.fuel_remaining is None and ctx.memory_in_use == 0
    with pytest.raises(VMError) as info:
        ctx.cancel()
    assert info.value.code == StatusCode.FAILED_PRECONDITION


# -- issue 15: what a failed call held, NaN limits, one context on two threads -------------------
HOSTILE = """
vm.module @hostile version 0
vm.type i32
vm.type !vm.buffer
vm.type !vm.opaque
vm.type !vm.list<!vm.opaque>

vm.export @hold_then_spin
vm.func @hold_then_spin(%i0: i32) -> () {
^bb0:
  %i2:3 = vm.ext.i32.i64.s %i0
  %i4 = vm.const.i32 16
  %r0 = vm.buffer.alloc %i2:3, %i4
  vm.br ^bb1()
^bb1:
  vm.br ^bb1()
}

// A list holding a buffer of %i0 bytes and itself, dropped on return.
vm.export @self_list
vm.func @self_list(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 2
  %i5 = vm.const.i32.zero
  %i6 = vm.const.i32 1
  %r0 = vm.list.alloc %i1 : !vm.list<!vm.opaque>
  vm.list.resize %r0, %i1
  %i2:3 = vm.ext.i32.i64.s %i0
  %i4 = vm.const.i32 16
  %r1 = vm.buffer.alloc %i2:3, %i4
  vm.list.set.ref %r0, %i5, %r1
  vm.list.set.ref %r0, %i6, %r0
  vm.return %i5
}

vm.export @spin
vm.func @spin() -> () {
^bb0:
  vm.br ^bb0()
}

vm.export @short
vm.func @short(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 1
  %i0 = vm.add.i32 %i0, %i1
  vm.cond_br %i0, ^bb1(), ^bb1()
^bb1:
  vm.return %i0
}
"""


@pytest.fixture(scope="module")
def hostile():
    return vmrt.load_module(assemble(HOSTILE))


@pytest.mark.parametrize("limits, code", [
    (dict(timeout=0.02), StatusCode.DEADLINE_EXCEEDED),
    (dict(fuel=100_000), StatusCode.RESOURCE_EXHAUSTED),
])
def test_a_failed_call_gives_back_its_memory_at_once(hostile, limits, code):
    ctx = vmrt.Context(modules=[hostile], limits=Limits(max_memory=100_000, **limits))
    for _ in range(3):  # each call may hold 60 kB of 100: the last one's must be gone
        with pytest.raises(VMError) as info:
            ctx.function("hostile.hold_then_spin")(60_000)
        assert info.value.code == code
        assert ctx.memory_in_use == 0
        if ctx.fuel_remaining is not None:
            ctx.refuel(100_000 - ctx.fuel_remaining)


def test_a_list_holding_itself_is_released(hostile):
    ctx = vmrt.Context(modules=[hostile], limits=Limits(max_memory=100_000))
    for _ in range(5):  # 60 kB each, under 100 kB: unreachable cycles must not count
        assert ctx.function("hostile.self_list")(60_000) == 0
    assert ctx.memory_in_use == 0


@pytest.mark.parametrize("name, value", [
    (name, value) for name in ("fuel", "max_memory", "max_depth", "timeout")
    for value in (float("nan"), "10", b"1", [1], True, *([] if name == "timeout" else [1.5]))])
def test_limits_are_validated_at_construction(name, value):
    with pytest.raises(VMError) as info:
        Limits(**{name: value})
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert name in str(info.value)


def test_valid_limits_normalize():
    assert Limits(timeout=float("inf")).timeout is None
    assert Limits(timeout=2).timeout == 2.0 and Limits(fuel=10).fuel == 10
    ctx = vmrt.Context(limits=Limits())
    with pytest.raises(VMError) as info:
        ctx.set_deadline(float("nan"))
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_each_thread_calling_a_context_has_its_own_deadline(hostile):
    ctx = vmrt.Context(modules=[hostile], limits=Limits(timeout=0.3))
    short, done = ctx.function("hostile.short"), threading.Event()
    calls = []

    def caller():  # a short call every 20 ms, all along
        while not done.is_set():
            calls.append(short(1))
            time.sleep(0.02)
    thread = threading.Thread(target=caller)
    thread.start()
    start = time.monotonic()
    try:
        with pytest.raises(VMError) as info:
            ctx.function("hostile.spin")()
    finally:
        elapsed = time.monotonic() - start
        done.set()
        thread.join()
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    assert 0.3 <= elapsed < 0.3 + 10  # (its own deadline; the bound only catches a hang)
    assert len(calls) >= 5 and set(calls) == {2}
