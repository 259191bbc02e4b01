"""Instances, contexts and invocation: modules registered in order, imports resolved
by full name, exports called from Python with VM errors carrying a VM stack.
"""

from __future__ import annotations

import enum
import operator
import struct
import sys
import types
from typing import Any, Callable, Iterable

from vmrt.errors import (DepthExceeded, StatusCode, VMError, VmrtError, limit_of,
                          release_frames)
from vmrt.isa.decoder import decode_at
from vmrt.vm import cconv as cconv_mod
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.codegen import CodegenOptions
from vmrt.vm.hooks import ExecutionHooks, HookDispatcher
from vmrt.vm.source_maps import function_source_map
from vmrt.vm.limits import Limits, Meter
from vmrt.vm.list import VMList
from vmrt.vm.module import BytecodeModuleInstance, Module, ModuleInstance
from vmrt.vm.numerics import f32
from vmrt.vm.ref import RefObject

#: Deepest VM call stack (frames) before RESOURCE_EXHAUSTED; each VM frame is
#: one Python frame, so this also bounds Python's recursion.
DEFAULT_MAX_DEPTH = 2000


class Instance:
    """The root of a set of contexts (upstream iree_vm_instance_t).

    Ref types are registered process-wide (vmrt.vm.ref); the instance carries
    defaults for the contexts created from it: `limits`, or with `max_depth`
    alone Limits(max_depth=max_depth).
    """

    def __init__(self, *, max_depth: int | None = None, limits: Limits | None = None) -> None:
        if limits is None and max_depth is not None:
            limits = Limits(max_depth=max_depth)
        self.limits = limits
        if max_depth is None:
            max_depth = DEFAULT_MAX_DEPTH if limits is None or limits.max_depth is None \
                else limits.max_depth
        self.max_depth = max_depth
        # Each VM frame is a Python frame (Python-to-Python calls use no C stack
        # in CPython 3.11+), so the interpreter's recursion limit must leave room.
        needed = max_depth + 1000
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)


def _default_print(name: str, values) -> None:
    print(f"{name}: {', '.join(map(str, values))}", file=sys.stderr)


class Signal(enum.IntEnum):
    """iree_vm_signal_t: what Context.notify tells modules."""

    RESUME = 0
    SUSPEND = 1
    LOW_MEMORY = 2
    FORK = 3


class Context:
    """Modules registered in order; each one's imports resolve against those before it.

    Limits (vmrt.vm.limits.Limits; default: the instance's): a context given
    limits compiles its code with check points and enforces fuel, call depth,
    memory, a deadline and cancellation; every violation is a VMError subclass
    naming it (FuelExhausted, DepthExceeded, MemoryLimitExceeded: RESOURCE_EXHAUSTED;
    DeadlineExceeded; Cancelled) and leaves the context usable. From the host:

    - `refuel(n)` adds fuel; `fuel_remaining` is what is left (None: no limit).
    - `set_deadline(t)`: an absolute deadline (time.monotonic() seconds, or
      None) for every call, besides `Limits.timeout` per outermost call.
    - `cancel()`, from any thread: calls in progress fail with CANCELLED at
      their next check point, and later calls at once, until `clear_cancel()`.
    - `memory_in_use`: bytes held by live VM allocations (and by native modules
      that report theirs through `charge_memory(n)` / `release_memory(n)`).

    Check points are block entries, loops and calls of bytecode; a native
    import runs to completion (its Python code is the host's, trusted).
    `checkpoints=True` without limits compiles them in with none set (so that
    the context can be cancelled). A context without limits pays nothing.
    """

    def __init__(self, instance: Instance | None = None, modules: Iterable[Module] = (), *,
                 trace_hook: Callable[[str, Any], None] | None = None,
                 print_hook: Callable[[str, Any], None] | None = None,
                 checkpoints: bool = False,
                 hooks: ExecutionHooks | Iterable[ExecutionHooks] | None = (),
                 instrumented: bool = False, limits: Limits | None = None,
                 meter: Meter | None = None) -> None:
        self.instance = instance or Instance()
        limits = limits or self.instance.limits or (Limits() if checkpoints else None)
        if meter is None and limits is not None:  # (a given meter: see DispatchMeter)
            meter = Meter(limits, self.instance.max_depth)
        self.meter = meter
        checkpoints = self.meter is not None
        self.trace_hook = trace_hook or (lambda name, values: None)
        self.print_hook = print_hook or _default_print
        # Execution hooks (vmrt.vm.hooks) need the instrumented variant, chosen
        # here once: code already bound to a context cannot change variant.
        hooks = [hooks] if isinstance(hooks, ExecutionHooks) else list(hooks or ())
        self.hook_dispatcher = HookDispatcher(hooks) if hooks or instrumented else None
        self.codegen_options = CodegenOptions(checkpoints=checkpoints,
                                              instrumented=self.hook_dispatcher is not None)
        self.instances: list = []
        self._by_name: dict[str, ModuleInstance] = {}
        self._closed = False
        for module in modules:
            self.register(module)

    # -- limits (see the class docstring) ---------------------------------------------------
    @property
    def limits(self) -> Limits | None:
        return self.meter.limits if self.meter is not None else None

    def _metered(self, what: str) -> Meter:
        if self.meter is None:
            raise VMError(f"{what} needs a context created with limits",
                          StatusCode.FAILED_PRECONDITION)
        return self.meter

    @property
    def fuel_remaining(self) -> int | None:
        return self.meter.fuel_remaining if self.meter is not None else None

    def refuel(self, amount: int) -> None:
        self._metered("refuel").refuel(amount)

    def set_deadline(self, deadline: float | None) -> None:
        self._metered("a deadline").deadline = deadline

    def cancel(self) -> None:
        self._metered("cancellation").cancelled = True

    def clear_cancel(self) -> None:
        self._metered("cancellation").cancelled = False

    @property
    def cancelled(self) -> bool:
        return self.meter is not None and self.meter.cancelled

    @property
    def memory_in_use(self) -> int:
        if self.meter is None:
            return 0
        self.meter.collect_cycles()  # bytes only unreachable cycles hold are not in use
        return self.meter.memory_in_use

    def charge_memory(self, nbytes: int) -> None:
        """For native modules: `nbytes` more are held for this context's code
        (RESOURCE_EXHAUSTED over the limit). A no-op without limits."""
        if self.meter is not None:
            self.meter.charge_memory(nbytes)

    def release_memory(self, nbytes: int) -> None:
        if self.meter is not None:
            self.meter.release_memory(nbytes)

    # -- registration -----------------------------------------------------------------------
    def register(self, module: Module) -> ModuleInstance:
        if module.name in self._by_name:
            raise VMError(f"a module named '{module.name}' is already registered",
                          StatusCode.ALREADY_EXISTS)
        for dep in module.dependencies():
            provider = self._by_name.get(dep.name)
            if provider is None:
                if dep.optional:
                    continue
                raise VMError(f"module '{module.name}' depends on '{dep.name}' (version >= "
                              f"{dep.minimum_version}), which is not registered",
                              StatusCode.NOT_FOUND)
            version = provider.module.version
            if version < dep.minimum_version:
                raise VMError(f"module '{module.name}' needs '{dep.name}' version >= "
                              f"{dep.minimum_version}, but version {version} is registered",
                              StatusCode.FAILED_PRECONDITION)
        instance = module.instantiate(self)
        for ordinal, decl in enumerate(module.imports()):
            self._resolve(instance, ordinal, decl)
        self._by_name[module.name] = instance
        self.instances.append(instance)
        try:
            with self._vm_errors():
                instance.initialize()
        except BaseException:
            self.instances.pop()
            del self._by_name[module.name]
            raise
        return instance

    def _resolve(self, instance, ordinal: int, decl) -> None:
        module_name, _, function_name = decl.full_name.partition(".")
        provider = self._by_name.get(module_name)
        export_cconv = provider.module.export_cconv(function_name) if provider else None
        if provider is None or export_cconv is None and function_name not in \
                provider.module.export_names():
            if decl.optional:
                return
            raise VMError(f"required import '{decl.full_name}' of module "
                          f"'{instance.module.name}' was not found", StatusCode.NOT_FOUND)
        if decl.cconv and export_cconv and not cconv_compatible(decl.cconv, export_cconv):
            raise VMError(f"import '{decl.full_name}' expects cconv '{decl.cconv}' but the "
                          f"export has '{export_cconv}'", StatusCode.INVALID_ARGUMENT)
        fn = provider.lookup(function_name)
        is_generator = getattr(provider, "is_generator", lambda name: False)(function_name)
        if is_generator:
            def completing(*args, _fn=fn):
                return _drive(_fn(*args))
            instance.resolve_import(ordinal, completing, fn)
        else:
            instance.resolve_import(ordinal, fn)

    # -- execution hooks --------------------------------------------------------------------
    def add_hook(self, hook: ExecutionHooks) -> None:
        """Adds a hook; the context must have been created with hooks or `instrumented=True`."""
        if self.hook_dispatcher is None:
            raise VMError("execution hooks need a context created with hooks= or "
                          "instrumented=True", StatusCode.FAILED_PRECONDITION)
        self.hook_dispatcher.add(hook)

    def remove_hook(self, hook: ExecutionHooks) -> None:
        if self.hook_dispatcher is not None:
            self.hook_dispatcher.remove(hook)

    def module(self, name: str) -> ModuleInstance:
        instance = self._by_name.get(name)
        if instance is None:
            raise VMError(f"no module named '{name}' in this context", StatusCode.NOT_FOUND)
        return instance

    # -- calls ----------------------------------------------------------------------------------
    def function(self, name: str, function_name: str | None = None) -> "Function":
        """An export as a Python callable: `function("module", "fn")`, or
        `function("module.fn")`. Export names may contain dots (`i32i32.i32`):
        the one-string form splits at the first dot that leaves a registered
        module exporting the rest, else at the last dot."""
        if function_name is not None:
            return self.lookup_function(name, function_name)
        return self.lookup_function(*self._split_full_name(name))

    def _split_full_name(self, full_name: str) -> tuple[str, str]:
        start = full_name.find(".")
        while start != -1:
            instance = self._by_name.get(full_name[:start])
            if instance is not None and \
                    full_name[start + 1:] in instance.module.export_names():
                return full_name[:start], full_name[start + 1:]
            start = full_name.find(".", start + 1)
        module_name, sep, function_name = full_name.rpartition(".")
        if not sep:
            raise VMError(f"function name '{full_name}' must be module.function",
                          StatusCode.INVALID_ARGUMENT)
        return module_name, function_name

    def lookup_function(self, module_name: str, function_name: str) -> "Function":
        """The export `function_name` of the registered module `module_name`
        (NOT_FOUND when either is missing)."""
        instance = self.module(module_name)
        cconv = instance.module.export_cconv(function_name)
        fn = instance.lookup(function_name)
        if fn is None:
            raise VMError(f"module '{module_name}' has no export '{function_name}'",
                          StatusCode.NOT_FOUND)
        attrs = _export_attrs(instance, function_name)
        kind = AsyncFunction if attrs.get("iree.abi.model") == "coarse-fences" else Function
        return kind(self, instance, function_name, cconv or "", fn)

    def run_to_completion(self, result: Any) -> Any:
        return _drive(result)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        errors = []
        for instance in reversed(self.instances):
            try:
                with self._vm_errors():
                    instance.deinitialize()
            except VmrtError as error:
                errors.append(error)
        self.instances.clear()
        self._by_name.clear()
        if errors:
            raise errors[0]

    def abandon(self) -> None:
        """Closes the context without running any VM code (no __deinit): every
        module lets go of its state at once, cycles through the context included.
        For a context whose owner goes away (a VMVX executable's worker contexts)."""
        self._closed = True
        for instance in reversed(self.instances):
            instance.abandon()
        self.instances.clear()
        self._by_name.clear()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- signals ----------------------------------------------------------------------------------
    def notify(self, signal: int) -> None:
        """iree_vm_context_notify: tells every module of a system signal
        (RESUME 0, SUSPEND 1, LOW_MEMORY 2, FORK 3; vmrt.vm.context.Signal).

        Each module hears it twice: in its implementation (`ModuleInstance.notify`,
        e.g. io_parameters tells its providers) and through its optional
        `__notify(i32)` export. Resume and fork walk the modules in registration
        order, implementation first; suspend and low memory walk them in reverse,
        `__notify` first, so user modules return resources to the pools of the
        system modules registered before them.
        """
        try:
            signal = Signal(signal)
        except ValueError:
            raise VMError(f"unknown signal {signal!r}", StatusCode.INVALID_ARGUMENT) from None
        forward = signal in (Signal.RESUME, Signal.FORK)
        for instance in (self.instances if forward else reversed(self.instances)):
            with self._vm_errors():
                if forward:
                    instance.notify(int(signal))
                self._call_notify(instance, signal)
                if not forward:
                    instance.notify(int(signal))

    def _call_notify(self, instance, signal: int) -> None:
        if "__notify" not in instance.module.export_names():
            return
        self.run_to_completion(instance.lookup("__notify")(int(signal)))

    # -- errors -----------------------------------------------------------------------------------
    def _vm_errors(self):
        return _VMErrorScope(self)

    def vm_stack(self, tb: types.TracebackType | None) -> list[str]:
        """VM frames (innermost first) of a traceback through generated code."""
        frames = []
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename.startswith("<vmrt "):
                for instance in self.instances:
                    named = instance.frame_name(code)
                    if named is not None:
                        name, ordinal = named
                        pc = instance.pc_for_line(ordinal, tb.tb_lineno, code)
                        frames.append(_frame_label(instance, name, ordinal, pc))
                        break
            tb = tb.tb_next
        frames.reverse()
        return frames


def _export_attrs(instance: ModuleInstance, name: str) -> dict[str, str]:
    """The reflection attributes of an export (none for modules without any)."""
    return getattr(instance.module, "export_attrs", lambda name: {})(name)


def _frame_label(instance, name: str, ordinal: int, pc) -> str:
    if pc is None:
        return name
    label = f"{name}+{pc:08X}"
    location = source_location(instance.module.definition, ordinal, pc)
    return f"{label} ({location})" if location else label


def source_location(definition, ordinal: int, pc: int) -> str | None:
    """file:line:col of the op at `pc` from the module's debug database, if any."""
    debug = definition.debug_database
    if debug is None:
        return None
    source_map = function_source_map(definition, ordinal)
    if source_map is None or not source_map.locations:
        return None
    best = None
    for entry in source_map.locations:
        if entry.bytecode_offset <= pc + 1:
            best = entry.location
        else:
            break
    table = debug.location_table
    seen = 0
    while best is not None and 0 <= best < len(table) and seen < 16:
        seen += 1
        loc = table[best]
        if loc is None:
            return None
        if hasattr(loc, "filename"):
            return f"{loc.filename}:{loc.line}:{loc.column}"
        if hasattr(loc, "caller"):
            best = loc.callee
        elif hasattr(loc, "child_location"):
            best = loc.child_location
        elif hasattr(loc, "locations"):
            best = loc.locations[0] if loc.locations else None
        else:
            return None
    return None


class _VMErrorScope:
    """Turns any exception escaping generated code into a VMError with a VM stack."""

    def __init__(self, context: Context):
        self.context = context

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit,
                                           StopIteration)):
            return False
        stack = self.context.vm_stack(tb)
        if isinstance(exc, VMError):
            if not exc.stack:
                exc.stack = stack
            _release_failed_frames(self.context, exc)
            return False
        error = translate_exception(exc, self.context, tb)
        error.stack = stack
        _release_failed_frames(self.context, exc, keep=False)
        try:
            raise error from None
        finally:  # (this frame holding the error it raises would be a reference cycle)
            error = exc = tb = None


def _release_failed_frames(context: Context, exc: BaseException, keep: bool = True) -> None:
    """A failed call of a context with limits lets go of everything it held
    (vmrt.errors.release_frames; `keep`: the error keeps its own traceback), then
    what only cycles of VM values hold is collected (Meter.collect_cycles). So no
    kept error or cycle decides whether the context can run again. Contexts
    without limits keep it all (for post-mortem debugging)."""
    if context.meter is not None:
        release_frames(exc, keep_traceback=keep)
        context.meter.collect_cycles()


def _failing_instruction(context: Context, tb) -> str | None:
    """vm mnemonic of the instruction where an exception was raised, if in generated code."""
    last = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith("<vmrt "):
            last = (code, tb.tb_lineno)
        tb = tb.tb_next
    if last is None:
        return None
    code, line = last
    for instance in context.instances:
        named = instance.frame_name(code)
        if named is not None:
            _, ordinal = named
            pc = instance.pc_for_line(ordinal, line, code)
            if pc is None:
                return None
            descriptor = instance.module.definition.function_descriptors[ordinal]
            start = descriptor.bytecode_offset
            body = memoryview(instance.module.definition.bytecode_data)[
                start:start + descriptor.bytecode_length]
            try:
                return decode_at(body, pc, len(body)).instruction.vm_name
            except VmrtError:
                return None
    return None


def translate_exception(exc: BaseException, context: Context, tb) -> VMError:
    where = _failing_instruction(context, tb)
    prefix = f"{where}: " if where else ""
    if isinstance(exc, VmrtError):  # (a limit that stopped HAL work keeps its subclass)
        return VMError(exc.message, exc.code, limit=limit_of(exc))
    if isinstance(exc, ZeroDivisionError):
        return VMError(f"{prefix}integer division by zero", StatusCode.INVALID_ARGUMENT)
    if isinstance(exc, RecursionError):
        return DepthExceeded(f"{prefix}VM call stack depth exceeded")
    if isinstance(exc, MemoryError):
        return VMError(f"{prefix}out of memory", StatusCode.RESOURCE_EXHAUSTED)
    if isinstance(exc, AttributeError):
        if "'NoneType'" in str(exc):
            return VMError(f"{prefix}null ref operand", StatusCode.INVALID_ARGUMENT)
        return VMError(f"{prefix}ref operand of the wrong type ({exc})",
                       StatusCode.INVALID_ARGUMENT)
    if isinstance(exc, (struct.error, OverflowError, ValueError, TypeError, IndexError)):
        return VMError(f"{prefix}{type(exc).__name__}: {exc}", StatusCode.INVALID_ARGUMENT)
    return VMError(f"{prefix}internal error: {type(exc).__name__}: {exc}", StatusCode.INTERNAL)


def _drive(result):
    """Runs a generator (a suspended VM stack) to completion: each yield resumes."""
    if result.__class__ is not types.GeneratorType:
        return result
    try:
        while True:
            next(result)
    except StopIteration as stop:
        return stop.value


def cconv_compatible(import_cconv: str, export_cconv: str) -> bool:
    try:
        return cconv_mod.split_fragments(import_cconv) == cconv_mod.split_fragments(export_cconv)
    except VmrtError:
        return False


# -- Python values <-> registers ----------------------------------------------------------------
def _integer(value) -> int:
    """An exact integer (int, bool, numpy integer): no silent float truncation or str parsing."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{value!r} is not an integer") from None


def _real(value) -> float:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def _to_i32(value) -> int:
    v = _integer(value)
    if not -(1 << 31) <= v < (1 << 32):
        raise ValueError(f"{value!r} does not fit in i32")
    return v - (1 << 32) if v >= (1 << 31) else v


def _to_i64(value) -> int:
    v = _integer(value)
    if not -(1 << 63) <= v < (1 << 64):
        raise ValueError(f"{value!r} does not fit in i64")
    return v - (1 << 64) if v >= (1 << 63) else v


def _to_ref(value):
    if value is None or isinstance(value, RefObject):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return VMBuffer.from_bytes(value)
    if hasattr(value, "__array_interface__"):
        return VMBuffer.from_array(value)
    if isinstance(value, (list, tuple)):
        return VMList.from_values(value)
    raise TypeError(f"{type(value).__name__} is not a ref (buffer, list or None)")


_CONVERT = {"i": _to_i32, "I": _to_i64, "f": lambda v: f32(_real(v)), "F": _real, "r": _to_ref}


def _convert_arguments(fragment: str, args) -> list:
    converted = []
    values = list(args)
    i = 0
    index = 0
    while i < len(fragment):
        ch = fragment[i]
        if ch == "v":
            i += 1
            continue
        if index >= len(values):
            raise VMError(f"expected {count_arguments(fragment)} arguments, got {len(values)}",
                          StatusCode.INVALID_ARGUMENT)
        value = values[index]
        if ch == "C":
            end = fragment.find("D", i + 1)
            span = [c for c in fragment[i + 1:end] if c != "v"]
            tuples = []
            for item in value:
                item = item if isinstance(item, (tuple, list)) else (item,)
                if len(item) != len(span):
                    raise VMError(f"argument {index}: span entries need {len(span)} values",
                                  StatusCode.INVALID_ARGUMENT)
                tuples.append(tuple(_CONVERT[c](v) for c, v in zip(span, item)))
            converted.append(tuples)
            i = end + 1
        else:
            try:
                converted.append(_CONVERT[ch](value))
            except (TypeError, ValueError, OverflowError) as error:
                raise VMError(f"argument {index}: {error}", StatusCode.INVALID_ARGUMENT) from None
            i += 1
        index += 1
    if index != len(values):
        raise VMError(f"expected {count_arguments(fragment)} arguments, got {len(values)}",
                      StatusCode.INVALID_ARGUMENT)
    return converted


def count_arguments(fragment: str) -> int:
    count, i = 0, 0
    while i < len(fragment):
        if fragment[i] == "C":
            i = fragment.find("D", i + 1)
            count += 1
        elif fragment[i] != "v":
            count += 1
        i += 1
    return count


_CONVERTER_CACHE: dict[str, object] = {}


def _argument_converter(fragment: str):
    """A function (*args) -> converted tuple for a span-free cconv fragment."""
    converter = _CONVERTER_CACHE.get(fragment)
    if converter is None:
        kinds = [c for c in fragment if c != "v"]
        names = [f"a{i}" for i in range(len(kinds))]
        body = ", ".join(f"C_{k}({n})" for k, n in zip(kinds, names))
        source = f"def convert({', '.join(names)}):\n    return ({body}{',' if len(kinds) == 1 else ''})\n"
        namespace = {f"C_{k}": fn for k, fn in _CONVERT.items()}
        exec(source, namespace)
        converter = _CONVERTER_CACHE[fragment] = namespace["convert"]
    return converter


class Function:
    """A callable export: converts Python arguments, runs, converts results."""

    def __init__(self, context: Context, instance: ModuleInstance, name: str, cconv: str,
                 fn: Callable[..., Any]) -> None:
        self.context = context
        self.instance = instance
        self.name = name
        self.cconv = cconv
        self.arguments, self.results = cconv_mod.split_fragments(cconv)
        self._fn = fn
        self._may_yield = getattr(instance, "is_generator", lambda n: True)(name)
        # Without spans each argument converts on its own: one generated function
        # converts them all (a comprehension over converters costs ~0.5 us a call).
        self._convert: Callable[..., Any] = (
            _argument_converter(self.arguments) if "C" not in self.arguments
            else lambda *args: _convert_arguments(self.arguments, args))
        # Set by a native module (hal: numpy arrays in, numpy arrays out) for ref values.
        host = getattr(context, "host_adapter", None)
        self._host = host if host is not None and "r" in self.arguments + self.results else None

    @property
    def full_name(self) -> str:
        return f"{self.instance.module.name}.{self.name}"

    @property
    def reflection(self) -> dict[str, str]:
        """The export's reflection attributes: `iree.abi.declaration` (its signature in
        tensors, from iree-compile), `iree.abi.model`, ...; empty when it has none."""
        return dict(_export_attrs(self.instance, self.name))

    def __repr__(self) -> str:
        # As iree.runtime shows a VmFunction: the cconv, then the reflection (whose
        # iree.abi.declaration tells the tensor types the cconv's refs carry).
        reflection = self.reflection
        shown = f", reflection = {reflection}" if reflection else ""
        return f"<vmrt function {self.full_name}({self.cconv}){shown}>"

    def __call__(self, *args: Any) -> Any:
        host = self._host
        if host is not None:
            args = host.convert_arguments(self.arguments, args)
        try:
            converted = self._convert(*args)
        except (TypeError, ValueError, OverflowError):
            converted = _convert_arguments(self.arguments, args)  # names the bad argument
        try:
            result = self._fn(*converted)
            if self._may_yield:
                result = _drive(result)
            return result if host is None else host.convert_results(self.results, result)
        except BaseException as exc:
            self.context._vm_errors().__exit__(type(exc), exc, exc.__traceback__)
            raise

    def invoke_async(self, *args: Any) -> Invocation:
        """Starts a call that may yield; resume it step by step with Invocation.resume."""
        converted = _convert_arguments(self.arguments, args)
        with self.context._vm_errors():
            result = self._fn(*converted)
        return Invocation(self.context, result)


class AsyncFunction(Function):
    """An export compiled with --iree-execution-model=async-external (`iree.abi.model`
    = `coarse-fences`): its last two arguments are a wait fence and a signal fence.

    Through a context whose host adapter (the hal module's, with host_arrays) can make
    fences, it may be called with the other arguments only: it appends a null wait
    fence and a new signal fence, waits for the signal, then converts the results,
    as iree.runtime's function invoker does. Passing both fences works as for any
    function.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._arity = len([c for c in self.arguments if c != "v"])

    def __call__(self, *args: Any) -> Any:
        host = self._host
        if host is None or "C" in self.arguments or len(args) != self._arity - 2:
            return super().__call__(*args)
        signal = host.create_signal_fence()
        args = host.convert_arguments(self.arguments, (*args, None, signal))
        try:
            converted = self._convert(*args)
        except (TypeError, ValueError, OverflowError):
            converted = _convert_arguments(self.arguments, args)
        try:
            result = self._fn(*converted)
            if self._may_yield:
                result = _drive(result)
            host.wait_fence(signal)  # results are ready only once it is signalled
            return host.convert_results(self.results, result)
        except BaseException as exc:
            self.context._vm_errors().__exit__(type(exc), exc, exc.__traceback__)
            raise


class Invocation:
    """A call in progress: each resume() runs the VM stack until its next yield."""

    def __init__(self, context: Context, result: Any) -> None:
        self.context = context
        self._generator = result if result.__class__ is types.GeneratorType else None
        self.done = self._generator is None
        self.result = None if self._generator else result
        self.yields = 0

    def resume(self) -> bool:
        """Runs until the next yield (False) or completion (True)."""
        generator = self._generator
        if self.done or generator is None:
            return True
        try:
            with self.context._vm_errors():
                next(generator)
        except StopIteration as stop:
            self.done = True
            self.result = stop.value
            return True
        self.yields += 1
        return False

    def wait(self) -> Any:
        while not self.resume():
            pass
        return self.result
