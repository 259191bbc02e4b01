"""vmrt: a Python runtime for IREE VM bytecode modules (.vmfb)."""

from vmrt.errors import (
    ArchiveError, AssemblyError, Cancelled, DeadlineExceeded, DepthExceeded, FuelExhausted,
    InvalidLimit, LimitExceeded, MemoryLimitExceeded, ModuleFormatError, StatusCode,
    VerificationError, VMError, VmrtError,
)

# mypy takes any `if TYPE_CHECKING:` as true; defining the name here rather than
# importing it from typing keeps `import vmrt` from loading typing.
TYPE_CHECKING = False
if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from vmrt import io as io
    from vmrt.api import LoadedModule as LoadedModule, compile as compile, load as load
    from vmrt.modules.hal import HalModule as HalModule
    from vmrt.modules.io_parameters import IoParametersModule as IoParametersModule
    from vmrt.native import NativeModule as NativeModule, export as export
    from vmrt.vm.buffer import VMBuffer as VMBuffer
    from vmrt.vm.context import (
        Context as Context, Function as Function, Instance as Instance,
        Invocation as Invocation, Signal as Signal,
    )
    from vmrt.vm.limits import Limits as Limits
    from vmrt.vm.list import VMList as VMList
    from vmrt.vm.module import (
        BytecodeModule as BytecodeModule, Module as Module, load_module as load_module,
    )

__all__ = [
    "ArchiveError", "AssemblyError", "BytecodeModule", "Cancelled", "Context",
    "DeadlineExceeded", "DepthExceeded", "FuelExhausted", "Function", "HalModule", "Instance",
    "InvalidLimit", "Invocation", "IoParametersModule", "LimitExceeded", "Limits", "LoadedModule",
    "MemoryLimitExceeded", "Module", "ModuleFormatError", "NativeModule", "Signal",
    "StatusCode", "VMBuffer", "VMError", "VMList", "VerificationError", "VmrtError", "compile",
    "export", "load", "load_module",
]

#: Public names -> the module defining them. They load on first use, so that
#: `import vmrt.tools.cli` (the `vmrt` command) starts in milliseconds: until its
#: main() runs, a Ctrl-C could only end it with a traceback. (Keep in step with
#: the TYPE_CHECKING imports above.)
_LAZY = {
    "NativeModule": "vmrt.native", "export": "vmrt.native", "VMBuffer": "vmrt.vm.buffer",
    "Context": "vmrt.vm.context", "Function": "vmrt.vm.context",
    "Instance": "vmrt.vm.context", "Invocation": "vmrt.vm.context",
    "Signal": "vmrt.vm.context", "VMList": "vmrt.vm.list", "Limits": "vmrt.vm.limits",
    "BytecodeModule": "vmrt.vm.module", "Module": "vmrt.vm.module",
    "load_module": "vmrt.vm.module",
    # Kept out of the core: load() pulls in the assembler, debug the hooks, the
    # native modules the HAL and numpy.
    "load": "vmrt.api", "LoadedModule": "vmrt.api", "compile": "vmrt.api",
    "HalModule": "vmrt.modules.hal", "IoParametersModule": "vmrt.modules.io_parameters",
}


def __getattr__(name: str) -> object:
    import importlib
    where = _LAZY.get(name)
    if where is None and not name.startswith("__"):  # a submodule (vmrt.native, ...)
        try:
            return importlib.import_module(f"vmrt.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"vmrt.{name}":
                raise
    if where is None:
        raise AttributeError(f"module 'vmrt' has no attribute '{name}'")
    if where != "vmrt.api":  # the core as a whole, as an eager import loaded it
        for module in ("vmrt.native", "vmrt.vm.buffer", "vmrt.vm.context", "vmrt.vm.list",
                       "vmrt.vm.module"):
            importlib.import_module(module)
    value = getattr(importlib.import_module(where), name)
    if where != "vmrt.api":
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
