"""Run every export of a module as a test against the `check` module (iree-check-module).

    vmrt check MODULE.vmfb [--module=DEP ...] [--device=local-sync|local-task]
               [--parameters=[SCOPE=]FILE ...] [--module_mode=mmap|preload]
               [--expect_failure] [--no_progress] [--trace_json=FILE]

Each export of MODULE (but `__*` and `$` names) must take and return nothing;
each runs in a fresh context: the host HAL and other native modules MODULE
needs (set up as `vmrt run` does), the `check` module, the dependencies,
MODULE. A test passes when it returns without error and every check it made
held. One line per test (`PASSED`, `FAILED` with the first failed check, its
details and any later failed checks indented below, `ERROR` with the error),
then `N passed, M failed`; the
exit code is 1 on any failure (with `--expect_failure`: 1 when all passed).
On a terminal, a progress bar counts the tests run (with tqdm installed: the
vmrt[progress] extra).
"""

from __future__ import annotations

import sys

from vmrt.errors import StatusCode, VmrtError
from vmrt.modules.check import CheckModule, failures_of
from vmrt.tools import progress
from vmrt.modules.natives import native_modules_for
from vmrt.tools import run as run_tool
from vmrt.tools.trace_json import Recording, add_trace_json_flag
from vmrt.vm.cconv import split_fragments
from vmrt.vm.context import Context, Instance
from vmrt.vm.module import load_module


def add_arguments(parser) -> None:
    parser.add_argument("module", help="the .vmfb whose exports are the tests")
    parser.add_argument("--module", dest="deps", action="append", default=[], metavar="DEP",
                        help="a module to register before MODULE (repeatable)")
    parser.add_argument("--device", action="append", default=[], metavar="URI",
                        help="local-sync (default) or local-task")
    parser.add_argument("--parameters", action="append", default=[], metavar="[SCOPE=]FILE",
                        help="a parameter archive for modules importing io_parameters")
    parser.add_argument("--parameter_mode", default="mmap", choices=("mmap", "file", "preload"))
    parser.add_argument("--module_mode", default="mmap", choices=("mmap", "preload"),
                        help="map the module files (default) or read them into memory")
    parser.add_argument("--expect_failure", nargs="?", const="true", default="false",
                        metavar="BOOL", help="succeed only when some test fails")
    progress.add_no_progress_flag(parser)
    add_trace_json_flag(parser)


def _load(path: str, mode: str):
    if mode == "preload":
        return run_tool._load(path)[0]
    try:
        return load_module(path)
    except VmrtError as error:
        raise error.annotate(f"loading bytecode module at '{path}'")


def tests_of(module) -> list[str]:
    """The exports iree-check-module registers as tests (INVALID_ARGUMENT for
    one taking arguments or returning results)."""
    names = []
    for name in module.export_names():
        if name.startswith("__") or "$" in name:
            continue
        cconv = module.export_cconv(name) or ""
        if any(split_fragments(cconv)):
            raise VmrtError(f"expected function with no inputs or outputs, but export "
                            f"'{name}' has signature '{cconv}'", StatusCode.INVALID_ARGUMENT)
        names.append(name)
    return names


def run_test(instance, modules, paths, name: str, device: str, parameters,
             hooks=()) -> tuple:
    """('PASSED'|'FAILED'|'ERROR', message) of one export in a fresh context."""
    main = modules[-1]
    try:
        natives = native_modules_for(modules, paths, device, parameters)
        with Context(instance, natives + [CheckModule()] + modules, hooks=hooks) as context:
            context.function(main.name, name)()
            failures = failures_of(context)
    except VmrtError as error:
        return "ERROR", error.one_line().replace("\n", " ")
    if not failures:
        return "PASSED", ""
    # The first failed check heads the line; its details and the later ones follow.
    return "FAILED", "\n".join(failures[:1] + ["  " + line for failure in failures[1:]
                                                 for line in failure.splitlines()])


def run(args) -> int:
    paths = args.deps + [args.module]
    modules = [_load(path, args.module_mode) for path in paths]
    device = run_tool.device_from_flags(args.device)
    parameters = run_tool.load_parameters(args.parameters, args.parameter_mode)
    instance = Instance()
    out = sys.stdout
    passed = failed = 0
    names = tests_of(modules[-1])
    with Recording(args.trace_json) as recording, \
            progress.progress_bar(len(names), modules[-1].name, "test", args) as bar:
        for name in names:
            outcome, message = run_test(instance, modules, paths, name, device, parameters,
                                        recording.hooks)
            headline, _, details = message.partition("\n")
            line = f"{outcome} {modules[-1].name}.{name}" + (f": {headline}" if headline else "")
            # Through the bar: on a terminal it steps aside for the line.
            bar.write(line + ("\n" + details if details else ""), file=out)
            out.flush()
            bar.update()
            passed += outcome == "PASSED"
            failed += outcome != "PASSED"
    out.write(f"{passed} passed, {failed} failed\n")
    out.flush()
    if run_tool._flag_on(args.expect_failure):
        return 0 if failed else 1
    return 1 if failed else 0
