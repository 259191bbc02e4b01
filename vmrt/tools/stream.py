"""Partition stream programs (text form) into waves and report their transient memory.

    vmrt stream stats FILE [--json] [--partitioning-favor=F]
    vmrt stream schedule FILE [--function NAME] [--partitioning-favor=F]
    vmrt stream compile FILE -o OUT.vmfb [--partitioning-favor=F]   (not yet available)

`stats` prints, per function, the statistics of all three favors side by side;
the column marked `*` is the favor the function would be compiled with (its
`partitioning` attribute, else the program's, else --partitioning-favor).
`schedule` prints the waves and the transient slab of the effective favor.
"""

from __future__ import annotations

import json
import sys

from vmrt.errors import StatusCode, VmrtError
from vmrt.stream import (DEFAULT_FAVOR, FAVORS, FuncAnalysis, load_program, plan,
                         resolve_favor)
from vmrt.stream.text import format_op


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="stream_command", metavar="ACTION")
    sub.required = True
    favor_help = (f"favor when neither the function nor the program has a `partitioning` "
                  f"attribute (default {DEFAULT_FAVOR.value})")
    favors = [f.value for f in FAVORS]

    stats = sub.add_parser("stats", help="statistics of all three favors side by side")
    stats.add_argument("file", help="a stream program (text form)")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.add_argument("--partitioning-favor", choices=favors, default=DEFAULT_FAVOR.value,
                       help=favor_help)
    stats.set_defaults(stream_run=run_stats)

    schedule = sub.add_parser("schedule", help="the waves and transient slab of one favor")
    schedule.add_argument("file", help="a stream program (text form)")
    schedule.add_argument("--function", help="only this function")
    schedule.add_argument("--partitioning-favor", choices=favors,
                          default=DEFAULT_FAVOR.value, help=favor_help)
    schedule.add_argument("--force", action="store_true",
                          help="use --partitioning-favor even over attributes")
    schedule.set_defaults(stream_run=run_schedule)

    compile_ = sub.add_parser("compile", help="lower to a VM module (not yet available)")
    compile_.add_argument("file", help="a stream program (text form)")
    compile_.add_argument("-o", "--output", required=True, help="the .vmfb to write")
    compile_.add_argument("--partitioning-favor", choices=favors,
                          default=DEFAULT_FAVOR.value, help=favor_help)
    compile_.set_defaults(stream_run=run_compile)


def run(args) -> int:
    return args.stream_run(args)


def _bytes(count: int) -> str:
    if count >= 1 << 20:
        return f"{count} ({count / (1 << 20):.2f} MiB)"
    if count >= 1 << 10:
        return f"{count} ({count / (1 << 10):.1f} KiB)"
    return str(count)


def format_stats_table(program, default_favor=DEFAULT_FAVOR) -> str:
    """The side-by-side table `vmrt stream stats` prints."""
    blocks = []
    for func in program.funcs:
        analysis = FuncAnalysis(func)
        effective = resolve_favor(program, func, default_favor)
        stats = {f: plan(func, f, analysis).stats for f in FAVORS}
        headers = [f.value + ("*" if f is effective else "") for f in FAVORS]
        rows = []
        for label, attr in stats[FAVORS[0]].ROWS:
            cells = []
            for f in FAVORS:
                value = getattr(stats[f], attr)
                cells.append(_bytes(value) if "bytes" in label or "peak" in label
                             else str(value))
            rows.append((label, cells))
        label_width = max(len(label) for label, _ in rows)
        widths = [max(len(h), *(len(cells[i]) for _, cells in rows))
                  for i, h in enumerate(headers)]
        title = (f"@{func.name}: {len(func.ops)} ops, {func.dispatch_count} dispatches, "
                 f"{len(analysis.transients)} transients")
        lines = [title,
                 " " * label_width + "  " + "  ".join(h.rjust(w)
                                                      for h, w in zip(headers, widths))]
        for label, cells in rows:
            lines.append(label.ljust(label_width) + "  "
                         + "  ".join(c.rjust(w) for c, w in zip(cells, widths)))
        blocks.append("\n".join(lines))
    note = "(* = the favor this function is compiled with)"
    return "\n\n".join(blocks) + "\n" + note + "\n"


def run_stats(args) -> int:
    program = load_program(args.file)
    if args.json:
        out = []
        for func in program.funcs:
            analysis = FuncAnalysis(func)
            entry = {"function": func.name,
                     "favor": resolve_favor(program, func, args.partitioning_favor).value,
                     "stats": {f.value: plan(func, f, analysis).stats.as_dict()
                               for f in FAVORS}}
            out.append(entry)
        json.dump({"program": program.name, "functions": out}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(format_stats_table(program, args.partitioning_favor))
    return 0


def run_schedule(args) -> int:
    program = load_program(args.file)
    funcs = [program.func(args.function)] if args.function else program.funcs
    out = []
    for func in funcs:
        favor = (args.partitioning_favor if args.force
                 else resolve_favor(program, func, args.partitioning_favor))
        result = plan(func, favor)
        stats = result.stats
        out.append(f"@{func.name} favor={stats.favor.value}: {stats.waves} waves, "
                   f"transient slab {stats.transient_bytes} bytes")
        for number, wave in enumerate(result.schedule.waves):
            out.append(f"  wave {number}:")
            for index in wave:
                out.append(f"    {format_op(func.ops[index])}")
        if result.layout.slices:
            out.append("  transient slab:")
            for piece in sorted(result.layout.slices, key=lambda s: (s.offset, s.storage)):
                out.append(f"    [{piece.offset:>10} for {piece.aligned_size:>10}] "
                           f"%{piece.name} waves {piece.start_wave}..{piece.end_wave}")
        out.append("")
    sys.stdout.write("\n".join(out))
    return 0


def run_compile(args) -> int:
    load_program(args.file)   # report errors in the program first
    raise VmrtError("vmrt stream compile is not yet available: lowering a stream program "
                    "to a VM module needs the HAL and io_parameters lowering, which are "
                    "not built yet (use `vmrt stream stats` or `vmrt stream schedule`)",
                    StatusCode.UNIMPLEMENTED)
