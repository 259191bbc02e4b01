"""Python dispatch kernels: executables of format `vmrt-python-v0` whose functions
are Python callables found by name in a kernel registry.

The executable data is UTF-8 JSON naming each exported function's kernel and
what a dispatch of it passes:

    {"functions": [{"name": "f0", "kernel": "mlp::matmul", "bindings": 3,
                    "constants": 0}, ...]}

A kernel is called once per dispatch (one workgroup) as
`kernel(*bindings, *constants)`: every binding a writable numpy uint8 array over
the bound bytes (reinterpret with `.view(np.float32)`), every constant a Python int
(u32). Kernels run on the device's workers, so the kernels of one region run
concurrently on local-task; heavy numpy operations release the GIL. A kernel
writes every byte of the results it produces.

Kernels are looked up when an executable is created: a name nobody registered is
a NOT_FOUND error then, not at dispatch time.
"""

from __future__ import annotations

import json
import threading
from typing import Callable

from vmrt.errors import HalError, StatusCode, VmrtError
from vmrt.hal.executable import DispatchState, Executable, ExecutableLoader, FunctionInfo

FORMAT = "vmrt-python-v0"


def fill_kernel(target, pattern_low: int, pattern_high: int, pattern_length: int) -> None:
    """`vmrt.fill`: repeats a 1..8-byte pattern over the target from its first byte
    (for what hal fill commands cannot do: 8-byte patterns, unaligned offsets)."""
    import numpy as np
    if not 1 <= pattern_length <= 8 or len(target) % pattern_length:
        raise HalError(f"fill of {len(target)} bytes with a {pattern_length}-byte pattern",
                       StatusCode.INVALID_ARGUMENT)
    pattern = (pattern_low | pattern_high << 32).to_bytes(8, "little")[:pattern_length]
    target.reshape(-1, pattern_length)[:] = np.frombuffer(pattern, dtype=np.uint8)


def copy_kernel(source, target) -> None:
    """`vmrt.copy`: target = source, correct when the two ranges overlap."""
    if len(source) != len(target):
        raise HalError(f"copy of {len(source)} bytes into {len(target)}",
                       StatusCode.INVALID_ARGUMENT)
    target[:] = source.copy()


#: Kernels every registry has (a registered kernel of the same name wins).
BUILTIN_KERNELS = {"vmrt.fill": fill_kernel, "vmrt.copy": copy_kernel}


class KernelRegistry:
    """Kernel name -> callable, with BUILTIN_KERNELS behind. Thread-safe; names are
    free-form strings."""

    def __init__(self):
        self._kernels: dict[str, Callable] = {}
        self._lock = threading.Lock()

    def register(self, name: str, kernel: Callable | None = None, *, replace: bool = True):
        """Registers `kernel` under `name`; without `kernel`, a decorator."""
        if not isinstance(name, str) or not name:
            raise HalError(f"a kernel name is a non-empty string, not {name!r}",
                           StatusCode.INVALID_ARGUMENT)

        def add(fn: Callable) -> Callable:
            if not callable(fn):
                raise HalError(f"kernel '{name}' is not callable: {fn!r}",
                               StatusCode.INVALID_ARGUMENT)
            with self._lock:
                if not replace and name in self._kernels:
                    raise HalError(f"a kernel named '{name}' is already registered",
                                   StatusCode.ALREADY_EXISTS)
                self._kernels[name] = fn
            return fn
        return add if kernel is None else add(kernel)

    def update(self, kernels: dict) -> None:
        for name, fn in kernels.items():
            self.register(name, fn)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._kernels.pop(name, None)

    def lookup(self, name: str) -> Callable:
        with self._lock:
            fn = self._kernels.get(name) or BUILTIN_KERNELS.get(name)
        if fn is None:
            raise HalError(f"no Python kernel registered under the name '{name}' (register it "
                           "with vmrt.hal.python_loader.register_kernel)", StatusCode.NOT_FOUND)
        return fn

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._kernels)

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._kernels or name in BUILTIN_KERNELS


#: The process-wide registry a PythonLoader uses unless given its own.
KERNELS = KernelRegistry()


def register_kernel(name: str, kernel: Callable | None = None):
    """Registers a kernel in the process-wide registry (usable as a decorator)."""
    return KERNELS.register(name, kernel)


def encode_executable(functions) -> bytes:
    """Executable data for (name, kernel, binding count, constant count) tuples."""
    return json.dumps({"functions": [
        {"name": name, "kernel": kernel, "bindings": bindings, "constants": constants}
        for name, kernel, bindings, constants in functions]}, sort_keys=True).encode("utf-8")


def decode_executable(data) -> list[tuple[str, str, int, int]]:
    try:
        document = json.loads(bytes(data).decode("utf-8"))
        entries = document["functions"]
        functions = []
        for entry in entries:
            name, kernel = entry["name"], entry["kernel"]
            bindings, constants = entry.get("bindings", 0), entry.get("constants", 0)
            if not (isinstance(name, str) and isinstance(kernel, str)
                    and type(bindings) is int and type(constants) is int
                    and bindings >= 0 and constants >= 0):
                raise ValueError(f"bad function entry {entry!r}")
            functions.append((name, kernel, bindings, constants))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise HalError(f"invalid {FORMAT} executable data: {error}",
                       StatusCode.INVALID_ARGUMENT) from None
    return functions


class PythonExecutable(Executable):
    """A hal.executable whose functions are Python kernels."""

    __slots__ = ("kernel_names", "kernels")

    def __init__(self, functions, registry: KernelRegistry):
        super().__init__([FunctionInfo(name, constants, bindings)
                          for name, _, bindings, constants in functions])
        self.kernel_names = [kernel for _, kernel, _, _ in functions]
        self.kernels = [registry.lookup(kernel) for kernel in self.kernel_names]

    def __repr__(self) -> str:
        return f"<hal.executable python {len(self.functions)} functions>"

    def prepare(self, state: DispatchState):
        if state.workgroup_total != 1:
            raise HalError(f"Python kernel '{self.kernel_names[state.function]}' runs as one "
                           f"workgroup, not {state.workgroup_count}",
                           StatusCode.INVALID_ARGUMENT)
        return state

    def run_workgroups(self, prepared: DispatchState, workgroups, worker_id: int = 0) -> None:
        import numpy as np
        for _ in workgroups:
            name = self.kernel_names[prepared.function]
            arrays = [np.frombuffer(view, dtype=np.uint8) for view in prepared.bindings]
            count = len(prepared.constants) // 4
            constants = (np.frombuffer(prepared.constants, dtype="<u4", count=count).tolist()
                         if count else [])
            try:
                self.kernels[prepared.function](*arrays, *constants)
            except VmrtError as error:
                raise error.annotate(f"in Python kernel '{name}'")
            except Exception as error:
                raise HalError(f"Python kernel '{name}' failed: {type(error).__name__}: "
                               f"{error}", StatusCode.INTERNAL) from error


class PythonLoader(ExecutableLoader):
    """Loads `vmrt-python-v0` executables against a kernel registry (by default
    the process-wide KERNELS)."""

    formats = (FORMAT,)

    def __init__(self, registry: KernelRegistry | None = None):
        self.registry = registry if registry is not None else KERNELS

    def load(self, executable_format: str, data, constants: bytes = b"") -> PythonExecutable:
        if constants:
            raise HalError(f"{FORMAT} executables take no executable-level constants",
                           StatusCode.INVALID_ARGUMENT)
        return PythonExecutable(decode_executable(data), self.registry)
