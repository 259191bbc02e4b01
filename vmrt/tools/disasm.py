"""Print a module as vmasm (the format of iree-dump-module --output=disassembly).

    vmrt disasm MODULE [--function=F] [--bytecode_offsets]

`--function` keeps one function, by name or internal ordinal. The text
assembles back with `vmrt asm`: where upstream prints two functions under one
name, the second is `@fnN` here (`vmrt dump --output=disassembly` prints
upstream's names).
"""

from __future__ import annotations

import sys

from vmrt.format import read_module
from vmrt.tools.flags import add_flag


def add_arguments(parser) -> None:
    parser.add_argument("module", help="a .vmfb file")
    add_disassembly_flags(parser)


def add_disassembly_flags(parser) -> None:
    """The flags iree-dump-module's disassembly takes."""
    parser.add_argument("--function", default=None, metavar="F",
                        help="only this function (name or internal ordinal)")
    add_flag(parser, "--bytecode_offsets", hidden=("--bytecode-offsets",), action="store_true",
             help="prefix every line with its bytecode offset [XXXXXXXX]")


def write_disassembly(module, args, as_upstream: bool = False) -> None:
    """Prints `module` (a ModuleDef) as the disassembly flags in `args` ask (names
    `as_upstream`: vmrt.asm.disassembler.ModuleNames)."""
    from vmrt.asm.disassembler import disassemble  # (not the assembler vmrt.asm loads)
    text = disassemble(module, function=args.function, bytecode_offsets=args.bytecode_offsets,
                       as_upstream=as_upstream)
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()


def run(args) -> int:
    write_disassembly(read_module(args.module), args)
    return 0
