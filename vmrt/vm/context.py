"""Instances and contexts: modules registered in order, imports resolved by full
name, exports looked up as Python callables.

Calling them is vmrt.vm.invocation (Function, AsyncFunction, Invocation), their
errors vmrt.vm.call_errors; both are re-exported here, where users import them.
"""

from __future__ import annotations

import enum
import sys
import types
from typing import Any, Callable, Iterable

from vmrt.errors import StatusCode, VMError, VmrtError
from vmrt.vm.call_errors import VMErrorScope, translate_exception, vm_stack
from vmrt.vm.cconv import signature_of
from vmrt.vm.codegen import CodegenOptions
from vmrt.vm.hooks import ExecutionHooks, HookDispatcher
from vmrt.vm.invocation import (
    AsyncFunction, Function, HostAdapter, Invocation)
from vmrt.vm.ctier import check_tier, selected_tier
from vmrt.vm.limits import Limits, Meter
from vmrt.vm.module import Module, ModuleInstance, run_to_completion

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

    - `refuel(n)` adds fuel, `set_fuel(n)` sets it (wasmtime's `set_fuel`);
      `fuel_remaining` is what is left (None: no limit).
    - `set_deadline(t)`: an absolute deadline (time.monotonic() seconds, or
      None) for every call, besides `Limits.timeout` per outermost call.
    - `cancel()`, from any thread: calls in progress fail with CANCELLED at
      their next check point, and later calls at once, until `clear_cancel()`.
    - `memory_in_use`: bytes held by live VM allocations (and by native modules
      that report theirs through `charge_memory(n)` / `release_memory(n)`);
      without `max_memory`, not the scratch buffers of a C-tier call while it
      runs (they die with it: vmrt/vm/ctier/runtime.h).

    Check points are block entries, loops and calls of bytecode; a native
    import runs to completion (its Python code is the host's, trusted).
    `checkpoints=True` without limits compiles them in with none set (so that
    the context can be cancelled). A context without limits pays nothing.

    `tier`: 'auto', 'c' or 'python' (default: VMRT_TIER, else 'auto'); see vmrt.vm.ctier.
    """

    def __init__(self, instance: Instance | None = None, modules: Iterable[Module] = (), *,
                 trace_hook: Callable[[str, Any], None] | None = None,
                 print_hook: Callable[[str, Any], None] | None = None,
                 checkpoints: bool = False,
                 hooks: ExecutionHooks | Iterable[ExecutionHooks] | None = (),
                 instrumented: bool = False, limits: Limits | None = None,
                 meter: Meter | None = None, tier: str | None = None) -> None:
        self.instance = instance or Instance()
        #: Which tier runs its bytecode: 'auto', 'c' or 'python' (vmrt.vm.ctier;
        #: default VMRT_TIER), chosen once.
        self.tier = check_tier(tier) if tier is not None else selected_tier()
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
        #: Converts host values of Function calls (see set_host_adapter); None: none.
        self.host_adapter: HostAdapter | None = None
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
        """Adds `amount` fuel to what remains (set_fuel sets it)."""
        self._metered("refuel").refuel(amount)

    def set_fuel(self, amount: int) -> None:
        """Makes the fuel remaining `amount`, as wasmtime's Store.set_fuel (refuel adds)."""
        self._metered("set_fuel").set_fuel(amount)

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
        if provider.is_generator(function_name):
            def completing(*args, _fn=fn):
                return run_to_completion(_fn(*args))
            instance.resolve_import(ordinal, completing, fn)
        else:
            instance.resolve_import(ordinal, fn)

    # -- host values --------------------------------------------------------------------------
    def set_host_adapter(self, adapter: HostAdapter) -> None:
        """Has Function calls through this context convert ref arguments and results
        with `adapter` (vmrt.vm.invocation.HostAdapter; the hal module sets its own
        when created with host_arrays). The first adapter set stays; set it before
        looking up functions, which read it once."""
        if self.host_adapter is None:
            self.host_adapter = adapter

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
        attrs = instance.module.export_attrs(function_name)
        kind = AsyncFunction if attrs.get("iree.abi.model") == "coarse-fences" else Function
        return kind(self, instance, function_name, cconv or "", fn)

    def run_to_completion(self, result: Any) -> Any:
        return run_to_completion(result)

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
    def _vm_errors(self) -> VMErrorScope:
        return VMErrorScope(self)

    def vm_stack(self, tb: types.TracebackType | None) -> list[str]:
        """VM frames (innermost first) of a traceback through generated code."""
        return vm_stack(self.instances, tb)


def cconv_compatible(import_cconv: str, export_cconv: str) -> bool:
    try:
        return signature_of(import_cconv).fragments == signature_of(export_cconv).fragments
    except VmrtError:
        return False


__all__ = ["AsyncFunction", "Context", "DEFAULT_MAX_DEPTH", "Function", "HostAdapter", "Instance",
           "Invocation", "Signal", "cconv_compatible", "translate_exception"]
