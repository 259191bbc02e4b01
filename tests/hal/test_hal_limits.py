"""Limits on every path a module reaches through the hal module (issue 15, items 1-3):
queue allocations, recorded commands and executables are charged, VMVX dispatches
are metered and stop with their call (deadline, cancel, fuel) on both devices, and
a failed call gives back everything it allocated."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import vmrt
from tests.vm import hostile_hal
from vmrt.errors import StatusCode, VmrtError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.limits import Limits

MATMUL = """
func.func @matmul(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<64x64xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%fill : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}
"""


_OPEN: list = []


@pytest.fixture(autouse=True)
def _close_contexts():
    yield
    while _OPEN:  # (local-task devices: their threads end with the test)
        hostile_hal.close(_OPEN.pop())


def context(limits, device: str = "local-sync"):
    _OPEN.append(hostile_hal.context(limits, device))
    return _OPEN[-1]


def executable() -> VMBuffer:
    return VMBuffer.from_bytes(hostile_hal.mlp_executable())


#: Seconds no call here comes near unless it hangs: deadlines and cancels are shown
#: by the error a call ends with, not by how soon it ends (machines are shared).
HANG = 60


def failure(fn, *args) -> tuple[VmrtError, float]:
    """The error `fn(*args)` ends with, and the seconds it took (under HANG)."""
    start = time.monotonic()
    with pytest.raises(VmrtError) as info:
        fn(*args)
    elapsed = time.monotonic() - start
    assert elapsed < HANG, f"{elapsed:.1f} s: the call hung"
    return info.value, elapsed


def cancel_after(ctx, seconds: float) -> tuple[threading.Timer, threading.Event]:
    """A started timer cancelling `ctx`, and the event it sets once it has."""
    cancelled = threading.Event()
    timer = threading.Timer(seconds, lambda: (ctx.cancel(), cancelled.set()))
    timer.start()
    return timer, cancelled


# -- item 1: every allocation path is charged ---------------------------------------------------
def test_queue_alloca_is_charged_and_refused_over_the_limit():
    ctx = context(Limits(max_memory=1 << 20))
    error, _ = failure(ctx.function("hostile.alloca_fill"), 1024)  # 1 GiB, then a fill
    assert error.code == StatusCode.RESOURCE_EXHAUSTED
    assert ctx.memory_in_use == 0
    buffer = ctx.function("hostile.alloca")(6000)
    assert ctx.memory_in_use == 6000
    del buffer
    assert ctx.memory_in_use == 0


def test_queue_allocations_under_limits_hold_zeros_not_what_the_heap_held():
    # (without limits a queue allocation's contents are undefined, as upstream's; a
    # sandboxed module must never read another's data out of the process's heap)
    size = 1 << 20
    ctx = context(Limits(max_memory=4 << 20))
    for _ in range(3):
        np.full(size + 64, 0xA5, np.uint8)  # freed at once: the next allocation's memory
        buffer = ctx.function("hostile.alloca")(size)
        assert buffer.map_read(0, size) == bytes(size)
        del buffer


def test_recorded_commands_are_charged():
    ctx = context(Limits(max_memory=1 << 20))
    error, _ = failure(ctx.function("hostile.record_updates"), bytes(4096), 10_000)
    assert error.code == StatusCode.RESOURCE_EXHAUSTED
    assert ctx.memory_in_use == 0
    assert ctx.function("hostile.record_updates")(bytes(64), 10) == 10


def test_workgroup_local_memory_is_charged():
    from vmrt.hal.device import create_device
    from vmrt.hal.executable import DispatchState
    from vmrt.vm.call_guard import guarded
    ctx = context(Limits(max_memory=1 << 20))
    exe = create_device().create_executable("vmvx-bytecode-fb", hostile_hal.mlp_executable())
    with guarded(ctx.meter):
        state = DispatchState(0, (1, 1, 1), bindings=[memoryview(bytearray(4096))] * 2)
        from vmrt.vm.call_guard import current_guard
        state.guard = current_guard()
    prepared = exe.prepare(state)
    prepared.local_size = 1 << 40  # as an executable declaring 1 TiB of local memory
    with pytest.raises(VmrtError) as info:
        exe.run_workgroups(prepared, state.workgroup_ids())
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED and ctx.memory_in_use == 0


def test_an_allocation_waiting_on_a_fence_stops_with_its_call():
    # (an allocation with nothing to wait for skips the call's guard; one that waits
    # is guarded: the wait ends at the call's deadline, or when it is cancelled)
    ctx = context(Limits(timeout=0.2))
    error, elapsed = failure(ctx.function("hostile.alloca_waiting"), 64)
    assert error.code == StatusCode.DEADLINE_EXCEEDED
    assert elapsed >= 0.2  # it waited for the fence until its deadline
    assert ctx.memory_in_use == 0
    ctx = context(Limits())
    timer, cancelled = cancel_after(ctx, 0.1)
    error, _ = failure(ctx.function("hostile.alloca_waiting"), 64)
    timer.join()
    assert error.code == StatusCode.CANCELLED and cancelled.is_set()


# -- item 2: dispatches are metered and interruptible ---------------------------------------------
@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_huge_dispatch_stops_at_the_deadline(device):
    ctx = context(Limits(timeout=0.2), device)
    # (65535 x 65535 workgroups: hours of work, so ending at all is the deadline's doing)
    error, elapsed = failure(ctx.function("hostile.dispatch"), executable(), 0, 65535, 65535)
    assert error.code == StatusCode.DEADLINE_EXCEEDED
    assert elapsed >= 0.2
    assert ctx.memory_in_use == 0
    assert ctx.function("hostile.dispatch")(executable(), 0, 1, 1) == 0  # its own timeout


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_dispatches_from_two_threads_keep_their_own_deadlines(device):
    # (a dispatch on the calling thread runs under its call's own meter and deadline:
    # another thread's calls through the same context neither lend it theirs nor
    # end with it)
    ctx = context(Limits(timeout=0.5), device)
    short = ctx.function("hostile.dispatch")
    results, stop = [], threading.Event()

    def keep_calling():
        while not stop.is_set():
            try:
                results.append(short(executable(), 0, 1, 1))
            except VmrtError as error:  # (none expected: each call has its own 0.5 s)
                results.append(error)
            time.sleep(0.02)

    other = threading.Thread(target=keep_calling)
    other.start()
    try:
        error, elapsed = failure(ctx.function("hostile.dispatch"), executable(), 0, 65535,
                                 65535)
    finally:
        stop.set()
        other.join()
    assert error.code == StatusCode.DEADLINE_EXCEEDED
    assert elapsed >= 0.5  # its own deadline, not one of the other thread's calls
    assert results and all(result == 0 for result in results), results


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_huge_dispatch_stops_when_cancelled(device):
    ctx = context(Limits(), device)
    timer, cancelled = cancel_after(ctx, 0.1)
    error, _ = failure(ctx.function("hostile.dispatch"), executable(), 0, 65535, 65535)
    timer.join()
    assert error.code == StatusCode.CANCELLED and cancelled.is_set()


def test_dispatch_work_is_charged_fuel():
    def fuel_used(x, y):
        ctx = context(Limits(fuel=10**9))
        assert ctx.function("hostile.dispatch")(executable(), 0, x, y) == 0
        return 10**9 - ctx.fuel_remaining
    one, four = fuel_used(1, 1), fuel_used(2, 2)
    assert four > one + 3 * 10  # three more workgroups of VM code
    assert fuel_used(2, 2) == four  # deterministic
    ctx = context(Limits(fuel=one - 5))
    error, _ = failure(ctx.function("hostile.dispatch"), executable(), 0, 1, 1)
    assert error.code == StatusCode.RESOURCE_EXHAUSTED and "out of fuel" in str(error)


def test_matmul_model_respects_timeout_and_fuel(compile_mlir):
    from vmrt.modules.hal import HalModule
    module = vmrt.load_module(compile_mlir(MATMUL).read_bytes())
    a = np.full((64, 64), 0.5, np.float32)
    # (a deadline already past when the work starts: where it stops, in the module's
    # initializer or in the call, depends on the machine; that it stops does not)
    for limits, code in ((Limits(timeout=1e-6), StatusCode.DEADLINE_EXCEEDED),
                         (Limits(fuel=1000), StatusCode.RESOURCE_EXHAUSTED)):
        with pytest.raises(vmrt.VmrtError) as caught:
            ctx = vmrt.Context(modules=[HalModule(), module], limits=limits)
            ctx.function("module.matmul")(a, a)
        assert caught.value.code == code
    ctx = vmrt.Context(modules=[HalModule(), module], limits=Limits(fuel=10**9, timeout=60))
    np.testing.assert_allclose(ctx.function("module.matmul")(a, a), a @ a)


def test_a_model_runs_any_number_of_calls_under_a_depth_limit():
    """Each call of a compiled model (an export that may yield: it waits on fences)
    leaves the call depth where it found it: under limits, the call after max_depth
    calls was refused with DepthExceeded."""
    from tests.hal.conftest import MLP_VMFB
    from vmrt.modules.hal import HalModule
    ctx = vmrt.Context(modules=[HalModule(), vmrt.load_module(MLP_VMFB.read_bytes())],
                       limits=Limits(max_depth=16, fuel=10**12, timeout=60))
    predict, x = ctx.function("module.predict"), np.ones((1, 4), np.float32)
    first = predict(x)
    for _ in range(40):
        np.testing.assert_array_equal(predict(x), first)

@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_an_executable_that_loops_forever_stops_at_the_deadline(device):
    # Its dispatch body is one block branching to itself: charged like any VM code.
    looping = VMBuffer.from_bytes(hostile_hal.spinning_executable())
    ctx = context(Limits(timeout=0.1, fuel=10**12), device)
    error, elapsed = failure(ctx.function("hostile.dispatch_unbound"), looping, 0, 1, 1)
    assert error.code == StatusCode.DEADLINE_EXCEEDED and elapsed >= 0.1
    ctx = context(Limits(fuel=100_000), device)
    error, _ = failure(ctx.function("hostile.dispatch_unbound"), looping, 0, 1, 1)
    assert error.code == StatusCode.RESOURCE_EXHAUSTED
    if device == "local-sync":  # (workers of local-task leave the caller's slice alone)
        assert ctx.fuel_remaining < 100
    assert ctx.memory_in_use == 0


# -- item 3: HAL buffers dropped in a loop -------------------------------------------------
@pytest.mark.parametrize("export", ["allocate", "alloca"])
def test_hal_buffers_dropped_in_a_loop_are_released_at_once(export):
    ctx = context(Limits(max_memory=1 << 20))
    allocate = ctx.function(f"hostile.{export}")
    gc.disable()  # what a collection would free does not count
    try:
        for _ in range(1000):  # 1000 x 6000 B under 1 MiB
            allocate(6000)
        assert ctx.memory_in_use == 0
    finally:
        gc.enable()


def test_parameter_loads_are_charged(tmp_path):
    from tests.io.test_io_parameters_module import (
        DEVICE_LOCAL, USAGE_VARIABLE, scope_buffer, vm_buffers)
    from vmrt.hal.device import create_device
    from vmrt.io import FileCache, IndexProvider, ParameterIndex
    from vmrt.modules.io_parameters import IoParametersModule
    index = ParameterIndex()
    index.add_buffer("w", bytes(8192))
    index.save(tmp_path / "p.irpa")
    module = IoParametersModule([IndexProvider("m", ParameterIndex.load(
        tmp_path / "p.irpa", cache=FileCache()))])
    ctx = vmrt.Context(limits=Limits(max_memory=10_000))

    def load():  # (a copy: the target may be written)
        return module.load(create_device(), -1, None, None, scope_buffer("m"), -1,
                           DEVICE_LOCAL, USAGE_VARIABLE, *vm_buffers([("w", 0, 0, 8192)]),
                           meter=ctx.meter)
    loaded = load()
    assert ctx.memory_in_use == 8192
    with pytest.raises(VmrtError) as info:
        load()
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    del loaded
    assert ctx.memory_in_use == 0


# -- dispatches in the C tier under limits -------------------------------------------------
@pytest.fixture
def c_runs(monkeypatch) -> list:
    """Needs a C compiler; lists each dispatch range run in C (vmrt.vm.ctier)."""
    from vmrt.vm.ctier import runtime
    from vmrt.vm.ctier.build import compiler_identity

    if compiler_identity() is None:
        pytest.skip("needs a C compiler")
    runs: list = []
    run_workgroups = runtime.run_workgroups
    monkeypatch.setattr(runtime, "run_workgroups",
                        lambda *args: runs.append(args[6:8]) or run_workgroups(*args))
    return runs


def built_in_c(monkeypatch, tier: str = "auto") -> None:
    """The executable's C built, by a context without limits (one with limits only
    uses a build), for contexts made from now on in `tier`."""
    monkeypatch.setenv("VMRT_TIER", tier)
    assert context(None).function("hostile.dispatch")(executable(), 0, 2, 2) == 0


def test_dispatches_in_c_under_limits_spend_what_python_spends(monkeypatch, c_runs):
    """A dispatch the C tier compiled runs its workgroups in one C call under limits
    too, the call's fuel going in and what is left coming back by value: it spends
    what the Python tier spends, and out of fuel inside C it fails as the Python tier
    does, with the same fuel left (none lost, none made)."""
    def outcome(tier: str, budget: int):
        """(error code or None, fuel left) of a 2x2 dispatch with `budget` fuel."""
        built_in_c(monkeypatch, tier)
        ctx = context(Limits(fuel=budget, timeout=60))
        try:
            assert ctx.function("hostile.dispatch")(executable(), 0, 2, 2) == 0
            code = None
        except VmrtError as error:
            code = error.code
        return code, ctx.fuel_remaining

    code, left = outcome("python", 10**9)
    assert code is None and not c_runs
    spent = 10**9 - left
    assert outcome("auto", 10**9) == (None, left) and c_runs[-1] == (0, 4)
    for budget in (spent - 1, spent // 2, spent // 5):
        expected = outcome("python", budget)
        assert expected[0] == StatusCode.RESOURCE_EXHAUSTED
        c_runs.clear()
        assert outcome("auto", budget) == expected and c_runs


def test_a_huge_dispatch_in_c_makes_its_workgroup_ids_one_at_a_time(monkeypatch, c_runs):
    """No list of a dispatch's ids is made for C to run (65535 x 65535 of them would
    hold gigabytes, uncharged, and take minutes to make): under a fuel limit alone
    it fails once its fuel is spent. (The timer cancels a run that makes the list,
    which would hang the test for minutes.)"""
    import tracemalloc

    built_in_c(monkeypatch)
    ctx = context(Limits(fuel=10**6))
    timer = threading.Timer(HANG / 2, ctx.cancel)
    timer.start()
    tracemalloc.start()
    try:
        error, _ = failure(ctx.function("hostile.dispatch"), executable(), 0, 65535, 65535)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        timer.cancel()
    assert error.code == StatusCode.RESOURCE_EXHAUSTED, error
    assert c_runs[-1] == (0, 65535 * 65535)
    assert peak < 1 << 20
    assert "workgroup (" in str(error)  # (named from the index C failed at)
