"""Assemble vmasm text into a .vmfb module (as iree-as-module does).

    vmrt asm IN.vmasm [-o OUT.vmfb]

Without -o the output goes next to the input with a .vmfb suffix; `-` reads
standard input (then -o is required). Errors are printed as
`file:line:col: error: message` with the source line and a caret, all of
them, and the exit code is 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vmrt.asm import AssemblyError, assemble


def add_arguments(parser) -> None:
    parser.add_argument("input", help="a .vmasm file (or - for standard input)")
    parser.add_argument("-o", "--output", help="the .vmfb to write")


def run(args) -> int:
    if args.input == "-":
        if not args.output:
            print("vmrt: error: -o is required when reading standard input", file=sys.stderr)
            return 1
        text, name = sys.stdin.read(), "<stdin>"
    else:
        path = Path(args.input)
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        name = args.input
    try:
        data = assemble(text, filename=name)
    except AssemblyError as error:
        print(error.format(), file=sys.stderr)
        count = len(error.diagnostics)
        print(f"{count} error{'s' if count != 1 else ''}", file=sys.stderr)
        return 1
    output = Path(args.output) if args.output else Path(args.input).with_suffix(".vmfb")
    output.write_bytes(data)
    return 0
