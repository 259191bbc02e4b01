"""Choosing among builds of one model: each candidate's outputs are checked against the
default build's on the same inputs (the example arguments, else random ones of the
declared shapes), and with tuning each correct one is timed; a candidate whose
outputs differ is never used, and a warning says so.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from vmrt.compiler.flags import Candidate
from vmrt.errors import StatusCode, VmrtError
from vmrt.vm.declaration import ValueInfo

__all__ = ["CompileWarning", "Trial", "choose", "example_inputs", "time_interleaved",
           "warn_not_used"]

#: Outputs agree when |candidate - default| <= ATOL * max(1, max |default|) + RTOL * |default|:
#: reassociated sums (data tiling, microkernels) move float32 results by ~1e-6 relative.
RTOL = 1e-3
ATOL = 1e-4
#: Timing: at least this many calls, and calls until this long has passed (seconds).
MIN_CALLS = 3
MIN_SECONDS = 0.5


class CompileWarning(UserWarning):
    """A build vmrt made was not used (its outputs differed, or it failed to compile)."""


@dataclass
class Trial:
    """A candidate built: its module, the seconds a call took (when timed), and why it
    was set aside (None: usable)."""

    candidate: Candidate
    vmfb: Optional[bytes] = None
    seconds: Optional[float] = None
    rejected: Optional[str] = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"name": self.candidate.name, "flags": list(self.candidate.flags),
                "ms_per_call": None if self.seconds is None else float(f"{self.seconds * 1e3:.4g}"),
                "rejected": self.rejected}


def example_inputs(example_args: Optional[Sequence], inputs: list[ValueInfo],
                   seed: int = 0) -> list:
    """The arrays to check and time with: the example arguments as numpy arrays, else
    random ones of the declared shapes (a dynamic dimension taken as 1)."""
    import numpy as np
    if example_args is not None:
        return [_to_numpy(np, value) for value in example_args]
    if not inputs or not all(value.is_tensor and value.dtype for value in inputs):
        raise VmrtError("cannot make inputs to check the build with: the model does not "
                        "declare its inputs' shapes and types; pass example_args",
                        StatusCode.INVALID_ARGUMENT)
    generator = np.random.default_rng(seed)
    arrays = []
    for value in inputs:
        shape = tuple(1 if d is None else d for d in value.shape)
        dtype = np.dtype(value.dtype)
        if dtype.kind == "f":
            arrays.append(generator.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(generator.integers(0, 2, shape).astype(dtype))
        else:  # (indices, token ids: small values are valid for any table)
            arrays.append(generator.integers(0, 2, shape).astype(dtype))
    return arrays


def _to_numpy(np, value):
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def choose(trials: list[Trial], load: Callable, function: str, arrays: list, timed: bool,
           progress: Callable[[str], None]) -> Trial:
    """The trial to use: the fastest correct one when `timed`, else the last correct one
    (candidates come in order of preference after the default, trials[0]). `load`
    loads a module's bytes (vmrt.load); `function` is the export to call."""
    with contextlib.ExitStack() as opened:
        progress("running the default build")
        reference = opened.enter_context(load(trials[0].vmfb)).function(function)
        expected = _as_list(reference(*arrays))
        usable, calls = [trials[0]], [reference]
        for trial in trials[1:]:
            if trial.rejected is not None:
                continue
            progress(f"checking {trial.candidate.name}")
            try:
                call = opened.enter_context(load(trial.vmfb)).function(function)
                trial.rejected = _difference(expected, _as_list(call(*arrays)))
            except VmrtError as error:
                trial.rejected = f"failed to run: {error}"
            if trial.rejected is None:
                usable.append(trial)
                calls.append(call)
            else:
                warn_not_used(trial)
        if not timed:
            return usable[-1]
        progress("timing")
        for trial, seconds in zip(usable, time_interleaved(calls, arrays)):
            trial.seconds = seconds
    return min(usable, key=lambda trial: trial.seconds)


def _as_list(result: Any) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def warn_not_used(trial: Trial) -> None:
    warnings.warn(f"vmrt.compile: flags {trial.candidate.name} "
                  f"({' '.join(trial.candidate.flags)}) not used: {trial.rejected}; "
                  f"falling back", CompileWarning, stacklevel=2)


def _difference(expected: list, outputs: list) -> Optional[str]:
    """Why `outputs` do not match the default build's `expected` (None: they do)."""
    import numpy as np
    if len(expected) != len(outputs):
        return f"{len(outputs)} outputs where the default build gives {len(expected)}"
    for index, (want, got) in enumerate(zip(expected, outputs)):
        want, got = np.asarray(want), np.asarray(got)
        if want.shape != got.shape or want.dtype != got.dtype:
            return f"output {index} is {got.dtype}{list(got.shape)}, not " \
                   f"{want.dtype}{list(want.shape)}"
        if want.dtype.kind in "fc":
            scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
            error = np.abs(got.astype(np.float64) - want) - RTOL * np.abs(want)
            worst = float(np.max(error)) if error.size else 0.0
            if not np.isfinite(got).all() and np.isfinite(want).all():
                return f"output {index} has non-finite values"
            if worst > ATOL * scale:
                return f"output {index} differs by up to {worst:.3g} (over {ATOL * scale:.3g})"
        elif not np.array_equal(want, got):
            return f"output {index} differs"
    return None


def time_interleaved(calls: list[Callable], arrays: list) -> list[float]:
    """Seconds per call of each of `calls` (the median of at least MIN_CALLS, over
    MIN_SECONDS each): one call of each in turn, round after round, so that what
    else the machine does meanwhile weighs on all of them alike."""
    times: list[list[float]] = [[] for _ in calls]
    started = time.perf_counter()
    while len(times[0]) < MIN_CALLS or \
            time.perf_counter() - started < MIN_SECONDS * len(calls):
        for call, measured in zip(calls, times):
            before = time.perf_counter()
            call(*arrays)
            measured.append(time.perf_counter() - before)
    return [sorted(measured)[len(measured) // 2] for measured in times]
