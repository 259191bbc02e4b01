"""The native modules vmrt supplies for what a module imports: `hal` (the host HAL on
one device), `io_parameters` (over parameter archives or providers) and
`yieldable_test`. Shared by vmrt.load and the tools (`vmrt run`, `check`, `test`),
as iree.runtime and iree-run-module register them on their own.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, Union

from vmrt.errors import StatusCode, VmrtError

if TYPE_CHECKING:
    from vmrt.hal.device import Device
    from vmrt.io.index import ParameterScopes
    from vmrt.io.provider import ParameterProvider, ProviderSet
    from vmrt.vm.module import Module

__all__ = ["NATIVE_MODULES", "ParameterSource", "explain_device_target", "native_modules_for",
           "parameter_providers"]

#: Native modules without options vmrt supplies when a module imports them (or
#: depends on them): name -> (Python module, class). hal and io_parameters take
#: the device and parameters of native_modules_for.
NATIVE_MODULES = {
    "yieldable_test": ("vmrt.modules.yieldable_test", "YieldableTestModule"),
}

#: Native modules of IREE's runtime that vmrt does not provide.
_UNPROVIDED_NATIVE_MODULES = {
    "hal_inline": "the inline HAL module",
    "hal_loader": "the HAL loader module",
}

#: Parameters as a host passes them: archive paths (the global scope), {scope: path
#: or paths}, a ParameterScopes, a provider, a ProviderSet or providers.
ParameterSource = Union[str, "os.PathLike[str]", Mapping[str, Any], "ParameterScopes",
                        "ParameterProvider", "ProviderSet", Iterable[Any]]


def native_modules_for(modules: Sequence[Module], paths: Sequence[str] | None = None,
                       device: str | Device = "local-sync",
                       parameters: ParameterSource | None = None, *,
                       native_under_limits: bool = False,
                       host_arrays: bool = False) -> list[Module]:
    """Native modules to register ahead of `modules`, for what they import or depend
    on and no module of `modules` provides (each module may use those before it).

    `device`: a driver name (local-sync, local-task) or a vmrt.hal Device for `hal`;
    `host_arrays`: its Function calls take and return numpy arrays (vmrt.load; the
    tools keep buffer views); `native_under_limits`: see HalModule. `parameters`
    (parameter_providers) feeds `io_parameters`. A required import of a native module
    vmrt does not provide is UNIMPLEMENTED, naming the module (and its file, from
    `paths`).
    """
    provided = {module.name for module in modules}
    natives: list[Module] = []
    for index, module in enumerate(modules):
        wanted = [(d.name, d.optional) for d in module.dependencies()]
        wanted += [(i.module_name, i.optional) for i in module.imports()]
        for name, optional in wanted:
            if name in provided:
                continue
            native = _native_module(name, device, parameters, native_under_limits, host_arrays)
            if native is not None:
                natives.append(native)
                provided.add(name)
            elif name in _UNPROVIDED_NATIVE_MODULES and not optional:
                where = f" ({paths[index]})" if paths else ""
                raise VmrtError(f"module '{module.name}'{where} needs "
                                f"{_UNPROVIDED_NATIVE_MODULES[name]} '{name}', which vmrt "
                                "does not provide", StatusCode.UNIMPLEMENTED)
    return natives


def _native_module(name: str, device: str | Device, parameters: ParameterSource | None,
                   native_under_limits: bool, host_arrays: bool) -> Module | None:
    """The native module vmrt supplies for `name`, or None."""
    if name == "hal":
        from vmrt.modules.hal import HalModule
        if isinstance(device, str):
            return HalModule(device=device, host_arrays=host_arrays,
                             native_under_limits=native_under_limits)
        return HalModule([device], host_arrays=host_arrays,
                         native_under_limits=native_under_limits)
    if name == "io_parameters":
        from vmrt.modules.io_parameters import IoParametersModule
        return IoParametersModule(parameter_providers(parameters))
    if name in NATIVE_MODULES:
        python_module, class_name = NATIVE_MODULES[name]
        module: Module = getattr(importlib.import_module(python_module), class_name)()
        return module
    return None


def parameter_providers(parameters: ParameterSource | None, mode: str = "mmap"
                        ) -> ParameterScopes | ParameterProvider | ProviderSet | list[Any]:
    """What IoParametersModule takes, from what a host passes: a ParameterScopes, a
    provider, a ProviderSet or providers as they are; an archive path or paths (.irpa,
    .safetensors, .gguf) in the global scope; {scope: path or paths}. Archives are
    opened now (`mode`: mmap, file or preload), so a missing one fails here."""
    from vmrt.io.index import ParameterScopes
    from vmrt.io.provider import ParameterProvider, ProviderSet
    if parameters is None:
        return ParameterScopes()
    if isinstance(parameters, (ParameterScopes, ParameterProvider, ProviderSet)):
        return parameters
    if isinstance(parameters, (str, os.PathLike)):
        return parameter_providers({"": [parameters]}, mode)
    if isinstance(parameters, Mapping):
        scopes = ParameterScopes()
        for scope, paths in parameters.items():
            for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
                try:
                    scopes.add_file(path, scope, mode=mode)
                except VmrtError as error:
                    raise error.annotate(f"loading parameters of scope '{scope}' "
                                         f"from '{os.fspath(path)}'")
        return scopes
    items = list(parameters)
    if items and all(isinstance(item, (str, os.PathLike)) for item in items):
        return parameter_providers({"": items}, mode)
    return items  # providers


#: What a module compiled for a device vmrt does not have fails with, in its __init
#: (the text iree-compile puts in the module: `#hal.device.target<...>`, ~600 bytes).
_DEVICE_NOT_FOUND = re.compile(r"HAL device `[^`]*` not found or unavailable: "
                               r"#hal\.device\.target<\"([^\"]+)\"(.*)", re.DOTALL)
_EXECUTABLE_TARGET = re.compile(r'#hal\.executable\.target<"([^"]+)", "([^"]+)"')


def explain_device_target(error: VmrtError) -> VmrtError:
    """`error`, its message said in a user's terms when the module was compiled for a
    device vmrt lacks: what it was compiled for, what vmrt runs, and the iree-compile
    flags that make one (upstream prints the target attribute only)."""
    match = _DEVICE_NOT_FOUND.search(error.message)
    if match is None:
        return error
    targets = sorted({f"{backend} ({fmt})" for backend, fmt in
                      _EXECUTABLE_TARGET.findall(match.group(2))})
    compiled = f"a `{match.group(1)}` device" + (
        f" with {', '.join(targets)} executables" if targets else "")
    error.message = (f"the module was compiled for {compiled}; vmrt runs local-sync and "
                     "local-task devices with vmvx-bytecode-fb and x86-64 ELF executables: "
                     "compile it with `--iree-hal-target-device=local "
                     "--iree-hal-local-target-device-backends=vmvx` (or `=llvm-cpu` for this "
                     "x86-64 host)")
    return error
