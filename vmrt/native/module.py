"""Python native modules: a class with a name, a version and exports with cconvs.

    class Host(vmrt.NativeModule, name="host", version=1):
        @vmrt.export("0ii_i")
        def add(self, a, b):
            return a + b

An export receives one Python argument per cconv element (spans as lists of
tuples) and returns None, one value, or a tuple. An export written as a
generator is yieldable: each `yield` suspends the calling VM stack and its
return value is the result.
"""

from __future__ import annotations

import inspect

from vmrt.errors import StatusCode, VMError
from vmrt.vm import cconv as cconv_mod
from vmrt.vm.module import Dependency, ImportDecl, Module, ModuleInstance


def export(cconv: str, name: str | None = None):
    """Marks a method as an export with calling convention `cconv`."""
    cconv_mod.check_well_formed(cconv)

    def mark(fn):
        fn.vmrt_export = (name or fn.__name__, cconv)
        return fn
    return mark


class NativeModule(Module):
    """Base class of Python native modules (see the module docstring)."""

    name = ""
    version = 0

    def __init_subclass__(cls, name: str | None = None, version: int | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.name = name
        if version is not None:
            cls.version = version
        cls._export_table = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                marker = getattr(value, "vmrt_export", None)
                if marker is not None:
                    export_name, cconv = marker
                    cls._export_table[export_name] = (attr, cconv)

    def export_names(self) -> list[str]:
        return list(self._export_table)

    def export_cconv(self, name: str) -> str | None:
        entry = self._export_table.get(name)
        return entry[1] if entry else None

    def imports(self) -> list[ImportDecl]:
        return []

    def dependencies(self) -> list[Dependency]:
        return []

    def create_state(self, context):
        """Per-context state (override); released at context teardown."""
        return None

    def instantiate(self, context) -> "NativeModuleInstance":
        return NativeModuleInstance(self, context)


class NativeModuleInstance(ModuleInstance):
    def __init__(self, module: NativeModule, context):
        self.module = module
        self.context = context
        self.state = module.create_state(context)

    def lookup(self, name: str):
        entry = self.module._export_table.get(name)
        if entry is None:
            return None
        return getattr(self.module, entry[0])

    def is_generator(self, name: str) -> bool:
        fn = self.lookup(name)
        return fn is not None and inspect.isgeneratorfunction(fn)

    def deinitialize(self) -> None:
        release = getattr(self.state, "release", None)
        if release is not None:
            release()
        self.state = None


def native_error(message: str, code=StatusCode.INTERNAL) -> VMError:
    return VMError(message, code)
