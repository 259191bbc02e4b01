"""Archive formats by name: which parser reads a file, which writer writes one.

As IREE's parser registry (runtime/src/iree/io/formats/parser_registry.c) the
format comes from the file extension (`irpa`, `gguf`, `safetensors`, any
case), or the extension alone may be given as the format; a file with an
unknown extension is recognized by its first bytes.
"""

from __future__ import annotations

import os
import struct

from vmrt.errors import ArchiveError, StatusCode, VmrtError
from vmrt.io.file import DEFAULT_FILE_CACHE, FileAccess, FileCache, FileHandle, FileMode
from vmrt.io.index import register_archive_formats

FORMATS = ("irpa", "gguf", "safetensors")


def format_from_name(path_or_format) -> str | None:
    """`irpa`, `gguf` or `safetensors` from a path's extension or a bare name."""
    text = os.fspath(path_or_format)
    base = os.path.basename(text)
    ext = base.rsplit(".", 1)[1] if "." in base else base
    ext = ext.lower()
    return ext if ext in FORMATS else None


def sniff_format(contents: memoryview) -> str | None:
    """The format a file's first bytes announce, if any."""
    head = bytes(contents[:16])
    if head[:4] == b"IRPA":
        return "irpa"
    if head[:4] == b"GGUF":
        return "gguf"
    if len(head) >= 9:
        (length,) = struct.unpack_from("<Q", head)
        if 2 <= length <= contents.nbytes - 8 and head[8:9] == b"{":
            return "safetensors"
    return None


def _check_format(format: str) -> str:
    name = format_from_name(format)
    if name is None:
        raise VmrtError(f"unsupported file format `{format}`; supported formats: "
                        "[irpa, gguf, safetensors]", StatusCode.UNIMPLEMENTED)
    return name


def parse_handle(handle: FileHandle, index, format: str):
    """Parses an open handle of the given format into `index`."""
    import importlib
    format = _check_format(format)
    # Only the parser of this format is imported (gguf's takes longer to import than
    # loading most models' parameters).
    parser = getattr(importlib.import_module(f"vmrt.io.formats.{format}"), f"parse_{format}")
    contents = handle.contents()
    try:
        return parser(handle, index, contents)
    finally:
        del contents
        if handle.mode is FileMode.FILE:
            handle.trim()


def parse_file(path, index, *, format: str | None = None, writable: bool = False,
               mode: FileMode | str = FileMode.MMAP, cache: FileCache | None = None):
    """Opens `path` (through the file cache) and adds its parameters to `index`."""
    path = os.fspath(path)
    access = FileAccess.READ | (FileAccess.WRITE if writable else FileAccess.NONE)
    handle = (cache or DEFAULT_FILE_CACHE).open(path, access, mode)
    if format is None:
        format = format_from_name(path)
        if format is None:
            format = sniff_format(handle.contents())
        if format is None:
            raise VmrtError(
                f"unsupported file format of '{path}'; ensure the extension matches one "
                "of the supported formats: [.irpa, .gguf, .safetensors]",
                StatusCode.UNIMPLEMENTED)
    try:
        return parse_handle(handle, index, format)
    except VmrtError as error:
        raise error.annotate(f"while parsing {format} file '{path}'")


def write_file(index, path, *, format: str | None = None, **options):
    """Writes `index` as `format` (else the extension's format; .irpa by default)."""
    from vmrt.io.formats import gguf, irpa, safetensors
    path = os.fspath(path)
    format = _check_format(format) if format else (format_from_name(path) or "irpa")
    try:
        if format == "irpa":
            return irpa.write_irpa(index, path, **options)
        if format == "gguf":
            return gguf.write_gguf(index, path, **options)
        return safetensors.write_safetensors(index, path, **options)
    except VmrtError as error:
        raise error.annotate(f"while writing {format} file '{path}'")


register_archive_formats(parse_file, write_file)

__all__ = ["FORMATS", "format_from_name", "sniff_format", "parse_handle", "parse_file",
           "write_file", "ArchiveError"]
