"""Pictures of partition schedules (SVG): per function and favor, the waves as columns
of op boxes (height: bytes the op touches, an estimate of its cost) and below them,
on the same wave axis, the transient slab as a memory map (a transient's box spans
the waves it is live in, at its offset in the slab).

The slab's vertical scale is bytes, plus 2 px for every stretch between two slice
boundaries so a 64-byte transient stays visible. That scale is monotonic, so boxes
overlap in the picture exactly when their byte ranges overlap: never for transients
live at once (what vmrt.stream.allocation.pack guarantees).
"""

from __future__ import annotations

from dataclasses import dataclass

from vmrt.stream.allocation import Plan, plan
from vmrt.stream.analysis import FuncAnalysis
from vmrt.stream.ir import Func, Program
from vmrt.stream.partition import DEFAULT_FAVOR, FAVORS, resolve_favor
from vmrt.stream.text import format_op
from vmrt.svg import Svg, color_for, fits, palette

LEFT = 96            # label margin
PLOT_WIDTH = 1100    # the widest panel's waves
HEADER = 30
WAVES_HEIGHT = 170
AXIS = 18            # wave numbers between the waves and the slab
SLAB_HEIGHT = 170
PANEL_GAP = 28
MIN_OP = 4           # px every op box has besides its bytes (countable)
MIN_SLICE = 2        # px every slab stretch has besides its bytes
OTHER_OPS = "#b8b8b8"


def size_text(count: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):.1f} {unit}"
    return f"{count} B"


def op_bytes(analysis: FuncAnalysis, index: int) -> int:
    """The bytes op `index` reads and writes: its picture's size (an estimate)."""
    return sum(access.hi - access.lo for access in analysis.accesses[index])


def _op_label(func: Func, index: int) -> str:
    op = func.ops[index]
    return op.callee[-1] if op.is_dispatch and op.callee else op.kind


@dataclass
class _Scales:
    pitch: float          # px per wave column
    op_px: float          # px per byte of an op box
    slab_px: float        # px per byte of the slab
    colors: dict          # kernel -> colour


def _scales(plans: list[Plan]) -> _Scales:
    """One scale for every panel of a picture, so favors compare at a glance."""
    most_waves = max((len(p.schedule.waves) for p in plans), default=1) or 1
    pitch = max(12.0, min(64.0, PLOT_WIDTH / most_waves))
    op_px = slab_px = float("inf")
    for p in plans:
        for wave in p.schedule.waves:
            total = sum(op_bytes(p.analysis, i) for i in wave)
            room = WAVES_HEIGHT - len(wave) * (MIN_OP + 1)
            if total:
                op_px = min(op_px, max(0.0, room) / total)
        if p.layout.size:
            room = SLAB_HEIGHT - MIN_SLICE * len(_boundaries(p))
            slab_px = min(slab_px, max(0.0, room) / p.layout.size)
    return _Scales(pitch, 0.0 if op_px == float("inf") else op_px,
                   0.0 if slab_px == float("inf") else slab_px, palette(_kernels(plans)))


def _kernels(plans: list[Plan]) -> set[str]:
    return {_op_label(p.analysis.func, i) for p in plans
            for i, op in enumerate(p.analysis.func.ops) if op.is_dispatch}


def _boundaries(p: Plan) -> list[int]:
    points = {0, p.layout.size}
    for piece in p.layout.slices:
        points.update((piece.offset, piece.offset + piece.aligned_size))
    return sorted(points)


def _slab_y(p: Plan, scales: _Scales) -> dict[int, float]:
    """Slab offset -> px below the slab's top, for every slice boundary (monotonic)."""
    points = _boundaries(p)
    y = {points[0]: 0.0}
    for low, high in zip(points, points[1:]):
        y[high] = round(y[low] + (high - low) * scales.slab_px + MIN_SLICE, 2)
    return y


def _draw_waves(svg: Svg, p: Plan, scales: _Scales, top: float) -> None:
    func, base = p.analysis.func, top + WAVES_HEIGHT
    width = scales.pitch - 2
    for number, wave in enumerate(p.schedule.waves):
        x = LEFT + number * scales.pitch
        touched = sum(op_bytes(p.analysis, i) for i in wave)
        title = (f"wave {number}: {len(wave)} ops "
                 f"({sum(func.ops[i].is_dispatch for i in wave)} dispatches), "
                 f"{size_text(touched)} touched")
        with svg.group("wave", title, data_wave=number):
            y = base
            for index in wave:
                height = MIN_OP + op_bytes(p.analysis, index) * scales.op_px
                y -= height + 1
                _draw_op(svg, p, index, (x, y, width, height), scales.colors)
            if number % max(1, round(40 / scales.pitch)) == 0:
                svg.text(x + width / 2, base + 13, str(number), size=9, text_anchor="middle",
                         fill="#555")


def _draw_op(svg: Svg, p: Plan, index: int, box, colors: dict) -> None:
    x, y, width, height = box
    func = p.analysis.func
    op = func.ops[index]
    label = _op_label(func, index)
    fill = colors[label] if op.is_dispatch else OTHER_OPS
    title = f"{format_op(op)}\n{size_text(op_bytes(p.analysis, index))} touched"
    with svg.group("op", title, data_op=index):
        svg.rect(x, y, width, height, fill, stroke="white", stroke_width=0.5)
        if height >= 12 and fits(label, width - 2, 9):
            svg.text(x + width / 2, y + height / 2 + 3, label, size=9, text_anchor="middle")
        elif width >= 11 and fits(label, height - 2, 9):
            cx, cy = x + width / 2 + 3, y + height / 2
            svg.text(cx, cy, label, size=9, text_anchor="middle",
                     transform=f"rotate(-90 {cx:.2f} {cy:.2f})")


def _draw_slab(svg: Svg, p: Plan, scales: _Scales, top: float) -> None:
    layout = p.layout
    y = _slab_y(p, scales)
    span = len(p.schedule.waves) * scales.pitch - 2
    svg.rect(LEFT, top, span, y[layout.size], "#f3f3f3", stroke="#ccc", stroke_width=0.5)
    svg.text(LEFT - 8, top + 11, f"slab {size_text(layout.size)}", size=10,
             text_anchor="end", fill="#333")
    for piece in sorted(layout.slices, key=lambda s: (s.offset, s.start_wave)):
        x = LEFT + piece.start_wave * scales.pitch
        width = (piece.end_wave - piece.start_wave + 1) * scales.pitch - 2
        low, high = y[piece.offset], y[piece.offset + piece.aligned_size]
        title = (f"%{piece.name}: {piece.size} bytes at offset {piece.offset}, live in "
                 f"waves {piece.start_wave}..{piece.end_wave}")
        with svg.group("transient", title, data_name=piece.name, data_offset=piece.offset,
                       data_size=piece.aligned_size, data_start_wave=piece.start_wave,
                       data_end_wave=piece.end_wave):
            svg.rect(x, top + low, width, high - low, color_for(piece.name, 45, 72),
                     stroke="#666", stroke_width=0.4)
            if high - low >= 12 and fits(piece.name, width - 4, 9):
                svg.text(x + 3, top + low + (high - low) / 2 + 3, piece.name, size=9)


def _panel_height(p: Plan, scales: _Scales) -> float:
    slab = _slab_y(p, scales)[p.layout.size] if p.layout.slices else 0.0
    return HEADER + WAVES_HEIGHT + AXIS + slab


def _draw_panel(svg: Svg, p: Plan, scales: _Scales, top: float) -> None:
    stats = p.stats
    func = p.analysis.func
    with svg.group("panel", data_function=func.name, data_favor=stats.favor.value):
        svg.text(8, top + 16, f"@{func.name}  {stats.favor.value}", size=13,
                 font_weight="bold")
        svg.text(LEFT + 170, top + 16,
                 f"{stats.waves} waves, {stats.concurrent_dispatches} of {stats.dispatches} "
                 f"dispatches share a wave, widest wave {stats.widest_wave} ops; transient "
                 f"slab {size_text(stats.transient_bytes)}, live peak "
                 f"{size_text(stats.live_transient_peak)}", size=11, fill="#333")
        svg.text(LEFT - 8, top + HEADER + 11, "waves", size=10, text_anchor="end",
                 fill="#333")
        svg.text(LEFT - 8, top + HEADER + 24, "(box: bytes", size=9, text_anchor="end",
                 fill="#777")
        svg.text(LEFT - 8, top + HEADER + 35, "touched)", size=9, text_anchor="end",
                 fill="#777")
        _draw_waves(svg, p, scales, top + HEADER)
        if p.layout.slices:
            _draw_slab(svg, p, scales, top + HEADER + WAVES_HEIGHT + AXIS)


def _draw_legend(svg: Svg, colors: dict, top: float) -> None:
    x = LEFT
    with svg.group("legend", "kernel colours"):
        for name, color in colors.items():
            width = len(name) * 6.5 + 26
            if x + width > LEFT + PLOT_WIDTH:
                x, top = LEFT, top + 16
            svg.rect(x, top, 10, 10, color)
            svg.text(x + 14, top + 9, name, size=10)
            x += width
        svg.rect(x, top, 10, 10, OTHER_OPS)
        svg.text(x + 14, top + 9, "other ops (splat, fill, copy, param)", size=10)


def draw(plans: list[Plan], title: str) -> Svg:
    """The picture of `plans` (function x favor), one panel each, top to bottom."""
    scales = _scales(plans)
    heights = [_panel_height(p, scales) for p in plans]
    legend_rows = 3
    height = 40 + sum(heights) + PANEL_GAP * len(plans) + 16 * legend_rows
    svg = Svg(LEFT + PLOT_WIDTH + 40, height, title)
    svg.text(8, 22, title, size=15, font_weight="bold")
    top = 40.0
    for p, panel_height in zip(plans, heights):
        _draw_panel(svg, p, scales, top)
        top += panel_height + PANEL_GAP
    _draw_legend(svg, scales.colors, top - 8)
    return svg


def schedule_picture(program: Program, favor=DEFAULT_FAVOR, *, force: bool = False,
                     function: str | None = None) -> Svg:
    """`vmrt stream schedule --svg`: each function under its effective favor (or
    `favor` itself with `force`)."""
    funcs = [program.func(function)] if function else program.funcs
    plans = [plan(func, favor if force else resolve_favor(program, func, favor))
             for func in funcs if func.ops]
    return draw(plans, f"@{program.name}: partition schedule and transient slab")


def favors_picture(program: Program, function: str | None = None) -> Svg:
    """`vmrt stream stats --svg`: every function under all three favors, on one scale."""
    plans = []
    for func in ([program.func(function)] if function else program.funcs):
        if func.ops:
            analysis = FuncAnalysis(func)
            plans.extend(plan(func, favor, analysis) for favor in FAVORS)
    return draw(plans, f"@{program.name}: the three partitioning favors on one scale")
