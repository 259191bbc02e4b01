"""VMVX executables: a VM bytecode module (format `vmvx-bytecode-fb`, usually
ZIP-wrapped) whose exports are dispatch functions run once per workgroup
(runtime/src/iree/hal/local/loaders/vmvx_module_loader.c).

Each export has the calling convention `0rrriiiiiiiii_v`:
(local memory buffer, constants buffer, bindings list, workgroup id x/y/z,
workgroup size x/y/z, workgroup count x/y/z). Its `local_memory`,
`constant_count` and `binding_count` attributes declare what it needs. Every
worker running workgroups has its own vmrt.Context over the shared module (and
the `vmvx` module first, when the executable imports it).
"""

from __future__ import annotations

import threading
import weakref

from vmrt.errors import HalError, StatusCode, VmrtError
from vmrt.hal.executable import (
    LOCAL_MEMORY_PAGE_SIZE, DispatchState, Executable, ExecutableLoader, FunctionInfo,
)
from vmrt.vm.buffer import ACCESS_ORIGIN_HOST, VMBuffer
from vmrt.vm.context import Context
from vmrt.vm.call_guard import current_guard
from vmrt.vm.limits import DispatchMeter
from vmrt.vm.list import VMList
from vmrt.vm.module import BytecodeModule, load_module
from vmrt.vm.ref import as_type_def

#: IREE_VMVX_ENTRY_SIGNATURE.
ENTRY_SIGNATURE = "0rrriiiiiiiii_v"
FORMAT = "vmvx-bytecode-fb"

_BUFFER_TYPE = as_type_def("!vm.buffer")


def _attr(attrs: dict, name: str) -> int:
    text = attrs.get(name)
    try:
        return int(text) if text else 0
    except ValueError:
        return 0


class _Prepared:
    """A dispatch turned into VM values shared by every worker."""

    __slots__ = ("function", "name", "constants", "bindings", "size", "count", "local_size",
                 "guard")

    def __init__(self, function, name, constants, bindings, size, count, local_size,
                 guard=None):
        self.function = function
        self.name = name
        self.constants = constants
        self.bindings = bindings
        self.size = size
        self.count = count
        self.local_size = local_size
        self.guard = guard  # the CallGuard of the submitting call (limits), or None


class VmvxExecutable(Executable):
    """A hal.executable backed by a VM bytecode module."""

    __slots__ = ("module", "constants", "common_modules", "export_names", "_workers", "_lock",
                 "_contexts")

    def __init__(self, module: BytecodeModule, constants: bytes = b"", common_modules=()):
        functions, names = [], []
        for name, _, cconv, attrs in module.summary.exports:
            # Every export is an entry point, whatever its name (the compiler's
            # `__builtin_splat_i64` included), and function ids are export
            # ordinals, as upstream's vmvx_module_loader.c has them.
            cconv = cconv if cconv is not None else ""
            if cconv != ENTRY_SIGNATURE:
                raise HalError(f"executable entry point `{name}` does not match the expected "
                               f"calling convention; expected '{ENTRY_SIGNATURE}' but got "
                               f"'{cconv}', possible ABI version mismatch",
                               StatusCode.INVALID_ARGUMENT)
            attrs = dict(attrs)
            # Upstream counts whole pages; a partial page is rounded up here so a
            # dispatch never gets less local memory than it declared.
            local = _attr(attrs, "local_memory")
            pages = -(-local // LOCAL_MEMORY_PAGE_SIZE)
            functions.append(FunctionInfo(name, _attr(attrs, "constant_count"),
                                          _attr(attrs, "binding_count"),
                                          pages * LOCAL_MEMORY_PAGE_SIZE))
            names.append(name)
        super().__init__(functions)
        self.module = module
        self.constants = bytes(constants)
        self.common_modules = tuple(common_modules)
        self.export_names = names
        self._workers: dict[int, list] = {}
        self._lock = threading.Lock()
        self._contexts: list[Context] = []
        # Load errors (imports, __set_constants) surface at creation; a context with
        # limits creating it pays for the module's __init and __set_constants.
        self._worker(0, current_guard())

    def __repr__(self) -> str:
        return f"<hal.executable vmvx {self.module.name} {len(self.functions)} functions>"

    def _worker(self, worker_id: int, guard=None) -> list:
        """The worker's dispatch functions (vmrt.Function objects by function id).
        Work for a context with limits (`guard`, a vmrt.vm.call_guard.CallGuard) runs
        in worker contexts of its own: on the calling thread metered by that context's
        Meter itself (the dispatch is then one more call nested in the calling one:
        same fuel, same deadline, the call's guard being current there),
        elsewhere by a DispatchMeter of it (bound to the call for each dispatch)."""
        calling_thread = guard is not None and guard.thread == threading.get_ident()
        key = worker_id if guard is None else (worker_id, guard.meter, calling_thread)
        functions = self._workers.get(key)
        if functions is not None:
            return functions
        with self._lock:
            functions = self._workers.get(key)
            if functions is None:
                functions = self._workers[key] = self._create_worker(guard, calling_thread)
        return functions

    def _create_worker(self, guard=None, calling_thread: bool = False) -> list:
        meter = None
        if guard is not None:
            meter = guard.meter if calling_thread else DispatchMeter(guard.meter)
        if meter.__class__ is DispatchMeter:
            meter.bind(guard)
        context = Context(meter=meter)
        self._contexts.append(context)
        try:
            return self._register_worker(context)
        finally:
            if meter.__class__ is DispatchMeter:
                meter.settle()

    def on_release(self) -> None:
        # Worker contexts are reference cycles: let go of what their modules hold
        # (charged to a context with limits) now, not when the collector runs.
        for context in getattr(self, "_contexts", ()):  # (none if __init__ failed early)
            context.abandon()

    def _register_worker(self, context: Context) -> list:
        for module in self.common_modules:
            context.register(module)
        context.register(self.module)
        name = self.module.name
        has_setter = "__set_constants" in self.module.export_names()
        if has_setter:
            if not self.constants:
                raise HalError("executable requires executable-level constants but none were "
                               "provided", StatusCode.INVALID_ARGUMENT)
            constants = VMList(_BUFFER_TYPE, 1)
            constants.push_ref(VMBuffer(self.constants, mutable=False,
                                        origin=ACCESS_ORIGIN_HOST))
            context.function(name, "__set_constants")(constants)
        elif self.constants:
            raise HalError("executable has no executable-level constants but "
                           f"{len(self.constants) // 4} constants were provided",
                           StatusCode.INVALID_ARGUMENT)
        return [context.function(name, export) for export in self.export_names]

    def prepare(self, state: DispatchState) -> _Prepared:
        info = self.function_info(state.function)
        constants = VMBuffer(state.constants, mutable=False, origin=ACCESS_ORIGIN_HOST)
        bindings = VMList(_BUFFER_TYPE, len(state.bindings))
        for view in state.bindings:
            # Read-only memory (a parameter imported from a mapped file) stays read-only.
            bindings.push_ref(VMBuffer(view, mutable=not view.readonly,
                                       origin=ACCESS_ORIGIN_HOST))
        return _Prepared(state.function, info.name, constants, bindings,
                         state.workgroup_size, state.workgroup_count, info.local_memory_size,
                         state.guard)

    def run_range(self, prepared: _Prepared, state: DispatchState, start: int, stop: int,
                  worker_id: int = 0) -> None:
        """Runs workgroups [start, stop): in one C call when the C tier compiled the
        dispatch function (no list of their ids made), else one by one."""
        self._run(prepared, lambda: state.workgroup_ids(start, stop), worker_id,
                  (state, start, min(stop, state.workgroup_total)))

    def run_workgroups(self, prepared: _Prepared, workgroups, worker_id: int = 0) -> None:
        self._run(prepared, lambda: workgroups, worker_id)

    def _run(self, prepared: _Prepared, workgroups, worker_id: int, span=None) -> None:
        """Runs the workgroups (`workgroups()`: their ids; `span`: (DispatchState,
        start, stop) of a range the C tier may run at once); under a guard (limits)
        the worker's VM code spends the calling context's fuel, its local memory is
        charged to it, and it stops with the call (between workgroups, and at the VM
        code's check points)."""
        guard = prepared.guard
        fn = self._worker(worker_id, guard)[prepared.function]
        meter = dispatch_meter = None
        local_size = prepared.local_size
        if guard is not None:
            meter = fn.context.meter
            if meter.__class__ is DispatchMeter:
                dispatch_meter = meter
            if local_size:
                meter.charge_memory(local_size)  # (the calling context's) before allocating
        constants, bindings = prepared.constants, prepared.bindings
        sx, sy, sz = prepared.size
        cx, cy, cz = prepared.count
        x = y = z = 0
        try:
            if dispatch_meter is not None:
                dispatch_meter.bind(guard)
            local = VMBuffer(bytearray(local_size), mutable=True,
                             origin=ACCESS_ORIGIN_HOST)
            # A function the C tier compiled runs all its workgroups in one C call,
            # without the GIL (vmrt.vm.ctier); False: values it does not model.
            in_c = getattr(fn.entry, "run_workgroups", None) if span is not None else None
            if in_c is not None and in_c(local, constants, bindings, span[1], span[2],
                                         (sx, sy, sz), (cx, cy, cz)):
                return
            for x, y, z in workgroups():
                fn(local, constants, bindings, x, y, z, sx, sy, sz, cx, cy, cz)
        except VmrtError as error:
            index = getattr(error, "workgroup_index", None)  # (the C tier's)
            if index is not None:
                x, y, z = span[0].workgroup_id(span[1] + index)
            stack = f" [{' <- '.join(error.stack)}]" if getattr(error, "stack", None) else ""
            raise HalError(f"dispatch {prepared.name} workgroup ({x}, {y}, {z}) failed: "
                           f"{error.message}{stack}", error.code) from error
        finally:
            if meter is not None:
                if local_size:
                    meter.release_memory(local_size)
                if dispatch_meter is not None:
                    dispatch_meter.settle()


class VmvxLoader(ExecutableLoader):
    """Loads `vmvx-bytecode-fb` executables; modules are parsed once per
    distinct executable image and shared by every executable made from it."""

    formats = (FORMAT,)

    def __init__(self, common_modules=None):
        self._common_modules = common_modules
        # Weak: a module lives as long as an executable made from it (a context
        # creating executables from ever new bytes must not grow the process).
        self._cache: "weakref.WeakValueDictionary[bytes, BytecodeModule]" = \
            weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def common_modules(self) -> list:
        """Modules registered before each executable module (the `vmvx` module)."""
        if self._common_modules is None:
            from vmrt.hal.vmvx_module import VmvxModule  # (numpy comes with it)
            self._common_modules = [VmvxModule()]
        return list(self._common_modules)

    def load(self, executable_format: str, data, constants: bytes = b"") -> VmvxExecutable:
        key = bytes(data)
        with self._lock:
            module = self._cache.get(key)
        if module is None:
            try:
                module = load_module(key)
            except VmrtError as error:
                raise HalError(f"invalid VMVX executable: {error.message}",
                               error.code) from error
            with self._lock:
                self._cache[key] = module
        return VmvxExecutable(module, constants, self.common_modules())
