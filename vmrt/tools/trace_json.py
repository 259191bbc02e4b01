"""`--trace_json=FILE` of `vmrt run`, `vmrt check` and `vmrt stream run`, and pictures
of such traces.

The file is a Chrome trace (vmrt.timeline; open it in ui.perfetto.dev or
chrome://tracing): VM function calls on the calling thread, HAL queue operations
with flow arrows from submission to execution, dispatches (with workgroup counts)
and io_parameters batches on the threads that ran them, and fence waits. It is
written when the command ends, also when it fails. `timeline_picture` draws a trace
as an SVG: one lane per thread, spans stacked by nesting, flow arrows as lines.
"""

from __future__ import annotations

import json

from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.svg import Svg, fits, palette
from vmrt.timeline import Timeline
from vmrt.vm.hooks import TimelineHooks


def add_trace_json_flag(parser) -> None:
    parser.add_argument("--trace_json", default="", metavar="FILE",
                        help="write a Chrome trace (Perfetto, chrome://tracing) of the VM "
                             "calls, HAL queue operations, dispatches, fence waits and "
                             "io_parameters batches to FILE")


class Recording:
    """With a path: a started Timeline, the hook feeding it VM calls (`hooks`), and
    the trace written to the path on exit. Without one: nothing at all."""

    def __init__(self, path: str):
        self.path = path
        self.timeline: Timeline | None = None
        self._file = None

    def __enter__(self) -> "Recording":
        if self.path:
            try:  # opened first: a path that cannot be written fails before the run
                self._file = open(self.path, "w", encoding="utf-8")
            except OSError as error:
                raise file_error(error, f"cannot write the trace file '{self.path}'") \
                    from None
            self.timeline = Timeline().start()
        return self

    @property
    def hooks(self) -> list:
        return [TimelineHooks(self.timeline)] if self.timeline is not None else []

    def __exit__(self, *exc) -> bool:
        if self.timeline is not None:
            self.timeline.stop()
            with self._file:
                self.timeline.write(self._file)
        return False


# -- the picture -----------------------------------------------------------------------------------
LEFT = 150
WIDTH = 1100
ROW = 15
CATEGORY_COLORS = {"vm": "#8fb8de", "submit": "#c8c8c8", "queue": "#f4b26b",
                   "fence": "#e57f84", "io": "#79c37d"}


def load_trace(path) -> list[dict]:
    """The events of a trace file (an object with traceEvents, or a bare list)."""
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as error:
        raise file_error(error, f"cannot read the trace '{path}'") from None
    except ValueError as error:
        raise VmrtError(f"'{path}' is not JSON: {error}", StatusCode.INVALID_ARGUMENT) \
            from None
    return document["traceEvents"] if isinstance(document, dict) else document


def _lanes(events: list[dict]) -> list[tuple[int, str, list[tuple[dict, int]]]]:
    """(tid, thread name, [(span, depth)]) per thread, in order of first activity."""
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    spans: dict[int, list[dict]] = {}
    for event in sorted((e for e in events if e["ph"] == "X"),
                        key=lambda e: (e["ts"], -e["dur"])):
        spans.setdefault(event["tid"], []).append(event)
    lanes = []
    for tid, lane in spans.items():
        placed, open_ends = [], []
        for span in lane:
            while open_ends and open_ends[-1] <= span["ts"]:
                open_ends.pop()
            placed.append((span, len(open_ends)))
            open_ends.append(span["ts"] + span["dur"])
        lanes.append((tid, names.get(tid, str(tid)), placed))
    return lanes


def _tick_step(total_us: float) -> float:
    """1, 2 or 5 times a power of ten: at most ten ticks over `total_us`."""
    step = 1.0
    while True:
        for multiple in (1, 2, 5):
            if total_us / (step * multiple) <= 10:
                return step * multiple
        step *= 10


def _draw_axis(svg: Svg, start: float, scale: float, total: float, height: float) -> None:
    step = _tick_step(total)
    tick = 0.0
    while tick <= total:
        x = LEFT + tick * scale
        svg.line(x, 30, x, height - 10, stroke="#eee")
        svg.text(x, 26, f"{tick / 1000:g} ms", size=9, text_anchor="middle", fill="#555")
        tick += step


def _span_fill(span: dict, dispatch_colors: dict) -> str:
    if span.get("cat") == "dispatch":
        return dispatch_colors[span["name"]]
    return CATEGORY_COLORS.get(span.get("cat"), "#bbb")


def timeline_picture(events: list[dict], title: str = "vmrt execution timeline") -> Svg:
    """An SVG of trace events: a lane per thread, spans by nesting depth, flows as lines."""
    lanes = _lanes(events)
    spans = [span for _, _, placed in lanes for span, _ in placed]
    start = min((s["ts"] for s in spans), default=0.0)
    total = max((s["ts"] + s["dur"] for s in spans), default=1.0) - start or 1.0
    scale = WIDTH / total
    heights = [(max((d for _, d in placed), default=0) + 1) * ROW + 10 for _, _, placed in lanes]
    height = 40 + sum(heights) + 30
    svg = Svg(LEFT + WIDTH + 30, height, title)
    svg.text(8, 18, title, size=14, font_weight="bold")
    _draw_axis(svg, start, scale, total, height - 20)
    dispatch_colors = palette({s["name"] for s in spans if s.get("cat") == "dispatch"})
    rows: dict[int, float] = {}
    top = 40.0
    for (tid, name, placed), lane_height in zip(lanes, heights):
        rows[tid] = top
        with svg.group("lane", f"thread {name} ({tid}): {len(placed)} spans", data_tid=tid):
            svg.line(8, top + lane_height - 3, LEFT + WIDTH, top + lane_height - 3,
                     stroke="#ddd")
            svg.text(LEFT - 8, top + 11, name, size=10, text_anchor="end")
            for span, depth in placed:
                _draw_span(svg, span, (LEFT + (span["ts"] - start) * scale, top + depth * ROW),
                           span["dur"] * scale, _span_fill(span, dispatch_colors))
        top += lane_height
    _draw_flows(svg, events, rows, start, scale)
    _draw_key(svg, height - 16)
    return svg


def _draw_span(svg: Svg, span: dict, at: tuple[float, float], width: float,
               fill: str) -> None:
    x, y = at
    details = ", ".join(f"{k}={v}" for k, v in (span.get("args") or {}).items())
    title = f"{span['name']} [{span.get('cat', '')}] {span['dur'] / 1000:.3f} ms" + (
        f" ({details})" if details else "")
    with svg.group("span", title, data_cat=span.get("cat", "")):
        svg.rect(x, y, max(width, 0.5), ROW - 2, fill, stroke="white", stroke_width=0.3)
        if fits(span["name"], width - 4, 9):
            svg.text(x + 2, y + ROW - 5, span["name"], size=9)


def _draw_flows(svg: Svg, events: list[dict], rows: dict, start: float, scale: float) -> None:
    starts = {(e.get("cat"), e["id"]): e for e in events if e["ph"] == "s"}
    with svg.group("flows", "flow arrows: submission -> execution"):
        for end in (e for e in events if e["ph"] == "f"):
            begin = starts.get((end.get("cat"), end["id"]))
            if begin is None or begin["tid"] not in rows or end["tid"] not in rows:
                continue
            x1, x2 = (LEFT + (e["ts"] - start) * scale for e in (begin, end))
            y1, y2 = rows[begin["tid"]] + ROW / 2, rows[end["tid"]] + ROW / 2
            svg.line(x1, y1, x2, y2, stroke="#555", stroke_width=0.6, stroke_opacity=0.6)
            svg.rect(x2 - 1.5, y2 - 1.5, 3, 3, "#555")


def _draw_key(svg: Svg, y: float) -> None:
    x = LEFT
    for label, color in [("VM call", CATEGORY_COLORS["vm"]), ("submit", CATEGORY_COLORS["submit"]),
                         ("queue operation", CATEGORY_COLORS["queue"]),
                         ("dispatch (colour per function)", "#ddd"),
                         ("fence wait", CATEGORY_COLORS["fence"]),
                         ("io_parameters batch", CATEGORY_COLORS["io"])]:
        svg.rect(x, y - 9, 10, 10, color)
        svg.text(x + 14, y, label, size=10)
        x += len(label) * 6.5 + 30
