"""Running lowered stream programs: a VM context with the hal module (its device
loading Python kernels from a given registry), io_parameters when the module
imports it, and the module; functions take and return host byte arrays.

    with StreamRunner(compile_program(program), kernels, device="local-task") as runner:
        results = runner.call("train_step", inputs)     # numpy uint8 arrays
"""

from __future__ import annotations

from vmrt.errors import StatusCode, VmrtError
from vmrt.hal.device import create_device
from vmrt.hal.python_loader import KERNELS, KernelRegistry, PythonLoader
from vmrt.hal.vmvx_loader import VmvxLoader
from vmrt.stream.evaluate import as_bytes_array


def as_registry(kernels) -> KernelRegistry:
    """A KernelRegistry from a registry, a {name: callable} dict or None (the
    process-wide one)."""
    if kernels is None:
        return KERNELS
    if isinstance(kernels, KernelRegistry):
        return kernels
    registry = KernelRegistry()
    registry.update(dict(kernels))
    return registry


def io_parameters_module(parameters):
    """The io_parameters module over `parameters` (a vmrt.io ProviderSet,
    providers or ParameterScopes, as IoParametersModule takes them)."""
    try:
        from vmrt.modules.io_parameters import IoParametersModule
    except ImportError as error:
        raise VmrtError("the io_parameters module (vmrt.modules.io_parameters) is not "
                        f"available: {error}", StatusCode.UNIMPLEMENTED) from None
    return IoParametersModule(parameters)


class StreamRunner:
    """One VM context running a lowered stream module (`hooks`: vmrt.vm.hooks
    ExecutionHooks for the context, e.g. TimelineHooks)."""

    def __init__(self, module, kernels=None, *, device: str = "local-task",
                 parameters=None, worker_count: int | None = None, hooks=(),
                 device_options=None):
        from vmrt.modules.hal import HalModule
        from vmrt.vm.context import Context
        from vmrt.vm.module import load_module

        if isinstance(module, (bytes, bytearray, memoryview)):
            module = load_module(bytes(module))
        self.module = module
        options = {"worker_count": worker_count} if device == "local-task" and worker_count \
            else {}
        options.update(device_options or {})  # (create_device's, e.g. inline_ready)
        self.device = create_device(device, loaders=[VmvxLoader(), PythonLoader(
            as_registry(kernels))], **options)
        natives = [HalModule([self.device], host_arrays=False)]
        wanted = {d.name for d in module.dependencies()} | {
            i.module_name for i in module.imports()}
        if "io_parameters" in wanted:
            natives.append(io_parameters_module(parameters if parameters is not None else []))
        try:
            self.context = Context(modules=natives + [module], hooks=hooks)
        except BaseException:
            self.device.close()
            raise

    def __enter__(self) -> "StreamRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.device.close()

    def call(self, function: str, inputs=()) -> list:
        """Calls `function` with bytes-like inputs; returns numpy uint8 arrays."""
        from vmrt.hal.buffer_view_io import buffer_view_from_numpy, buffer_view_to_numpy

        instance = self.context.module(self.module.name)
        fn = instance.lookup(function)
        if fn is None:
            raise VmrtError(f"module '{self.module.name}' has no function '{function}'",
                            StatusCode.NOT_FOUND)
        from vmrt.vm.context import Function
        callable_ = Function(self.context, instance, function,
                             self.module.export_cconv(function) or "", fn)
        views = [buffer_view_from_numpy(as_bytes_array(data), self.device) for data in inputs]
        results = callable_(*views)
        if results is None:
            return []
        if not isinstance(results, tuple):
            results = (results,)
        return [buffer_view_to_numpy(view).reshape(-1).view("u1") for view in results]
