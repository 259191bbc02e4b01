"""vmrt.load: one call from a module (a .vmfb, vmasm text, or bytes) to Python callables.

    with vmrt.load("model.vmfb") as m:
        m.add(1, 2)                  # each export is a vmrt.Function
        m.context, m.module          # the Context and the BytecodeModule

Native modules the module imports are passed as `modules=[...]` (registered
first, in order); other keywords go to vmrt.Context (e.g. `hooks=`,
`instrumented=True`). Leaving the `with` (or `close()`) closes the context:
the modules' `__deinit` runs and every export stops being callable.
"""

from __future__ import annotations

import os
from pathlib import Path

from vmrt.errors import StatusCode, VmrtError

__all__ = ["LoadedModule", "load"]


def _is_vmasm_text(data: str) -> bool:
    return "vm.module" in data and ("\n" in data or "{" in data)


def _module_from(source):
    """(BytecodeModule, where it came from) for a path, vmasm text or module bytes."""
    from vmrt.vm.module import load_module
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        head = data[:4096]
        if b"\0" not in head and _is_vmasm_text(head.decode("utf-8", "replace")):
            return _assemble(data.decode("utf-8"), "<vmasm>"), "<vmasm>"
        return load_module(data), "<bytes>"
    if isinstance(source, str) and _is_vmasm_text(source):
        return _assemble(source, "<vmasm>"), "<vmasm>"
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise VmrtError(f"cannot read module '{path}': {error.strerror or error}",
                            StatusCode.NOT_FOUND) from None
        except ValueError as error:  # a NUL in the path, ...
            raise VmrtError(f"cannot read module {str(path)!r}: {error}",
                            StatusCode.INVALID_ARGUMENT) from None
        if path.suffix == ".vmasm" or (b"\0" not in data[:4096] and _is_vmasm_text(
                data[:4096].decode("utf-8", "replace"))):
            return _assemble(data.decode("utf-8", "replace"), str(path)), str(path)
        module = load_module(data)
        module.source = str(path)
        return module, str(path)
    raise VmrtError(f"cannot load a module from {type(source).__name__} (expected a path, "
                    "vmasm text or module bytes)", StatusCode.INVALID_ARGUMENT)


def _assemble(text: str, filename: str):
    from vmrt.asm import assemble
    from vmrt.vm.module import load_module
    module = load_module(assemble(text, filename=filename))
    module.source = filename
    return module


class LoadedModule:
    """A module registered in its own context; its exports are attributes."""

    def __init__(self, context, module):
        self.context = context
        self.module = module
        self._functions: dict = {}

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def exports(self) -> list[str]:
        return self.module.export_names()

    def function(self, name: str):
        """The export `name` (also for names that are not Python identifiers)."""
        fn = self._functions.get(name)
        if fn is None:
            if self.context._closed:
                raise VmrtError(f"module '{self.name}' was closed", StatusCode.FAILED_PRECONDITION)
            fn = self._functions[name] = self.context.function(self.name, name)
        return fn

    def __getattr__(self, name: str):
        if name.startswith("__") or name not in self.module.export_names():
            raise AttributeError(f"module '{self.module.name}' has no export '{name}'")
        return self.function(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in self.exports if n.isidentifier()})

    def close(self) -> None:
        self._functions.clear()
        self.context.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        state = " (closed)" if self.context._closed else ""
        return f"<vmrt module {self.name} exports={self.exports}{state}>"


def load(source, *, modules=(), instance=None, **context_options) -> LoadedModule:
    """Loads `source` (a .vmfb or .vmasm path, vmasm text, or .vmfb bytes) into a new
    context after the native `modules`; returns its exports as callables."""
    from vmrt.vm.context import Context
    module, _ = _module_from(source)
    context = Context(instance, list(modules) + [module], **context_options)
    return LoadedModule(context, module)
