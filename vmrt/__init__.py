"""vmrt: a Python runtime for IREE VM bytecode modules (.vmfb)."""

from vmrt.errors import (
    ModuleFormatError, StatusCode, VerificationError, VMError, VmrtError,
)
from vmrt.native import NativeModule, export
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.context import Context, Function, Instance, Invocation
from vmrt.vm.list import VMList
from vmrt.vm.module import BytecodeModule, Module, load_module

__all__ = [
    "BytecodeModule", "Context", "Function", "Instance", "Invocation", "Module",
    "ModuleFormatError", "NativeModule", "StatusCode", "VMBuffer", "VMError", "VMList",
    "VerificationError", "VmrtError", "export", "load", "load_module",
]


def __getattr__(name: str):
    # Kept out of `import vmrt`: load() pulls in the assembler, debug the hooks.
    if name in ("load", "LoadedModule"):
        from vmrt import api
        return getattr(api, name)
    if name == "debug":
        import importlib
        return importlib.import_module("vmrt.debug")
    raise AttributeError(f"module 'vmrt' has no attribute '{name}'")
