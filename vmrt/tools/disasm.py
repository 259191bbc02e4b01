"""Print a module as vmasm (the format of iree-dump-module --output=disassembly).

    vmrt disasm MODULE [--function=F] [--bytecode-offsets]

`--function` keeps one function, by name or internal ordinal. The text
assembles back with `vmrt asm`.
"""

from __future__ import annotations

import sys

from vmrt.asm import disassemble
from vmrt.format import read_module


def add_arguments(parser) -> None:
    parser.add_argument("module", help="a .vmfb file")
    parser.add_argument("--function", default=None, metavar="F",
                        help="only this function (name or internal ordinal)")
    parser.add_argument("--bytecode-offsets", "--bytecode_offsets", action="store_true",
                        dest="bytecode_offsets",
                        help="prefix every line with its bytecode offset [XXXXXXXX]")


def run(args) -> int:
    module = read_module(args.module)
    text = disassemble(module, function=args.function, bytecode_offsets=args.bytecode_offsets)
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()
    return 0
