"""Create, inspect and convert parameter files (.irpa, .safetensors, .gguf).

    vmrt params dump [FILE ...] [--parameters=[SCOPE=]FILE ...] [--extract=[SCOPE::]KEY=OUT]
    vmrt params create --output=OUT.irpa [--data=NAME=SHAPExTYPE[=VALUE] ...]
                       [--splat=NAME=SHAPExTYPE[=VALUE] ...] [--alignment=64]
                       [--gguf_types=iree|ggml] [--quiet] [--no_progress]
    vmrt params convert [FILE ...] [--parameters=...] --output=OUT.{irpa,safetensors,gguf}
                        [--exclude=NAME] [--rename=OLD=NEW] [--strip] [--tensor=NAME=SHAPExTYPE]
                        [--splat=NAME[=TYPE=VALUE]] [--gguf_types=iree|ggml] [--quiet]
                        [--no_progress]

`dump` prints what iree-dump-parameters prints; `create` and `convert` write
what iree-create-parameters and iree-convert-parameters write (IRPA) and
print the new file's listing unless --quiet. The output format follows the
output's extension (or --format; another extension is an error); splats are
written out as data in formats that have no splats. IRPA stores no dtype or
shape: converted to safetensors or GGUF, such parameters are flat U8 bytes (a
warning names them) unless `--tensor=NAME=2x3xf32` gives theirs. On a terminal,
a progress bar shows the bytes written (with tqdm installed: the vmrt[progress]
extra).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from typing import NamedTuple

from vmrt.elements import (
    element_bit_count, element_byte_count, format_element_type, parse_element,
    parse_element_type, parse_shape_and_type,
)
from vmrt.errors import ElementError, StatusCode, VmrtError
from vmrt.io import FORMATS, FileMode, ParameterIndex, ParameterIndexEntry, ParameterScopes
from vmrt.io.formats import format_from_name, write_file
from vmrt.io.index import MAX_SPLAT_PATTERN_LENGTH, format_index
from vmrt.io.formats.gguf import DEFAULT_TYPE_NUMBERING, TYPE_NUMBERINGS
from vmrt.io.formats.irpa import DEFAULT_DATA_ALIGNMENT
from vmrt.io.formats.safetensors import DTYPE_SIZES
from vmrt.tools import progress
from vmrt.tools.flags import add_flag


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="params_command", metavar="ACTION")
    sub.required = True

    dump = sub.add_parser("dump", help="list the parameters of files (as iree-dump-parameters)",
                          description="List the parameters of .irpa, .gguf and .safetensors "
                                      "files, as iree-dump-parameters does.")
    _add_inputs(dump)
    dump.add_argument("--extract", action="append", default=[], metavar="[SCOPE::]KEY=FILE",
                      help="write a parameter's bytes to FILE")
    dump.add_argument("--json", action="store_true",
                      help="print the entries as JSON (kind, offsets, pattern, metadata)")
    dump.set_defaults(params_run=run_dump)

    create = sub.add_parser("create", help="create an archive of zeroed, patterned or splat "
                                           "parameters (as iree-create-parameters)",
                            description="Create a parameter archive, as "
                                        "iree-create-parameters does.")
    create.add_argument("--output", "-o", required=True, help="output file (.irpa, "
                        ".safetensors or .gguf)")
    create.add_argument("--data", action="append", default=[],
                        metavar="NAME=SHAPExTYPE[=VALUE]",
                        help="a parameter stored in the file, zeroed or filled with VALUE")
    create.add_argument("--splat", action="append", default=[],
                        metavar="NAME=SHAPExTYPE[=VALUE]",
                        help="a parameter with no storage: VALUE repeated (IRPA only)")
    create.add_argument("--alignment", type=int, default=DEFAULT_DATA_ALIGNMENT,
                        help="storage alignment of data parameters (default 64)")
    _add_output_options(create)
    create.set_defaults(params_run=run_create)

    convert = sub.add_parser("convert", help="convert and edit parameter files (as "
                                             "iree-convert-parameters)",
                             description="Merge, edit and convert parameter files, as "
                                         "iree-convert-parameters does.")
    _add_inputs(convert)
    convert.add_argument("--output", "-o", required=True,
                         help="output file (.irpa, .safetensors or .gguf)")
    convert.add_argument("--exclude", action="append", default=[], metavar="NAME",
                         help="leave a parameter out")
    convert.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                         help="rename a parameter")
    convert.add_argument("--strip", action="store_true",
                         help="replace every parameter by a splat of zeros")
    convert.add_argument("--splat", action="append", default=[], metavar="NAME[=TYPE=VALUE]",
                         help="replace a parameter (by its new name) by a splat of VALUE "
                              "(zero if omitted)")
    convert.add_argument("--alignment", type=int, default=DEFAULT_DATA_ALIGNMENT,
                         help="storage alignment of IRPA data parameters (default 64)")
    convert.add_argument("--tensor", action="append", default=[], metavar="NAME=SHAPExTYPE",
                         help="the shape and element type of a parameter (by its new name) "
                              "for safetensors/GGUF outputs: IRPA sources have none")
    _add_output_options(convert)
    convert.set_defaults(params_run=run_convert)


def _add_inputs(parser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="a parameter file, or SCOPE=FILE (after any --parameters)")
    parser.add_argument("--parameters", action="append", default=[], metavar="[SCOPE=]FILE",
                        help="a parameter file, optionally in a named scope")
    add_flag(parser, "--parameter_mode", hidden=("--parameter-mode",), dest="mode",
             choices=[m.value for m in FileMode], default=FileMode.MMAP.value,
             help="how files are read: mmap (default), file (pread) or preload")


def _add_output_options(parser) -> None:
    parser.add_argument("--format", choices=FORMATS,
                        help="output format (default: from the output's extension, else irpa)")
    add_flag(parser, "--gguf_types", hidden=("--gguf-types",), choices=TYPE_NUMBERINGS,
             default=DEFAULT_TYPE_NUMBERING,
             help="GGUF tensor type numbers: ggml (default; the GGUF specification's, "
                  "I8/I16/I32 = 24-26, read by llama.cpp and the gguf package) or iree "
                  "(16-18, as IREE 3.13's tools read integer tensors)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="do not print the listing of the new file")
    progress.add_no_progress_flag(parser)


def run(args) -> int:
    return args.params_run(args)


def _write_text(text: str) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()


def _load_scopes(args) -> ParameterScopes:
    specs = list(args.parameters) + list(args.files)
    return ParameterScopes.from_specs(specs, mode=args.mode)


# -- dump ---------------------------------------------------------------------------------
def run_dump(args) -> int:
    scopes = _load_scopes(args)
    if args.json:
        _write_text(json.dumps(dump_json(scopes), indent=2) + "\n")
    else:
        _write_text(scopes.dump())
    for spec in args.extract:
        extract_parameter(scopes, spec)
    return 0


def dump_json(scopes: ParameterScopes) -> list:
    out = []
    for scope, index in scopes.items():
        entries = []
        for entry in index:
            item = {"key": entry.key, "kind": entry.kind, "length": entry.length}
            if entry.is_splat:
                item["pattern"] = entry.pattern.hex()
            else:
                item["file"] = entry.file.path
                item["offset"] = entry.offset
            if entry.metadata:
                item["metadata"] = entry.metadata.hex()
            if entry.info:
                item["info"] = {k: list(v) if isinstance(v, tuple) else v
                                for k, v in entry.info.items()}
            entries.append(item)
        out.append({"scope": scope, "entries": entries, "total_bytes": index.total_bytes})
    return out


def extract_parameter(scopes: ParameterScopes, spec: str) -> None:
    identifier, sep, path = spec.partition("=")
    if not sep or not path:
        raise VmrtError(f"--extract expects [SCOPE::]KEY=FILE, got '{spec}'",
                        StatusCode.INVALID_ARGUMENT)
    scope, sep, key = identifier.partition("::")
    if not sep:
        scope, key = "", identifier
    try:
        entry = scopes.index(scope).lookup(key)
        _refuse_an_input(scopes, path)
        name = f"{scope}::{key}" if scope else key
        _write_text(f"Extracting parameter `{name}` ({entry.length}b) to `{path}`...\n")
        with open(path, "wb") as out:
            if entry.is_file:
                from vmrt.io.spans import copy_to_fd
                out.truncate(entry.length)
                copy_to_fd(out.fileno(), 0, entry)
            else:
                out.write(entry.read())
    except VmrtError as error:
        raise error.annotate(f"extracting parameter with flag `{spec}`")


def _refuse_an_input(scopes: ParameterScopes, path: str) -> None:
    """INVALID_ARGUMENT when `path` is (a link to) one of the archives being read:
    opening it for writing would destroy the parameters while they are read."""
    try:
        target = os.stat(path)
    except OSError:
        return  # nothing there yet (or unreachable: open() reports that)
    for _, index in scopes.items():
        for handle in index.file_handles():
            stat = handle.stat
            if stat is not None and (stat.st_dev, stat.st_ino) == (target.st_dev,
                                                                   target.st_ino):
                raise VmrtError(f"refusing to write `{path}`: it is the parameter archive "
                                f"`{handle.path}` being read", StatusCode.INVALID_ARGUMENT)


def output_format_of(args) -> str:
    """--format, else the output's extension; an output named for no format of ours
    (`out.npz`, `weights`) is an error rather than an IRPA under that name."""
    output_format = args.format or format_from_name(args.output)
    if output_format is None:
        raise VmrtError(f"cannot tell the format of `{args.output}` from its name: name it "
                        f".irpa, .safetensors or .gguf, or pass --format="
                        f"{{{','.join(FORMATS)}}}", StatusCode.INVALID_ARGUMENT)
    return output_format


# -- create -------------------------------------------------------------------------------
def run_create(args) -> int:
    output_format = output_format_of(args)
    if args.splat and output_format != "irpa":
        raise VmrtError(f"{output_format} files cannot hold splat parameters; use --data",
                        StatusCode.INVALID_ARGUMENT)
    index = ParameterIndex()
    data_entries = set()
    # As iree-create-parameters: splats (no storage) first, then data in flag order.
    for flag in args.splat:
        decl = _decl(flag, "--splat")
        index.add_splat(decl.name, decl.pattern, decl.length)
    for flag in args.data:
        decl = _decl(flag, "--data")
        entry = index.add_splat(decl.name, decl.pattern, decl.length, info=_tensor_info(decl))
        data_entries.add(id(entry))
    options = {}
    if output_format == "irpa":
        options = {"alignment": args.alignment,
                   "materialize": lambda entry: id(entry) in data_entries}
    elif output_format == "gguf":
        options = {"types": args.gguf_types}
    return write_archive(index, args, output_format, options)


def write_archive(index: ParameterIndex, args, output_format: str, options: dict) -> int:
    """Writes `index` to --output (a bar of the bytes written on a terminal), then
    prints the new file's listing unless --quiet."""
    materialize = options.get("materialize", lambda entry: False)
    # Splats take no storage in IRPA (unless materialized); other formats store them.
    stored = sum(entry.length for entry in index
                 if output_format != "irpa" or not entry.is_splat or materialize(entry))
    with progress.bytes_written_bar(stored, f"writing {os.path.basename(args.output)}", args):
        written = write_file(index, args.output, format=output_format, **options)
    if not args.quiet:
        _write_text(format_index("", written))
    return 0


class ParameterDecl(NamedTuple):
    """A `--data`/`--splat` declaration: name, byte length and fill pattern."""

    name: str
    shape: tuple[int, ...]
    element_type: int
    length: int
    pattern: bytes


#: IREE element type text (f32, bf16, si8, ui16, i64) -> safetensors dtype prefix.
_SAFETENSORS_PREFIXES = {"f": "F", "bf": "BF", "i": "I", "si": "I", "ui": "U"}


def _tensor_info(decl: ParameterDecl) -> dict | None:
    """The dtype and shape a `--data` tensor declares, recorded by the typed formats
    (safetensors, GGUF); None for element types they have no name for (raw bytes)."""
    match = re.fullmatch(r"(bf|f|si|ui|i)(\d+)", format_element_type(decl.element_type))
    if match is None:
        return None
    dtype = _SAFETENSORS_PREFIXES[match.group(1)] + match.group(2)
    return {"dtype": dtype, "shape": list(decl.shape)} if dtype in DTYPE_SIZES else None


def parse_parameter_decl(text: str) -> ParameterDecl:
    """`name=SHAPExTYPE[=VALUE]` as iree-create-parameters reads it (a missing
    VALUE is zeros)."""
    name, _, spec = text.partition("=")
    shape_type, _, contents = spec.partition("=")
    shape, element_type = parse_shape_and_type(shape_type)
    if element_bit_count(element_type) == 0 or element_bit_count(element_type) % 8:
        raise ElementError("opaque and sub-byte aligned element types cannot currently be "
                           "used as splats; use a bitcast type (2xi4=1xi8, etc)")
    length = element_byte_count(element_type) * math.prod(shape)
    pattern = _splat_pattern(shape_type, element_type, contents) if contents else b"\0"
    return ParameterDecl(name, shape, element_type, length, pattern)


def parse_splat_value(text: str) -> bytes:
    """`TYPE=VALUE` (or empty for zero) as iree-convert-parameters --splat reads it."""
    if not text:
        return b"\0"
    type_text, _, value = text.partition("=")
    element_type = parse_element_type(type_text)
    if element_byte_count(element_type) == 0:
        raise ElementError(f"element type {type_text} has no bytes")
    return _splat_pattern(type_text, element_type, value)


def _splat_pattern(type_text: str, element_type: int, value: str) -> bytes:
    if element_byte_count(element_type) > MAX_SPLAT_PATTERN_LENGTH:
        raise VmrtError(f"element type size for {type_text} out of range of splat patterns",
                        StatusCode.OUT_OF_RANGE)
    return parse_element(value, element_type)


def _decl(flag: str, option: str):
    try:
        return parse_parameter_decl(flag)
    except VmrtError as error:
        raise error.annotate(f"parsing {option}={flag}")


# -- convert ------------------------------------------------------------------------------
def convert_index(scopes: ParameterScopes, *, exclude=(), rename=(), strip=False,
                  splat=()) -> ParameterIndex:
    """The edited union of every scope, as iree-convert-parameters builds it."""
    renames = {}
    for flag in rename:
        old, sep, new = flag.partition("=")
        if not sep:
            raise VmrtError(f"--rename expects OLD=NEW, got '{flag}'",
                            StatusCode.INVALID_ARGUMENT)
        renames.setdefault(old, new)
    splats = {}
    for flag in splat:
        name, _, value = flag.partition("=")
        try:
            splats.setdefault(name, parse_splat_value(value))
        except VmrtError as error:
            raise error.annotate(f"parsing --splat={flag}")
    excluded = set(exclude)
    result = ParameterIndex()
    for _, index in scopes.items():
        for entry in index:
            if entry.key in excluded:
                continue
            key = renames.get(entry.key, entry.key)
            pattern = splats.get(key, b"\0" if strip else None)
            if pattern is not None:
                result.add(ParameterIndexEntry(key=key, length=entry.length,
                                               metadata=entry.metadata, pattern=pattern,
                                               info=entry.info))
            elif key != entry.key:
                result.add(ParameterIndexEntry(key=key, length=entry.length,
                                               metadata=entry.metadata, file=entry.file,
                                               offset=entry.offset, pattern=entry.pattern,
                                               info=entry.info))
            else:
                result.add(entry)
    return result


def run_convert(args) -> int:
    scopes = _load_scopes(args)
    index = convert_index(scopes, exclude=args.exclude, rename=args.rename, strip=args.strip,
                          splat=args.splat)
    output_format = output_format_of(args)
    if args.tensor:
        index = with_tensor_types(index, args.tensor)
    if output_format != "irpa":
        _warn_untyped(index, output_format)
    options = {"alignment": args.alignment} if output_format == "irpa" else {}
    if output_format == "gguf":
        options = {"types": args.gguf_types}
    return write_archive(index, args, output_format, options)


def with_tensor_types(index: ParameterIndex, flags) -> ParameterIndex:
    """`index` with the dtype and shape `--tensor=NAME=SHAPExTYPE` flags give (IRPA
    stores neither); each must cover the parameter's bytes exactly."""
    types = {}
    for flag in flags:
        decl = _decl(flag, "--tensor")
        info = _tensor_info(decl)
        if info is None:
            raise VmrtError(f"--tensor={flag}: safetensors and GGUF have no dtype for "
                            f"{format_element_type(decl.element_type)}",
                            StatusCode.INVALID_ARGUMENT)
        types[decl.name] = (decl, info)
    result = ParameterIndex()
    for entry in index:
        typed = types.pop(entry.key, None)
        if typed is not None:
            decl, info = typed
            if decl.length != entry.length:
                raise VmrtError(f"--tensor={decl.name}=...: {decl.length} bytes declared, "
                                f"but `{entry.key}` has {entry.length}",
                                StatusCode.INVALID_ARGUMENT)
            entry = dataclasses.replace(entry, info=info)
        result.add(entry)
    if types:
        raise VmrtError(f"--tensor names no parameter: {', '.join(sorted(types))}",
                        StatusCode.NOT_FOUND)
    return result


def _warn_untyped(index: ParameterIndex, output_format: str) -> None:
    """One stderr line naming parameters written as plain bytes (IRPA sources carry no
    dtype or shape): the conversion is not silent about it."""
    untyped = [entry.key for entry in index if not (entry.info or {}).get("dtype")]
    if untyped:
        shown = ", ".join(untyped[:5]) + (f" and {len(untyped) - 5} more" if len(untyped) > 5
                                          else "")
        print(f"vmrt: warning: {len(untyped)} parameter(s) have no dtype or shape (IRPA "
              f"stores none): {shown} are written to {output_format} as flat U8 bytes; give "
              "them with --tensor=NAME=SHAPExTYPE", file=sys.stderr)
