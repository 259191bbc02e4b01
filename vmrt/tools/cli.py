"""`vmrt` entry point: subcommand dispatch and the one place errors become exit codes.

A vmrt error prints one line (`vmrt: error: ...`) and exits 1; no traceback
unless VMRT_TRACEBACK=1 is set.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from vmrt.errors import VmrtError

# subcommand -> module under vmrt.tools defining add_arguments(parser) and run(args).
SUBCOMMANDS = {
    "asm": "vmrt.tools.asm",
    "disasm": "vmrt.tools.disasm",
    "dump": "vmrt.tools.dump",
    "params": "vmrt.tools.params",
    "run": "vmrt.tools.run",
    "test": "vmrt.tools.test",
    "stream": "vmrt.tools.stream",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except VmrtError as error:
        if os.environ.get("VMRT_TRACEBACK"):
            raise
        return _fail(error.one_line().replace("\n", " "), 1)
    except OSError as error:
        if os.environ.get("VMRT_TRACEBACK"):
            raise
        name = f": {error.filename}" if error.filename else ""
        return _fail(f"{error.strerror or error}{name}", 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
