"""Compile a script in Python syntax (vmrt.script) into a .vmfb module.

    vmrt script compile FILE.py [-o OUT.vmfb] [--module=NAME]

Without -o the module goes next to the script with a .vmfb suffix; the module is
named after the file unless --module says otherwise. A script outside the subset is
reported as `file:line:col: what is not supported; use ...` (exit status 1). Scripts
that import host modules are compiled from Python (vmrt.script.compile(imports=...)),
which has the modules' classes.
"""

from __future__ import annotations

import re
from pathlib import Path

from vmrt.errors import UsageError


def add_arguments(parser) -> None:
    parser.add_argument("action", choices=["compile"], help="what to do (compile)")
    parser.add_argument("input", help="the script (.py)")
    parser.add_argument("-o", "--output", help="the .vmfb to write")
    parser.add_argument("--module", help="the module's name (default: the file's stem)")


def run(args) -> int:
    from vmrt.script import compile as compile_script

    path = Path(args.input)
    name = args.module or re.sub(r"\W", "_", path.stem) or "script"
    if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        raise UsageError(f"--module: '{name}' is not a module name")
    try:
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{args.input}: not UTF-8 text ({error.reason})") from None
    data = compile_script(source, module=name, filename=args.input)
    output = Path(args.output) if args.output else path.with_suffix(".vmfb")
    output.write_bytes(data)
    return 0
