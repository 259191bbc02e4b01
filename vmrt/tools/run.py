"""Run one exported function, with iree-run-module's flags and output.

    vmrt run --module=M.vmfb [--module=...] [--function=F] [--input=V ...]
             [--output=SPEC ...] [--expected_output=V ...]

Modules are registered in flag order (dependencies first; a `--module` is read as
vmrt.load reads it: a .vmfb, vmasm text, which is assembled, or an .onnx or .mlir
model, compiled for this machine or found in the compile cache); `--function` names
an export of the last module (or `module.function` of any registered module;
with one non-internal export it may be left out). Inputs are parsed by the
function's signature (`--input=5`, `--input=-1.5`, `--input=(null)`) and
stdout is what iree-run-module prints: `EXEC @F`, then `result[N]: i32=7`
lines. `--output=` takes `-` (the value as its result line shows it: a buffer
view under a `hal.buffer_view` line), `` (skip), `@file.npy`, `+file.npy`,
`@file.bin` and `+file.bin`; `--expected_output=` compares the results (tensors
within `--expected_f32_threshold` etc., or `--equality_mode=exact`), prints
`[SUCCESS]` or `[FAILED]` lines with expected and actual, and exits 1 on a
mismatch. `--output_max_element_count` (alias `--print_max_element_count`)
bounds the elements a tensor result prints; `--print_statistics` prints each
device's allocation counts (vmrt's, not upstream's table) to stderr at the end;
`--module_mode` is accepted so iree-run-module command lines work unchanged.
`--parameters=[SCOPE=]FILE` (.irpa, .safetensors, .gguf;
repeatable) feeds the io_parameters module of modules importing it, with the
files mapped (`--parameter_mode=mmap`, the default), read (`file`) or
preloaded (`preload`). Modules importing `yieldable_test`
get vmrt's twin of upstream's test module; modules importing `hal` get the host
HAL (`--device=local-sync|local-task`). `--trace_execution` prints every executed
op with its operand values to stderr (upstream's tracing format) and `--profile`
prints instructions and time per function to stderr when the run ends;
`--trace_json=FILE` writes a Chrome trace of the run (vmrt.tools.trace_json).
`--fuel`, `--timeout`, `--max_memory` and `--max_depth` run the call under
vmrt.vm.limits.Limits (a module you do not trust: one error line when one runs out).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path

from vmrt.errors import StatusCode, VMError, VmrtError, file_error
from vmrt.tools import function_io as fio
from vmrt.tools.trace_json import Recording, add_trace_json_flag
from vmrt.vm.context import Context, Function, Instance
from vmrt.vm.module import load_module
from vmrt.modules.natives import explain_device_target, native_modules_for


def add_arguments(parser) -> None:
    parser.add_argument("--module", action="append", default=[], metavar="FILE",
                        help="a .vmfb to register, in order (repeatable; `-` reads stdin); "
                             "the last one holds --function")
    parser.add_argument("--function", default="", metavar="NAME",
                        help="export to run: NAME in the last module or MODULE.NAME")
    parser.add_argument("--input", action="append", default=[], metavar="VALUE",
                        help="an argument, parsed by the function's signature (repeatable)")
    parser.add_argument("--output", action="append", default=[], metavar="SPEC",
                        help="per result: `-` print, `` ignore, `@f.npy`/`+f.npy`/`@f.bin`/"
                             "`+f.bin` write or append")
    parser.add_argument("--expected_output", action="append", default=[], metavar="VALUE",
                        help="compare results against these values (`(ignored)` skips one; "
                             "tensors as --input takes them)")
    parser.add_argument("--equality_mode", default="approximate",
                        choices=("approximate", "exact"),
                        help="how --expected_output compares float tensors: within "
                             "`atol + rtol * abs(expected)` (NaN equals NaN), or byte for byte")
    for name, atol in (("f16", 0.001), ("f32", 0.0001), ("f64", 0.0001), ("bf16", 0.01)):
        parser.add_argument(f"--expected_{name}_threshold", type=float, default=atol,
                            metavar="ATOL", help=f"absolute tolerance for {name} elements in "
                                                 "approximate mode")
    parser.add_argument("--expected_rtol", type=float, default=1e-5, metavar="RTOL",
                        help="relative tolerance for float elements in approximate mode")
    parser.add_argument("--trace_execution", nargs="?", const="true", default="false",
                        metavar="BOOL", help="trace every executed VM op, with its operand "
                                             "values, to stderr (iree-run-module's format)")
    parser.add_argument("--profile", nargs="?", const="true", default="false", metavar="BOOL",
                        help="count executed VM instructions and time per function; the "
                             "table goes to stderr")
    add_trace_json_flag(parser)
    parser.add_argument("--device", action="append", default=[], metavar="URI",
                        help="the HAL device of modules importing `hal`: local-sync (the "
                             "default) or local-task (the last one given)")
    parser.add_argument("--output_max_element_count", "--print_max_element_count",
                        dest="max_element_count", type=int, default=1024, metavar="N",
                        help="print at most N elements of a tensor result (then `...`)")
    parser.add_argument("--print_statistics", nargs="?", const="true", default="false",
                        metavar="BOOL", help="print each device's allocation counts to "
                                             "stderr when the run ends")
    ignored = parser.add_argument_group("accepted for iree-run-module compatibility (no "
                                        "effect: module files are always mapped)")
    ignored.add_argument("--module_mode", default="preload", choices=("preload", "mmap"))
    _add_limits_and_parameters(parser)


def _add_limits_and_parameters(parser) -> None:
    limits = parser.add_argument_group("limits (for modules you do not trust; see vmrt.vm.limits)")
    limits.add_argument("--fuel", type=int, metavar="N",
                        help="instructions the call may execute (RESOURCE_EXHAUSTED beyond)")
    limits.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="wall-clock time the call may run (DEADLINE_EXCEEDED beyond)")
    limits.add_argument("--max_memory", type=int, metavar="BYTES",
                        help="bytes of vm.buffer, vm.list and HAL allocations it may hold")
    limits.add_argument("--max_depth", type=int, metavar="N",
                        help="VM call stack depth (at most 10000)")
    limits.add_argument("--native_under_limits", action="store_true",
                        help="run native (llvm-cpu) executables under limits all the same: "
                             "their machine code is not metered or interruptible")
    params = parser.add_argument_group("parameters (modules importing io_parameters)")
    params.add_argument("--parameters", action="append", default=[], metavar="[SCOPE=]FILE",
                        help="a parameter archive (.irpa, .safetensors, .gguf) for SCOPE "
                             "(the global scope without `SCOPE=`); repeatable")
    params.add_argument("--parameter_mode", default="mmap", choices=("mmap", "file", "preload"),
                        help="map parameter files (zero-copy loads), read them with pread, "
                             "or read them whole into memory up front")


# ---------------------------------------------------------------------------
# Modules and the function
# ---------------------------------------------------------------------------
def _load(spec: str):
    """The module of a --module value, loaded as vmrt.load loads it (a .vmfb mapped,
    vmasm assembled, MLIR refused with what to do instead)."""
    if spec == "-":
        path, data = "<stdin>", sys.stdin.buffer.read()
    else:
        # iree-run-module reads `path@export?params` (for shared libraries);
        # a bytecode module takes the path before '@'.
        path = spec
        if "@" in spec and not os.path.exists(spec):
            path = spec.split("@", 1)[0]
        try:  # (checked here for iree-run-module's message; module_from_file maps it)
            with open(path, "rb"):
                data = None
        except OSError as error:
            # (iree-run-module's text and status, whatever the OSError)
            raise file_error(error, f"failed to open file '{path}'",
                             StatusCode.NOT_FOUND).annotate(
                f"loading bytecode module at '{path}'") from None
    if data is None and Path(path).suffix.lower() in (".onnx", ".mlir", ".mlirbc"):
        return _compiled(path)
    try:
        if data is None and path.endswith(".vmfb"):
            # (mapped by load_module, as module_from_file would: vmrt.api is imported
            # only for other files, `vmrt run`'s start-up being measured)
            return load_module(path), path
        from vmrt.api import module_from, module_from_file
        return (module_from(data) if data is not None else module_from_file(Path(path))), path
    except VmrtError as error:
        raise error.annotate(f"loading bytecode module at '{path}'")


def _compiled(path: str):
    """The module of an .onnx or .mlir file, compiled for this machine (or found in the
    compile cache: vmrt.compiler), and the build (its entry, its .irpa)."""
    from vmrt.tools.compile import build_with_progress
    try:
        made = build_with_progress(Path(path), None)
    except VmrtError as error:
        raise error.annotate(f"compiling '{path}'")
    return load_module(made.vmfb), made


def device_from_flags(devices) -> str:
    """The device the `--device` flags name (the last one wins; local-sync by default)."""
    device = devices[-1] if devices else "local-sync"
    if device not in ("local-sync", "local-task"):
        raise VmrtError(f"device '{device}' is not available (vmrt has local-sync and "
                        "local-task)", StatusCode.NOT_FOUND)
    return device


def load_parameters(specs, mode: str = "mmap"):
    """The ParameterScopes of `--parameters` values, as iree-run-module builds them
    (None without any: vmrt.io is not loaded for modules that take no parameters)."""
    if not specs:
        return None
    from vmrt.io import ParameterScopes
    scopes = ParameterScopes()
    for spec in specs:
        try:
            scopes.add_spec(spec, mode=mode)
        except VmrtError as error:
            raise error.annotate(f"loading parameters from `{spec}`")
    return scopes


def resolve_function(context: Context, main, name: str) -> Function:
    """The export `name` of the main (last) module, or `module.name`, or the
    only non-internal export when `name` is empty (as iree-run-module)."""
    candidates = [n for n in main.export_names() if not n.startswith("__") and "$" not in n]
    if not name:
        if not candidates:
            raise VmrtError("no exported functions found in module; at least one must be "
                            "present", StatusCode.INVALID_ARGUMENT)
        if len(candidates) > 1:
            raise VmrtError(f"more than one exported function present ({', '.join(candidates)}"
                            "); --function= must be specified explicitly",
                            StatusCode.INVALID_ARGUMENT)
        return context.function(main.name, candidates[0])
    if name in main.export_names():
        return context.function(main.name, name)
    module_name, dot, export = name.partition(".")
    if dot:
        for instance in context.instances:
            if instance.module.name == module_name and export in instance.module.export_names():
                return context.function(module_name, export)
    raise VmrtError(f"no function `{name}` exported by module '{main.name}'"
                    f"{_suggestion(name, candidates)}",
                    StatusCode.NOT_FOUND).annotate(f"looking up function '{name}'")


def _suggestion(name: str, candidates: list[str]) -> str:
    """` (did you mean `gcd`?)` for a misspelt export, else the exports there are
    (iree-run-module names neither)."""
    import difflib
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return f" (did you mean `{close[0]}`?)"
    return f" (it exports {', '.join(candidates)})" if candidates else ""


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------
def _result_list(result, kinds: list[str]) -> list:
    if not kinds:
        return []
    if len(kinds) == 1:
        return [result]
    return list(result)


def print_results(results: list, kinds: list[str], out, max_element_count: int = 1024) -> None:
    for index, (kind, value) in enumerate(zip(kinds, results)):
        out.write(f"result[{index}]: {fio.format_value(kind, value, max_element_count)}\n")


def parse_inputs(fragment: str, specs, hal, streams, expected: bool = False) -> list:
    """Arguments from --input values: scalars as iree-run-module parses them, and for
    ref arguments buffer views (`2x3xf32=1 2 3 4 5 6`, splats, `@f.npy`, ...).
    With `expected` (--expected_output values), `(ignored)` is fio.IGNORED."""
    if "r" not in fragment or hal is None or "C" in fragment:
        return fio.parse_values(fragment, specs, expected=expected)
    from vmrt.hal.buffer_view_io import parse_tensor_input
    kinds = [c for c in fragment if c != "v"]
    values: list = []
    for spec in specs:
        kind = kinds[len(values)] if len(values) < len(kinds) else "r"
        if kind == "r" and expected and spec.strip() == "(ignored)":
            values.append(fio.IGNORED)
        elif kind == "r":
            try:
                values.extend(parse_tensor_input(spec, hal.devices[0], streams))
            except VmrtError as error:
                raise error.annotate(f"parsing input `{spec.strip()}`")
        else:
            values.extend(fio.parse_values(kind, [spec], expected=expected))
    return values


def _input_streams(hal):
    """The files `--input=@f.npy` values read, open across inputs; only tensor
    inputs read them, and those need the HAL (so scalar runs load none of it)."""
    if hal is None:
        return contextlib.nullcontext()
    from vmrt.hal.buffer_view_io import InputStreams
    return InputStreams()


def _append_async_fences(function: Function, values: list, hal):
    """For an async function (`iree.abi.model` = `coarse-fences`, iree-compile's
    --iree-execution-model=async-external): appends a null wait fence and a new
    signal fence, as iree-run-module does; returns the fence to wait on, or None."""
    attrs = function.instance.module.export_attrs(function.name)
    if attrs.get("iree.abi.model") != "coarse-fences":
        return None
    if hal is None or not hal.devices:
        raise VmrtError("coarse-fences invocation requires a HAL device to create "
                        "wait/signal fences, but the module does not depend on the hal "
                        "module", StatusCode.FAILED_PRECONDITION).annotate(
            "setting up async-external fence inputs")
    finish = hal.devices[0].create_fence()
    values.extend([None, finish])
    return finish


def write_outputs(results: list, kinds: list[str], specs: list[str], out,
                  max_element_count: int = 1024) -> None:
    if len(specs) != len(results):
        raise VmrtError(f"{len(specs)} outputs specified but the provided variant list only "
                        f"has {len(results)} elements", StatusCode.OUT_OF_RANGE)
    for kind, value, spec in zip(kinds, results, specs):
        if spec == "":
            continue
        if spec == "-":  # as a result line prints it, without the `result[N]: `
            out.write(fio.format_value(kind, value, max_element_count) + "\n")
            continue
        tensor = kind == "r" and fio.is_buffer_view(value)
        if spec[0] not in "@+":
            raise VmrtError(f"unsupported output mode specification '{spec}'",
                            StatusCode.UNIMPLEMENTED)
        path = spec[1:]
        if tensor:
            import io

            import numpy as np

            from vmrt.hal.buffer_view_io import buffer_view_to_numpy
            array = buffer_view_to_numpy(value)
            if path.endswith(".npy"):
                buffer = io.BytesIO()
                np.save(buffer, array, allow_pickle=False)
                payload = buffer.getvalue()
            else:
                payload = array.tobytes()
        else:
            descr, shape, data = fio.output_payload(kind, value)
            payload = fio.npy_bytes(descr, shape, data) if path.endswith(".npy") else data
        try:
            with open(path, "wb" if spec[0] == "@" else "ab") as file:
                file.write(payload)
        except OSError as error:
            raise VmrtError(f"unable to open file `{path}`: {error.strerror or error}",
                            StatusCode.UNKNOWN) from None


def _same(kind: str, expected, actual) -> bool:
    if kind in "fF" and math.isnan(expected) and math.isnan(actual):
        return True
    return expected == actual


def _shown(kind: str, value) -> str:
    return fio.format_g(value, upper=True) if kind in "fF" else str(value)


def _equality(args):
    """The vmrt.hal.buffer_view_match.Equality the --equality_mode and
    --expected_*_threshold/--expected_rtol flags ask for."""
    from vmrt.hal.buffer_view_match import Equality
    return Equality(args.equality_mode, f16_atol=args.expected_f16_threshold,
                    bf16_atol=args.expected_bf16_threshold,
                    f32_atol=args.expected_f32_threshold,
                    f64_atol=args.expected_f64_threshold, rtol=args.expected_rtol)


def _ref_mismatch(index: int, want, got, equality) -> str | None:
    """The [FAILED] text of a ref result that does not match, or None (an expected
    `(null)` is, as upstream reads it from its variant list, not compared)."""
    if want is None:
        return None
    if fio.is_buffer_view(want) and fio.is_buffer_view(got):
        from vmrt.hal.buffer_view_io import format_buffer_view
        from vmrt.hal.buffer_view_match import match_equal
        why = match_equal(want, got, equality)
        if why is None:
            return None
        return (f"[FAILED] result[{index}]: {why}\n  expected:\n{format_buffer_view(want)}"
                f"\n  actual:\n{format_buffer_view(got)}")
    got_name = "(null)" if got is None else fio.ref_type_name(got)
    return (f"[FAILED] result[{index}]: variant types mismatch; expected "
            f"{fio.ref_type_name(want)} but got {got_name}")


def check_expected(results: list, kinds: list[str], expected: list, out,
                   equality=None) -> bool:
    """--expected_output: prints [FAILED] lines per mismatch or one [SUCCESS] line.
    `expected` holds parse_inputs(..., expected=True) of the values; tensors are
    compared as iree-run-module compares them (vmrt.hal.buffer_view_match).

    (iree-run-module 3.13.0 reports every scalar as "variant types mismatch;
    expected i32 but got i32": its comparison.cc tests the types inverted.
    vmrt compares the values, with upstream's message formats.)
    """
    lines = []
    if len(expected) != len(results):
        lines.append(f"[FAILED] expected {len(expected)} list elements but {len(results)} "
                     "provided")
    else:
        for index, (kind, want, got) in enumerate(zip(kinds, expected, results)):
            if want is fio.IGNORED:
                continue
            if kind == "r":
                failure = _ref_mismatch(index, want, got, equality)
                if failure is not None:
                    lines.append(failure)
                continue
            if _same(kind, want, got):
                continue
            type_name = fio.TYPE_NAMES[kind]
            lines.append(f"[FAILED] result[{index}]: {type_name} values differ\n"
                         f"  expected: {_shown(kind, want)}\n  actual: {_shown(kind, got)}")
    if not lines:
        lines.append("[SUCCESS] all function outputs matched their expected values.")
    out.write("".join(line + "\n" for line in lines))
    return not lines[0].startswith("[FAILED]")


# ---------------------------------------------------------------------------
# Tracing and profiling
# ---------------------------------------------------------------------------
def _flag_on(value: str) -> bool:
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off"):
        return False
    raise VmrtError(f"invalid boolean flag value '{value}'", StatusCode.INVALID_ARGUMENT)


def execution_hooks(args) -> list:
    """The hooks --trace_execution and --profile ask for (none: plain, uninstrumented code)."""
    hooks = []
    if _flag_on(getattr(args, "trace_execution", "false")):
        from vmrt.asm.trace import Tracer
        hooks.append(Tracer())
    if _flag_on(getattr(args, "profile", "false")):
        from vmrt.vm.hooks import Profiler
        hooks.append(Profiler())
    return hooks


def _limits(args):
    """The Limits the --fuel/--timeout/--max_memory/--max_depth flags ask for, or None."""
    values = {name: getattr(args, name, None)
              for name in ("fuel", "timeout", "max_memory", "max_depth")}
    if all(value is None for value in values.values()):
        return None
    from vmrt.vm.limits import Limits
    return Limits(**values)


def print_statistics(hal, out) -> None:
    """--print_statistics: per device, what its allocator counted (as iree-run-module
    does after the run, in vmrt's terms: vmrt counts allocations, not frees)."""
    for device in getattr(hal, "devices", ()):
        stats = device.allocator.statistics
        out.write(f"Device: {device.identifier}\n[[ vmrt allocator statistics ]]\n"
                  f"  allocated: {stats.host_bytes_allocated}B in {stats.buffers_allocated} "
                  f"buffers; imported: {stats.buffers_imported} buffers\n\n")


class _profile_report:
    """Prints the profile table to stderr when the run ends, failed or not."""

    def __init__(self, hooks):
        self.profilers = [h for h in hooks if hasattr(h, "report")]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for profiler in self.profilers:
            sys.stdout.flush()
            sys.stderr.write(profiler.report())
        return False


# ---------------------------------------------------------------------------
# The subcommand
# ---------------------------------------------------------------------------
def run(args) -> int:
    if not args.module:
        raise VmrtError("no user module specified; use --module=file.vmfb to load from a "
                        "file or --module=- to load from stdin", StatusCode.INVALID_ARGUMENT)
    loaded = [_load(spec) for spec in args.module]
    modules = [module for module, _ in loaded]
    builds = [made for _, made in loaded if not isinstance(made, str)]
    paths = [made if isinstance(made, str) else spec for spec, (_, made) in zip(args.module,
                                                                                 loaded)]
    for made in builds:  # (a compiled model: its archive, and its entry by default)
        if made.irpa is not None:
            args.parameters = [f"{made.record['parameter_scope']}={made.irpa}",
                               *args.parameters]
    last = loaded[-1][1]
    if not args.function and not isinstance(last, str):  # (the main module was compiled)
        args.function = last.function
    device = device_from_flags(args.device)
    natives = native_modules_for(modules, paths, device,
                                 load_parameters(args.parameters, args.parameter_mode),
                                 native_under_limits=args.native_under_limits)
    hal = next((n for n in natives if n.name == "hal"), None)
    try:
        return _run_in_context(args, modules, natives, hal)
    except VmrtError as error:
        raise explain_device_target(error)
    finally:
        if _flag_on(args.print_statistics):
            sys.stdout.flush()
            print_statistics(hal, sys.stderr)


def _run_in_context(args, modules, natives, hal) -> int:
    out = sys.stdout
    hooks = execution_hooks(args)
    with Recording(args.trace_json) as recording, \
            Context(Instance(), natives + modules, hooks=hooks + recording.hooks,
                    limits=_limits(args)) as context, \
            _input_streams(hal) as streams, _profile_report(hooks):
        function = resolve_function(context, modules[-1], args.function)
        kinds = fio.result_kinds(function.results)
        try:
            values = parse_inputs(function.arguments, args.input, hal, streams)
        except VmrtError as error:
            raise error.annotate("parsing function inputs")
        finish = _append_async_fences(function, values, hal)
        out.write(f"EXEC @{function.name}\n")
        out.flush()
        try:
            expected_count = len(fio.result_kinds(function.arguments))
            if len(values) != expected_count:
                raise VMError(f"input list and function mismatch; expected {expected_count} "
                              f"arguments but passed {len(values)}", StatusCode.INVALID_ARGUMENT)
            results = _result_list(function(*values), kinds)
        except VmrtError as error:
            # (the declaration last, as iree-run-module shows it)
            raise error.annotate(f"invoking function '{function.name}'").annotate(
                f"`{function.declaration}`")
        if finish is not None:
            try:
                finish.wait()
            except VmrtError as error:
                raise error.annotate("waiting on finish fence")
        try:
            if args.expected_output:
                try:
                    expected = parse_inputs(function.results, args.expected_output, hal,
                                            streams, expected=True)
                except VmrtError as error:
                    raise error.annotate("parsing expected function outputs")
                equality = _equality(args) if hal is not None else None
                matched = check_expected(results, kinds, expected, out, equality)
                return 0 if matched else 1
            if args.output:
                try:
                    write_outputs(results, kinds, args.output, out, args.max_element_count)
                except VmrtError as error:
                    raise error.annotate("outputting results")
            else:
                print_results(results, kinds, out, args.max_element_count)
        except VmrtError as error:
            raise error.annotate("processing function outputs")
        finally:
            out.flush()
    return 0
