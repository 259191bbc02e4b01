"""Execution hooks (vmrt.vm.hooks): call/instruction/return events of instrumented
code, register inspection, the VM call stack, the profiler; plain code untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

import vmrt
from vmrt.vm.hooks import ExecutionHooks, Profiler

TRACED = Path(__file__).parent / "vmasm" / "traced.vmasm"
# Without a debug database an internal function is named by its ordinal.
SQUARE = "traced.function#1"


class Recorder(ExecutionHooks):
    def __init__(self):
        self.events = []

    def on_call(self, frame):
        self.events.append(("call", frame.name, dict(frame.registers.items())))

    def on_instruction(self, frame, decoded):
        self.events.append(("op", frame.name, decoded.pc, decoded.instruction.vm_name,
                            [f.label() for f in frame.callers()]))

    def on_return(self, frame):
        self.events.append(("return", frame.name, repr(frame.error) if frame.error else None))


def _sum_expected(n: int) -> int:
    return (n * (n + 1) // 2) ** 2


def test_instrumented_results_match_plain_code():
    with vmrt.load(TRACED) as plain, vmrt.load(TRACED, hooks=[Recorder()]) as hooked:
        for n in (1, 2, 7):
            assert hooked.sum(n) == plain.sum(n) == _sum_expected(n)
        assert hooked.mixed(5, -7, 1.5) == plain.mixed(5, -7, 1.5) == (-2, 3.75, 0)


def test_events_in_execution_order_with_callers():
    recorder = Recorder()
    with vmrt.load(TRACED, hooks=recorder) as m:
        assert m.sum(2) == 9
    events = recorder.events
    assert events[0] == ("call", "traced.sum", {"i0": 2, "i1": 0, "i2": 0, "i3": 0,
                                                 "i4": 0, "i5": 0})
    ops = [e for e in events if e[0] == "op"]
    sum_pcs = [e[2] for e in ops if e[1] == "traced.sum"]
    # entry block, two loop iterations (marker + 5 ops each), exit block
    assert sum_pcs == [0, 1, 8, 15, 22] + [30, 31, 38, 45, 52, 57] * 2 + [72, 73, 86]
    square = [e for e in ops if e[1] == SQUARE]
    assert [e[3] for e in square[1:]] == ["vm.global.load.i32", "vm.const.i32", "vm.add.i32",
                                          "vm.global.store.i32", "vm.mul.i32", "vm.return"]
    assert all(e[4] == ["traced.sum+00000049"] for e in square)
    kinds = [(e[0], e[1]) for e in events if e[0] != "op"]
    assert kinds == [("call", "traced.sum"), ("call", SQUARE),
                     ("return", SQUARE), ("return", "traced.sum")]


def test_registers_by_name_at_an_instruction():
    seen = {}

    class Watch(ExecutionHooks):
        def on_instruction(self, frame, decoded):
            if decoded.instruction.vm_name == "vm.return" and frame.name == "traced.mixed":
                registers = frame.registers
                seen.update(pair=registers["%i6:7"], f=registers["i9"], x=registers["i10"],
                            has_r0="r0" in registers, names=list(registers))

    with vmrt.load(TRACED, hooks=Watch()) as m:
        m.mixed(1 << 40, 3, -2.0)
    assert seen["pair"] == (1 << 40) + 3
    assert seen["f"] == -5.0 and seen["x"] == 0
    assert not seen["has_r0"]
    assert seen["names"] == ["i0", "i2", "i4", "i6", "i8", "i9", "i10"]


def test_unwinding_frame_reports_its_error():
    recorder = Recorder()
    with vmrt.load(TRACED, hooks=recorder) as m:
        with pytest.raises(vmrt.VMError) as info:
            m.check(0)
        assert m.check(4) == 4
    assert info.value.code == vmrt.StatusCode.FAILED_PRECONDITION
    returns = [e for e in recorder.events if e[0] == "return"]
    assert "n must not be zero" in returns[0][2]
    assert returns[1][2] is None


def test_hook_error_aborts_the_call_with_a_vm_stack():
    class Stop(ExecutionHooks):
        def on_instruction(self, frame, decoded):
            if frame.name == SQUARE:
                raise vmrt.VMError("stopped by a hook", vmrt.StatusCode.CANCELLED)

    with vmrt.load(TRACED, hooks=Stop()) as m:
        with pytest.raises(vmrt.VMError) as info:
            m.sum(3)
        assert info.value.code == vmrt.StatusCode.CANCELLED
        assert info.value.stack == [f"{SQUARE}+00000000", "traced.sum+00000049"]


def test_profiler_counts_instructions_per_function():
    profiler = Profiler()
    with vmrt.load(TRACED, hooks=[profiler]) as m:
        m.sum(10)
        m.sum(1)
    sum_entry = profiler.functions["traced.sum"]
    square_entry = profiler.functions[SQUARE]
    # entry block 4 + 5 per iteration + call and return: 5n + 6 (markers not counted)
    assert sum_entry.calls == 2 and sum_entry.instructions == (5 * 10 + 6) + (5 * 1 + 6)
    assert square_entry.calls == 2 and square_entry.instructions == 12
    assert sum_entry.total_ns >= sum_entry.self_ns >= 0
    assert sum_entry.total_ns >= square_entry.total_ns
    report = profiler.report().splitlines()
    assert report[0].split() == ["function", "calls", "instructions", "total", "ms", "self",
                                 "ms"]
    assert report[1].split()[:3] == ["traced.sum", "2", "67"]
    assert report[-1].split() == ["(all)", "4", "79"]


def test_hooks_can_be_added_and_removed_on_an_instrumented_context():
    recorder = Recorder()
    with vmrt.load(TRACED, instrumented=True) as m:
        assert m.sum(1) == 1
        m.context.add_hook(recorder)
        m.check(3)
        m.context.remove_hook(recorder)
        m.sum(1)
    assert {e[1] for e in recorder.events} == {"traced.check"}


def test_plain_context_is_not_instrumented():
    with vmrt.load(TRACED) as m:
        assert m.sum(3) == 36
        assert m.context.hook_dispatcher is None
        _, _, source = m.module.compiled(0, m.context.codegen_options)
        assert "STEP" not in source and "ENTER" not in source
        with pytest.raises(vmrt.VMError) as info:
            m.context.add_hook(Recorder())
        assert info.value.code == vmrt.StatusCode.FAILED_PRECONDITION


def test_frames_leave_no_reference_cycles_behind():
    import gc
    import weakref

    frames = []

    class Keep(ExecutionHooks):
        def on_call(self, frame):
            frames.append(weakref.ref(frame))

    with vmrt.load(TRACED, hooks=Keep()) as m:
        m.sum(2)
        gc.disable()
        try:
            assert all(ref() is None or not ref().active for ref in frames)
            assert m.context.hook_dispatcher.live == {}
        finally:
            gc.enable()
