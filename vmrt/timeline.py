"""Execution timelines in the Chrome Trace Event format (Perfetto, chrome://tracing).

`active` is the one switch: None (the default) and nothing is recorded, the HAL's
queue operations, dispatches and fence waits and io_parameters' batches pay one
`is not None` test. While a Timeline is started it is `active` and those sites add
spans on the thread that ran them; VM calls come from vmrt.vm.hooks.TimelineHooks.

    timeline = Timeline()
    with timeline:                       # active while inside
        ...run something...
    timeline.save("trace.json")          # open in ui.perfetto.dev
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time

from vmrt.errors import StatusCode, VmrtError

#: The Timeline recording now, or None (tracing off: no event is ever made).
active: "Timeline | None" = None
_switch = threading.Lock()


class Timeline:
    """Spans (`X` events), flow arrows (`s`/`f`) and thread names of one recording.

    Events are appended from any thread (list.append is atomic); timestamps are
    microseconds since the Timeline was made.
    """

    def __init__(self, clock=time.perf_counter_ns):
        self.events: list[dict] = []
        self.pid = os.getpid()
        self._clock = clock
        self._origin = clock()
        self._threads: dict[int, str] = {}
        self._flow_ids = itertools.count(1)

    # -- switching ------------------------------------------------------------------------------
    def start(self) -> "Timeline":
        """Makes this the active timeline (FAILED_PRECONDITION if another one is)."""
        global active
        with _switch:
            if active is not None and active is not self:
                raise VmrtError("another timeline is already recording",
                                StatusCode.FAILED_PRECONDITION)
            active = self
        return self

    def stop(self) -> None:
        global active
        with _switch:
            if active is self:
                active = None

    def __enter__(self) -> "Timeline":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- recording ------------------------------------------------------------------------------
    def now(self) -> int:
        """The clock in nanoseconds (pass it back as a span's start)."""
        return self._clock()

    def _us(self, ns: int) -> float:
        return round((ns - self._origin) / 1000.0, 3)

    def _tid(self) -> int:
        tid = threading.get_native_id()
        if tid not in self._threads:
            self._threads[tid] = threading.current_thread().name
        return tid

    def span(self, name: str, category: str, start_ns: int, end_ns: int | None = None,
             args: dict | None = None) -> dict:
        """A complete event on this thread from `start_ns` to `end_ns` (now)."""
        end_ns = self._clock() if end_ns is None else end_ns
        event = {"name": name, "cat": category, "ph": "X", "ts": self._us(start_ns),
                 "dur": round(max(0, end_ns - start_ns) / 1000.0, 3), "pid": self.pid,
                 "tid": self._tid()}
        if args:
            event["args"] = args
        self.events.append(event)
        return event

    def call(self, name: str, category: str, function, *arguments, args=None):
        """function(*arguments), recorded as a span (also when it raises)."""
        start = self._clock()
        try:
            return function(*arguments)
        finally:
            self.span(name, category, start, args=args)

    def _flow(self, phase: str, flow_id: int, name: str, category: str, ns: int) -> None:
        event = {"name": name, "cat": category, "ph": phase, "id": flow_id,
                 "ts": self._us(ns), "pid": self.pid, "tid": self._tid()}
        if phase == "f":
            event["bp"] = "e"  # bind to the span that starts here (the execution)
        self.events.append(event)

    def later(self, name: str, category: str, work, args: dict | None = None):
        """`work` (a callable run later, on any thread) recorded: a `submit` span with
        a flow arrow here, and a span where it runs, at the arrow's head."""
        start = self._clock()
        flow_id = next(self._flow_ids)
        self._flow("s", flow_id, name, "flow", start)

        def run():
            begin = self._clock()
            self._flow("f", flow_id, name, "flow", begin)
            try:
                return work()
            finally:
                self.span(name, category, begin, args=args)
        self.span(f"submit {name}", "submit", start)
        return run

    # -- output ---------------------------------------------------------------------------------
    def trace_events(self) -> list[dict]:
        """Thread and process names (metadata events), then the recorded events."""
        meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": self.pid, "tid": 0,
                 "args": {"name": "vmrt"}}]
        meta.extend({"name": "thread_name", "ph": "M", "ts": 0, "pid": self.pid, "tid": tid,
                     "args": {"name": name}} for tid, name in list(self._threads.items()))
        return meta + list(self.events)

    def to_json(self) -> dict:
        return {"traceEvents": self.trace_events(), "displayTimeUnit": "ms"}

    def write(self, file) -> None:
        json.dump(self.to_json(), file, separators=(",", ":"))

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as file:
            self.write(file)

    def threads(self) -> dict[int, str]:
        """Thread id -> thread name of every thread that recorded an event."""
        return dict(self._threads)


__all__ = ["Timeline", "active"]
