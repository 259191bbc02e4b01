"""`vmrt` entry point: subcommand dispatch and the one place errors become exit codes.

A vmrt error prints one line (`vmrt: error: ...`) and exits 1; no traceback
unless VMRT_TRACEBACK=1 is set. Command lines read as IREE's tools read them:
flags only as spelled (no abbreviations) and `--flagfile=FILE` (vmrt.tools.flags).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from vmrt.errors import UsageError, VmrtError
from vmrt.tools.flags import FLAGFILE_HELP, expand_flagfiles

# subcommand -> (module under vmrt.tools defining add_arguments(parser) and run(args),
# its one-line summary). Only the chosen subcommand's module is imported (start-up
# time): `vmrt --help` lists the others from here. Each summary is the first
# paragraph of its module's docstring, which the subcommand's --help shows.
SUBCOMMANDS = {
    "asm": ("vmrt.tools.asm", "Assemble vmasm text into a .vmfb module (as iree-as-module "
                              "does)."),
    "check": ("vmrt.tools.check", "Run every export of a module as a test against the "
                                  "`check` module (iree-check-module)."),
    "compile": ("vmrt.tools.compile", "Compile a model (.onnx, or .mlir: StableHLO, linalg, "
                                      "torch) into a .vmfb for this machine."),
    "disasm": ("vmrt.tools.disasm", "Print a module as vmasm (the format of "
                                    "iree-dump-module --output=disassembly)."),
    "dump": ("vmrt.tools.dump", "Print a module's metadata, disassembly or FlatBuffer (as "
                                "iree-dump-module does)."),
    "example": ("vmrt.tools.example", "Print where the bundled examples are: every file, "
                                      "or the path of one."),
    "params": ("vmrt.tools.params", "Create, inspect and convert parameter files (.irpa, "
                                    ".safetensors, .gguf)."),
    "ray": ("vmrt.tools.ray", "Run a module's function over a folder of inputs on a Ray "
                              "cluster (vmrt.ray)."),
    "run": ("vmrt.tools.run", "Run one exported function, with iree-run-module's flags and "
                              "output."),
    "script": ("vmrt.tools.script", "Compile a script in Python syntax (vmrt.script) into a "
                                    ".vmfb module."),
    "test": ("vmrt.tools.test", "Run a module's test exports: `test_*` must succeed and "
                                "`fail_*` must fail."),
    "stream": ("vmrt.tools.stream", "Partition stream programs (text form) into waves, "
                                    "report their transient memory, lower them to VM "
                                    "modules and run them."),
}


class _ArgumentParser(argparse.ArgumentParser):
    """Flags are taken as spelled, never abbreviated (`--func` is not `--function`),
    as in IREE's tools; subparsers are of this class too."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}{self._suggestion(message)}")

    def _suggestion(self, message: str) -> str:
        """` (did you mean --function?)` for mistyped flags among unrecognized ones
        (argparse names none; the flags are the subcommands' too)."""
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return ""
        import difflib
        known = set(self._option_string_actions)
        for action in self._actions:
            for sub in (getattr(action, "choices", None) or {}).values():
                known.update(getattr(sub, "_option_string_actions", ()))
        meant = []
        for argument in message[len(prefix):].split():
            if argument.startswith("--"):
                meant += difflib.get_close_matches(argument.split("=")[0], known, n=1)
        return f" (did you mean {', '.join(meant)}?)" if meant else ""


class _VersionAction(argparse.Action):
    """--version: `vmrt VERSION`, looked up only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the vmrt version and exit"):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"vmrt {version()}")
        parser.exit()


def version() -> str:
    """The installed distribution's version."""
    from importlib import metadata
    try:
        return metadata.version("vmrt")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "(unknown version: not installed)"


def command_in(argv: list[str]) -> str | None:
    """The subcommand `argv` (flag files expanded) names: its first argument that is
    not a flag, as vmrt's own flags but --flagfile take no values."""
    return next((argument for argument in argv if not argument.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `vmrt` parser, with the arguments of `command` (only its module is imported)."""
    parser = _ArgumentParser(prog="vmrt", description="Run and inspect IREE VM bytecode "
                                                      "modules.")
    parser.add_argument("--version", action=_VersionAction)
    _add_flagfile_help(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, summary) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=summary, description=summary)
        if name == command:
            _add_subcommand(sub_parser, importlib.import_module(module_name))
    return parser


def _add_subcommand(parser: argparse.ArgumentParser, module) -> None:
    """The module's arguments; its docstring is the --help text: the first paragraph
    above the flags, the rest (usage and details, as written) below them."""
    doc = (module.__doc__ or "").strip()
    summary, _, details = doc.partition("\n\n")
    parser.description = summary
    parser.epilog = details or None
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _add_flagfile_help(parser)
    module.add_arguments(parser)
    parser.set_defaults(run=module.run)


def _add_flagfile_help(parser: argparse.ArgumentParser) -> None:
    # For --help only: main() puts the flags of flag files in their place before parsing.
    parser.add_argument("--flagfile", metavar="FILE", help=FLAGFILE_HELP)


def _fail(message: str, code: int) -> int:
    print(f"vmrt: error: {message}", file=sys.stderr)
    return code


class _Interrupts:
    """While the command runs, Ctrl-C raises KeyboardInterrupt as it does by default,
    and is remembered: a C extension may turn it into another error (an import
    failing half-way), which then still ends the command as a Ctrl-C."""

    def __init__(self):
        self.seen = False
        self._previous = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._interrupt)

    def _interrupt(self, signum, frame):
        self.seen = True
        raise KeyboardInterrupt

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def main(argv: list[str] | None = None) -> int:
    interrupts = None
    try:
        interrupts = _Interrupts()
        return _main(argv, interrupts)
    except KeyboardInterrupt:  # (a Ctrl-C while the handler is being put in place)
        return 130
    finally:
        if interrupts is not None:
            interrupts.restore()


def _main(argv, interrupts: _Interrupts) -> int:
    try:
        argv = expand_flagfiles(sys.argv[1:] if argv is None else list(argv))
        args = build_parser(command_in(argv)).parse_args(argv)
        return int(args.run(args) or 0)
    except UsageError as error:
        print(error.message, file=sys.stderr)
        return 1
    except VmrtError as error:
        if os.environ.get("VMRT_TRACEBACK"):
            raise
        return _fail(error.one_line().replace("\n", " "), 1)
    except BrokenPipeError:
        return 0
    except OSError as error:
        if os.environ.get("VMRT_TRACEBACK"):
            raise
        name = f": {error.filename}" if error.filename else ""
        return _fail(f"{error.strerror or error}{name}", 1)
    except KeyboardInterrupt:
        return 130
    except Exception:
        if interrupts.seen:
            return 130
        raise


if __name__ == "__main__":
    sys.exit(main())
