"""The host side of the C tier: which tier runs, entries that turn Python values
into the C runtime's (vmrt/vm/ctier/runtime.h) and back, and C failures turned
into the very VMError the Python tier raises for the same instruction.

VMRT_TIER=auto (the default) runs the functions the C tier can compile in C when a
compiler or a cached build is there, else says so once and runs Python (a failed
build is remembered, and not said again: vmrt.vm.ctier.build); `c` the same,
failing when the build fails; `python` never builds. Contexts with hooks run
the Python tier (hooks are compiled into its code); contexts with limits never build
(CModule.of), and their host entries are the meter's (vmrt.vm.limits, Meter.entry).
"""

from __future__ import annotations

import functools
import sys
import threading
import types

from vmrt import ctrl_c
from vmrt.errors import StatusCode, VMError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.ctier.analysis import argument_registers, compilable_functions, fragment_types
from vmrt.vm.ctier.build import BuildError, RememberedFailure, compiler_identity, load_or_build
from vmrt.vm.ctier.cgen import generate_module
from vmrt.vm.error_kinds import ErrorKind as E, NULL_OPERANDS, vm_error
from vmrt.vm.generated_abi import CELLS, namespace as abi_namespace
from vmrt.vm.list import VMList
from vmrt.vm.ref import type_label

#: The kinds of a CallRefs descriptor (runtime.h VMRT_KIND_BUFFER, VMRT_KIND_LIST).
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
            ctrl_c.watch()  # (C loops stop on Ctrl-C: vmrt/ctrl_c.py)
            if not getattr(built, "vmrt_callbacks", False):
                _bind_callbacks(self.ffi)
                built.vmrt_callbacks = True

    def digest(self) -> bytes:
        """All the generated C depends on: the module's code (content_digest) and what
        else the generator reads (type names, global storage, rodata, the shapes)."""
        module = self.module
        shapes = [(o, s.arguments, s.results) for o, s in sorted(self.shapes.items())]
        described = repr(([t.name for t in module.type_defs], module.summary.global_bytes,
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
            if not isinstance(error, RememberedFailure):  # (said when it failed)
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
        # A vmrt_ctx per thread (a C call never starts another on its thread), and per
        # thread and meter for calls under limits (its host: a CCall of the meter).
        self._local = threading.local()
        self._metered: dict = {}
        presses, watch = ctrl_c.c_addresses()
        self._ctrl_c = ffi.cast("const int64_t *", presses), ffi.cast("int (*)(void)", watch)

    def context(self):
        """This thread's vmrt_ctx for calls without limits."""
        c = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = self.cmodule.ffi.new("vmrt_ctx *")
            c.inst = self.state
            c.max_depth = sys.getrecursionlimit()
            c.ctrl_c, c.ctrl_c_watch = self._ctrl_c  # (c->fuel from 0: vmrt_slice_end fills it)
        return c

    def metered_local(self, meter) -> threading.local:
        """Per thread, the vmrt_ctx of calls under `meter` (`c`, once metered_context
        made it)."""
        local = self._metered.get(meter)
        if local is None:
            local = self._metered.setdefault(meter, threading.local())
        return local

    def metered_context(self, meter):
        """This thread's vmrt_ctx for calls under `meter`; c->fuel is 0 between calls."""
        local = self.metered_local(meter)
        c = getattr(local, "c", None)
        if c is None:
            ffi = self.cmodule.ffi
            c = ffi.new("vmrt_ctx *")
            c.inst, c.max_depth = self.state, meter.max_depth
            c.meter_memory = meter.bounds_memory  # (runtime.h: vmrt_charge_cb)
            c.ctrl_c, c.ctrl_c_watch = self._ctrl_c
            local.call = CCall(meter, c)
            c.host = local.handle = ffi.new_handle(local.call)
            local.c = c
        return c

    def new_context(self, meter=None):
        """A vmrt_ctx for one call, and the host state of limits (None without), the
        meter's fuel moved into it (finish moves it back)."""
        if meter is None:
            return self.context(), None
        c, call = self.metered_call(meter)
        cell = meter.fuel_cell
        c.fuel += cell.cell_contents
        cell.cell_contents = 0
        return c, call

    def metered_call(self, meter):
        """This thread's vmrt_ctx under `meter` and its CCall, for a call starting (no
        error); no fuel moved."""
        local = self._metered.get(meter)
        call = getattr(local, "call", None) if local is not None else None
        if call is None:
            self.metered_context(meter)
            call = self._metered[meter].call
        call.error = None
        return call.context, call

    def entry(self, ordinal: int, python_function, meter=None):
        """The callable that runs function N in C: without limits, for any caller; with
        them, as the Python tier's function (its depth last unless it is straight-line:
        callers outside generated code go through the meter's host entry)."""
        shape = self.cmodule.shapes[ordinal]
        kinds = [t for _, t in argument_registers(shape.arguments)]
        results = fragment_types(shape.results)
        general = None
        if "ref" in kinds:
            general = general_entry(self, ordinal, kinds, results, python_function, meter)
        if general is not None and meter is None:
            entry = general
        else:
            entry = straight_entry(self, ordinal, kinds, results, general, meter)
        entry.vmrt_c_ordinal = ordinal
        lib = self.cmodule.lib
        workgroups = getattr(lib, f"vmrt_workgroups_{ordinal}", None)
        if workgroups is not None:
            if meter is not None:
                workgroups = getattr(lib, f"vmrt_metered_workgroups_{ordinal}")
            entry.run_workgroups = lambda *a: run_workgroups(self, workgroups, meter, *a)
        return entry

    def finish(self, c, call, refs, failed: bool):
        """After a C call: unspent fuel back to the meter; a failure raised."""
        if call is not None:
            call.meter.fuel_cell.cell_contents += c.fuel
            c.fuel = 0
        if failed:
            if c.err_kind == E.CTRL_C:
                c.err_kind = c.frame_count = 0
                ctrl_c.stopped()
            try:
                error = c_error(self.instance, c, refs, call)
            finally:
                c.err_kind = c.frame_count = 0  # (the thread's context serves its next call)
                if call is not None:  # (kept, its traceback would keep the call's values)
                    call.error = None
            raise error from None

    def run(self, c, call, refs, call_c, *args) -> None:
        """`call_c(c, *args)` in a context from new_context, then finish (a failure
        raised as a VMError; an argument cffi refuses raised as it is)."""
        try:
            failed = call_c(c, *args)
        except BaseException:
            self.finish(c, call, refs, False)
            raise
        self.finish(c, call, refs, failed)

    def failed(self, c):
        """Raises the error of the failed call of a straight entry (scalars only)."""
        self.finish(c, self.cmodule.ffi.from_handle(c.host) if c.host else None, None, True)


class CCall:
    """The host side of C calls under limits on one thread (c->host): the meter, and
    the error that stopped a call (the C code reaches it through c->host). Between
    calls c->fuel is 0: a call's fuel moves in from FUEL and back (straight_entry)."""

    __slots__ = ("meter", "context", "error")

    def __init__(self, meter, context):
        self.meter = meter
        self.context = context
        self.error = None

    def refill(self, c, cost: int) -> int:
        """Meter.refill for C code: the slice it spent goes through FUEL."""
        meter = self.meter
        cell = meter.fuel_cell
        cell.cell_contents += c.fuel
        c.fuel = 0
        try:
            meter.refill(cost, meter.MAX_NATIVE_SLICE)
        except BaseException as error:  # (FuelExhausted, DeadlineExceeded, Cancelled)
            self.error = error
            return 1
        finally:
            c.fuel, cell.cell_contents = cell.cell_contents, 0
        return 0


def _bind_callbacks(ffi) -> None:
    """The `extern "Python"` functions of one built module (runtime.h)."""
    @ffi.def_extern(name="vmrt_refill_cb", error=1)
    def refill(c, cost):
        return ffi.from_handle(c.host).refill(c, cost)

    @ffi.def_extern(name="vmrt_charge_cb", error=1)
    def charge(call, nbytes):  # (vm.buffer.alloc: one Python call less than a CCall method)
        host = ffi.from_handle(call)
        try:
            host.meter.charge_memory(nbytes)
        except BaseException as error:  # (MemoryLimitExceeded)
            host.error = error
            return 1
        return 0

    @ffi.def_extern(name="vmrt_uncharge_cb")
    def uncharge(call, nbytes):
        ffi.from_handle(call).meter.release_memory(nbytes)


def general_entry(cinstance: CInstance, ordinal: int, kinds, results, python_function,
                  meter=None):
    """The entry of a function with ref arguments (with limits, taking its depth
    last): their C descriptors made per call, or the Python tier's code for values
    the C tier does not model."""
    lib, ffi = cinstance.cmodule.lib, cinstance.cmodule.ffi
    call_c = getattr(lib, f"vmrt_entry_{ordinal}")
    ref_positions = [i for i, k in enumerate(kinds) if k == "ref"]
    f32_positions = [i for i, k in enumerate(kinds) if k == "f32"]
    readers = [_RESULT_READERS[k] for k in results]
    limited = meter is not None
    # (the Python tier's code of a straight-line function takes no depth: codegen)
    takes_depth = limited and cinstance.instance.module.static_cost(ordinal) is None

    def entry(*args):
        depth = 1
        if limited:
            depth, args = args[-1], args[:-1]
        values = list(args)
        refs = CallRefs(ffi)
        try:
            for i in ref_positions:
                values[i] = refs.ref(values[i])
        except Unsupported:
            return python_function()(*args, *((depth,) if takes_depth else ()))
        for i in f32_positions:
            values[i] = _f32_bits(values[i])
        c, call = cinstance.new_context(meter)
        cinstance.run(c, call, refs, call_c, depth, *values)
        if not readers:
            return None
        if len(readers) == 1:
            return readers[0](c.results[0])
        return tuple(read(c.results[i]) for i, read in enumerate(readers))
    return entry


def straight_entry(cinstance: CInstance, ordinal: int, kinds, results, general, meter):
    """An entry generated to do no more than its caller and limits need (a host calling
    an empty function pays ~0.3 us): straight Python over cffi (with limits, over the
    context's cell FUEL too), or the depth argument passed on to `general` for a
    function with ref arguments."""
    module = cinstance.instance.module
    static_cost = module.static_cost(ordinal) if meter is not None else None
    shape = _entry_shape(meter is not None, static_cost, general is not None)
    source = _entry_source(kinds, results, shape, meter is not None, static_cost)
    lib = cinstance.cmodule.lib
    local, new = (cinstance._local, cinstance.context) if meter is None else \
        (cinstance.metered_local(meter), lambda: cinstance.metered_context(meter))
    # (CALL: vmrt_entry_N or vmrt_metered_N, by shape; general: GENERAL)
    namespace = abi_namespace(
        "c_entry", CALL=getattr(lib, f"vmrt_{shape}_{ordinal}", None),
        GENERAL=general, FAILED=cinstance.failed, F32_BITS=_f32_bits, READ_F32=_read_f32,
        READ_F64=_read_f64, LOCAL=local, NEW=new)
    return _entry_function(source, namespace, meter.cells if meter is not None else {})


def _entry_shape(metered: bool, static_cost, general: bool) -> str:
    """How an entry calls C: `general` (ref arguments), `metered` (the function charges:
    fuel in and out), else `entry` (no limits, or a straight-line function, which its
    callers paid for)."""
    if general:
        return "general"
    return "metered" if metered and static_cost is None else "entry"


def _entry_source(kinds, results, shape: str, metered: bool, static_cost) -> str:
    """The source of straight_entry's function (in a scope holding the context's cells)."""
    params = [f"a{i}" for i in range(len(kinds))]
    # With limits a function that charges takes its depth last; a straight-line one is
    # unchecked (it cannot recurse), and called with depth 1.
    internal = metered and not static_cost
    depth = "D" if internal else "1"
    lines = ["nonlocal FUEL"] if shape == "metered" else []
    signature = params + (["D"] if internal else [])
    if shape == "general":  # (it converts the arguments itself)
        return _entry_lines(signature, lines + [f"return GENERAL({', '.join(params + [depth])})"])
    values = [f"F32_BITS({p})" if kind == "f32" else p for p, kind in zip(params, kinds)]
    lines += ["try:", "    c = LOCAL.c", "except AttributeError:", "    c = NEW()"]
    if shape == "metered":  # the meter's fuel goes into C for the call, and what is left back
        lines += ["fuel = FUEL", "FUEL = 0",
                  "try:", f"    fuel = CALL({', '.join(['c', depth, 'fuel'] + values)})",
                  "except BaseException:", "    FUEL += fuel", "    raise",
                  "if fuel < 0:", "    FAILED(c)", "FUEL += fuel"]
    else:
        lines += [f"if CALL({', '.join(['c', depth] + values)}):", "    FAILED(c)"]
    read = [{"f32": "READ_F32({})", "f64": "READ_F64({})"}.get(kind, "{}").format(
        f"c.results[{i}]") for i, kind in enumerate(results)]
    got = "None" if not read else read[0] if len(read) == 1 else f"({', '.join(read)})"
    return _entry_lines(signature, lines + [f"return {got}"])


def _entry_lines(params, lines) -> str:
    body = "\n".join("        " + line for text in lines for line in text.split("\n"))
    cells = ", ".join(CELLS)
    return f"def scope({cells}):\n    def entry({', '.join(params)}):\n{body}\n"


@functools.lru_cache(maxsize=None)
def _entry_code(source: str) -> types.CodeType:
    scope = compile(source, "<vmrt C tier entry>", "exec").co_consts[0]
    return next(c for c in scope.co_consts if isinstance(c, types.CodeType))


def _entry_function(source: str, namespace: dict, cells: dict):
    code = _entry_code(source)
    return types.FunctionType(code, namespace, "entry", None,
                              tuple(cells[name] for name in code.co_freevars) or None)


def run_workgroups(cinstance: CInstance, workgroups, meter, local, constants, bindings,
                   start: int, stop: int, size, count) -> bool:
    """Runs workgroups [start, stop) of a dispatch's linearized range (x fastest) in
    one C call, without the GIL; a failure's VMError has the failed workgroup's index
    in that range (`workgroup_index`). False: values the C tier does not model (the
    caller runs them in Python). Under limits `workgroups` is
    vmrt_metered_workgroups_N: the meter's fuel goes in, and what is left comes back,
    by value (as a metered straight entry's)."""
    refs = CallRefs(cinstance.cmodule.ffi)
    try:
        args = [refs.ref(local), refs.ref(constants), refs.ref(bindings), start, stop,
                *size, *count]
    except Unsupported:
        return False
    try:
        if meter is None:
            c = cinstance.context()
            cinstance.run(c, None, refs, workgroups, 1, *args)
            return True
        c, call = cinstance.metered_call(meter)
        cell = meter.fuel_cell
        fuel, cell.cell_contents = cell.cell_contents, 0
        try:
            left = workgroups(c, 1, fuel, *args)
        except BaseException:  # (an argument cffi refused: nothing ran)
            cell.cell_contents += fuel
            raise
        if left < 0:
            cinstance.finish(c, call, refs, True)  # (c->fuel back, and the error raised)
        cell.cell_contents += left
    except VMError as error:
        error.workgroup_index = c.results[0]
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
    if kind == E.FAIL:
        return _failed(decoded, a)
    fields = _error_fields(c, kind, a, b, refs, instance)
    if fields is None:
        where = f"{decoded.instruction.vm_name}: " if decoded is not None else ""
        return VMError(f"{where}internal error: C tier error kind {kind}", StatusCode.INTERNAL)
    if kind in (E.RANGE_ELEMENTS, E.RANGE_FILL):
        kind = E.RANGE_BYTES
    fields["where"] = f"{decoded.instruction.vm_name}: " if decoded is not None else ""
    return vm_error(E(kind), **fields)


def _error_fields(c, kind, a, b, refs, instance) -> dict | None:
    """The numbers a kind's message template (vmrt.vm.error_kinds) names, read off
    what the C call recorded; None for a kind the C tier does not record."""
    length = c.err_ref.length if c.err_ref else 0
    if kind == E.RANGE_ELEMENTS:
        return dict(offset=a * b, length=b, alignment=b, buffer_length=length)
    if kind == E.RANGE_FILL:
        return dict(offset=a * b, length=c.err_c * b, alignment=b, buffer_length=length)
    if kind == E.RANGE_BYTES:
        return dict(offset=a, length=b, alignment=1, buffer_length=length)
    if kind == E.WRONG_REF:
        return dict(detail=type_label(_ref_object(c, refs, instance)))
    if kind in (E.ALLOC, E.NEGATIVE_LENGTH):
        return dict(length=a, unsigned=a & 0xFFFFFFFFFFFFFFFF)
    if kind == E.ALIGNMENT:
        return dict(alignment=a)
    if kind == E.GLOBAL_RANGE:
        return dict(offset=a, size=len(instance.rwdata))
    if kind == E.LIST_INDEX:
        return dict(index=a & 0xFFFFFFFF if a < 0 else a, count=c.err_ref.count)
    if kind == E.NULL_NAMED:
        obj = _ref_object(c, refs, instance)
        return dict(what=NULL_OPERANDS[a], got="" if obj is None else f" (got {type_label(obj)})")
    if kind in (E.READ_ONLY, E.NULL_REF, E.DIV_ZERO, E.DEPTH, E.FELL_THROUGH):
        return {}
    return None


def _failed(decoded, status: int) -> VMError:
    """vm.fail's error: the module's message and status (UNKNOWN for a status
    StatusCode does not name)."""
    message = bytes(decoded.values[1]).decode("utf-8", "replace")
    try:
        code = StatusCode(status & 0x1F)
    except ValueError:
        code = StatusCode.UNKNOWN
    return VMError(message, code)
