"""`vmrt` entry point: subcommand dispatch and the one place errors become exit codes.

A vmrt error prints one line (`vmrt: error: ...`) and exits 1; no traceback
unless VMRT_TRACEBACK=1 is set.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from vmrt.errors import VmrtError

# subcommand -> module under vmrt.tools defining add_arguments(parser) and run(args).
SUBCOMMANDS = {
    "asm": "vmrt.tools.asm",
    "check": "vmrt.tools.check",
    "disasm": "vmrt.tools.disasm",
    "dump": "vmrt.tools.dump",
    "params": "vmrt.tools.params",
    "run": "vmrt.tools.run",
    "test": "vmrt.tools.test",
    "stream": "vmrt.tools.stream",
}


class UsageError(Exception):
    """A command line argparse rejects (printed as one line, exit status 1, as
    IREE's tools do)."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="vmrt", description="Run and inspect IREE VM bytecode modules.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or "").strip().splitlines()
        sub_parser = sub.add_parser(name, help=doc[0] if doc else None,
                                    description=doc[0] if doc else None)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(run=module.run)
    return parser


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
    interrupts = _Interrupts()
    try:
        return _main(argv, interrupts)
    finally:
        interrupts.restore()


def _main(argv, interrupts: _Interrupts) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.run(args) or 0)
    except UsageError as error:
        print(error, file=sys.stderr)
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
