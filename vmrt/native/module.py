"""Native modules: a class with a name, a version and exports with cconvs.

    class Host(vmrt.NativeModule, name="host", version=1):
        @vmrt.export("0ii_i")
        def add(self, a, b):
            return a + b

Exports
-------
`@export(cconv)` marks a method; the cconv may be left out when the parameters
and return are annotated (vmrt.native.types). The method receives one Python
argument per cconv element: ints for i/I, floats for f/F, a RefObject or None
for r, and for a span `C..D` a list of tuples. It returns None (no results),
one value, or a tuple of values. An export written as a generator is
yieldable: each `yield` suspends the calling VM stack (upstream's DEFERRED) and
its return value is the result.

Results are checked on the way out by a small adapter generated per signature:
a wrong arity or type, or an int that does not fit, is a VMError
(INVALID_ARGUMENT) naming the module, the function and the cconv. An exception
escaping an export becomes a VMError: INTERNAL, or the status a vmrt error
carries; the context adds the VM stack.

Per-context state
-----------------
`create_state(context)` runs when the module is registered in a context; its
result is passed to exports declared with `@export(..., state=True)` as the
argument after `self`. `release_state(state)` runs when the context is closed
(by default it calls `state.release()` if there is one). The default state is a
`NativeState`, which also holds the resolved imports.

Imports and dependencies
------------------------
Class keywords `imports=[Import("other.fn", "0i_i", optional=True), ...]` and
`dependencies=[Dependency("other", 1)]`. Resolved imports are put in the
state's `imports` dict (full name -> callable taking register values; None for
an optional import that did not resolve) when the state is a NativeState, or
handed to `bind_import(state, full_name, fn)`.

C exports
---------
A class attribute `name = c_export(cconv, function_pointer)` (vmrt.native.cmodule)
is an export written in C with upstream's shim ABI.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from dataclasses import dataclass

from vmrt.errors import StatusCode, VMError, VmrtError, limit_of
from vmrt.vm.module import Dependency as _Dependency
from vmrt.vm.module import ImportDecl, Module, ModuleInstance
from vmrt.vm.numerics import f32 as _f32
from vmrt.vm.ref import RefObject, register_ref_type
from vmrt.vm.cconv import CConvError, Signature, parse

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


# ----------------------------------------------------------------------------------------------
# Declarations
# ----------------------------------------------------------------------------------------------
class ExportSpec:
    """What `@export` records on a method."""

    __slots__ = ("name", "cconv", "state")

    def __init__(self, name: str | None, cconv: str | None, state: bool):
        self.name = name
        self.cconv = cconv
        self.state = state


def export(cconv=None, *, name: str | None = None, state: bool = False):
    """Marks a method as an export.

    `cconv`: the calling convention ("0ii_i"); omitted, it is derived from the
    annotations. `name`: the export name (default: the method's). `state`:
    pass the per-context state as the argument after `self`.
    Also usable bare: `@export`.
    """
    if callable(cconv):  # bare @export
        cconv.vmrt_export = ExportSpec(None, None, False)
        return cconv

    def mark(fn):
        fn.vmrt_export = ExportSpec(name, cconv, state)
        return fn
    return mark


def Import(full_name: str, cconv: str = "", optional: bool = False) -> ImportDecl:
    """An import of a native module: `module.function` with its cconv."""
    if "." not in full_name:
        raise VMError(f"import '{full_name}' must be module.function", StatusCode.INVALID_ARGUMENT)
    return ImportDecl(full_name, cconv, optional)


def Dependency(name: str, minimum_version: int = 0, optional: bool = False) -> _Dependency:
    """A module this one needs registered before it (at least `minimum_version`)."""
    return _Dependency(name, minimum_version, optional)


def ref_type(name: str):
    """Class decorator: registers a RefObject subclass as ref type `name`
    ("!example.counter" or "example.counter"), so that modules naming the type
    can hold its objects in registers, lists and globals."""
    def register(cls):
        register_ref_type(name, cls)
        return cls
    return register


class NativeState:
    """The default per-context state: the context and the resolved imports."""

    def __init__(self, context):
        self.context = context
        self.imports: dict[str, object] = {}

    def release(self) -> None:
        self.imports = {}


@dataclass(slots=True, eq=False)
class Export:
    """One export of a native module class (Python or C)."""

    name: str
    signature: Signature
    attribute: str  # the class attribute holding its function
    with_state: bool = False
    is_generator: bool = False
    c_export: object = None  # the CExport of a C function


def _declaration_error(module: str, function: str, cconv, reason: str) -> VMError:
    return VMError(f"native module '{module}' export '{function}' (cconv {cconv!r}): {reason}",
                   StatusCode.INVALID_ARGUMENT)


# ----------------------------------------------------------------------------------------------
# The module class
# ----------------------------------------------------------------------------------------------
class NativeModule(Module):
    """Base class of native modules (see the module docstring)."""

    name = ""
    version = 0
    _exports: dict = {}
    _import_decls: tuple = ()
    _dependency_decls: tuple = ()
    _c_state = None
    _c_module = None
    #: ForeignCode.binding of the module's foreign exports or state, or None.
    _foreign_binding = None

    def __init_subclass__(cls, name: str | None = None, version: int | None = None,
                          imports=None, dependencies=None, c_state=None, c_module=None,
                          **kwargs):
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.name = name
        if version is not None:
            cls.version = int(version)
        if imports is not None:
            cls._import_decls = tuple(d if isinstance(d, ImportDecl) else Import(*d)
                                      for d in imports)
            for decl in cls._import_decls:
                try:
                    if decl.cconv:
                        parse(decl.cconv)
                except CConvError as error:
                    raise VMError(f"native module '{cls.name}' import '{decl.full_name}' "
                                  f"(cconv {decl.cconv!r}): {error.message}",
                                  StatusCode.INVALID_ARGUMENT) from None
        if dependencies is not None:
            cls._dependency_decls = tuple(d if isinstance(d, _Dependency) else Dependency(*d)
                                          for d in dependencies)
        if c_state is not None:
            cls._c_state = c_state
        if c_module is not None:
            cls._c_module = c_module
        cls._exports = _collect_exports(cls)
        foreign = [e.c_export for e in cls._exports.values() if e.c_export is not None]
        if cls._c_state is not None:
            foreign.append(cls._c_state)
        cls._foreign_binding = staticmethod(foreign[0].binding) if foreign else None

    # -- Module interface -------------------------------------------------------------------
    def export_names(self) -> list[str]:
        return list(self._exports)

    def export_cconv(self, name: str) -> str | None:
        entry = self._exports.get(name)
        return entry.signature.cconv if entry else None

    def imports(self) -> list[ImportDecl]:
        return list(self._import_decls)

    def dependencies(self) -> list[_Dependency]:
        return list(self._dependency_decls)

    def instantiate(self, context) -> "NativeModuleInstance":
        return NativeModuleInstance(self, context)

    # -- hooks --------------------------------------------------------------------------------
    def create_state(self, context):
        """Per-context state (override); the default is a NativeState."""
        return NativeState(context)

    def release_state(self, state) -> None:
        """Releases what create_state made, at context teardown."""
        release = getattr(state, "release", None)
        if release is not None:
            release()

    def bind_import(self, state, full_name: str, fn) -> None:
        """Delivers a resolved import (None: optional and not resolved) to the state."""
        imports = getattr(state, "imports", None)
        if isinstance(imports, dict):
            imports[full_name] = fn


class ForeignCode:
    """What a native module declares of code outside Python (vmrt.native.cmodule:
    C exports and C state): `binding(module)` makes the per-context object that
    serves it, with `adapter(export, module_name)` (the callable of a
    ForeignExport) and `release()` (at context teardown)."""

    __slots__ = ()

    @staticmethod
    def binding(module):
        raise NotImplementedError


class ForeignExport(ForeignCode):
    """A class attribute declaring an export implemented outside Python: `cconv`
    and `name` (None: the attribute's name)."""

    __slots__ = ()
    cconv: str
    name: str | None


def _collect_exports(cls) -> dict:
    module_name = cls.name or cls.__name__
    exports: dict[str, Export] = {}
    seen_attributes: dict[str, Export] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            spec = getattr(value, "vmrt_export", None)
            if isinstance(value, ForeignExport):
                name = value.name or attr
                try:
                    signature = parse(value.cconv)
                except CConvError as error:
                    raise _declaration_error(module_name, name, value.cconv,
                                             error.message) from None
                entry = Export(name, signature, attr, c_export=value)
            elif isinstance(spec, ExportSpec) and callable(value):
                name = spec.name or attr
                entry = _python_export(module_name, name, attr, value, spec)
            else:
                if attr in seen_attributes:  # overridden by something that is no export
                    exports.pop(seen_attributes.pop(attr).name, None)
                continue
            previous = seen_attributes.get(attr)
            if previous is not None:
                exports.pop(previous.name, None)
            seen_attributes[attr] = entry
            exports[name] = entry
    return exports


def _python_export(module_name, name, attr, fn, spec: ExportSpec) -> Export:
    is_generator = inspect.isgeneratorfunction(fn)
    cconv = spec.cconv
    if cconv is None:
        from vmrt.native.types import derive_cconv

        try:
            cconv = derive_cconv(fn, with_state=spec.state)
        except CConvError as error:
            raise _declaration_error(module_name, name, None, error.message) from None
    try:
        signature = parse(cconv)
    except CConvError as error:
        raise _declaration_error(module_name, name, cconv, error.message) from None
    _check_parameters(module_name, name, fn, signature, spec.state)
    return Export(name, signature, attr, with_state=spec.state, is_generator=is_generator)


def _check_parameters(module_name, name, fn, signature: Signature, with_state: bool) -> None:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return
    required = [p for p in positional if p.default is p.empty]
    wanted = 1 + int(with_state) + len(signature.arguments)
    if not len(required) <= wanted <= len(positional):
        extra = " and the state" if with_state else ""
        raise _declaration_error(
            module_name, name, signature.cconv,
            f"the method takes {len(positional) - 1} arguments after self but the cconv "
            f"passes {len(signature.arguments)}{extra}")


# ----------------------------------------------------------------------------------------------
# Per-context instances
# ----------------------------------------------------------------------------------------------
class NativeModuleInstance(ModuleInstance):
    """A native module registered in one context: its state and export adapters."""

    def __init__(self, module: NativeModule, context):
        self.module = module
        self.context = context
        self.state = None
        self.c_binding = None
        self._resolved: dict[str, tuple] = {}
        self._adapters: dict[str, tuple] = {}
        self._initialized = False

    # -- ModuleInstance interface ---------------------------------------------------------------
    def resolve_import(self, ordinal: int, fn, yieldable_fn=None) -> None:
        decl = self.module._import_decls[ordinal]
        self._resolved[decl.full_name] = (fn, yieldable_fn or fn)

    def initialize(self) -> None:
        module = self.module
        try:
            self.state = module.create_state(self.context)
        except VmrtError:
            raise
        except Exception as error:
            raise VMError(f"native module '{module.name}': create_state raised "
                          f"{type(error).__name__}: {error}", StatusCode.INTERNAL) from error
        try:
            for decl in module._import_decls:
                entry = self._resolved.get(decl.full_name)
                module.bind_import(self.state, decl.full_name, entry[0] if entry else None)
            if module._foreign_binding is not None:
                self.c_binding = module._foreign_binding(module)
            self._initialized = True  # adapters are made as exports are looked up
        except BaseException:
            self._release()
            raise

    def deinitialize(self) -> None:
        self._release()

    def notify(self, signal: int) -> None:
        hear = getattr(self.module, "notify", None)
        if hear is not None:
            hear(signal)

    def _release(self) -> None:
        self._adapters.clear()
        state, self.state = self.state, None
        binding, self.c_binding = self.c_binding, None
        try:
            if state is not None:
                self.module.release_state(state)
        finally:
            if binding is not None:
                binding.release()

    def lookup(self, name: str):
        entry = self._adapters.get(name)
        if entry is None:
            if not self._initialized or name not in self.module._exports:
                return None
            export = self.module._exports[name]
            entry = self._adapters[name] = (self._make_adapter(export), export.is_generator)
        return entry[0]

    def is_generator(self, name: str) -> bool:
        export = self.module._exports.get(name)
        return export is not None and export.is_generator

    def _make_adapter(self, export: Export):
        if export.c_export is not None:
            return self.c_binding.adapter(export, self.module.name)
        fn = getattr(type(self.module), export.attribute)
        return python_adapter(self.module, fn, export, self.state)


# ----------------------------------------------------------------------------------------------
# Adapters for Python exports
# ----------------------------------------------------------------------------------------------
#: The range of a single integer result that registers hold as it is.
_INT_RESULT_RANGES = {("i",): (I32_MIN, I32_MAX), ("I",): (I64_MIN, I64_MAX)}


def adapter_factory(source: str, name: str):
    """The `make` function of generated adapter source (vmrt.native.cmodule's C
    adapters): the one place vmrt.native compiles code from text. Made once per
    shape of signature (`name` says which, in tracebacks)."""
    namespace: dict = {}
    exec(compile(source, f"<vmrt {name}>", "exec"), namespace)
    return namespace["make"]


def python_adapter(module: NativeModule, fn, export: Export, state):
    """The callable serving `export` of `module` in one context: it calls `fn`, turns
    what it raises into a VMError and checks its results. (A plain closure: adapters
    compiled per shape of signature cost a process as much as loading a small model.)"""
    signature = export.signature
    where = f"{module.name}.{export.name}"
    fail = export_failure(where, signature.cconv)
    fix = result_fixer(where, signature)
    results = signature.results
    # Values registers hold as they are pass; anything else (and f32 results, which
    # are rounded) goes through result_fixer, which normalizes it or raises.
    none_ok = results in ((), ("r",))
    ref_type = RefObject if results == ("r",) else ()
    low, high = _INT_RESULT_RANGES.get(results, (1, 0))  # (1, 0): no integer passes
    float_ok = results == ("F",)

    def finish(r):
        if r is None and none_ok or isinstance(r, ref_type) or (
                r.__class__ is int and low <= r <= high or r.__class__ is float and float_ok):
            return r
        return fix(r)

    call = (functools.partial(fn, module, state) if export.with_state
            else types.MethodType(fn, module))
    if export.is_generator:
        def adapter(*args):
            try:
                r = yield from call(*args)
            except Exception as e:
                raise fail(e)
            return finish(r)
    else:
        def adapter(*args):
            try:
                r = call(*args)
            except Exception as e:
                raise fail(e)
            if r is None and none_ok or isinstance(r, ref_type) or (
                    r.__class__ is int and low <= r <= high):
                return r  # (what most exports return, passed without a call)
            return finish(r)
    adapter.__name__ = adapter.__qualname__ = export.name
    adapter.vmrt_native = (where, signature.cconv)
    return adapter


def export_failure(where: str, cconv: str):
    """Turns an exception escaping an export into the VMError to raise."""
    label = f"{where} (cconv '{cconv}')"

    def fail(error: BaseException) -> VMError:
        if isinstance(error, VMError):
            error.annotate(f"in native export {label}")
            return error
        if isinstance(error, VmrtError):
            converted = VMError(f"{label}: {error.message}", error.code, limit=limit_of(error))
            converted.annotations.extend(error.annotations)
            return converted
        return VMError(f"{label} raised {type(error).__name__}: {error}", StatusCode.INTERNAL)
    return fail


def result_error(where: str, cconv: str, reason: str) -> VMError:
    return VMError(f"{where} (cconv '{cconv}') {reason}", StatusCode.INVALID_ARGUMENT)


def result_fixer(where: str, signature: Signature):
    """Normalizes results the generated check did not accept, or raises."""
    results = signature.results
    cconv = signature.cconv

    def fix(value):
        if not results:
            raise result_error(where, cconv, f"returned {_describe(value)} but has no results")
        if len(results) == 1:
            if isinstance(value, tuple):
                if len(value) != 1:
                    raise result_error(where, cconv,
                                       f"returned {len(value)} results, expected 1")
                value = value[0]
            return normalize_result(where, cconv, results[0], value, 0)
        if not isinstance(value, (tuple, list)):
            raise result_error(where, cconv, f"returned {_describe(value)}, expected a tuple "
                                             f"of {len(results)} results")
        if len(value) != len(results):
            raise result_error(where, cconv,
                               f"returned {len(value)} results, expected {len(results)}")
        return tuple(normalize_result(where, cconv, t, v, k)
                     for k, (t, v) in enumerate(zip(results, value)))
    return fix


_TYPE_NAMES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "a ref (or None)"}


def _describe(value) -> str:
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


def normalize_result(where: str, cconv: str, kind: str, value, index: int):
    """One result as a register holds it, or a VMError."""
    def bad(reason):
        return result_error(where, cconv, f"result {index}: {reason}")

    if kind in "iI":
        if isinstance(value, float) or value is None or isinstance(value, (str, bytes)):
            raise bad(f"{_describe(value)} is not {_TYPE_NAMES[kind]}")
        try:
            number = operator.index(value)
        except TypeError:
            raise bad(f"{_describe(value)} is not {_TYPE_NAMES[kind]}") from None
        low, high = (I32_MIN, I32_MAX) if kind == "i" else (I64_MIN, I64_MAX)
        if not low <= number <= high:
            raise bad(f"{number} does not fit in {_TYPE_NAMES[kind]}")
        return number
    if kind in "fF":
        if isinstance(value, (str, bytes)) or value is None or isinstance(value, RefObject):
            raise bad(f"{_describe(value)} is not {_TYPE_NAMES[kind]}")
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise bad(f"{_describe(value)} is not {_TYPE_NAMES[kind]}") from None
        return _f32(number) if kind == "f" else number
    if value is None or isinstance(value, RefObject):
        return value
    raise bad(f"{_describe(value)} is not {_TYPE_NAMES[kind]}")


__all__ = ["Dependency", "Export", "Import", "NativeModule", "NativeModuleInstance",
           "NativeState", "export", "ref_type"]
