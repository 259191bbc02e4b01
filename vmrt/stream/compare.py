"""IREE's partitioning beside vmrt's on the same program, per favor.

    comparison = compare_model("model.mlir")      # three iree-compile runs + the import
    print(format_comparison(comparison))

IREE's figures come from the IR it ends the stream phase with under
`--iree-stream-partitioning-favor=F`: transient bytes are its `stream.resource.alloca`s
of transient resources, a wave is a command of a `stream.cmd.execute` region (a
`stream.cmd.concurrent` counting as one), concurrent dispatches are the
`stream.cmd.dispatch`es in a concurrent region of at least two commands. vmrt's
are its partitioner's on the imported program (vmrt/stream/importer.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vmrt.stream.allocation import FuncStats
from vmrt.stream.importer import ImportedProgram, import_stream_ir, vmrt_name
from vmrt.stream.iree_compiler import (compile_stream_ir, constant_int, function_ops,
                                       parse_modules, walk)
from vmrt.stream.partition import FAVORS, Favor
from vmrt.stream.verify import verified_stats

_TERMINATORS = ("stream.yield", "stream.return")


@dataclass
class IreeStats:
    """What IREE made of one function under one favor."""

    function: str
    favor: Favor
    #: transient bytes allocated (None when a size is not a constant).
    transient_bytes: int | None
    dispatches: int
    concurrent_dispatches: int
    waves: int
    widest_wave: int

    def as_dict(self) -> dict:
        return {"function": self.function, "favor": self.favor.value,
                "transient_bytes": self.transient_bytes, "dispatches": self.dispatches,
                "concurrent_dispatches": self.concurrent_dispatches, "waves": self.waves,
                "widest_wave": self.widest_wave}


def _commands(region_op) -> list:
    return [op.operation for op in region_op.regions[0].blocks[0].operations
            if op.operation.name not in _TERMINATORS]


def _transient_bytes(ops) -> int | None:
    total = 0
    for op in ops:
        if op.name == "stream.resource.alloca" and \
                str(op.results[0].type).startswith("!stream.resource<transient>"):
            size = constant_int(op.operands[0])
            if size is None:
                return None
            total += size
    return total


def iree_function_stats(name: str, op, favor: Favor) -> IreeStats:
    ops = list(walk(op))
    waves = concurrent = 0
    widest = 1 if any(child.name == "stream.cmd.execute" for child in ops) else 0
    for execute in (child for child in ops if child.name == "stream.cmd.execute"):
        commands = _commands(execute)
        waves += len(commands)
        for command in commands:
            if command.name != "stream.cmd.concurrent":
                continue
            members = _commands(command)
            widest = max(widest, len(members))
            if len(members) > 1:
                concurrent += sum(1 for m in members if m.name == "stream.cmd.dispatch")
    dispatches = sum(1 for child in ops if child.name == "stream.cmd.dispatch")
    return IreeStats(name, favor, _transient_bytes(ops), dispatches, concurrent, waves,
                     widest)


def iree_stats(partitioned: dict[str, str]) -> dict[str, dict[Favor, IreeStats]]:
    """Per function, per favor: IREE's figures from the texts of compile_stream_ir."""
    _context, modules = parse_modules(list(partitioned.values()))
    out: dict[str, dict[Favor, IreeStats]] = {}
    for favor, module in zip(partitioned, modules):
        for name, op in function_ops(module):
            name = vmrt_name(name)
            out.setdefault(name, {})[Favor(favor)] = iree_function_stats(name, op,
                                                                         Favor(favor))
    return out


@dataclass
class Comparison:
    model: str
    imported: ImportedProgram
    iree: dict[str, dict[Favor, IreeStats]]
    vmrt: dict[str, dict[Favor, FuncStats]]
    compile_args: tuple[str, ...] = ()
    functions: list[str] = field(default_factory=list)


def compare_model(model, compile_args=()) -> Comparison:
    """Compiles `model` under each favor, imports it, and partitions it with vmrt."""
    stream_ir = compile_stream_ir(model, [f.value for f in FAVORS], compile_args)
    imported = import_stream_ir(stream_ir.before_partitioning, Path(model).stem)
    iree = iree_stats(stream_ir.partitioned)
    vmrt = verified_stats(imported.program)     # raises ScheduleError on a bad plan
    names = list(iree) + [name for name in vmrt if name not in iree]
    return Comparison(str(model), imported, iree, vmrt, tuple(compile_args), names)


#: (column title, IreeStats / FuncStats attribute) of the table.
COLUMNS = (("transient bytes", "transient_bytes"),
           ("concurrent dispatches", "concurrent_dispatches"),
           ("waves", "waves"))


def _cell(stats, attribute: str) -> str:
    if stats is None:
        return "-"
    value = getattr(stats, attribute)
    return "?" if value is None else f"{value:,}"


def _function_title(comparison: Comparison, name: str) -> str:
    parts = [f"@{name}:"]
    iree = comparison.iree.get(name)
    if iree:
        parts.append(f"IREE {next(iter(iree.values())).dispatches} dispatches;")
    func = next((f for f in comparison.imported.program.funcs if f.name == name), None)
    if func is not None:
        stats = next(iter(comparison.vmrt[name].values()))
        kinds: dict[str, int] = {}
        for op in func.ops:
            if op.kind != "dispatch":
                kinds[op.kind] = kinds.get(op.kind, 0) + 1
        others = "".join(f", {count} {kind}" for kind, count in sorted(kinds.items()))
        parts.append(f"imported {stats.ops} ops, {stats.dispatches} dispatches{others}")
    else:
        parts.append("not imported")
    return " ".join(parts)


def _function_rows(comparison: Comparison, name: str) -> list[list[str]]:
    rows = []
    for favor in FAVORS:
        iree = comparison.iree.get(name, {}).get(favor)
        vmrt = comparison.vmrt.get(name, {}).get(favor)
        row = [favor.value]
        for _, attribute in COLUMNS:
            row += [_cell(iree, attribute), _cell(vmrt, attribute)]
        rows.append(row)
    return rows


def _format_function(comparison: Comparison, name: str) -> str:
    rows = [["favor"] + ["IREE", "vmrt"] * len(COLUMNS)] + _function_rows(comparison, name)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for pair, (title, _) in enumerate(COLUMNS):   # a title spans its IREE and vmrt cells
        short = len(title) - (widths[1 + 2 * pair] + widths[2 + 2 * pair] + 2)
        if short > 0:
            widths[1 + 2 * pair] += short // 2
            widths[2 + 2 * pair] += short - short // 2
    titles = " " * widths[0] + "".join(
        "  " + title.center(widths[1 + 2 * pair] + widths[2 + 2 * pair] + 2)
        for pair, (title, _) in enumerate(COLUMNS))
    lines = [_function_title(comparison, name), titles.rstrip()]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width)
                                             for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def has_dispatches(comparison: Comparison, name: str) -> bool:
    """Whether IREE or the import finds a dispatch in the function."""
    iree = comparison.iree.get(name, {})
    vmrt = comparison.vmrt.get(name, {})
    return any(stats.dispatches for stats in [*iree.values(), *vmrt.values()])


def _without_dispatches(comparison: Comparison, name: str) -> str:
    if name in comparison.imported.skipped:
        return f"@{name}: skipped: {comparison.imported.skipped[name]}"
    ops = next(iter(comparison.vmrt[name].values())).ops if name in comparison.vmrt else 0
    return f"@{name}: no dispatches ({ops} ops imported: constants, parameters, copies)"


def format_comparison(comparison: Comparison) -> str:
    """The table `vmrt stream compare` prints: per function with dispatches, a row per
    favor with IREE's and vmrt's figures side by side; a line per other function; what
    the import approximated; and that vmrt's plans were verified."""
    names = comparison.functions
    blocks = [_format_function(comparison, name) for name in names
              if has_dispatches(comparison, name)]
    others = [_without_dispatches(comparison, name) for name in names
              if not has_dispatches(comparison, name)]
    notes = "".join(f"approximated: {note}\n" for note in comparison.imported.notes)
    plans = sum(len(per_favor) for per_favor in comparison.vmrt.values())
    verified = (f"verified: vmrt's {plans} plans keep every dependency and hazard; live "
                "transients never share slab bytes\n")
    return "\n\n".join(blocks) + "\n\n" + "".join(line + "\n" for line in others) + \
        notes + verified


def comparison_json(comparison: Comparison) -> dict:
    """The `--json` form: per function, per favor, IREE's and vmrt's figures."""
    functions = []
    for name in comparison.functions:
        favors = {}
        for favor in FAVORS:
            iree = comparison.iree.get(name, {}).get(favor)
            vmrt = comparison.vmrt.get(name, {}).get(favor)
            favors[favor.value] = {"iree": iree.as_dict() if iree else None,
                                   "vmrt": vmrt.as_dict() if vmrt else None}
        functions.append({"function": name, "dispatches": has_dispatches(comparison, name),
                          "favors": favors})
    return {"model": comparison.model, "compile_args": list(comparison.compile_args),
            "functions": functions, "approximations": comparison.imported.notes,
            "skipped": comparison.imported.skipped, "verified": True}
