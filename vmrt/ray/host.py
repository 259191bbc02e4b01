"""One context of a module inside a Ray worker process: what a pool actor and a
Ray Data stage hold. Plain vmrt (no Ray here): vmrt.load does the loading."""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from typing import Any

from vmrt.errors import VmrtError

__all__ = ["ModuleHost", "parameter_arrays_of", "portable_error"]


def parameter_arrays_of(parameters: Any) -> dict[str, Mapping[str, Any]]:
    """The scopes of `parameters` given as arrays ({scope: {key: array}}); the other
    scopes (archive paths) are left out."""
    if not isinstance(parameters, Mapping):
        return {}
    return {scope: value for scope, value in parameters.items() if isinstance(value, Mapping)}


def _parameter_scopes(parameters: Any) -> Any:
    """What vmrt.load takes for `parameters`: paths as they are; scopes of arrays
    ({scope: {key: array}}) become indices lending the arrays' memory, no copy."""
    arrays = parameter_arrays_of(parameters)
    if not arrays:
        return parameters
    from vmrt.io import ParameterScopes
    scopes = ParameterScopes()
    for scope, value in parameters.items():
        if scope in arrays:
            index = scopes.index(scope)
            for key, array in value.items():
                index.add_buffer(key, array)
        else:
            for path in [value] if isinstance(value, (str, os.PathLike)) else value:
                scopes.add_file(path, scope)
    return scopes


def portable_error(error: VmrtError) -> VmrtError:
    """`error`, or a plain VmrtError with its code, message and annotations when its
    class cannot be rebuilt from a pickle (one with extra constructor arguments)."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        plain = VmrtError(error.message, error.code)
        plain.annotations = list(error.annotations)
        return plain


class ModuleHost:
    """A module loaded with vmrt.load in this process; `call` runs one export.

    `limits` hold per call: the fuel is refilled to `limits.fuel` before each call.
    `worker_count` sizes a local-task device (the CPUs Ray reserved for the worker)."""

    def __init__(self, module: Any, *, parameters: Any = None, device: str = "local-task",
                 limits: Any = None, worker_count: int | None = None,
                 **context_options: Any):
        import vmrt
        self._device = None
        if device == "local-task" and worker_count:
            from vmrt.hal import create_device
            self._device = device = create_device("local-task", worker_count=worker_count)
        if limits is not None:
            context_options["limits"] = limits
        self._fuel = getattr(limits, "fuel", None)
        try:
            self.loaded = vmrt.load(module, device=device,
                                    parameters=_parameter_scopes(parameters),
                                    **context_options)
        except BaseException:
            self._close_device()
            raise

    def call(self, function: str, args: tuple) -> Any:
        """The export's results, or the VmrtError it failed with (returned, not raised:
        a failing input is an answer, not a fault of the worker)."""
        try:
            self._restore_fuel()
            return self.loaded.function(function)(*args)
        except VmrtError as error:
            return portable_error(error)

    def _restore_fuel(self) -> None:
        if self._fuel is None:
            return
        context = self.loaded.context
        remaining = context.fuel_remaining or 0
        if remaining < self._fuel:
            context.refuel(self._fuel - remaining)

    def close(self) -> None:
        try:
            self.loaded.close()
        finally:
            self._close_device()

    def _close_device(self) -> None:
        if self._device is not None:
            self._device.close()
            self._device = None

