"""Command-line conventions shared by the subcommands, as IREE's tools have them.

- `--flagfile=FILE` reads more flags from FILE, one per line, and puts them
  where the `--flagfile` flag was (so later flags override them). Lines are
  trimmed; blank lines and lines starting with `#` or `//` are skipped; every
  other line must be a `--flag` (positional arguments are not allowed), and
  spaces around its `=` are dropped. A flag file may name further flag files.
- Flags are spelled as IREE spells them (`--parameter_mode`); a spelling vmrt
  accepted before stays accepted but is left out of --help (`add_flag`).
"""

from __future__ import annotations

import argparse
import os

from vmrt.errors import StatusCode, VmrtError

FLAGFILE = "--flagfile"
FLAGFILE_HELP = ("read more flags from FILE, one per line (`#` and `//` lines are "
                 "comments); they take the place of this flag")
#: C isspace() in the "C" locale: what IREE trims from flag file lines.
_WHITESPACE = " \t\n\v\f\r"


def expand_flagfiles(argv: list[str]) -> list[str]:
    """`argv` with each `--flagfile=FILE` (or `--flagfile FILE`) replaced by the
    flags in FILE; everything after a `--` is left as it is."""
    return _expand(argv, reading=())


def _expand(argv: list[str], reading: tuple[str, ...]) -> list[str]:
    expanded: list[str] = []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--":
            expanded.append(argument)
            expanded.extend(arguments)
            break
        if argument == FLAGFILE:
            path = next(arguments, "")
        elif argument.startswith(FLAGFILE + "="):
            path = argument[len(FLAGFILE) + 1:]
        else:
            expanded.append(argument)
            continue
        expanded.extend(_expand(read_flagfile(path, reading), reading + (path,)))
    return expanded


def read_flagfile(path: str, reading: tuple[str, ...] = ()) -> list[str]:
    """The flags FILE holds, one `--name[=value]` per flag; `reading` are the
    flag files that named this one (a file naming itself would never end)."""
    if not path:
        raise VmrtError(f"{FLAGFILE}= requires a file path", StatusCode.INVALID_ARGUMENT)
    if any(os.path.realpath(path) == os.path.realpath(outer) for outer in reading):
        raise VmrtError(f"flag file '{path}' includes itself", StatusCode.INVALID_ARGUMENT)
    try:
        with open(path, "rb") as file:
            text = file.read().decode("utf-8", "surrogateescape")
    except OSError as error:
        raise VmrtError(f"failed to open file '{path}': {error.strerror or error}",
                        StatusCode.NOT_FOUND).annotate("while trying to parse flagfile") \
            from None
    flags = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip(_WHITESPACE)
        if not line or line.startswith(("#", "//")):
            continue
        if not line.startswith("--"):
            raise VmrtError(f"{path}:{number}: positional arguments not allowed in flag "
                            "files", StatusCode.INVALID_ARGUMENT)
        name, equals, value = line[2:].partition("=")
        flags.append(f"--{name.strip(_WHITESPACE)}{equals}{value.strip(_WHITESPACE)}")
    return flags


def add_flag(parser, *spellings: str, hidden: tuple[str, ...] = (), **options):
    """parser.add_argument(*spellings, **options), the flag also accepted as each of
    `hidden` (older vmrt spellings of the IREE flag), which --help leaves out."""
    action = parser.add_argument(*spellings, **options)
    value_options = {key: value for key, value in options.items()
                     if key not in ("help", "default", "required", "dest")}
    for spelling in hidden:
        # SUPPRESS as the default: the visible flag's default is the one argparse sets.
        parser.add_argument(spelling, dest=action.dest, help=argparse.SUPPRESS,
                            default=argparse.SUPPRESS, **value_options)
    return action
