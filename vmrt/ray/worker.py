"""The Ray actor of a ModulePool: one ModuleHost (a vmrt context) per worker process."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import ray

from vmrt.errors import VmrtError
from vmrt.ray.host import ModuleHost, parameter_arrays_of, portable_error

__all__ = ["ModuleWorker", "WorkerInfo", "fetch_parameter_arrays", "reserved_cpus"]


class WorkerInfo(NamedTuple):
    """Where an actor runs and what its module exports."""

    node_id: str
    pid: int
    exports: tuple[str, ...]


def fetch_parameter_arrays(parameters: Any) -> Any:
    """`parameters` with the object references of its array scopes replaced by the
    arrays: read-only views of Ray's shared object store on this node (no copy)."""
    arrays = parameter_arrays_of(parameters)
    if not arrays:
        return parameters
    fetched: dict[str, Any] = dict(parameters)
    for scope, entries in arrays.items():
        keys = list(entries)
        values = [entries[key] for key in keys]
        refs = [i for i, value in enumerate(values) if isinstance(value, ray.ObjectRef)]
        for i, array in zip(refs, ray.get([values[i] for i in refs])):
            values[i] = array
        fetched[scope] = dict(zip(keys, values))
    return fetched


def reserved_cpus() -> int:
    """The whole CPUs Ray reserved for this worker (at least 1): the threads a
    local-task device may use without taking another worker's cores."""
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
    return max(1, int(cpus))


class ModuleWorker:
    """Holds the module's context; a failure to load is kept and reported by ready(),
    so the pool raises the VmrtError itself rather than a dead actor."""

    def __init__(self, module: Any, parameters: Any, device: str, limits: Any,
                 context_options: Mapping[str, Any]):
        self.host: ModuleHost | None = None
        self.load_error: VmrtError | None = None
        try:
            self.host = ModuleHost(module, parameters=fetch_parameter_arrays(parameters),
                                   device=device, limits=limits,
                                   worker_count=reserved_cpus(), **context_options)
        except VmrtError as error:
            self.load_error = portable_error(error)

    def ready(self) -> WorkerInfo | VmrtError:
        if self.host is None:
            assert self.load_error is not None
            return self.load_error
        return WorkerInfo(ray.get_runtime_context().get_node_id(), os.getpid(),
                          tuple(self.host.loaded.exports))

    def call(self, function: str, args: tuple) -> Any:
        if self.host is None:  # (a replacement on a node that cannot load the module)
            return self.load_error
        return self.host.call(function, args)

    def close(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None
