"""A module function over Ray Data batches: a callable class for `Dataset.map_batches(
ModuleBatchFunction, fn_constructor_kwargs=..., compute=ActorPoolStrategy(...))`.
Each Ray Data actor holds one context of the module (vmrt.ray.host)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vmrt.errors import StatusCode, VmrtError
from vmrt.ray.host import ModuleHost
from vmrt.ray.worker import fetch_parameter_arrays, reserved_cpus

__all__ = ["ModuleBatchFunction"]


class ModuleBatchFunction:
    """Calls `function` of `module` on numpy batches ({column: array}).

    `inputs`: the columns passed as the function's arguments, in order (default: every
    column, in the batch's order); `outputs`: the names of its result columns (default
    `output` for one result, `output0`, `output1`, ... for several). Compiled modules
    have static shapes: `rows_per_call=k` calls the function on k rows at a time (the
    last group padded with zeros, its padding rows dropped from the results); None
    calls it once on the whole batch (give `map_batches` the compiled batch size).
    A failing call raises its VmrtError (Ray Data then fails the dataset).
    Other keywords (`parameters=`, `device=`, `limits=`, ...) are ModuleHost's.
    """

    def __init__(self, module: Any, function: str, *, inputs: Sequence[str] | None = None,
                 outputs: Sequence[str] | None = None, rows_per_call: int | None = None,
                 parameters: Any = None, device: str = "local-sync", limits: Any = None,
                 **context_options: Any):
        if rows_per_call is not None and rows_per_call < 1:
            raise VmrtError("rows_per_call must be at least 1", StatusCode.INVALID_ARGUMENT)
        self.function = function
        self.inputs = list(inputs) if inputs is not None else None
        self.outputs = list(outputs) if outputs is not None else None
        self.rows_per_call = rows_per_call
        self.host = ModuleHost(module, parameters=fetch_parameter_arrays(parameters),
                               device=device, limits=limits, worker_count=reserved_cpus(),
                               **context_options)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        columns = [np.asarray(batch[name]) for name in (self.inputs or list(batch))]
        rows = len(columns[0]) if columns else 0
        step = self.rows_per_call or max(rows, 1)
        groups = [self._call(columns, start, min(step, rows - start), step)
                  for start in range(0, rows, step)]
        results = [np.concatenate(parts) for parts in zip(*groups)]
        names = self.outputs or (["output"] if len(results) == 1 else
                                 [f"output{i}" for i in range(len(results))])
        if len(names) != len(results):
            raise VmrtError(f"'{self.function}' returns {len(results)} results; outputs "
                            f"names {len(names)}", StatusCode.INVALID_ARGUMENT)
        return dict(zip(names, results))

    def _call(self, columns: list[np.ndarray], start: int, count: int,
              step: int) -> list[np.ndarray]:
        """The results for rows [start, start + count), called with `step` rows."""
        args = [_padded(column[start:start + count], step) for column in columns]
        result = self.host.call(self.function, tuple(args))
        if isinstance(result, VmrtError):
            raise result
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        return [np.asarray(value)[:count] for value in results]


def _padded(rows: np.ndarray, count: int) -> np.ndarray:
    if len(rows) == count:
        return np.ascontiguousarray(rows)
    padding = np.zeros((count - len(rows),) + rows.shape[1:], rows.dtype)
    return np.concatenate([rows, padding])
