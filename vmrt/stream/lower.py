"""Lowering a stream program to a VM module (vmasm for vmrt.asm) that runs its
functions on the HAL, wave by wave, with Python kernels as dispatches.

    vmasm = lower_program(program)                  # text, for `vmrt asm` / inspection
    vmfb = compile_program(program)                 # the module bytes

What each function becomes (see vmrt/stream/README.md, "Lowering"):

- arguments and results are `!hal.buffer_view`s; an argument may have any shape
  and element type but exactly the declared number of bytes; results are
  `Nxui8` views. A result tied to an argument is a view of the argument's buffer.
- all transients live in one slab from one `hal.device.queue.alloca`, at the
  offsets of the favor's slab layout; every other new resource gets an alloca
  of its own (or the buffer io_parameters.load returns).
- the waves become one command buffer: each wave's fills, copies and dispatches
  between `execution_barrier`s. A wave with parameter gathers splits it: the
  gathers (one `io_parameters.gather` per scope and target) run beside that
  wave's commands, and the next command buffer waits for both.
- `param.load`s of non-transient resources are hoisted to the start, one
  `io_parameters.load` per scope; a transient's load is a gather into the slab
  in its wave.
- dispatches call executable `vmrt-python-v0` functions (vmrt.hal.python_loader),
  one per (callee, binding count); the bindings are the operand ranges, then the
  untied results. Fills the HAL cannot express (8-byte patterns, unaligned
  offsets) and overlapping copies within one resource use the builtin kernels
  `vmrt.fill` / `vmrt.copy`.
- `__init` picks device 0, checks it supports `vmrt-python-v0` and creates the
  executable.

Everything is ordered by fences; the function awaits the last one and fails with
the queue's error if a command failed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from vmrt.elements import ElementType
from vmrt.errors import StatusCode
from vmrt.hal.python_loader import FORMAT as PYTHON_FORMAT
from vmrt.hal.python_loader import encode_executable
from vmrt.hal.types import BufferUsage, EncodingType, MemoryType
from vmrt.stream.allocation import Plan, plan
from vmrt.stream.evaluate import pattern_bytes
from vmrt.stream.ir import Func, Lifetime, Op, Program, StreamError
from vmrt.stream.partition import DEFAULT_FAVOR, Favor, resolve_favor
from vmrt.stream.verify import verify_plan

#: calling conventions of the imports used (runtime/src/iree/modules/hal/exports.inl,
#: runtime/src/iree/modules/io/parameters/exports.inl).
IMPORTS = {
    "hal.buffer.length": "0r_I",
    "hal.buffer_view.buffer": "0r_r",
    "hal.buffer_view.create": "0rIIiiCID_r",
    "hal.command_buffer.copy_buffer": "0riirIrIII_v",
    "hal.command_buffer.create": "0riiIi_r",
    "hal.command_buffer.dispatch": "0rrIiiiICiDCiirIID_v",
    "hal.command_buffer.execution_barrier": "0riiI_v",
    "hal.command_buffer.fill_buffer": "0rrIIiIiI_v",
    "hal.command_buffer.finalize": "0r_v",
    "hal.device.query.i64": "0rrr_iI",
    "hal.device.queue.alloca": "0rIrrIiiII_r",
    "hal.device.queue.dealloca": "0rIrrrI_v",
    "hal.device.queue.execute": "0rIrrrI_v",
    "hal.devices.get": "0i_r",
    "hal.executable.create": "0rIrrr_r",
    "hal.fence.await": "0iICrD_i",
    "hal.fence.create": "0rI_r",
    "hal.fence.join": "0ICrD_r",
    "io_parameters.gather": "0rIrrrrrrr_v",
    "io_parameters.load": "0rIrrrIiirrr_r",
}

#: what transients, results and loaded parameters are allocated as (iree-compile's choice).
MEMORY_TYPES = int(MemoryType.DEVICE_LOCAL)
BUFFER_USAGE = int(BufferUsage.TRANSFER | BufferUsage.DISPATCH_STORAGE)
COMMAND_BUFFER_ONE_SHOT = 1
COMMAND_CATEGORIES = 3                     # transfer | dispatch
BARRIER_SOURCE_STAGES = 28                 # dispatch | transfer | command retire
BARRIER_TARGET_STAGES = 13                 # command issue | dispatch | transfer
RESULT_ELEMENT_TYPE = int(ElementType.UINT_8)
DENSE = int(EncodingType.DENSE_ROW_MAJOR)
MAX_BINDINGS = 32                          # the hal module's limit per dispatch

_KEY_ENTRY = struct.Struct("<II")          # offset, length into the key data
_SPAN_ENTRY = struct.Struct("<QQQ")        # parameter offset, buffer offset, length


def parameter_tables(entries) -> tuple[bytes, bytes, bytes]:
    """io_parameters' key table, key data and spans for (key, parameter offset,
    buffer offset, length) entries (laid out as runtime/src/iree/modules/io/
    parameters/module.c reads them)."""
    table, data, spans = bytearray(), bytearray(), bytearray()
    for key, parameter_offset, buffer_offset, length in entries:
        encoded = key.encode("utf-8")
        table += _KEY_ENTRY.pack(len(data), len(encoded))
        data += encoded
        spans += _SPAN_ENTRY.pack(parameter_offset, buffer_offset, length)
    return bytes(table), bytes(data) or b"\0", bytes(spans)


@dataclass
class KernelTable:
    """The executable's functions: (name, kernel, binding count, constant count)."""

    functions: list = field(default_factory=list)
    _ordinals: dict = field(default_factory=dict)

    def ordinal(self, kernel: str, bindings: int, constants: int = 0) -> int:
        key = (kernel, bindings, constants)
        if key not in self._ordinals:
            self._ordinals[key] = len(self.functions)
            self.functions.append((f"{kernel}/{bindings}", kernel, bindings, constants))
        return self._ordinals[key]


class _Rodata:
    def __init__(self):
        self.segments: list[bytes] = []
        self._index: dict[bytes, int] = {}

    def __call__(self, data: bytes) -> int:
        data = bytes(data)
        if data not in self._index:
            self._index[data] = len(self.segments)
            self.segments.append(data)
        return self._index[data]


def _quote(text: str) -> str:
    # vm.fail strings run to the last quote of the line; keep them on one line.
    return text.replace("\n", " ")


class _FuncEmitter:
    """Registers and instructions of one function. Integer operands and results live
    in scratch registers, handed out afresh after each `release_scratch`; refs get a
    register each (a function holds a few hundred at most)."""

    def __init__(self, rodata: _Rodata, imports: set):
        self.lines: list[str] = []
        self.rodata = rodata
        self.imports = imports
        self.next_ref = 0
        self.next_int = 0
        self.fail_blocks: list[tuple[str, int, str]] = []

    def ref(self) -> str:
        register = f"%r{self.next_ref}"
        self.next_ref += 1
        return register

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)

    def label(self, name: str) -> None:
        self.lines.append(f"^{name}:")

    def scratch(self, wide: bool) -> int:
        if wide and self.next_int % 2:
            self.next_int += 1
        register = self.next_int
        self.next_int += 2 if wide else 1
        return register

    def const(self, kind: str, value: int, cache: dict) -> str:
        """An i32 ('i') or i64 ('I') constant in a scratch register."""
        key = (kind, value)
        if key not in cache:
            wide = kind == "I"
            register = self.scratch(wide)
            name = f"%i{register}:{register + 1}" if wide else f"%i{register}"
            op = "vm.const.i64" if wide else "vm.const.i32"
            self.emit(f"{name} = {op}.zero" if value == 0 else f"{name} = {op} {value}")
            cache[key] = f"%i{register}"
        return cache[key]

    def rodata_ref(self, data: bytes) -> str:
        register = self.ref()
        self.emit(f"{register} = vm.const.ref.rodata {self.rodata(data)}")
        return register

    def call(self, name: str, args, results: str = "", spans=None) -> list[str]:
        """Calls import `name`. `args` are registers (str) or ('i'|'I', int) constants;
        `spans` (for variadic imports) gives the segment sizes. `results` is the
        result kinds ('r', 'i', 'I'); their registers are returned."""
        self.imports.add(name)
        cache: dict = {}
        operands = [a if isinstance(a, str) else self.const(a[0], a[1], cache) for a in args]
        outs = []
        for kind in results:
            if kind == "r":
                outs.append(self.ref())
            else:
                outs.append(f"%i{self.scratch(kind == 'I')}")
        target = ", ".join(outs) + " = " if outs else ""
        if spans is None:
            self.emit(f"{target}vm.call @{name}({', '.join(operands)})")
        else:
            self.emit(f"{target}vm.call.variadic @{name} segments[{', '.join(map(str, spans))}]"
                      f"({', '.join(operands)})")
        return outs

    def release_scratch(self) -> None:
        self.next_int = 0


_NON_SPAN = 65535


class _Location:
    """Where a storage lives: a buffer register and a byte offset in it."""

    __slots__ = ("buffer", "offset")

    def __init__(self, buffer: str, offset: int = 0):
        self.buffer = buffer
        self.offset = offset


class _FunctionLowering:
    def __init__(self, func: Func, schedule_plan: Plan, kernels: KernelTable,
                 rodata: _Rodata, imports: set):
        self.func = func
        self.plan = schedule_plan
        self.analysis = schedule_plan.analysis
        self.kernels = kernels
        self.e = _FuncEmitter(rodata, imports)
        self.locations: dict[int, _Location] = {}
        self.fence_count = 0

    # -- helpers -----------------------------------------------------------------------------
    def storage(self, value) -> int:
        return self.analysis.storage_of[value]

    def where(self, use) -> tuple[str, int, int]:
        """(buffer register, absolute offset, length) of an operand range."""
        location = self.locations[self.storage(use.value)]
        return location.buffer, location.offset + use.offset, use.length

    def new_fence(self) -> str:
        (fence,) = self.e.call("hal.fence.create", [self.device, ("I", 0)], "r")
        self.e.release_scratch()
        return fence

    def join(self, fences: list[str]) -> str:
        if not fences:
            return self.null
        if len(fences) == 1:
            return fences[0]
        (joined,) = self.e.call("hal.fence.join", [("I", 0), *fences], "r",
                                spans=[_NON_SPAN, len(fences)])
        self.e.release_scratch()
        return joined

    # -- the function -------------------------------------------------------------------------
    def lower(self) -> list[str]:
        func, e = self.func, self.e
        arg_regs = [e.ref() for _ in func.args]
        signature = ", ".join(f"{r}: !vm.ref<?>" for r in arg_regs)
        results = ", ".join("!vm.ref<?>" for _ in func.returns)
        self.null = e.ref()
        e.emit(f"{self.null} = vm.const.ref.zero")
        self.device = e.ref()
        e.emit(f"{self.device} = vm.global.load.ref @device : !hal.device")
        self.executable = e.ref()
        e.emit(f"{self.executable} = vm.global.load.ref @executable : !hal.executable")

        self._bind_arguments(arg_regs)
        ready = self._allocate()
        ready = self._run_waves(ready)
        self._finish(ready)

        header = [f"vm.export @{func.name}",
                  f"vm.func @{func.name}({signature}) -> ({results}) {{", "^bb0:"]
        return header + e.lines + ["}"]

    def _bind_arguments(self, arg_regs: list[str]) -> None:
        e = self.e
        for index, (value, register) in enumerate(zip(self.func.args, arg_regs)):
            (buffer,) = e.call("hal.buffer_view.buffer", [register], "r")
            (length,) = e.call("hal.buffer.length", [buffer], "I")
            expected = e.const("I", value.type.size, {})
            wrong = f"%i{e.scratch(False)}"
            e.emit(f"{wrong} = vm.cmp.ne.i64 {_pair(length)}, {_pair(expected)}")
            e.emit(f"vm.cond_br {wrong}, ^bad_argument{index}(), ^argument{index}()")
            e.label(f"argument{index}")
            e.release_scratch()
            e.fail_blocks.append((f"bad_argument{index}", int(StatusCode.INVALID_ARGUMENT),
                                  f"argument {index} (%{value.name}) of @{self.func.name} must "
                                  f"be a buffer view of exactly {value.type.size} bytes"))
            self.locations[self.storage(value)] = _Location(buffer)

    def _alloca(self, size: int) -> tuple[str, str]:
        fence = self.new_fence()
        (buffer,) = self.e.call("hal.device.queue.alloca", [
            self.device, ("I", -1), self.null, fence, ("I", 0), ("i", MEMORY_TYPES),
            ("i", BUFFER_USAGE), ("I", size), ("I", 0)], "r")
        self.e.release_scratch()
        return buffer, fence

    def _allocate(self) -> str:
        """Allocas for the slab and every new non-transient resource, the hoisted
        parameter loads; returns the fence all of them signal."""
        fences = []
        self.slab = None
        if self.plan.layout.size:
            self.slab, fence = self._alloca(self.plan.layout.size)
            fences.append(fence)
            for piece in self.plan.layout.slices:
                self.locations[piece.storage] = _Location(self.slab, piece.offset)
        loads: dict[str, list] = {}
        for storage in self.analysis.storages:
            if storage.def_op is None or storage.is_transient:
                continue
            op = self.func.ops[storage.def_op]
            if op.kind == "param.load":
                loads.setdefault(op.scope, []).append((storage, op))
                continue
            buffer, fence = self._alloca(storage.size)
            fences.append(fence)
            self.locations[storage.id] = _Location(buffer)
        for scope, entries in loads.items():
            fences.append(self._load(scope, entries))
        return self.join(fences)

    def _load(self, scope: str, entries) -> str:
        e = self.e
        fence = self.new_fence()
        table, data, spans = parameter_tables(
            [(op.keys[0], 0, 0, storage.size) for storage, op in entries])
        scope_ref = e.rodata_ref(scope.encode("utf-8"))
        table_ref, data_ref, spans_ref = (e.rodata_ref(table), e.rodata_ref(data),
                                          e.rodata_ref(spans))
        (buffers,) = e.call("io_parameters.load", [
            self.device, ("I", -1), self.null, fence, scope_ref, ("I", -1),
            ("i", MEMORY_TYPES), ("i", BUFFER_USAGE), table_ref, data_ref, spans_ref], "r")
        for index, (storage, _) in enumerate(entries):
            buffer = e.ref()
            position = e.const("i", index, {})
            e.emit(f"{buffer} = vm.list.get.ref {buffers}, {position} : !hal.buffer")
            e.release_scratch()
            self.locations[storage.id] = _Location(buffer)
        e.release_scratch()
        return fence

    # -- waves -----------------------------------------------------------------------------------
    def _is_parameter_op(self, op: Op) -> bool:
        """Ops run by io_parameters in their wave (hoisted loads excluded)."""
        return op.kind == "param.gather" or (
            op.kind == "param.load" and op.results[0].type.lifetime is Lifetime.TRANSIENT)

    def _run_waves(self, ready: str) -> str:
        pending: list[list[Op]] = []
        for wave in self.plan.schedule.waves:
            ops = [self.func.ops[i] for i in wave]
            commands = [op for op in ops if op.kind in ("splat", "fill", "copy", "dispatch")]
            gathers = [op for op in ops if self._is_parameter_op(op)]
            if not gathers:
                if commands:
                    pending.append(commands)
                continue
            if pending:
                ready = self._execute(pending, ready)
                pending = []
            fences = []
            if commands:
                fences.append(self._execute([commands], ready, join=False))
            fences.extend(self._gather(gathers, ready))
            ready = self.join(fences)
        if pending:
            ready = self._execute(pending, ready)
        return ready

    def _execute(self, waves: list[list[Op]], wait: str, join: bool = True) -> str:
        e = self.e
        (command_buffer,) = e.call("hal.command_buffer.create", [
            self.device, ("i", COMMAND_BUFFER_ONE_SHOT), ("i", COMMAND_CATEGORIES),
            ("I", -1), ("i", 0)], "r")
        e.release_scratch()
        for number, wave in enumerate(waves):
            if number:
                e.call("hal.command_buffer.execution_barrier", [
                    command_buffer, ("i", BARRIER_SOURCE_STAGES), ("i", BARRIER_TARGET_STAGES),
                    ("I", 0)])
                e.release_scratch()
            for op in wave:
                self._record(command_buffer, op)
                e.release_scratch()
        e.call("hal.command_buffer.finalize", [command_buffer])
        signal = self.new_fence()
        e.call("hal.device.queue.execute", [self.device, ("I", -1), wait, signal,
                                            command_buffer, ("I", 0)])
        e.release_scratch()
        return signal

    def _gather(self, ops: list[Op], wait: str) -> list[str]:
        """One io_parameters.gather per (scope, target buffer) of the wave."""
        groups: dict[tuple[str, str], list] = {}
        for op in ops:
            if op.kind == "param.load":
                location = self.locations[self.storage(op.results[0])]
                entry = (op.keys[0], 0, location.offset, op.results[0].type.size)
                groups.setdefault((op.scope, location.buffer), []).append(entry)
                continue
            for key, use in zip(op.keys, op.operands):
                buffer, offset, length = self.where(use)
                groups.setdefault((op.scope, buffer), []).append((key, 0, offset, length))
        e = self.e
        fences = []
        for (scope, buffer), entries in groups.items():
            fence = self.new_fence()
            table, data, spans = parameter_tables(entries)
            scope_ref = e.rodata_ref(scope.encode("utf-8"))
            refs = [e.rodata_ref(table), e.rodata_ref(data), e.rodata_ref(spans)]
            e.call("io_parameters.gather", [self.device, ("I", -1), wait, fence, scope_ref,
                                            buffer, *refs])
            e.release_scratch()
            fences.append(fence)
        return fences

    # -- commands ----------------------------------------------------------------------------------
    def _record(self, command_buffer: str, op: Op) -> None:
        if op.kind == "splat":
            location = self.locations[self.storage(op.results[0])]
            self._fill(command_buffer, location.buffer, location.offset,
                       op.results[0].type.size, pattern_bytes(op.pattern))
        elif op.kind == "fill":
            self._fill(command_buffer, *self.where(op.operands[0]), pattern_bytes(op.pattern))
        elif op.kind == "copy":
            self._copy(command_buffer, op)
        else:
            name = "::".join(op.callee)
            bindings = [self.where(use) for use in op.operands]
            for result, tie in zip(op.results, op.ties):
                if tie is None:
                    location = self.locations[self.storage(result)]
                    bindings.append((location.buffer, location.offset, result.type.size))
            if len(bindings) > MAX_BINDINGS:
                raise StreamError(f"{op.describe()} has {len(bindings)} bindings; a dispatch "
                                  f"takes at most {MAX_BINDINGS}", op.loc)
            self._dispatch(command_buffer, name, bindings)

    def _dispatch(self, command_buffer: str, kernel: str, bindings, constants=()) -> None:
        ordinal = self.kernels.ordinal(kernel, len(bindings), len(constants))
        args = [command_buffer, self.executable, ("I", ordinal), ("i", 1), ("i", 1), ("i", 1),
                ("I", 0)]
        args += [("i", c) for c in constants]
        for buffer, offset, length in bindings:
            args += [("i", 0), ("i", 0), buffer, ("I", offset), ("I", length)]
        self.e.call("hal.command_buffer.dispatch", args,
                    spans=[_NON_SPAN] * 7 + [len(constants), len(bindings)])

    def _fill(self, command_buffer: str, buffer: str, offset: int, length: int,
              pattern: bytes) -> None:
        # The HAL fills with 1, 2 or 4-byte patterns at offsets aligned to them.
        while len(pattern) > 1 and pattern[:len(pattern) // 2] == pattern[len(pattern) // 2:]:
            pattern = pattern[:len(pattern) // 2]
        if len(pattern) <= 4 and offset % len(pattern) == 0:
            self.e.call("hal.command_buffer.fill_buffer", [
                command_buffer, buffer, ("I", offset), ("I", length), ("i", 0),
                ("I", int.from_bytes(pattern, "little")), ("i", len(pattern)), ("I", 0)])
            return
        word = int.from_bytes(pattern.ljust(8, b"\0"), "little")
        constants = (_i32(word & 0xFFFFFFFF), _i32(word >> 32), len(pattern))
        self._dispatch(command_buffer, "vmrt.fill", [(buffer, offset, length)], constants)

    def _copy(self, command_buffer: str, op: Op) -> None:
        source, target = op.operands
        src = self.where(source)
        dst = self.where(target)
        same = self.storage(source.value) == self.storage(target.value)
        if same and source.offset < target.end and target.offset < source.end:
            self._dispatch(command_buffer, "vmrt.copy", [src, dst])
            return
        self.e.call("hal.command_buffer.copy_buffer", [
            command_buffer, ("i", 0), ("i", 0), src[0], ("I", src[1]), dst[0], ("I", dst[1]),
            ("I", src[2]), ("I", 0)])

    # -- the end -----------------------------------------------------------------------------------
    def _finish(self, ready: str) -> None:
        e = self.e
        if self.slab is not None:
            done = self.new_fence()
            e.call("hal.device.queue.dealloca", [self.device, ("I", -1), ready, done,
                                                 self.slab, ("I", 0)])
            e.release_scratch()
            ready = done
        if ready != self.null:
            (status,) = e.call("hal.fence.await", [("i", -1), ("I", 0), ready], "i",
                               spans=[_NON_SPAN, _NON_SPAN, 1])
            # The failure block reads the status register before anything reuses it.
            e.emit(f"vm.cond_br {status}, ^wait_failed(), ^done()")
            e.label("done")
            e.release_scratch()
        views = []
        for value in self.func.returns:
            location = self.locations[self.storage(value)]
            size = value.type.size
            (view,) = e.call("hal.buffer_view.create", [
                location.buffer, ("I", location.offset), ("I", size),
                ("i", RESULT_ELEMENT_TYPE), ("i", DENSE), ("I", size)], "r",
                spans=[_NON_SPAN] * 5 + [1])
            e.release_scratch()
            views.append(view)
        e.emit("vm.return" + (" " + ", ".join(views) if views else ""))
        if ready != self.null:
            e.label("wait_failed")
            e.emit(f'vm.fail {status}, "@{_quote(self.func.name)}: waiting for the device '
                   'failed"')
        for name, code, message in e.fail_blocks:
            e.label(name)
            e.emit(f"%i0 = vm.const.i32 {code}")
            e.emit(f'vm.fail %i0, "{_quote(message)}"')


def _pair(register: str) -> str:
    """`%iN` as instructions other than calls write an i64 register: `%iN:N+1`."""
    number = int(register[2:])
    return f"%i{number}:{number + 1}"


def _i32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


def _module_name(name: str) -> str:
    # A '.' would split `module.function` lookups in the wrong place.
    return name.replace(".", "_")


@dataclass
class Lowering:
    """A lowered program: the vmasm text and what went into it."""

    vmasm: str
    module_name: str
    plans: dict[str, Plan]
    kernels: KernelTable


def lower(program: Program, default_favor: Favor | str = DEFAULT_FAVOR, *,
          force: bool = False) -> Lowering:
    """Lowers every function with its favor (the function's or program's
    `partitioning` attribute, else `default_favor`; with `force`, always it)."""
    rodata = _Rodata()
    imports: set[str] = set()
    kernels = KernelTable()
    plans = {}
    bodies = []
    for func in program.funcs:
        if func.name.startswith("__"):
            raise StreamError(f"function name @{func.name} is reserved (names starting with "
                              "'__' are the module's own)", func.loc)
        favor = default_favor if force else resolve_favor(program, func, default_favor)
        plans[func.name] = plan(func, favor)
        verify_plan(plans[func.name])       # lowered only once proven (vmrt.stream.verify)
        bodies.append(_FunctionLowering(func, plans[func.name], kernels, rodata,
                                        imports).lower())
    name = _module_name(program.name)
    lines = [f"// Lowered from stream program @{program.name} by vmrt.stream.lower.",
             f"vm.module @{name}"]
    imports |= {"hal.devices.get", "hal.device.query.i64", "hal.executable.create"}
    lines += [f'vm.import @{n} cconv "{IMPORTS[n]}"' for n in sorted(imports)]
    executable_data = encode_executable(kernels.functions)
    format_rodata = rodata(PYTHON_FORMAT.encode())
    category_rodata = rodata(b"hal.executable.format")
    data_rodata = rodata(executable_data)
    lines += [f"vm.rodata[{i}] = {data.hex().upper()}" for i, data in enumerate(rodata.segments)]
    lines += ["vm.global.ref private mutable @device : !hal.device",
              "vm.global.ref private mutable @executable : !hal.executable",
              "vm.export @__init",
              "vm.func @__init() -> () {",
              "^bb0:",
              "  %i0 = vm.const.i32.zero",
              "  %r0 = vm.call @hal.devices.get(%i0)",
              f"  %r1 = vm.const.ref.rodata {category_rodata}",
              f"  %r2 = vm.const.ref.rodata {format_rodata}",
              "  %i1, %i2:3 = vm.call @hal.device.query.i64(%r0, %r1, %r2)",
              "  %i4 = vm.cmp.nz.i64 %i2:3",
              "  %i4 = vm.and.i32 %i1, %i4",
              "  vm.cond_br %i4, ^supported(), ^unsupported()",
              "^supported:",
              f"  %r3 = vm.const.ref.rodata {data_rodata}",
              "  %r4 = vm.const.ref.zero",
              "  %i6:7 = vm.const.i64 -1",
              "  %r5 = vm.call @hal.executable.create(%r0, %i6, %r2, %r3, %r4)",
              "  vm.global.store.ref %r0, @device : !hal.device",
              "  vm.global.store.ref %r5, @executable : !hal.executable",
              "  vm.return",
              "^unsupported:",
              f"  %i5 = vm.const.i32 {int(StatusCode.UNAVAILABLE)}",
              f'  vm.fail %i5, "HAL device 0 does not support the {PYTHON_FORMAT} executable '
              'format (its device needs vmrt.hal.python_loader.PythonLoader)"',
              "}"]
    for body in bodies:
        lines += body
    return Lowering("\n".join(lines) + "\n", name, plans, kernels)


def lower_program(program: Program, default_favor: Favor | str = DEFAULT_FAVOR, *,
                  force: bool = False) -> str:
    """The vmasm text of the lowered module."""
    return lower(program, default_favor, force=force).vmasm


def compile_program(program: Program, default_favor: Favor | str = DEFAULT_FAVOR, *,
                    force: bool = False) -> bytes:
    """The .vmfb bytes of the lowered module (assembled by vmrt.asm)."""
    from vmrt.asm import AssemblyError, assemble
    text = lower_program(program, default_favor, force=force)
    try:
        return assemble(text, filename=f"<stream @{program.name}>")
    except AssemblyError as error:
        raise StreamError(f"internal error: the lowered module does not assemble: "
                          f"{error.format()}", code=StatusCode.INTERNAL) from error
