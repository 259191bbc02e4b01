"""Partition stream programs (text form) into waves, report their transient memory,
lower them to VM modules and run them.

    vmrt stream stats FILE [--json] [--function NAME] [--partitioning_favor=F] [--svg=OUT.svg]
    vmrt stream schedule FILE [--function NAME] [--partitioning_favor=F] [--svg=OUT.svg]
    vmrt stream compile FILE -o OUT.vmfb [--partitioning_favor=F] [--force] [--emit=vmasm]
    vmrt stream run FILE|OUT.vmfb --kernels=K [--function=NAME] [--input=@x.npy ...]
        [--parameters=SCOPE=FILE ...] [--device=local-task] [--check] [--output=@r.bin ...]
        [--trace_json=FILE]
    vmrt stream import MODEL.mlir [-o OUT.stream] [--constants=OUT.irpa] [--compile_arg=F ...]
        [--verbose]
    vmrt stream compare MODEL.mlir [--json] [--compile_arg=F ...] [--verbose]

`stats` prints, per function, the statistics of all three favors side by side;
the column marked `*` is the favor the function would be compiled with (its
`partitioning` attribute, else the program's, else --partitioning_favor).
`schedule` prints the waves and the transient slab of the effective favor.
With `--svg=OUT.svg` both also draw it (vmrt.stream.picture): waves as columns of
op boxes over the transient slab's memory map, `stats` all three favors on one scale.
`compile` lowers every function (vmrt/stream/README.md, "Lowering") and writes the
module; `--emit=vmasm` writes the vmasm text instead. `run` runs one function of
a program (compiled on the fly) or of a compiled module on a local device with the
Python kernels of `--kernels` (a .py file or a module defining KERNELS, a dict of
kernel name -> callable), io_parameters over `--parameters` archives, and with
`--check` compares every result byte for byte with a plain numpy evaluation.
`import` runs iree-compile (iree-base-compiler) on a model up to IREE's own
partitioning and converts that stream IR into a program, one function per IREE
function (functions with no stream work, such as the synchronous wrapper of an
async entry point, are skipped and named); `compare` prints, per function with
dispatches and per favor, IREE's transient bytes, concurrent dispatches and waves
beside vmrt's on the imported program, every vmrt plan verified first
(vmrt/stream/README.md, "Importing IREE programs"). When the import fails, the error
is one line (op counts by name, the first location); `--verbose` lists every op.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path

from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.stream import (DEFAULT_FAVOR, FAVORS, FuncAnalysis, load_program, plan,
                         resolve_favor)
from vmrt.stream.text import format_op
from vmrt.tools.flags import add_flag
from vmrt.tools.trace_json import Recording, add_trace_json_flag


def _add_svg_flag(parser, what: str) -> None:
    parser.add_argument("--svg", default="", metavar="OUT.svg",
                        help=f"also draw {what} as an SVG picture in OUT.svg")


def _save_svg(picture, path: str) -> None:
    try:
        picture.save(path)
    except OSError as error:
        raise file_error(error, f"cannot write the picture '{path}'") from None


def _add_favor_flags(parser, force: bool = True) -> None:
    add_flag(parser, "--partitioning_favor", hidden=("--partitioning-favor",),
             choices=[f.value for f in FAVORS], default=DEFAULT_FAVOR.value,
             help=f"favor when neither the function nor the program has a `partitioning` "
                  f"attribute (default {DEFAULT_FAVOR.value})")
    if force:
        parser.add_argument("--force", action="store_true",
                            help="use --partitioning_favor even over attributes")


def _add_action(sub, name: str, summary: str, run):
    """An action whose --help starts with `summary` (a sentence)."""
    parser = sub.add_parser(name, help=summary, description=summary)
    parser.set_defaults(stream_run=run)
    return parser


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="stream_command", metavar="ACTION")
    sub.required = True

    stats = _add_action(sub, "stats", "Print the statistics of all three partitioning "
                                      "favors side by side, per function.", run_stats)
    stats.add_argument("file", help="a stream program (text form)")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.add_argument("--function", help="only this function")
    _add_favor_flags(stats, force=False)
    _add_svg_flag(stats, "the waves and transient slab of all three favors")

    schedule = _add_action(sub, "schedule", "Print the waves and the transient slab of one "
                                            "favor, per function.", run_schedule)
    schedule.add_argument("file", help="a stream program (text form)")
    schedule.add_argument("--function", help="only this function")
    _add_favor_flags(schedule)
    _add_svg_flag(schedule, "the waves and the transient slab")

    compile_ = _add_action(sub, "compile", "Lower a stream program to a VM module (or its "
                                           "vmasm text).", run_compile)
    compile_.add_argument("file", help="a stream program (text form)")
    compile_.add_argument("-o", "--output", required=True, help="the .vmfb to write")
    _add_favor_flags(compile_)
    compile_.add_argument("--emit", choices=("vmfb", "vmasm"), default="vmfb",
                          help="write the module (default) or its vmasm text")

    run_ = _add_action(sub, "run", "Run one function of a stream program or compiled module "
                                   "on a local device, with Python kernels.", run_run)
    run_.add_argument("file", help="a stream program (text form) or a compiled .vmfb")
    run_.add_argument("--kernels", action="append", default=[], metavar="PY",
                      help="a .py file or module name defining KERNELS {name: callable} "
                           "(repeatable)")
    run_.add_argument("--function", default="", help="the function (optional when there "
                                                     "is one)")
    run_.add_argument("--input", action="append", default=[], metavar="VALUE",
                      help="an argument: @FILE (.npy: the array's bytes; else raw bytes) or "
                           "`zeros` (repeatable, in order)")
    run_.add_argument("--parameters", action="append", default=[], metavar="SCOPE=FILE",
                      help="a parameter archive (.irpa, .safetensors, .gguf) for a scope")
    run_.add_argument("--device", choices=("local-sync", "local-task"), default="local-task")
    _add_favor_flags(run_)
    run_.add_argument("--check", action="store_true",
                      help="compare with a numpy evaluation (needs the program text)")
    run_.add_argument("--output", action="append", default=[], metavar="SPEC",
                      help="per result: @FILE.bin (raw bytes), @FILE.npy (uint8 array) or "
                           "`` to skip")
    add_trace_json_flag(run_)
    _add_import_actions(sub)


def _add_import_actions(sub) -> None:
    """`import` and `compare`: IREE's own programs (vmrt/stream/importer.py)."""
    import_ = _add_action(sub, "import", "Import a model's stream IR from iree-compile (just "
                                         "before IREE partitions it) as a stream program.",
                          run_import)
    compare = _add_action(sub, "compare", "Compare IREE's partitioning of a model with "
                                          "vmrt's, per favor.", run_compare)
    for action in (import_, compare):
        action.add_argument("file", help="a model iree-compile takes (StableHLO, linalg, "
                                         "...)")
        add_flag(action, "--compile_arg", hidden=("--compile-arg",), action="append",
                 default=[], metavar="FLAG", dest="compile_args",
                            help="an extra iree-compile flag, e.g. a target (repeatable; "
                                 "the default target is local vmvx)")
        action.add_argument("--verbose", "-v", action="store_true",
                            help="when the import fails, list every op it cannot map "
                                 "(name, location, why), one a line, before the error")
    import_.add_argument("-o", "--output", help="the .stream file to write (default stdout)")
    add_flag(import_, "--stream_ir", hidden=("--stream-ir",), action="store_true",
                         help="FILE is stream IR as printed before "
                              "iree-stream-schedule-execution (no compile)")
    import_.add_argument("--constants", metavar="OUT.irpa",
                         help="write the non-splat constants (scope \"constants\") here")
    compare.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    return args.stream_run(args)


def _bytes(count: int) -> str:
    if count >= 1 << 20:
        return f"{count} ({count / (1 << 20):.2f} MiB)"
    if count >= 1 << 10:
        return f"{count} ({count / (1 << 10):.1f} KiB)"
    return str(count)


def format_stats_table(program, default_favor=DEFAULT_FAVOR, funcs=None) -> str:
    """The side-by-side table `vmrt stream stats` prints (of `funcs`, default all)."""
    blocks = []
    for func in funcs or program.funcs:
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
    funcs = [program.func(args.function)] if args.function else program.funcs
    if args.svg:
        from vmrt.stream.picture import favors_picture
        _save_svg(favors_picture(program, args.function), args.svg)
    if args.json:
        out = []
        for func in funcs:
            analysis = FuncAnalysis(func)
            entry = {"function": func.name,
                     "favor": resolve_favor(program, func, args.partitioning_favor).value,
                     "stats": {f.value: plan(func, f, analysis).stats.as_dict()
                               for f in FAVORS}}
            out.append(entry)
        json.dump({"program": program.name, "functions": out}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(format_stats_table(program, args.partitioning_favor, funcs))
    return 0


def run_schedule(args) -> int:
    program = load_program(args.file)
    funcs = [program.func(args.function)] if args.function else program.funcs
    if args.svg:
        from vmrt.stream.picture import schedule_picture
        _save_svg(schedule_picture(program, args.partitioning_favor, force=args.force,
                                   function=args.function), args.svg)
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
    from vmrt.stream.lower import compile_program, lower_program
    program = load_program(args.file)
    if args.emit == "vmasm":
        data = lower_program(program, args.partitioning_favor, force=args.force).encode()
    else:
        data = compile_program(program, args.partitioning_favor, force=args.force)
    Path(args.output).write_bytes(data)
    return 0


def load_kernels(specs) -> dict:
    """{name: callable} from .py files or module names defining KERNELS."""
    kernels: dict = {}
    for spec in specs:
        if spec.endswith(".py") or os.sep in spec:
            path = Path(spec)
            if not path.is_file():
                raise VmrtError(f"kernel file '{spec}' not found", StatusCode.NOT_FOUND)
            module_spec = importlib.util.spec_from_file_location(
                f"_vmrt_stream_kernels_{len(kernels)}_{path.stem}", path)
            module = importlib.util.module_from_spec(module_spec)
            # A kernel file next to its example may import its siblings.
            sys.path.insert(0, str(path.resolve().parent.parent))
            try:
                module_spec.loader.exec_module(module)
            finally:
                sys.path.pop(0)
        else:
            try:
                module = importlib.import_module(spec)
            except ImportError as error:
                raise VmrtError(f"cannot import kernel module '{spec}': {error}",
                                StatusCode.NOT_FOUND) from None
        table = getattr(module, "KERNELS", None)
        if not isinstance(table, dict):
            raise VmrtError(f"'{spec}' defines no KERNELS dict of kernel name -> callable",
                            StatusCode.INVALID_ARGUMENT)
        kernels.update(table)
    return kernels


def _read_input(spec: str, size: int | None) -> bytes:
    if spec == "zeros":
        if size is None:
            raise VmrtError("`zeros` needs the program text to know the size",
                            StatusCode.INVALID_ARGUMENT)
        return bytes(size)
    if not spec.startswith("@"):
        raise VmrtError(f"unsupported input '{spec}' (expected @FILE or zeros)",
                        StatusCode.INVALID_ARGUMENT)
    path = spec[1:]
    if path.endswith(".npy"):
        import numpy as np
        try:
            return np.ascontiguousarray(np.load(path, allow_pickle=False)).tobytes()
        except ValueError as error:
            raise VmrtError(f"cannot read '{path}': {error}",
                            StatusCode.INVALID_ARGUMENT) from None
    return Path(path).read_bytes()


def _parameter_providers(specs):
    from vmrt.io import IndexProvider, ParameterIndex, split_scope
    return [IndexProvider(scope, ParameterIndex.load(path))
            for scope, path in map(split_scope, specs)]


def run_run(args) -> int:
    from vmrt.stream.runtime import StreamRunner

    program, module = _load_program_or_module(args)
    function = _chosen_function(module, args.function)
    sizes = ([v.type.size for v in program.func(function).args] if program is not None
             else [None] * len(args.input))
    if len(args.input) != len(sizes):
        raise VmrtError(f"@{function} takes {len(sizes)} arguments but {len(args.input)} "
                        "--input values were given", StatusCode.INVALID_ARGUMENT)
    inputs = [_read_input(spec, size) for spec, size in zip(args.input, sizes)]
    kernels = load_kernels(args.kernels)
    providers = _parameter_providers(args.parameters)
    with Recording(args.trace_json) as recording:
        try:
            runner = StreamRunner(module, kernels, device=args.device, parameters=providers,
                                  hooks=recording.hooks)
        except VmrtError as error:
            raise error.annotate(f"initializing the module ({len(kernels)} kernels from "
                                 "--kernels, parameters from --parameters)")
        with runner:
            results = runner.call(function, inputs)
    out = sys.stdout
    out.write(f"EXEC @{function}\n")
    for index, result in enumerate(results):
        digest = hashlib.sha256(result.tobytes()).hexdigest()[:16]
        out.write(f"result[{index}]: {result.size} bytes, sha256 {digest}\n")
    _write_outputs(args.output, results)
    if args.check:
        return _check_results(program, function, inputs, kernels, providers, results, out)
    return 0


def _load_program_or_module(args):
    """(program or None, module) of --file: a compiled module as it is, program text
    compiled with the chosen favor (--check needs the text)."""
    from vmrt.stream.lower import compile_program
    from vmrt.vm.module import load_module

    data = Path(args.file).read_bytes()
    # A module is a (possibly size-prefixed) FlatBuffer with identifier IREE, or a ZIP.
    if b"IREE" in data[4:12] or data[:4] == b"PK\x03\x04":
        module = load_module(data)
        if args.check:
            raise VmrtError("--check needs the program text, not a compiled module",
                            StatusCode.INVALID_ARGUMENT)
        return None, module
    program = load_program(args.file)
    return program, load_module(compile_program(program, args.partitioning_favor,
                                                force=args.force))


def _chosen_function(module, function: str | None) -> str:
    """--function, or the one public export when there is only one."""
    names = [n for n in module.export_names() if not n.startswith("__")]
    chosen = function or (names[0] if len(names) == 1 else "")
    if chosen not in names:
        raise VmrtError(f"choose a function with --function (one of: {', '.join(names)})"
                        if not function else f"no function @{chosen} in the module",
                        StatusCode.INVALID_ARGUMENT if not function
                        else StatusCode.NOT_FOUND)
    return chosen


def _write_outputs(specs, results) -> None:
    """--output=@FILE per result (.npy as numpy, else raw bytes); empty skips one."""
    if not specs:
        return
    if len(specs) != len(results):
        raise VmrtError(f"{len(specs)} outputs given for {len(results)} results",
                        StatusCode.INVALID_ARGUMENT)
    for spec, result in zip(specs, results):
        if not spec:
            continue
        if not spec.startswith("@"):
            raise VmrtError(f"unsupported output '{spec}' (expected @FILE)",
                            StatusCode.INVALID_ARGUMENT)
        if spec.endswith(".npy"):
            import numpy as np
            np.save(spec[1:], result, allow_pickle=False)
        else:
            Path(spec[1:]).write_bytes(result.tobytes())


def _check_results(program, function, inputs, kernels, providers, results, out) -> int:
    """--check: 0 when every result is bit-identical to the numpy evaluation."""
    import numpy as np

    from vmrt.io import ProviderSet
    from vmrt.stream.evaluate import evaluate
    expected = evaluate(program, function, inputs, kernels, ProviderSet(providers))
    mismatched = [i for i, (a, b) in enumerate(zip(results, expected))
                  if not np.array_equal(a, b)]
    if mismatched:
        out.write(f"[FAILED] results {mismatched} differ from the numpy evaluation\n")
        return 1
    out.write("[SUCCESS] every result is bit-identical to the numpy evaluation\n")
    return 0


def _listing_failures(args, call, *call_args):
    """call(*call_args); with --verbose, a failed import first lists every op it could
    not map on stderr (the error itself stays one line)."""
    from vmrt.stream.importer import ImportFailed
    try:
        return call(*call_args)
    except ImportFailed as failure:
        if args.verbose:
            sys.stderr.write("".join(f"cannot import: {line}\n" for line in failure.details()))
        raise


def run_import(args) -> int:
    from vmrt.stream.importer import import_model, import_stream_ir, write_constants
    if args.stream_ir:
        try:
            text = Path(args.file).read_text()
        except OSError as error:
            raise VmrtError(f"cannot read '{args.file}': {error.strerror}",
                            StatusCode.NOT_FOUND) from None
        imported = _listing_failures(args, import_stream_ir, text, Path(args.file).stem)
    else:
        imported = _listing_failures(args, import_model, args.file, args.compile_args)
    text = imported.text(source=args.file)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    if args.constants:
        write_constants(imported, args.constants)
    elif imported.constants:
        sys.stderr.write(f"note: {len(imported.constants)} constants are loaded from "
                         "scope \"constants\"; write them with --constants=OUT.irpa\n")
    return 0


def run_compare(args) -> int:
    from vmrt.stream.compare import comparison_json, compare_model, format_comparison
    comparison = _listing_failures(args, compare_model, args.file, args.compile_args)
    if args.json:
        json.dump(comparison_json(comparison), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_comparison(comparison))
    return 0
