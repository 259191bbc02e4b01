"""The host side of the C tier: which tier runs, entries that turn Python values
into the C runtime's (vmrt/vm/ctier/runtime.h) and back, and C failures turned
into the very VMError the Python tier raises for the same instruction.

VMRT_TIER=auto (the default) runs the functions the C tier can compile in C when a
compiler or a cached build is there, else says so once and runs Python; `c` the
same, failing when the build fails; `python` never builds. Contexts with limits
or hooks run the Python tier (its limits and hooks are compiled into its code).
"""

from __future__ import annotations

import re
import sys
import threading
import time
import types

from vmrt.errors import DepthExceeded, StatusCode, VMError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.ctier.analysis import argument_registers, compilable_functions, fragment_types
from vmrt.vm.ctier.build import BuildError, compiler_identity, load_or_build
from vmrt.vm.ctier.cgen import ErrorKind as E, generate_module
from vmrt.vm.list import VMList

#: VMRT_NAMED_BUFFER's operand numbers (runtime.h).
OPERAND_NAMES = ("source_buffer", "target_buffer", "lhs_buffer", "rhs_buffer")
KIND_BUFFER, KIND_LIST = 1, 2
_notice_lock = threading.Lock()
_noticed: set[str] = set()


def notice(text: str) -> None:
    """One line on stderr, once per process and text."""
    with _notice_lock:
        if text in _noticed:
            return
        _noticed.add(text)
    print(f"vmrt: {text}", file=sys.stderr)


class NotBuilt(Exception):
    """The module's C is not built, and this context may not build it."""


class Unsupported(Exception):
    """A value the C tier does not model: this call runs in the Python tier."""


class CModule:
    """The C build of one bytecode module: its compilable functions, compiled."""

    def __init__(self, module, may_build: bool = True):
        self.module = module
        self.shapes, self.reasons = compilable_functions(module)
        self.lib = self.ffi = None
        if self.shapes:
            built = load_or_build(self.digest(), lambda: generate_module(module, self.shapes),
                                  may_build)
            if built is None:
                raise NotBuilt()
            self.lib, self.ffi = built.lib, built.ffi
            if not getattr(built, "vmrt_callbacks", False):
                _bind_callbacks(self.ffi)
                built.vmrt_callbacks = True

    def digest(self) -> bytes:
        """All the generated C depends on: the module's code (content_digest) and what
        else the generator reads (type names, global storage, rodata, the shapes)."""
        module = self.module
        state = module.definition.module_state
        shapes = [(o, s.arguments, s.results) for o, s in sorted(self.shapes.items())]
        described = repr(([t.name for t in module.type_defs],
                          state.global_bytes_capacity if state is not None else 0,
                          len(module.rodata), shapes))
        return module.content_digest + described.encode()

    @classmethod
    def of(cls, module, tier: str, may_build: bool = True) -> "CModule | None":
        """The module's C build for a tier (None: the Python tier runs it all).
        `may_build` false (a context with limits: a build takes seconds no deadline
        allows for, and its Python part would hold the GIL from other calls): only a
        build this process or the cache already has, whatever the tier."""
        if tier == "python":
            return None
        if not may_build and "_c_module" not in module.__dict__:
            try:
                built = cls(module, may_build=False)
            except (NotBuilt, BuildError):
                return None
            module.__dict__["_c_module"] = built
            return built
        built = module.__dict__.get("_c_module")
        if built is None:
            with _notice_lock:
                built = module.__dict__.get("_c_module")
            if built is None:
                built = cls._build(module, tier)
                module.__dict__["_c_module"] = built
        return built or None

    @classmethod
    def _build(cls, module, tier: str):
        if tier == "auto" and compiler_identity() is None:
            try:
                return cls(module)  # a cached build needs no compiler
            except BuildError:
                notice("no C compiler: VM code runs in the Python tier "
                       "(VMRT_TIER=python says so and hides this line)")
                return False
        try:
            return cls(module)
        except BuildError as error:
            if tier == "c":
                raise
            notice(f"{error.message}; VM code runs in the Python tier")
            return False

    def instance(self, instance) -> "CInstance":
        bound = instance.__dict__.get("_c_instance") if hasattr(instance, "__dict__") else None
        if bound is None:
            bound = CInstance(self, instance)
            instance.__dict__["_c_instance"] = bound
        return bound


class CallRefs:
    """The C descriptors of one call's refs (one per object: refs compare by
    identity), and the Python objects behind them, kept alive for the call."""

    __slots__ = ("ffi", "descriptors", "keep", "objects")

    def __init__(self, ffi):
        self.ffi = ffi
        self.descriptors: dict[int, object] = {}
        self.keep: list = []
        self.objects: list = []

    def ref(self, obj):
        if obj is None:
            return self.ffi.NULL
        known = self.descriptors.get(id(obj))
        if known is not None:
            return known
        if isinstance(obj, VMBuffer):
            return self._buffer(obj)
        if isinstance(obj, VMList) and obj._ref_type is not None and obj._types is None:
            return self._list(obj)
        raise Unsupported(type(obj).__name__)

    def _descriptor(self, obj, kind: int):
        d = self.ffi.new("vmrt_ref *")
        d.kind, d.refcount, d.host_id = kind, -1, len(self.objects)
        self.objects.append(obj)
        self.keep.append(d)
        self.descriptors[id(obj)] = d
        return d

    def _buffer(self, buffer: VMBuffer):
        d = self._descriptor(buffer, KIND_BUFFER)
        # A memoryview of our own: the collector may clear the buffer's view (a member
        # of some cycle) while C still exports it, which CPython does not survive.
        data = self.ffi.from_buffer("uint8_t[]", memoryview(buffer._view))
        self.keep.append(data)
        d.data, d.length, d.is_mutable = data, buffer.length, bool(buffer.access & 1)
        return d

    def _list(self, lst: VMList):
        d = self._descriptor(lst, KIND_LIST)
        values = lst._values
        items = self.ffi.new("vmrt_ref *[]", max(1, len(values)))
        for i, value in enumerate(values):
            # vm.list.get.ref of a buffer list: elements of another type read as null.
            items[i] = self.ref(value) if isinstance(value, VMBuffer) else self.ffi.NULL
        self.keep.append(items)
        d.items, d.count = items, len(values)
        return d


class CInstance:
    """One module instance's C state: its globals and rodata, and its entries."""

    def __init__(self, cmodule: CModule, instance):
        self.cmodule = cmodule
        self.instance = instance
        ffi = cmodule.ffi
        self.refs = CallRefs(ffi)  # rodata: alive as long as the instance
        self.state = ffi.new("vmrt_inst *")
        self.rw = ffi.from_buffer("uint8_t[]", instance.rwdata)
        self.state.rw, self.state.rw_size = self.rw, len(instance.rwdata)
        rodata = instance.module.rodata
        self.rodata = ffi.new("vmrt_ref *[]", max(1, len(rodata)))
        for i, buffer in enumerate(rodata):
            self.rodata[i] = self.refs.ref(buffer)
        self.state.rodata, self.state.rodata_count = self.rodata, len(rodata)
        self._local = threading.local()

    def new_context(self, meter=None):
        """A vmrt_ctx for one call, and the host state of limits (None without)."""
        if meter is None:  # one per thread: a C call never starts another on its thread
            c = getattr(self._local, "c", None)
            if c is None:
                c = self._local.c = self.cmodule.ffi.new("vmrt_ctx *")
                c.inst = self.state
                c.max_depth = sys.getrecursionlimit()
                c.fuel = UNLIMITED_FUEL
            return c, None
        limited = getattr(self._local, "limited", None)
        if limited is None or limited[1].meter is not meter:
            c = self.cmodule.ffi.new("vmrt_ctx *")
            c.inst = self.state
            c.max_depth = meter.max_depth
            call = CCall(meter)
            c.host = call.handle = self.cmodule.ffi.new_handle(call)
            self._local.limited = limited = (c, call)
        c, call = limited
        call.start(sys._getframe(1))
        c.fuel, meter.fuel_cell.cell_contents = meter.fuel_cell.cell_contents, 0
        return c, call

    def entry(self, ordinal: int, python_function, meter=None):
        """The callable the Python tier's code calls for function N (with limits, its
        depth last, as generated code passes it)."""
        shape = self.cmodule.shapes[ordinal]
        return make_entry(self, ordinal, [t for _, t in argument_registers(shape.arguments)],
                          fragment_types(shape.results), python_function, meter)

    def finish(self, c, call, refs, failed: bool):
        """After a C call: unspent fuel back to the meter; a failure raised."""
        if call is not None:
            meter = call.meter
            meter.fuel_cell.cell_contents += c.fuel
            call.frame = None
        if failed:
            error = c_error(self.instance, c, refs, call)
            c.err_kind = c.frame_count = 0  # (the thread's context serves its next call)
            raise error from None


#: Fuel of a context without limits: never runs out (VMRT_CHARGE still counts).
UNLIMITED_FUEL = 1 << 62


class CCall:
    """The host side of one C call under limits: its meter and deadline, and the
    error that stopped it (the C code reaches it through c->host)."""

    __slots__ = ("meter", "frame", "deadline", "error", "handle")
    _UNSET = object()

    def __init__(self, meter):
        self.meter = meter
        self.frame = None       # the Python frame that called C (call deadlines: limits.py)
        self.deadline = self._UNSET
        self.error = None
        self.handle = None

    def start(self, frame) -> None:
        """A new call on this thread (its state is reused: one per thread)."""
        self.frame, self.deadline, self.error = frame, self._UNSET, None

    def call_deadline(self):
        """As the Python tier's: found on the outermost VM frame, else started now."""
        if self.deadline is CCall._UNSET:
            meter = self.meter
            deadline = meter.call_deadline(self.frame) if self.frame is not None else None
            if deadline is None and meter.timeout is not None:
                deadline = time.monotonic() + meter.timeout
            self.deadline = deadline
        return self.deadline

    def refill(self, c, cost: int) -> int:
        meter = self.meter
        cell = meter.fuel_cell
        cell.cell_contents += c.fuel
        try:
            meter.refill_with(cost, meter.interruption_at(self.call_deadline()),
                              meter.MAX_NATIVE_SLICE)
        except BaseException as error:  # (FuelExhausted, DeadlineExceeded, Cancelled)
            self.error = error
            return 1
        finally:
            c.fuel, cell.cell_contents = cell.cell_contents, 0
        return 0

    def charge(self, nbytes: int) -> int:
        try:
            self.meter.charge_memory(nbytes)
        except BaseException as error:  # (MemoryLimitExceeded)
            self.error = error
            return 1
        return 0


def _bind_callbacks(ffi) -> None:
    """The `extern "Python"` functions of one built module (runtime.h)."""
    @ffi.def_extern(name="vmrt_refill_cb", error=1)
    def refill(c, cost):
        return ffi.from_handle(c.host).refill(c, cost)

    @ffi.def_extern(name="vmrt_charge_cb", error=1)
    def charge(call, nbytes):
        return ffi.from_handle(call).charge(nbytes)

    @ffi.def_extern(name="vmrt_uncharge_cb")
    def uncharge(call, nbytes):
        ffi.from_handle(call).meter.release_memory(nbytes)


def make_entry(cinstance: CInstance, ordinal: int, kinds, results, python_function,
               meter=None):
    lib, ffi = cinstance.cmodule.lib, cinstance.cmodule.ffi
    call_c = getattr(lib, f"vmrt_entry_{ordinal}")
    ref_positions = [i for i, k in enumerate(kinds) if k == "ref"]
    f32_positions = [i for i, k in enumerate(kinds) if k == "f32"]
    readers = [_RESULT_READERS[k] for k in results]
    limited = meter is not None

    def entry(*args):
        depth = 1
        if limited:
            depth, args = args[-1], args[:-1]
        refs = None
        if ref_positions or f32_positions:
            values = list(args)
            if ref_positions:
                refs = CallRefs(ffi)
                try:
                    for i in ref_positions:
                        values[i] = refs.ref(values[i])
                except Unsupported:
                    return python_function()(*args, *((depth,) if limited else ()))
            for i in f32_positions:
                values[i] = _f32_bits(values[i])
            args = values
        c, call = cinstance.new_context(meter)
        failed = True
        try:
            failed = call_c(c, depth, *args)
        finally:
            cinstance.finish(c, call, refs, failed)
        if not readers:
            return None
        if len(readers) == 1:
            return readers[0](c.results[0])
        return tuple(read(c.results[i]) for i, read in enumerate(readers))

    if not (ref_positions or f32_positions or limited):
        entry = scalar_entry(cinstance, call_c, len(kinds), results, entry)
    entry.vmrt_c_ordinal = ordinal
    workgroups = getattr(lib, f"vmrt_workgroups_{ordinal}", None)
    if workgroups is not None:
        entry.run_workgroups = lambda *a: run_workgroups(cinstance, workgroups, meter, *a)
    if limited:  # the generated code's shape: depth last, a fixed arity (Meter.entry)
        entry = fixed_arity(entry, len(kinds) + 1)
    return entry


def scalar_entry(cinstance: CInstance, call_c, arity: int, results, general):
    """The entry of a function of ints and f64s without limits, as straight Python
    (a host calling a small function pays ~0.3 us, not ~0.6); `general` handles
    a failure and any result that is not an int."""
    params = ", ".join(f"a{i}" for i in range(arity))
    if any(kind not in ("i32", "i64") for kind in results):
        return general
    got = {0: "None", 1: "c.results[0]"}.get(
        len(results), "(" + ", ".join(f"c.results[{i}]" for i in range(len(results))) + ")")
    source = f"""def entry({params}):
    try:
        c = LOCAL.c
    except AttributeError:
        c = NEW()[0]
    if CALL(c, 1{', ' if arity else ''}{params}):
        FINISH(c, None, None, True)
    return {got}
"""
    namespace = {"LOCAL": cinstance._local, "NEW": cinstance.new_context, "CALL": call_c,
                 "FINISH": cinstance.finish}
    exec(compile(source, "<vmrt C tier entry>", "exec"), namespace)
    return namespace["entry"]


def fixed_arity(entry, arity: int):
    """`entry` (taking *args) as a function of exactly `arity` parameters."""
    params = ", ".join(f"a{i}" for i in range(arity))
    namespace = {"entry": entry}
    exec(f"def fixed({params}):\n    return entry({params})\n", namespace)
    fixed = namespace["fixed"]
    fixed.__dict__.update(entry.__dict__)
    return fixed


def run_workgroups(cinstance: CInstance, workgroups, meter, local, constants, bindings, ids,
                   size, count) -> bool:
    """Runs a dispatch's workgroups (`ids`: x, y, z triples) in one C call, without
    the GIL; on failure, the VMError names the workgroup (its index in c.results[0]).
    False: values the C tier does not model (the caller runs them in Python)."""
    ffi = cinstance.cmodule.ffi
    refs = CallRefs(ffi)
    try:
        args = [refs.ref(local), refs.ref(constants), refs.ref(bindings)]
    except Unsupported:
        return False
    flat = ffi.new("int32_t[]", [v for xyz in ids for v in xyz] or [0])
    c, call = cinstance.new_context(meter)
    failed = True
    try:
        failed = workgroups(c, 1, *args, flat, len(ids), *size, *count)
    except BaseException:
        cinstance.finish(c, call, refs, False)
        raise
    try:
        cinstance.finish(c, call, refs, failed)
    except VMError as error:
        error.workgroup = ids[c.results[0]]
        raise
    return True


def _f32_bits(value: float) -> int:
    from vmrt.vm.numerics import bitcast_f32_i32
    return bitcast_f32_i32(value) & 0xFFFFFFFF


def _signed(bits: int, width: int) -> int:
    return bits - (1 << width) if bits >> (width - 1) else bits


def _read_f32(bits: int) -> float:
    from vmrt.vm.numerics import bitcast_i32_f32
    return bitcast_i32_f32(_signed(bits & 0xFFFFFFFF, 32))


def _read_f64(bits: int) -> float:
    from vmrt.vm.numerics import bitcast_i64_f64
    return bitcast_i64_f64(bits)


_RESULT_READERS = {  # (c->results are int64_t: i32 and i64 results arrive signed)
    "i32": int, "i64": int,
    "f32": _read_f32, "f64": _read_f64,
}


# -- errors ------------------------------------------------------------------------------
def c_error(instance, c, refs: CallRefs | None, call: CCall | None = None) -> VMError:
    """The VMError of a failed C call, as the Python tier raises it: message, status,
    and the C frames (innermost first) ahead of the Python ones (VMErrorScope)."""
    from vmrt.vm.call_errors import frame_label

    module = instance.module
    frames = [(c.frames[2 * i], c.frames[2 * i + 1])
              for i in range(min(c.frame_count, len(c.frames) // 2))]
    ordinal, pc = frames[0] if frames else (0, 0)
    decoded = module.instruction_at(ordinal, pc) if frames and pc >= 0 else None
    error = _error_of(c, decoded, refs, instance, call)
    error.stack = [frame_label(instance, f"{module.name}.{module.function_name(o)}", o,
                               p if p >= 0 else None) for o, p in frames]
    if c.frame_count > len(frames):
        error.stack.append(f"... {c.frame_count - len(frames)} more frames")
    error.c_frames = True
    return error


def _ref_object(c, refs: CallRefs | None, instance):
    ref = c.err_ref
    if not ref or ref.host_id < 0:
        return None
    if refs is not None and ref.host_id < len(refs.objects) and \
            refs.descriptors.get(id(refs.objects[ref.host_id])) == ref:
        return refs.objects[ref.host_id]
    cinstance = instance.__dict__.get("_c_instance")
    if cinstance is not None and ref.host_id < len(cinstance.refs.objects):
        return cinstance.refs.objects[ref.host_id]
    return None


def _method_of(decoded) -> str:
    found = re.search(r"\}\.(\w+)", decoded.instruction.py) if decoded else None
    return found.group(1) if found else "?"


def _error_of(c, decoded, refs, instance, call) -> VMError:
    kind, a, b = c.err_kind, c.err_a, c.err_b
    if kind == E.LIMIT and call is not None and isinstance(call.error, VMError):
        return call.error  # the meter's (FuelExhausted, DeadlineExceeded, ...)
    if kind == E.LIMIT and call is not None and call.error is not None:
        raise call.error
    if kind == E.DEPTH and call is not None:
        try:
            call.meter.depth_exceeded(a)
        except VMError as error:
            return error
    where = f"{decoded.instruction.vm_name}: " if decoded is not None else ""
    length = c.err_ref.length if c.err_ref else 0
    sized = types.SimpleNamespace(length=length)
    if kind == E.RANGE_ELEMENTS:
        return VMBuffer._range_error(sized, a * b, b, b)
    if kind == E.RANGE_FILL:
        return VMBuffer._range_error(sized, a * b, c.err_c * b, b)
    if kind == E.RANGE_BYTES:
        return VMBuffer._range_error(sized, a, b, 1)
    if kind == E.READ_ONLY:
        return VMBuffer._read_only_error(sized)
    if kind == E.NULL_REF:
        return VMError(f"{where}null ref operand", StatusCode.INVALID_ARGUMENT)
    if kind == E.WRONG_REF:
        obj = _ref_object(c, refs, instance)
        return VMError(f"{where}ref operand of the wrong type ('{type(obj).__name__}' object "
                       f"has no attribute '{_method_of(decoded)}')", StatusCode.INVALID_ARGUMENT)
    return _other_error(c, kind, a, where, decoded, refs, instance)


def _other_error(c, kind, a, where, decoded, refs, instance) -> VMError:
    from vmrt.vm.buffer import _check_alignment, _allocate
    from vmrt.vm.ref import null_ref_error

    if kind == E.DIV_ZERO:
        return VMError(f"{where}integer division by zero", StatusCode.INVALID_ARGUMENT)
    if kind == E.FAIL:
        message = bytes(decoded.values[1]).decode("utf-8", "replace")
        try:
            code = StatusCode(a & 0x1F)
        except ValueError:
            code = StatusCode.UNKNOWN
        return VMError(message, code)
    if kind == E.DEPTH:
        return DepthExceeded(f"{where}VM call stack depth exceeded")
    if kind == E.ALLOC:
        return VMError(f"cannot allocate a buffer of {a} bytes", StatusCode.RESOURCE_EXHAUSTED)
    if kind in (E.NEGATIVE_LENGTH, E.ALIGNMENT):
        try:
            _check_alignment(a) if kind == E.ALIGNMENT else _allocate(a)
        except VMError as error:
            return error
    if kind == E.GLOBAL_RANGE:
        size = len(instance.rwdata)
        return VMError(f"global byte offset {a} out of range of {size} bytes",
                       StatusCode.OUT_OF_RANGE)
    if kind == E.LIST_INDEX:
        return VMList._index_error(types.SimpleNamespace(_values=range(c.err_ref.count)), a)
    if kind == E.FELL_THROUGH:
        return VMError("execution fell through the end of the function",
                       StatusCode.FAILED_PRECONDITION)
    if kind == E.NULL_NAMED:
        return null_ref_error(OPERAND_NAMES[a], _ref_object(c, refs, instance))
    return VMError(f"{where}internal error: C tier error kind {kind}", StatusCode.INTERNAL)
