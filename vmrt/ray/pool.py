"""ModulePool: Ray actors each holding a context of one module, running its functions
over many inputs in input order with bounded in-flight work. An actor that dies is
replaced and its unfinished calls run again elsewhere: every input, one result."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import ray

from vmrt.errors import StatusCode, VmrtError
from vmrt.ray.host import parameter_arrays_of
from vmrt.ray.worker import ModuleWorker, WorkerInfo

__all__ = ["ModulePool", "PoolCall", "PoolStats"]

#: What a call's result reference raises when its actor, not its input, failed: the
#: worker process died, its node was lost, or the result went with the node.
_ACTOR_FAULTS = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError,
                 ray.exceptions.WorkerCrashedError)
_ERROR_MODES = ("return", "raise")


class PoolStats(NamedTuple):
    """Calls answered, calls sent again after their actor died, actors replaced."""

    calls: int
    reruns: int
    replaced_actors: int


class _Slot:
    """One place in the pool: its current actor and the calls sent to it."""

    __slots__ = ("actor", "in_flight", "info")

    def __init__(self, actor):
        self.actor = actor
        self.in_flight = 0
        self.info: WorkerInfo | None = None


class _Call:
    """One call of a function on one input, until it has its one outcome."""

    __slots__ = ("function", "args", "slot", "actor", "ref", "done", "outcome", "failed")

    def __init__(self, function: str, args: tuple):
        self.function, self.args = function, args
        self.slot: _Slot | None = None
        self.actor = self.ref = None
        self.done = self.failed = False
        self.outcome: Any = None


class PoolCall:
    """The one call `ModulePool.submit` sent: `result()` waits for it (rerunning it if
    its actor dies meanwhile)."""

    def __init__(self, pool: ModulePool, call: _Call):
        self._pool, self._call = pool, call

    def done(self) -> bool:
        return self._call.done

    def result(self, timeout: float | None = None) -> Any:
        """The function's results; a failed call's VmrtError as the pool's `errors`
        says (returned or raised). TimeoutError after `timeout` seconds."""
        self._pool._wait_for(self._call, timeout)
        return self._pool._outcome(self._call, self._pool.errors)


def _arguments(item: Any) -> tuple:
    """A map input as call arguments: a tuple is the arguments, anything else the one."""
    return item if isinstance(item, tuple) else (item,)


class ModulePool:
    """`num_actors` Ray actors, each with a context of `module` (vmrt.load's
    arguments: a path every node can read, vmasm text, or module bytes, put in Ray's
    object store once) and its `parameters`: archive paths as vmrt.load takes them
    (each node maps the files: actors on one node share one page-cache copy), or
    scopes of arrays `{scope: {key: numpy array}}`, put in the object store once and
    read there by every actor of a node without a copy.

    `limits` hold per call. `device`: local-task (sized to the actor's `num_cpus`)
    or local-sync. `max_in_flight` (default two per actor) bounds the calls of a
    `map` sent and not yet yielded. `errors`: a call failing with a VmrtError yields
    ("return", the default) or raises ("raise") that error. `max_replacements`
    bounds how many dead actors are replaced (default unbounded); `actor_options` go
    to the actors' `.options()` (resources, a `scheduling_strategy`: "SPREAD" by
    default, so actors spread over the nodes); `context_options` to vmrt.Context.
    """

    def __init__(self, module: Any, *, parameters: Any = None, device: str = "local-task",
                 num_actors: int = 2, limits: Any = None, max_in_flight: int | None = None,
                 errors: str = "return", num_cpus: float = 1,
                 max_replacements: int | None = None, start_timeout: float | None = 300.0,
                 actor_options: Mapping[str, Any] | None = None, **context_options: Any):
        if errors not in _ERROR_MODES:
            raise VmrtError(f"errors must be one of {_ERROR_MODES}, not {errors!r}",
                            StatusCode.INVALID_ARGUMENT)
        if num_actors < 1 or (max_in_flight is not None and max_in_flight < 1):
            raise VmrtError("a pool needs num_actors >= 1 and max_in_flight >= 1",
                            StatusCode.INVALID_ARGUMENT)
        self.errors = errors
        self.max_in_flight = max_in_flight or 2 * num_actors
        self.max_replacements = max_replacements
        self._pending: dict[Any, _Call] = {}
        self._calls = self._reruns = self._replaced = 0
        options = {"num_cpus": num_cpus, "scheduling_strategy": "SPREAD",
                   **(actor_options or {}), "max_restarts": 0, "max_task_retries": 0}
        self._actor_class = ray.remote(ModuleWorker).options(**options)
        self._actor_args = (_module_in_object_store(module), _parameters_in_object_store(
            parameters), device, limits, dict(context_options))
        self._slots = [_Slot(self._new_actor()) for _ in range(num_actors)]
        self._exports = self._await_start(start_timeout)

    # -- actors --------------------------------------------------------------------------
    def _new_actor(self):
        return self._actor_class.remote(*self._actor_args)

    def _await_start(self, timeout: float | None) -> tuple[str, ...]:
        refs = [slot.actor.ready.remote() for slot in self._slots]
        try:
            infos = ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise VmrtError(f"the pool's {len(refs)} actors did not start within {timeout} s "
                            "(are there enough free CPUs in the cluster for them?)",
                            StatusCode.DEADLINE_EXCEEDED) from None
        failed = next((info for info in infos if isinstance(info, VmrtError)), None)
        if failed is not None:
            self.close()
            raise failed
        for slot, info in zip(self._slots, infos):
            slot.info = info
        return infos[0].exports

    def workers(self) -> list[WorkerInfo]:
        """Where each actor runs now (node id, process id) and what it exports."""
        for slot, info in zip(self._slots, ray.get([s.actor.ready.remote()
                                                    for s in self._slots])):
            slot.info = info
        return [slot.info for slot in self._slots]

    def _replace(self, slot: _Slot, actor, fault: Exception) -> None:
        """A new actor in `slot` unless `actor` (which failed) was replaced already."""
        if slot.actor is not actor:
            return
        if self.max_replacements is not None and self._replaced >= self.max_replacements:
            raise VmrtError(f"{self._replaced} actors of the pool died, the most it "
                            f"replaces; the last: {fault}", StatusCode.UNAVAILABLE)
        self._replaced += 1
        try:  # (unreachable rather than dead: make sure it runs nothing more)
            ray.kill(actor, no_restart=True)
        except Exception:
            pass
        slot.actor, slot.info, slot.in_flight = self._new_actor(), None, 0

    # -- calls ---------------------------------------------------------------------------
    def _check_function(self, function: str) -> None:
        if function not in self._exports:
            raise VmrtError(f"the module has no export '{function}' (it exports: "
                            f"{', '.join(self._exports)})", StatusCode.NOT_FOUND)

    def _send(self, call: _Call) -> None:
        slot = min(self._slots, key=lambda s: s.in_flight)
        call.slot, call.actor = slot, slot.actor
        call.ref = slot.actor.call.remote(call.function, call.args)
        slot.in_flight += 1
        self._pending[call.ref] = call

    def _collect(self, timeout: float | None = None) -> None:
        """Waits until a call ends (or `timeout`), and takes every ended call's outcome."""
        refs = list(self._pending)
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        for ref in ready:
            self._finish(self._pending.pop(ref), ref)

    def _finish(self, call: _Call, ref) -> None:
        if call.slot is not None and call.slot.actor is call.actor:
            call.slot.in_flight -= 1
        try:
            value = ray.get(ref)
        except _ACTOR_FAULTS as fault:  # the actor's fault, not the input's: run it again
            self._replace(call.slot, call.actor, fault)
            self._reruns += 1
            self._send(call)
            return
        except ray.exceptions.RayTaskError as failure:  # a Python error in the call
            value = getattr(failure, "cause", None) or failure
        call.outcome, call.failed, call.done = value, isinstance(value, Exception), True
        self._calls += 1

    def _wait_for(self, call: _Call, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not call.done:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"the call of '{call.function}' did not end in {timeout} s")
            self._collect(left)

    @staticmethod
    def _outcome(call: _Call, errors: str) -> Any:
        if call.failed and errors == "raise":
            raise call.outcome
        return call.outcome

    def _abandon(self, call: _Call) -> None:
        """Forgets a call whose result nobody will take (a map left early)."""
        if call.done or self._pending.pop(call.ref, None) is None:
            return
        if call.slot is not None and call.slot.actor is call.actor:
            call.slot.in_flight -= 1
        try:
            ray.cancel(call.ref)
        except Exception:
            pass

    def submit(self, function: str, *args: Any) -> PoolCall:
        """Sends one call of `function` (numpy arrays, ints, floats); see PoolCall."""
        self._check_function(function)
        call = _Call(function, args)
        self._send(call)
        return PoolCall(self, call)

    def map(self, function: str, inputs: Iterable[Any], *,
            errors: str | None = None) -> Iterator[Any]:
        """The results of `function` on each input, in input order (an input that is a
        tuple is the arguments of its call). At most `max_in_flight` calls are out at
        once; `errors` overrides the pool's for this map."""
        self._check_function(function)
        return self._ordered_results(function, iter(inputs), errors or self.errors)

    def _ordered_results(self, function: str, inputs: Iterator[Any],
                         errors: str) -> Iterator[Any]:
        window: deque[_Call] = deque()
        exhausted = False
        try:
            while True:
                while not exhausted and len(window) < self.max_in_flight:
                    item = next(inputs, _END)
                    if item is _END:
                        exhausted = True
                        break
                    window.append(_Call(function, _arguments(item)))
                    self._send(window[-1])
                if not window:
                    return
                self._wait_for(window[0], None)
                yield self._outcome(window.popleft(), errors)
        finally:
            for call in window:
                self._abandon(call)

    @property
    def stats(self) -> PoolStats:
        return PoolStats(self._calls, self._reruns, self._replaced)

    @property
    def num_actors(self) -> int:
        return len(self._slots)

    def close(self) -> None:
        """Ends the actors (their contexts go with their processes)."""
        for slot in self._slots:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:
                pass
        self._slots = []
        self._pending.clear()

    def __enter__(self) -> ModulePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_END = object()


def _module_in_object_store(module: Any) -> Any:
    """What each actor loads: a path (made absolute: the actors' working folder is not
    the caller's on other nodes) or vmasm text as given; module bytes put in the
    object store once (an actor receives them from its node's store)."""
    if isinstance(module, (bytes, bytearray, memoryview)):
        return ray.put(bytes(module))
    if isinstance(module, os.PathLike) or (isinstance(module, str) and os.path.exists(module)):
        return os.path.abspath(module)
    return module


def _parameters_in_object_store(parameters: Any) -> Any:
    """`parameters` with each array of its array scopes put in the object store once;
    archive paths as absolute paths."""
    arrays = parameter_arrays_of(parameters)
    if not arrays:
        return _paths_as_text(parameters)
    placed = {scope: _paths_as_text(value) for scope, value in parameters.items()}
    for scope, entries in arrays.items():
        placed[scope] = {key: value if isinstance(value, ray.ObjectRef)
                         else ray.put(np.ascontiguousarray(value))
                         for key, value in entries.items()}
    return placed


def _paths_as_text(value: Any) -> Any:
    """Archive paths as absolute paths in text, whatever their nesting."""
    if isinstance(value, (str, os.PathLike)):
        return os.path.abspath(value)
    if isinstance(value, Mapping):
        return {scope: _paths_as_text(paths) for scope, paths in value.items()}
    if isinstance(value, (list, tuple)):
        return [_paths_as_text(path) for path in value]
    return value
