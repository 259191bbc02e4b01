"""What the HAL records on an active vmrt.timeline: each queue operation (its
submission and its execution, joined by a flow arrow) and each dispatch's workgroup
ranges, on the threads that ran them. Called only while a timeline is active:
the devices test `vmrt.timeline.active` and plain runs never reach this file.
"""

from __future__ import annotations

import sys

from vmrt import timeline as _timeline


def traced_queue_operation(work):
    """`work` of the queue operation whose device `_submit` calls this, recorded on
    the active timeline; an operation without work (alloca, barrier) is recorded as
    submitted only."""
    timeline = _timeline.active
    if timeline is None:  # (stopped since the device looked)
        return work
    # The queue method (queue_fill, ...) is _submit's caller: reading its name here
    # spares every queue method passing one for the rare traced run.
    name = "queue." + sys._getframe(2).f_code.co_name.removeprefix("queue_")
    if work is None:
        timeline.span(f"submit {name}", "submit", timeline.now())
        return None
    return timeline.later(name, "queue", work)


class TracedExecutable:
    """An executable as the devices run it (prepare, split, run_range), each range
    of workgroups recorded as a span named after the dispatched function."""

    __slots__ = ("executable", "timeline", "name")
    pooled = False  # each range of workgroups is a span of its own

    def __init__(self, timeline, executable, function: int):
        self.executable = executable
        self.timeline = timeline
        self.name = executable.function_info(function).name

    def prepare(self, state):
        return self.executable.prepare(state)

    def split(self, prepared, state, workers: int):
        return self.executable.split(prepared, state, workers)

    def run_range(self, prepared, state, start: int, stop: int, worker_id: int = 0) -> None:
        args = {"workgroup_count": list(state.workgroup_count), "workgroups": [start, stop],
                "worker": worker_id}
        self.timeline.call(self.name, "dispatch", self.executable.run_range, prepared, state,
                           start, stop, worker_id, args=args)
