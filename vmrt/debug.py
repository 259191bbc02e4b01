"""vmrt.debug: breakpoints, single stepping and register inspection from Python.

    ctx = vmrt.Context(modules=[module], instrumented=True)
    dbg = vmrt.debug.Debugger(ctx)
    dbg.break_at("m.loop", 0x1F)          # bytecode offset; no offset: function entry
    with dbg.start("m.loop", 10) as session:
        stop = session.wait()             # blocks until a stop (None: the call ended)
        stop.registers["i0"], stop.stack, stop.disassembly
        stop = session.step()             # one instruction, into calls
        stop = session.cont()             # to the next breakpoint or the end
    session.result / session.error

The call runs on a worker thread that the hooks park at each stop while the
calling thread inspects; every command answers with the next Stop, or None once
the call has returned or failed. Leaving the `with` (or `close()`) aborts a
call still running with an ABORTED VMError, so a session always ends. Only
the session's own thread stops: other calls into the context run freely.
"""

from __future__ import annotations

import queue
import threading

from vmrt.errors import StatusCode, VMError
from vmrt.vm.hooks import ExecutionHooks

__all__ = ["Debugger", "Session", "Stop"]

_FINISHED = object()


class Stop:
    """Where a stopped call is: the frame about to execute `instruction`.

    `frame` and `stack` are live while the session stays at this stop;
    `registers` is a snapshot taken when it stopped.
    """

    def __init__(self, reason: str, frame, decoded):
        self.reason = reason  # 'breakpoint', 'entry' or 'step'
        self.frame = frame
        self.decoded = decoded
        self.function = frame.name
        self.pc = decoded.pc
        self.registers = frame.registers
        self.stack = frame.stack()

    @property
    def instruction(self) -> str:
        """The instruction's mnemonic (`vm.add.i32`; `<block>` for a block marker)."""
        return self.decoded.instruction.vm_name or "<block>"

    @property
    def disassembly(self) -> str:
        """The instruction with its operand values, as --trace_execution prints it."""
        from vmrt.asm.trace import TraceFormatter
        return TraceFormatter().format(self.frame, self.decoded).split("]    ", 1)[1]

    @property
    def location(self) -> str | None:
        return self.frame.location

    def backtrace(self) -> list[str]:
        """`module.function+PC (file:line:col)` per frame, innermost first."""
        out = []
        for frame in self.stack:
            location = frame.location
            out.append(frame.label() + (f" ({location})" if location else ""))
        return out

    def __repr__(self) -> str:
        return f"<Stop {self.reason} at {self.function}+{self.pc:08X} {self.instruction}>"


class Debugger(ExecutionHooks):
    """Breakpoints and sessions over one instrumented context."""

    def __init__(self, context):
        self.context = context
        context.add_hook(self)  # FAILED_PRECONDITION unless the context is instrumented
        self._breakpoints: set[tuple[str, int]] = set()
        self._entry_breakpoints: set[str] = set()
        self._sessions: dict[int, Session] = {}
        self._lock = threading.Lock()

    # -- breakpoints ------------------------------------------------------------------------
    def break_at(self, function: str, pc: int | None = None) -> None:
        """Stops before the op at byte offset `pc` of `module.function`, or at its entry."""
        self._check_function(function, pc)
        with self._lock:
            if pc is None:
                self._entry_breakpoints = self._entry_breakpoints | {function}
            else:
                self._breakpoints = self._breakpoints | {(function, pc)}

    def clear(self, function: str | None = None, pc: int | None = None) -> None:
        """Removes one breakpoint, every breakpoint of `function` (pc None), or all."""
        with self._lock:
            if function is None:
                self._breakpoints, self._entry_breakpoints = set(), set()
            elif pc is None:
                self._entry_breakpoints = self._entry_breakpoints - {function}
                self._breakpoints = {b for b in self._breakpoints if b[0] != function}
            else:
                self._breakpoints = self._breakpoints - {(function, pc)}

    @property
    def breakpoints(self) -> list[tuple[str, int | None]]:
        return sorted([(f, None) for f in self._entry_breakpoints] + list(self._breakpoints),
                      key=lambda b: (b[0], -1 if b[1] is None else b[1]))

    def _check_function(self, function: str, pc: int | None) -> None:
        module_name, dot, name = function.partition(".")
        instance = self.context.module(module_name) if dot else None
        module = getattr(instance, "module", None)
        if module is None or not hasattr(module, "verified"):
            raise VMError(f"'{function}' is not module.function of a bytecode module in this "
                          "context", StatusCode.NOT_FOUND)
        ordinal = next((o for o in range(module.function_count)
                        if module.function_name(o) == name), None)
        if ordinal is None:
            raise VMError(f"module '{module_name}' has no function '{name}'",
                          StatusCode.NOT_FOUND)
        if pc is not None:
            if module.instruction_at(ordinal, pc) is None:
                raise VMError(f"no instruction starts at offset {pc:08X} of '{function}'",
                              StatusCode.INVALID_ARGUMENT)

    # -- sessions ----------------------------------------------------------------------------
    def start(self, function, *args) -> "Session":
        """Calls `function` (a Function or 'module.function') on a worker thread."""
        if isinstance(function, str):
            function = self.context.function(function)
        return Session(self, function, args)

    # -- hooks (run on the executing thread) --------------------------------------------------
    def on_call(self, frame) -> None:
        session = self._sessions.get(threading.get_ident())
        if session is not None and frame.name in self._entry_breakpoints:
            frame.data["debug.entry"] = True

    def on_instruction(self, frame, decoded) -> None:
        session = self._sessions.get(threading.get_ident())
        if session is None:
            return
        if session._aborting:
            raise VMError("debugging session aborted", StatusCode.ABORTED)
        reason = None
        if (frame.name, decoded.pc) in self._breakpoints:
            reason = "breakpoint"
        elif frame.data.pop("debug.entry", False):
            reason = "entry"
        elif session._stepping(frame, decoded):
            reason = "step"
        if reason is not None:
            session._stop(Stop(reason, frame, decoded))


class Session:
    """One call under the debugger (see the module docstring)."""

    def __init__(self, debugger: Debugger, function, args):
        self.debugger = debugger
        self.function = function
        self.result = None
        self.error: BaseException | None = None
        self.stopped: Stop | None = None
        self.done = False
        self._events: queue.Queue = queue.Queue()
        self._commands: queue.Queue = queue.Queue()
        self._mode = ("continue", None)
        self._aborting = False
        self._thread = threading.Thread(target=self._run, args=(args,), daemon=True,
                                         name=f"vmrt.debug {function.full_name}")
        self._registered = threading.Event()
        self._thread.start()
        self._registered.wait()

    # -- worker side ---------------------------------------------------------------------------
    def _run(self, args) -> None:
        ident = threading.get_ident()
        self.debugger._sessions[ident] = self
        self._registered.set()
        try:
            self.result = self.function(*args)
        except BaseException as error:  # handed to the controlling thread
            self.error = error
        finally:
            self.debugger._sessions.pop(ident, None)
            self._events.put(_FINISHED)

    def _stepping(self, frame, decoded) -> bool:
        mode, origin = self._mode
        if mode == "continue" or decoded.instruction.kind == "marker":
            return False
        if mode == "step":
            return True
        if mode == "over":
            return frame is origin or not origin.active
        return not origin.active  # "out"

    def _stop(self, stop: Stop) -> None:
        self._events.put(stop)
        command = self._commands.get()
        if command == "abort":
            raise VMError("debugging session aborted", StatusCode.ABORTED)
        self._mode = (command, stop.frame)

    # -- controlling side ------------------------------------------------------------------------
    def wait(self) -> Stop | None:
        """The next stop, or None once the call has ended (see `result` and `error`)."""
        if self.done:
            return None
        if self.stopped is not None:
            return self.stopped
        event = self._events.get()
        if event is _FINISHED:
            self.done = True
            self._thread.join()
            return None
        self.stopped = event
        return event

    def _resume(self, command: str) -> Stop | None:
        if self.done:
            return None
        if self.stopped is None:
            self.wait()
            if self.done:
                return None
        self.stopped = None
        self._commands.put(command)
        return self.wait()

    def cont(self) -> Stop | None:
        """Runs to the next breakpoint."""
        return self._resume("continue")

    def step(self) -> Stop | None:
        """Runs one instruction (into calls; block markers are passed over)."""
        return self._resume("step")

    def step_over(self) -> Stop | None:
        """Runs to the next instruction of this frame (or of its caller once it returns)."""
        return self._resume("over")

    def step_out(self) -> Stop | None:
        """Runs until this frame has returned (stops at the caller's next instruction)."""
        return self._resume("out")

    def run_to_end(self):
        """Runs to completion with breakpoints ignored; returns the result or raises."""
        self.debugger._sessions.pop(self._thread.ident, None)
        while self._resume("continue") is not None:
            pass
        if self.error is not None:
            raise self.error
        return self.result

    def close(self) -> None:
        """Aborts the call if it is still running and waits for the worker to end."""
        if self.done:
            return
        self._aborting = True
        if self.stopped is not None:
            self.stopped = None
            self._commands.put("abort")
        while True:
            event = self._events.get()
            if event is _FINISHED:
                break
            self._commands.put("abort")
        self.done = True
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
