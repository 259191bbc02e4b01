"""Execution hooks: what instrumented code reports (calls, instructions, returns).

A context created with `hooks=` (or `instrumented=True`) compiles its bytecode
functions in the instrumented variant (vmrt.vm.codegen): each function calls
ENTER at entry, STEP before every instruction (block markers included, as
upstream's dispatch traces them) and LEAVE on the way out, and those call the
context's ExecutionHooks. Plain contexts run code without any of it.

A VMFrame is one activation of a bytecode function. Its registers are the
generated function's locals, read on demand from the Python frame (so a hook
that never looks pays nothing for them); its callers are found by walking the
Python stack, which stays right across yields and host re-entry.
"""

from __future__ import annotations

import sys
import threading
import time


_GENERATED_PREFIX = "<vmrt "


class ExecutionHooks:
    """Receives events of instrumented code; override what you need.

    Hooks run on the thread executing the VM code, in the middle of it: they
    may inspect the frame and may raise (a VmrtError aborts the invocation
    with that error), but must not call back into the same frame.
    """

    def on_call(self, frame: "VMFrame") -> None:
        """A bytecode function was entered (its arguments are in its registers)."""

    def on_instruction(self, frame: "VMFrame", decoded) -> None:
        """`decoded` (vmrt.isa.decoder.Decoded, at frame.pc) is about to execute."""

    def on_return(self, frame: "VMFrame") -> None:
        """The frame is leaving: returned, or unwinding when `frame.error` is set."""


def _register_key(name: str) -> str:
    """`%i4:5`, `%i4`, `i4`, `%R2` and `r2` all name a local of generated code."""
    name = name.lstrip("%").split(":", 1)[0]
    return name[0].lower() + name[1:] if name[:1] in ("R", "I") else name


class Registers:
    """A read-only view of a frame's registers by name (`i0`, `%i2:3`, `r1`).

    Integer registers hold Python ints (i32 or the whole i64 of a pair) or
    floats (f32/f64); ref registers hold ref objects or None. Registers the
    function never touches do not exist.
    """

    def __init__(self, values: dict):
        self._values = {k: v for k, v in values.items() if _is_register_name(k)}

    def __getitem__(self, name: str):
        try:
            return self._values[_register_key(name)]
        except KeyError:
            raise KeyError(f"no register {name!r} in this frame") from None

    def get(self, name: str, default=None):
        return self._values.get(_register_key(name), default)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and _register_key(name) in self._values

    def __iter__(self):
        return iter(sorted(self._values, key=lambda n: (n[0], int(n[1:]))))

    def __len__(self) -> int:
        return len(self._values)

    def items(self):
        return [(name, self._values[name]) for name in self]

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}: {v!r}" for k, v in self.items()) + "}"


def _is_register_name(name: str) -> bool:
    return len(name) > 1 and name[0] in "ir" and name[1:].isdigit()


class FunctionInfo:
    """What hooks know of one bytecode function: names and decoded instructions."""

    def __init__(self, instance, ordinal: int):
        module = instance.module
        self.instance = instance
        self.ordinal = ordinal
        self.module_name = module.name
        self.name = module.function_name(ordinal)
        self.full_name = f"{module.name}.{self.name}"
        self.instructions = {d.pc: d for d in module.instructions(ordinal)}

    def __repr__(self) -> str:
        return f"<vmrt function {self.full_name}>"


class VMFrame:
    """One activation of a bytecode function, seen by hooks."""

    __slots__ = ("function", "pc", "python_frame", "error", "data", "__weakref__")

    def __init__(self, function: FunctionInfo, python_frame):
        self.function = function
        self.pc = 0
        self.python_frame = python_frame  # None once the frame has left
        self.error: BaseException | None = None
        self.data: dict = {}  # scratch space for hooks (e.g. the profiler's clock)

    @property
    def instance(self):
        return self.function.instance

    @property
    def name(self) -> str:
        return self.function.full_name

    @property
    def instruction(self):
        """The decoded instruction at `pc`."""
        return self.function.instructions.get(self.pc)

    @property
    def active(self) -> bool:
        return self.python_frame is not None

    @property
    def registers(self) -> Registers:
        """A snapshot of the registers (taken now; stale after the frame moves on)."""
        frame = self.python_frame
        return Registers(frame.f_locals if frame is not None else {})

    @property
    def location(self) -> str | None:
        """file:line:col of the instruction at `pc`, from the debug database."""
        return self.instance.module.source_location(self.function.ordinal, self.pc)

    def callers(self, limit: int | None = None) -> list["VMFrame"]:
        """Active VM frames that called this one, innermost first."""
        live = self.instance.context.hook_dispatcher.live
        out = []
        frame = self.python_frame.f_back if self.python_frame is not None else None
        while frame is not None and (limit is None or len(out) < limit):
            vm_frame = live.get(frame)
            if vm_frame is not None:
                out.append(vm_frame)
            frame = frame.f_back
        return out

    @property
    def caller(self) -> "VMFrame | None":
        callers = self.callers(limit=1)
        return callers[0] if callers else None

    def stack(self) -> list["VMFrame"]:
        """This frame and its callers, innermost first."""
        return [self] + self.callers()

    def label(self) -> str:
        """`module.function+0000001A`, the VM stack trace spelling."""
        return f"{self.name}+{self.pc:08X}"

    def __repr__(self) -> str:
        return f"<VMFrame {self.label()}>"


class HookDispatcher:
    """Per-context fan-out of instrumented code's events to its hooks."""

    def __init__(self, hooks=()):
        self.hooks: list[ExecutionHooks] = list(hooks)
        self.live: dict = {}  # Python frame -> VMFrame of every active frame
        self._functions: dict = {}
        self._lock = threading.Lock()

    def add(self, hook: ExecutionHooks) -> None:
        with self._lock:
            self.hooks = self.hooks + [hook]  # copy: a running STEP keeps its list

    def remove(self, hook: ExecutionHooks) -> None:
        with self._lock:
            self.hooks = [h for h in self.hooks if h is not hook]

    def function_info(self, instance, ordinal: int) -> FunctionInfo:
        key = (id(instance), ordinal)
        info = self._functions.get(key)
        if info is None or info.instance is not instance:
            info = self._functions[key] = FunctionInfo(instance, ordinal)
        return info

    def bindings(self, instance) -> dict:
        """The names instrumented code of `instance` calls (see vmrt.vm.codegen)."""
        live = self.live
        getframe = sys._getframe

        def enter(ordinal):
            python_frame = getframe(1)
            frame = VMFrame(self.function_info(instance, ordinal), python_frame)
            live[python_frame] = frame
            for hook in self.hooks:
                hook.on_call(frame)
            return frame

        def step(frame, pc):
            frame.pc = pc
            hooks = self.hooks
            if hooks:
                decoded = frame.function.instructions[pc]
                for hook in hooks:
                    hook.on_instruction(frame, decoded)

        def unwind(frame):
            frame.error = sys.exc_info()[1]

        def leave(frame):
            try:
                for hook in self.hooks:
                    hook.on_return(frame)
            finally:
                live.pop(frame.python_frame, None)
                frame.python_frame = None  # breaks the frame <-> locals cycle

        return {"ENTER": enter, "STEP": step, "UNWIND": unwind, "LEAVE": leave}


class FunctionProfile:
    """Counters of one function: calls, instructions, inclusive and self time."""

    __slots__ = ("name", "calls", "instructions", "total_ns", "self_ns")

    def __init__(self, name: str):
        self.name = name
        self.calls = 0
        self.instructions = 0
        self.total_ns = 0
        self.self_ns = 0

    def __repr__(self) -> str:
        return (f"<FunctionProfile {self.name} calls={self.calls} "
                f"instructions={self.instructions} total={self.total_ns / 1e6:.3f}ms>")


class Profiler(ExecutionHooks):
    """Counts executed instructions (block markers excluded) and wall time per function.

    Time is wall-clock from entry to exit, hooks' own cost included, so it is
    useful to compare functions, not as an absolute; a frame suspended by a
    yield keeps its clock running. Self time excludes time in bytecode callees.
    """

    def __init__(self, clock=time.perf_counter_ns):
        self.functions: dict[str, FunctionProfile] = {}
        self._clock = clock
        self._local = threading.local()

    def _entry(self, name: str) -> FunctionProfile:
        entry = self.functions.get(name)
        if entry is None:
            entry = self.functions[name] = FunctionProfile(name)
        return entry

    def on_call(self, frame):
        self._entry(frame.name).calls += 1
        frame.data["profile.start"] = self._clock()
        frame.data["profile.children"] = 0

    def on_instruction(self, frame, decoded):
        if decoded.instruction.kind != "marker":
            entry = frame.data.get("profile.entry")
            if entry is None:
                entry = frame.data["profile.entry"] = self._entry(frame.name)
            entry.instructions += 1

    def on_return(self, frame):
        start = frame.data.get("profile.start")
        if start is None:
            return
        elapsed = self._clock() - start
        entry = self._entry(frame.name)
        entry.total_ns += elapsed
        entry.self_ns += elapsed - frame.data.get("profile.children", 0)
        caller = frame.caller
        if caller is not None:
            parent = caller.data
            parent["profile.children"] = parent.get("profile.children", 0) + elapsed

    def reset(self) -> None:
        self.functions.clear()

    def report(self) -> str:
        """A table, busiest function first."""
        rows = sorted(self.functions.values(), key=lambda e: (-e.instructions, e.name))
        width = max([len("function")] + [len(e.name) for e in rows])
        lines = [f"{'function':<{width}}  {'calls':>8}  {'instructions':>12}  "
                 f"{'total ms':>10}  {'self ms':>10}"]
        for e in rows:
            lines.append(f"{e.name:<{width}}  {e.calls:>8}  {e.instructions:>12}  "
                         f"{e.total_ns / 1e6:>10.3f}  {e.self_ns / 1e6:>10.3f}")
        total = sum(e.instructions for e in rows)
        lines.append(f"{'(all)':<{width}}  {sum(e.calls for e in rows):>8}  {total:>12}")
        return "\n".join(lines) + "\n"


class TimelineHooks(ExecutionHooks):
    """Records every bytecode function call as a span of a vmrt.timeline.Timeline
    (category `vm`), on the thread that ran it: a complete event made on return, so
    a frame suspended by a yield still makes one span from entry to exit."""

    def __init__(self, timeline):
        self.timeline = timeline

    def on_call(self, frame):
        frame.data["timeline.start"] = self.timeline.now()

    def on_return(self, frame):
        start = frame.data.get("timeline.start")
        if start is not None:
            error = frame.error
            self.timeline.span(frame.name, "vm", start, args=None if error is None else
                               {"error": f"{type(error).__name__}: {error}"[:200]})
