"""The memory limit of a context: bytes its code holds (vm.buffer / vm.list
allocations, HAL objects, what native modules report), counted under a lock, as
buffers are charged and freed on any thread (vmrt.vm.limits, Meter)."""

from __future__ import annotations

import gc
import threading

from vmrt.errors import MemoryLimitExceeded


class MemoryHold:
    """Bytes charged to a meter for as long as the object holding this lives (a HAL
    buffer, the commands a command buffer recorded, an executable): released once,
    by `release()` or when freed."""

    __slots__ = ("meter", "nbytes")

    def __init__(self, meter: "MemoryCounter", nbytes: int):
        self.meter = meter  # already charged by MemoryCounter.hold
        self.nbytes = nbytes

    def grow(self, nbytes: int) -> None:
        """Charges `nbytes` more (RESOURCE_EXHAUSTED over the limit; nothing changes)."""
        if self.meter is not None and nbytes > 0:
            self.meter.charge_memory(nbytes)
            self.nbytes += nbytes

    def release(self) -> None:
        meter, self.meter = self.meter, None
        if meter is not None:
            meter.release_memory(self.nbytes)

    __del__ = release


class MemoryCounter:
    """Bytes in use, at most `max_memory` (None: unbounded). Memory held only by
    reference cycles (vm.lists holding each other) is collected before a charge is
    refused, after a failed call and when `memory_in_use` is read, so cycles never
    decide whether the context can run."""

    def __init__(self, max_memory: int | None):
        self.max_memory = max_memory
        self.memory_in_use = 0
        self._lock = threading.Lock()
        self._containers = 0      # live metered vm.lists that can hold refs (can form cycles)
        self._collected_at = 0    # memory_in_use at or below which nothing needs collecting

    def charge_memory(self, nbytes: int, collected: bool = False) -> None:
        """Charges `nbytes` (MemoryLimitExceeded over the limit: nothing is charged)."""
        with self._lock:
            in_use = self.memory_in_use + nbytes
            if self.max_memory is None or in_use <= self.max_memory:
                self.memory_in_use = in_use
                return
        # Bytes only cycles hold are not in use: collect them, then decide.
        if not collected and self._containers and self._collect():
            return self.charge_memory(nbytes, collected=True)
        raise MemoryLimitExceeded(f"allocating {nbytes} bytes would hold {in_use} bytes, "
                                  f"over the limit of {self.max_memory}")

    def release_memory(self, nbytes: int) -> None:
        with self._lock:
            in_use = self.memory_in_use = self.memory_in_use - nbytes
            if in_use < self._collected_at:
                self._collected_at = in_use

    def hold(self, nbytes: int) -> MemoryHold:
        """Charges `nbytes` (RESOURCE_EXHAUSTED over the limit) to a MemoryHold."""
        nbytes = max(nbytes, 0)
        self.charge_memory(nbytes)
        return MemoryHold(self, nbytes)

    def track_container(self, delta: int) -> None:
        """A metered vm.list that can hold refs was made (+1) or freed (-1)."""
        with self._lock:
            self._containers += delta

    def collect_cycles(self) -> None:
        """Frees what only reference cycles hold, when some may exist: lists that
        can hold refs are alive and memory grew since the last collection."""
        if self._containers and self.memory_in_use > self._collected_at:
            self._collect()

    def _collect(self) -> bool:
        before = self.memory_in_use
        gc.collect()
        self._collected_at = self.memory_in_use
        return self.memory_in_use < before
