"""Executables and their loaders: what a dispatch needs to know about an
exported function, and how its workgroups are run (runtime/src/iree/hal/local/
local_executable.h, executable_loader.h).

A dispatch is prepared once (`prepare`) from a `DispatchState` and then its
workgroups are run, possibly by several workers at once (`run_workgroups`
with a worker id; each worker has its own execution state).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmrt.errors import HalError, StatusCode
from vmrt.vm.ref import RefObject

#: IREE_HAL_EXECUTABLE_WORKGROUP_LOCAL_MEMORY_PAGE_SIZE.
LOCAL_MEMORY_PAGE_SIZE = 4096


@dataclass(frozen=True)
class FunctionInfo:
    """An exported dispatch function's declared requirements."""

    name: str
    constant_count: int = 0
    binding_count: int = 0
    local_memory_size: int = 0  # bytes, a whole number of pages
    workgroup_size: tuple[int, int, int] = (1, 1, 1)


@dataclass
class DispatchState:
    """One dispatch as the command buffer resolved it: workgroup counts and
    sizes, 32-bit constants and the bytes each binding covers."""

    function: int
    workgroup_count: tuple[int, int, int]
    workgroup_size: tuple[int, int, int] = (1, 1, 1)
    constants: bytes = b""
    bindings: list = field(default_factory=list)  # writable memoryviews
    max_concurrency: int = 1  # workers the device may run its workgroups on
    #: The vmrt.vm.limits.CallGuard of the call that submitted it, when its context has
    #: limits: workgroups stop at its deadline or cancellation, VM code is metered.
    guard: object = None

    @property
    def workgroup_total(self) -> int:
        x, y, z = self.workgroup_count
        return x * y * z

    def workgroup_ids(self, start: int = 0, stop: int | None = None):
        """Workgroup (x, y, z) ids in upstream's order (x fastest), the
        [start, stop) slice of the linearized range. Under a guard, each one is
        handed out only while the call may go on (CANCELLED, DEADLINE_EXCEEDED)."""
        total = self.workgroup_total
        stop = total if stop is None else min(stop, total)
        check = self.guard.check if self.guard is not None else None
        for index in range(start, stop):
            if check is not None:
                check()
            yield self.workgroup_id(index)

    def workgroup_id(self, index: int) -> tuple[int, int, int]:
        """The (x, y, z) id of workgroup `index` of the linearized range."""
        cx, cy, _ = self.workgroup_count
        z, rest = divmod(index, cx * cy)
        y, x = divmod(rest, cx)
        return x, y, z


class Executable(RefObject):
    """A hal.executable: a table of dispatch functions."""

    __slots__ = ("functions", "_by_name", "charge")
    #: Its dispatches run in a NativePool (one C call for many), not one by one.
    pooled = False

    def __init__(self, functions: list[FunctionInfo]):
        self.functions = list(functions)
        self._by_name = {f.name: i for i, f in enumerate(self.functions)}

    def __repr__(self) -> str:
        return f"<hal.executable {len(self.functions)} functions>"

    def lookup_function(self, name: str) -> int:
        ordinal = self._by_name.get(name)
        if ordinal is None:
            raise HalError(f"no exported function with the name `{name}` found in module",
                           StatusCode.NOT_FOUND)
        return ordinal

    def function_info(self, function: int) -> FunctionInfo:
        if not 0 <= function < len(self.functions):
            raise HalError(f"function id {function} out of range (count: "
                           f"{len(self.functions)})", StatusCode.OUT_OF_RANGE)
        return self.functions[function]

    def prepare(self, state: DispatchState):
        """Per-dispatch data shared by all workers (override)."""
        return state

    def run_workgroups(self, prepared, workgroups, worker_id: int = 0) -> None:
        """Runs the given workgroup ids of a prepared dispatch (override)."""
        raise NotImplementedError

    def split(self, prepared, state: DispatchState, workers: int) -> list[tuple[int, int]]:
        """The [start, stop) ranges of workgroups that `workers` threads run, one
        range per run_range call: here one equal share each."""
        total = state.workgroup_total
        step = max(1, -(-total // workers))
        return [(start, min(start + step, total)) for start in range(0, total, step)]

    def run_range(self, prepared, state: DispatchState, start: int, stop: int,
                  worker_id: int = 0) -> None:
        """Runs workgroups [start, stop) of the linearized range (x fastest);
        executables whose loop is native override it to run the range at once."""
        self.run_workgroups(prepared, state.workgroup_ids(start, stop), worker_id)


class ExecutableLoader:
    """Turns executable data of a format it supports into an Executable."""

    formats: tuple[str, ...] = ()

    def supports(self, executable_format: str) -> bool:
        return executable_format in self.formats

    def load(self, executable_format: str, data, constants: bytes) -> Executable:
        raise NotImplementedError
