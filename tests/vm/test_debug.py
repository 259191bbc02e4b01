"""vmrt.debug: breakpoints by function and offset, stepping, registers and the VM
stack at a stop; sessions always end (returned, failed, or aborted by close)."""

from __future__ import annotations

from pathlib import Path

import pytest

import vmrt
from vmrt.debug import Debugger

TRACED = Path(__file__).parent / "vmasm" / "traced.vmasm"
SQUARE = "traced.function#1"  # no debug database: internal functions go by ordinal


@pytest.fixture
def loaded():
    with vmrt.load(TRACED, instrumented=True) as m:
        yield m


@pytest.fixture
def debugger(loaded):
    return Debugger(loaded.context)


def test_breakpoint_by_offset_stops_each_time_with_registers(debugger):
    debugger.break_at("traced.sum", 0x1F)  # first add of the loop body
    with debugger.start("traced.sum", 3) as session:
        seen = []
        stop = session.wait()
        while stop is not None:
            assert stop.reason == "breakpoint" and stop.pc == 0x1F
            assert stop.instruction == "vm.add.i32"
            seen.append((stop.registers["i0"], stop.registers["%i1"]))
            stop = session.cont()
    assert seen == [(3, 0), (2, 3), (1, 5)]
    assert session.done and session.result == 36 and session.error is None


def test_function_entry_breakpoint_and_stack(debugger):
    debugger.break_at(SQUARE)
    with debugger.start("traced.sum", 2) as session:
        stop = session.wait()
        assert stop.reason == "entry" and stop.function == SQUARE and stop.pc == 0
        assert stop.registers["i0"] == 3
        assert [f.label() for f in stop.stack] == [f"{SQUARE}+00000000", "traced.sum+00000049"]
        assert stop.backtrace() == [f"{SQUARE}+00000000", "traced.sum+00000049"]
        assert session.cont() is None
    assert session.result == 9


def test_step_into_over_and_out(debugger):
    debugger.break_at("traced.sum", 0x49)  # the call
    with debugger.start("traced.sum", 1) as session:
        stop = session.wait()
        assert stop.disassembly == "%i5 = vm.call @traced:1(%i1(1))"
        stop = session.step()  # into the callee (its block marker is passed over)
        assert (stop.reason, stop.function, stop.pc) == ("step", SQUARE, 0x01)
        assert stop.disassembly == "%i2 = vm.global.load.i32 .rwdata[0](0)"
        stop = session.step_over()
        assert (stop.function, stop.pc, stop.instruction) == (SQUARE, 0x08, "vm.const.i32")
        stop = session.step_out()
        assert (stop.function, stop.pc, stop.instruction) == ("traced.sum", 0x56, "vm.return")
        assert stop.registers["i5"] == 1
        assert session.step() is None
    assert session.result == 1


def test_step_over_a_call_stays_in_the_frame(debugger):
    debugger.break_at("traced.sum", 0x49)
    with debugger.start("traced.sum", 2) as session:
        session.wait()
        stop = session.step_over()
        assert (stop.function, stop.pc) == ("traced.sum", 0x56)
        assert stop.registers["i5"] == 9


def test_failing_program_ends_the_session_with_its_error(debugger):
    debugger.break_at("traced.check", 0x00)
    with debugger.start("traced.check", 0) as session:
        assert session.wait().pc == 0
        assert session.cont() is None
        assert session.wait() is None  # stays ended
    assert isinstance(session.error, vmrt.VMError)
    assert session.error.code == vmrt.StatusCode.FAILED_PRECONDITION
    assert session.error.stack == ["traced.check+0000001D"]  # the vm.fail


def test_close_aborts_a_stopped_call(debugger):
    debugger.break_at("traced.spin", 0x11)  # the add
    session = debugger.start("traced.spin", 0)
    stop = session.wait()
    assert stop.registers["i0"] == 0
    session.close()
    assert session.done
    assert session.error.code == vmrt.StatusCode.ABORTED


def test_close_aborts_a_running_call(debugger):
    session = debugger.start("traced.spin", 0)  # no breakpoint: it never stops on its own
    session.close()
    assert session.error.code == vmrt.StatusCode.ABORTED


def test_breakpoint_added_while_running(debugger):
    session = debugger.start("traced.spin", 0)
    debugger.break_at("traced.spin", 0x11)  # the add
    stop = session.wait()
    first = stop.registers["i0"]
    stop = session.cont()
    assert stop.registers["i0"] == first + 1
    debugger.clear("traced.spin")
    assert debugger.breakpoints == []
    session.close()
    assert session.error.code == vmrt.StatusCode.ABORTED


def test_other_threads_and_calls_do_not_stop(debugger, loaded):
    debugger.break_at("traced.sum", 0x1F)
    with debugger.start("traced.sum", 2) as session:
        assert session.wait() is not None
        # the controlling thread may call into the context while the session is stopped
        assert loaded.sum(2) == 9
        assert session.run_to_end() == 9


def test_bad_breakpoints_and_plain_contexts_are_errors(debugger):
    with pytest.raises(vmrt.VMError) as info:
        debugger.break_at("traced.nothing")
    assert info.value.code == vmrt.StatusCode.NOT_FOUND
    with pytest.raises(vmrt.VMError) as info:
        debugger.break_at("traced.sum", 0x02)  # inside an instruction
    assert info.value.code == vmrt.StatusCode.INVALID_ARGUMENT
    with vmrt.load(TRACED) as plain:
        with pytest.raises(vmrt.VMError) as info:
            Debugger(plain.context)
        assert info.value.code == vmrt.StatusCode.FAILED_PRECONDITION
