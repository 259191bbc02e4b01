"""vmrt.load: one call from a module (a .vmfb, vmasm text, or bytes; a model, .onnx or
.mlir, compiled by vmrt.compile) to Python callables.

    with vmrt.load("model.vmfb") as m:
        m.predict(np.ones((1, 4), np.float32))   # each export is a vmrt.Function
        m.context, m.module          # the Context and the BytecodeModule

Native modules the module imports are passed as `modules=[...]` (registered
first, in order). Those it imports that the caller does not pass are supplied as
iree.runtime and iree-run-module supply them (vmrt.modules.natives): `hal` on
`device` (a driver name or a vmrt.hal Device), taking and returning numpy arrays,
and `io_parameters` over `parameters`. Other keywords go to vmrt.Context (e.g.
`limits=`, `hooks=`, `instrumented=True`). Leaving the `with` (or `close()`)
closes the context: the modules' `__deinit` runs, every export stops being
callable, and the devices load created stop their threads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.vm.context import Context
from vmrt.vm.module import load_module

if TYPE_CHECKING:
    from vmrt.hal.device import Device
    from vmrt.modules.natives import ParameterSource
    from vmrt.vm.context import Function, Instance
    from vmrt.vm.hooks import ExecutionHooks
    from vmrt.vm.limits import Limits, Meter
    from vmrt.vm.module import BytecodeModule, Module

__all__ = ["LoadedModule", "ModuleSource", "NamedFunction", "compile", "load"]

#: What vmrt.load reads a module from: a path (.vmfb or .vmasm), vmasm text, or the
#: bytes of a module (or of vmasm text).
ModuleSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]


def _is_vmasm_text(data: str) -> bool:
    return "vm.module" in data and ("\n" in data or "{" in data)


def _check_not_source(head: bytes, name: str, path: bool = True) -> None:
    """Text that is not vmasm (MLIR, most often) is not a module: say to compile it,
    rather than what the FlatBuffer reader makes of its first bytes."""
    if b"\0" in head or not head.strip():
        return
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # (not just a character cut at the 4 KiB mark)
            return
    source, output = (name, Path(name).with_suffix(".vmfb")) if path else ("IN.mlir", "OUT.vmfb")
    raise VmrtError(f"{name} is text, not a compiled module: compile MLIR first (`vmrt "
                    f"compile {source} -o {output}`, or vmrt.load of a file named .mlir); "
                    "vmasm text needs a `vm.module`", StatusCode.INVALID_ARGUMENT)


def module_from(source: ModuleSource) -> BytecodeModule:
    """The module of a path, vmasm text or module bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        # Read-only memory (bytes, a read-only mapping) is used in place; memory the
        # caller could still change under the verified module is copied once.
        data = memoryview(source) if memoryview(source).readonly else bytes(source)
        head = bytes(data[:4096])
        if b"\0" not in head and _is_vmasm_text(head.decode("utf-8", "replace")):
            return _assemble(bytes(data).decode("utf-8"), "<vmasm>")
        _check_not_source(head, "the module data", path=False)
        return load_module(data)
    if isinstance(source, str) and _is_vmasm_text(source):
        return _assemble(source, "<vmasm>")
    if isinstance(source, (str, os.PathLike)):
        return module_from_file(Path(source))
    raise VmrtError(f"cannot load a module from {type(source).__name__} (expected a path, "
                    "vmasm text or module bytes)", StatusCode.INVALID_ARGUMENT)


def module_from_file(path: Path) -> BytecodeModule:
    """The module of a file: vmasm text is read and assembled; a module file is mapped
    read-only (its pages stay shared with the page cache: weights are never copied);
    other text fails saying to compile it (vmrt.load compiles .onnx and .mlir files before
    they get here: vmrt.compiler). vmrt.load and `vmrt run` load files
    with this."""
    try:
        with open(path, "rb") as file:
            head = file.read(4096)
            text = path.suffix == ".vmasm" or (b"\0" not in head and _is_vmasm_text(
                head.decode("utf-8", "replace")))
            data = head + file.read() if text else b""
    except OSError as error:  # (also FileNotFoundError, PermissionError, ... to the caller)
        raise file_error(error, f"cannot read module '{path}'") from None
    except ValueError as error:  # a NUL in the path, ...
        raise VmrtError(f"cannot read module {str(path)!r}: {error}",
                        StatusCode.INVALID_ARGUMENT) from None
    if text:
        return _assemble(data.decode("utf-8", "replace"), str(path))
    _check_not_source(head, str(path))
    module = load_module(path)
    module.source = str(path)
    return module


def _assemble(text: str, filename: str) -> BytecodeModule:
    from vmrt.asm import assemble
    module = load_module(assemble(text, filename=filename))
    module.source = filename
    return module


class LoadedModule:
    """A module registered in its own context; its exports are attributes."""

    def __init__(self, context: Context, module: BytecodeModule,
                 owned_devices: Iterable[Device] = (), signatures: dict | None = None):
        self.context = context
        self.module = module
        self._functions: dict[str, Function] = {}
        # What a compiled source named of an export's values: {name: (inputs, outputs)}.
        self._signatures = signatures or {}
        # Devices vmrt.load created for the hal module it supplied: closed with it.
        self._owned_devices = list(owned_devices)

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def exports(self) -> list[str]:
        """The functions to call: every export but the internal `__init`/`__deinit`
        (module.export_names() has them all; `function(name)` calls any)."""
        return [name for name in self.module.export_names() if not name.startswith("__")]

    def function(self, name: str) -> Function:
        """The export `name` (also for names that are not Python identifiers)."""
        fn = self._functions.get(name)
        if fn is None:
            if self.context._closed:
                raise VmrtError(f"module '{self.name}' was closed", StatusCode.FAILED_PRECONDITION)
            fn = self.context.function(self.name, name)
            if name in self._signatures:
                fn = NamedFunction(fn, *self._signatures[name])  # type: ignore[assignment]
            self._functions[name] = fn
        return fn

    def __getattr__(self, name: str) -> Function:
        if name.startswith("__") or name not in self.module.export_names():
            raise AttributeError(f"module '{self.module.name}' has no export '{name}'")
        return self.function(name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in self.exports if n.isidentifier()})

    def close(self) -> None:
        self._functions.clear()
        try:
            self.context.close()
        finally:
            _close_devices(self._owned_devices)

    def __enter__(self) -> LoadedModule:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " (closed)" if self.context._closed else ""
        return f"<vmrt module {self.name} exports={self.exports}{state}>"


class NamedFunction:
    """An export of a compiled model, callable with its inputs by name as well as by
    position (as onnxruntime's feeds): `fn(x)` or `fn(input=x)`; `inputs` and `outputs`
    are what the source named (vmrt.vm.declaration.ValueInfo). Other attributes are
    the vmrt.Function's."""

    def __init__(self, function: Function, inputs: list, outputs: list):
        self.function = function
        self.inputs = inputs
        self.outputs = outputs

    def __call__(self, *args: Any, **named: Any) -> Any:
        if named:
            args = self._arranged(args, named)
        return self.function(*args)

    def _arranged(self, args: tuple, named: dict) -> tuple:
        names = [value.name for value in self.inputs]
        unknown = sorted(set(named) - set(names))
        if unknown:
            raise VmrtError(f"{self.function.name}() has no input named {unknown[0]!r} "
                            f"(its inputs: {', '.join(names)})", StatusCode.INVALID_ARGUMENT)
        given = list(args) + [None] * (len(names) - len(args))
        for name, value in named.items():
            index = names.index(name)
            if index < len(args):
                raise VmrtError(f"input {name!r} given by position and by name",
                                StatusCode.INVALID_ARGUMENT)
            given[index] = value
        missing = [n for n, v in zip(names, given) if v is None]
        if missing:
            raise VmrtError(f"{self.function.name}() is missing input {missing[0]!r}",
                            StatusCode.INVALID_ARGUMENT)
        return tuple(given)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.function, name)

    def __repr__(self) -> str:
        return repr(self.function)


def _close_devices(devices: list[Device]) -> None:
    while devices:  # (local-task devices: their threads end now)
        devices.pop().close()


def load(source: ModuleSource, *, modules: Iterable[Module] = (),
         instance: Instance | None = None, device: str | Device | None = None,
         driver: str | None = None, parameters: ParameterSource | None = None,
         limits: Limits | None = None,
         hooks: ExecutionHooks | Iterable[ExecutionHooks] | None = (),
         instrumented: bool = False, checkpoints: bool = False, tier: str | None = None,
         trace_hook: Callable[[str, Any], None] | None = None,
         print_hook: Callable[[str, Any], None] | None = None,
         meter: Meter | None = None) -> LoadedModule:
    """Loads `source` (a .vmfb or .vmasm path, vmasm text, or .vmfb bytes; an .onnx or
    .mlir path is compiled first, or found in the compile cache: see compile) into a
    new context after the native `modules`; returns its exports as callables.

    Native modules it imports that `modules` lacks are supplied: `hal` on `device`
    (a driver name, local-sync (the default) or local-task, or a vmrt.hal Device;
    `driver=` is iree.runtime's name for it; calls take and return numpy arrays),
    `io_parameters` over `parameters` (archive paths, {scope: path or paths}, a
    ParameterScopes, or parameter providers). `limits`, `hooks`, `instrumented`,
    `checkpoints`, `tier`, `trace_hook`, `print_hook` and `meter` are vmrt.Context's."""
    from vmrt.modules.natives import (explain_device_target, native_modules_for,
                                      parameter_providers)
    if driver is not None and device is not None and device != driver:
        raise TypeError(f"vmrt.load() was given device={device!r} and driver={driver!r}: "
                        "driver is iree.runtime's name for device; give one")
    device = device if device is not None else driver or "local-sync"
    source, parameters, signatures = _compiled(source, parameters)
    module = module_from(source)
    given = list(modules)
    if parameters is not None:  # archives open now: a missing one fails whatever imports
        parameters = parameter_providers(parameters)
    natives = native_modules_for(given + [module], device=device, parameters=parameters,
                                 host_arrays=True)
    # Devices made here are load's to close; a Device passed in stays the caller's.
    hal = next((n for n in natives if n.name == "hal"), None)
    owned = list(getattr(hal, "devices", ())) if isinstance(device, str) else []
    try:
        context = Context(instance, natives + given + [module], limits=limits, hooks=hooks,
                          instrumented=instrumented, checkpoints=checkpoints, tier=tier,
                          trace_hook=trace_hook, print_hook=print_hook, meter=meter)
    except VmrtError as error:
        _close_devices(owned)
        raise explain_device_target(error)
    except BaseException:
        _close_devices(owned)
        raise
    return LoadedModule(context, module, owned, signatures)


def _compiled(source: Any, parameters: Any) -> tuple[Any, Any, dict]:
    """(module source, parameters, signatures) for load: an .onnx or .mlir path is
    compiled (or found in the compile cache), a vmrt.compile result brings its own
    archive and names; anything else passes as it is."""
    import sys
    compiler = sys.modules.get("vmrt.compiler")  # (a CompiledModule exists only if loaded)
    if compiler is not None and isinstance(source, compiler.CompiledModule):
        made = source.build
    elif isinstance(source, (str, os.PathLike)) and not _is_vmasm_text(str(source)) \
            and Path(source).suffix.lower() in (".onnx", ".mlir", ".mlirbc"):
        from vmrt.compiler import build
        made = build(source, load=_checking_load)
        source = made.vmfb
    else:
        return source, parameters, {}
    if parameters is None and made.irpa is not None:
        parameters = {made.record["parameter_scope"]: made.irpa}
    return source, parameters, {made.function: (made.inputs, made.outputs)}


def _checking_load(vmfb: bytes) -> LoadedModule:
    """How vmrt.compile loads candidate builds to check and time them."""
    return load(vmfb, device="local-task")


def compile(source: Any, *, example_args: Any = None, target: str = "host",
            tune: bool = False, parameters: str | None = None, flags: Iterable[str] = (),
            progress: Callable[[str], None] | None = None) -> Any:
    """Compiles a model for this machine: `source` is a path to an .onnx or .mlir
    (StableHLO, linalg, torch) file, a torch.nn.Module or a JAX function (both with
    `example_args`). Returns a vmrt.compiler.CompiledModule: the module's bytes
    (vmrt.load takes it; .save(path) writes it), with its inputs, outputs and flags.

    `target`: host (this CPU), generic or vmvx. Builds with flags beyond the default
    (the host's fast set; `flags`, the caller's own) are checked against the default
    build on `example_args` (else random inputs): one whose outputs differ is not
    used (a vmrt.compiler.CompileWarning says so). `tune=True` builds several flag
    sets and keeps the fastest correct one. `parameters="external"` puts the large
    weights in an .irpa beside the module. Builds are kept in vmrt's cache
    (VMRT_CACHE_DIR). Needs the `vmrt[compile]` extra."""
    from vmrt.compiler import CompiledModule, build
    made = build(source, example_args=example_args, target=target, tune=tune,
                 parameters=parameters, flags=tuple(flags), load=_checking_load,
                 progress=progress or (lambda step: None))
    return CompiledModule.of(made)
