"""vmrt: a Python runtime for IREE VM bytecode modules (.vmfb)."""

from vmrt.errors import (
    ModuleFormatError, StatusCode, VerificationError, VMError, VmrtError,
)

__all__ = [
    "BytecodeModule", "Context", "Function", "Instance", "Invocation", "Module",
    "ModuleFormatError", "NativeModule", "StatusCode", "VMBuffer", "VMError", "VMList",
    "VerificationError", "VmrtError", "export", "load", "load_module",
]

#: Public names -> the module defining them. They load on first use, so that
#: `import vmrt.tools.cli` (the `vmrt` command) starts in milliseconds: until its
#: main() runs, a Ctrl-C could only end it with a traceback.
_LAZY = {
    "NativeModule": "vmrt.native", "export": "vmrt.native", "VMBuffer": "vmrt.vm.buffer",
    "Context": "vmrt.vm.context", "Function": "vmrt.vm.context",
    "Instance": "vmrt.vm.context", "Invocation": "vmrt.vm.context", "VMList": "vmrt.vm.list",
    "BytecodeModule": "vmrt.vm.module", "Module": "vmrt.vm.module",
    "load_module": "vmrt.vm.module",
    # Kept out of the core: load() pulls in the assembler, debug the hooks.
    "load": "vmrt.api", "LoadedModule": "vmrt.api",
}


def __getattr__(name: str):
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


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
