"""The parameter index: named parameters, each a span of a file or a splat pattern.

Mirrors iree_io_parameter_index_t (runtime/src/iree/io/parameter_index.h):
entries keep the order they were added in, keys need not be unique, and a
lookup returns the first entry with the key. `ParameterScopes` is the scope
map tools build from `--parameters=[SCOPE=]PATH` flags (iree_io_scope_map_t).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from types import MappingProxyType
from typing import Callable, Iterable, Iterator, Mapping

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import spans
from vmrt.io.file import FileAccess, FileCache, FileHandle, FileMode

#: IREE_IO_PARAMETER_MAX_SPLAT_PATTERN_LENGTH.
MAX_SPLAT_PATTERN_LENGTH = 16


class _Registered:
    """What the modules above the index supply to it: the archive formats (which
    build indices, so this module cannot import them) register `parse_file` and
    `write_file` for ParameterIndex.load/save, and the providers `IndexProvider`
    for ParameterScopes.providers. vmrt.io imports both, and Python runs vmrt.io
    before any module in it, so they are registered before an index is used."""

    parse_file: Callable | None = None
    write_file: Callable | None = None
    index_provider: Callable | None = None


def register_archive_formats(parse_file: Callable, write_file: Callable) -> None:
    """Called by vmrt.io.formats: how ParameterIndex.load and save read and write."""
    _Registered.parse_file, _Registered.write_file = parse_file, write_file


def register_index_provider(index_provider: Callable) -> None:
    """Called by vmrt.io.provider: what ParameterScopes.providers makes per scope."""
    _Registered.index_provider = index_provider

_EMPTY_INFO: Mapping = MappingProxyType({})


def as_key(key) -> str:
    """Keys and scopes are str; bytes are decoded losslessly (surrogateescape)."""
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key).decode("utf-8", "surrogateescape")
    raise VmrtError(f"parameter key must be str or bytes, not {type(key).__name__}",
                    StatusCode.INVALID_ARGUMENT)


def key_bytes(key: str) -> bytes:
    """The bytes a key is stored as in archives."""
    return key.encode("utf-8", "surrogateescape")


@dataclasses.dataclass(frozen=True, eq=False)
class ParameterIndexEntry:
    """One parameter: `length` bytes from `file` at `offset`, or a splat `pattern`.

    `metadata` is the opaque blob archives carry per entry; `info` holds what a
    format knows beyond that (dtype and shape for safetensors and GGUF) and is
    not stored in IRPA archives.
    """

    key: str
    length: int
    metadata: bytes = b""
    file: FileHandle | None = None
    offset: int = 0
    pattern: bytes | None = None
    info: Mapping = dataclasses.field(default_factory=lambda: _EMPTY_INFO)

    def __post_init__(self):
        if not isinstance(self.info, MappingProxyType):
            object.__setattr__(self, "info", _freeze(self.info))

    @property
    def is_splat(self) -> bool:
        return self.pattern is not None

    @property
    def is_file(self) -> bool:
        return self.file is not None

    @property
    def kind(self) -> str:
        return "splat" if self.is_splat else "file"

    def view(self) -> memoryview:
        """Zero-copy view of a file entry's bytes (over the file's mapping)."""
        if self.file is None:
            raise VmrtError(f"parameter `{self.key}` is a splat and has no storage to view",
                            StatusCode.FAILED_PRECONDITION)
        return self.file.view(self.offset, self.length)

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """Copies [offset, offset+length) of the parameter (splats materialized)."""
        if length is None:
            length = self.length - offset
        check_span(self, offset, length)
        data = bytearray(length)
        if self.pattern is not None:
            spans.fill_spans([(memoryview(data), 0, length, self.pattern, offset)])
        else:
            spans.read_file_spans([(self.file, self.offset + offset, memoryview(data), 0,
                                    length)])
        return bytes(data)

    def __repr__(self) -> str:
        if self.pattern is not None:
            where = f"splat {self.pattern.hex()}"
        else:
            where = f"{self.file.path or self.file.kind}@{self.offset}"
        return f"<ParameterIndexEntry {self.key!r} {where} length={self.length}>"


def check_span(entry: ParameterIndexEntry, offset: int, length: int) -> None:
    """OUT_OF_RANGE unless [offset, offset+length) lies inside the entry."""
    if offset < 0 or length < 0 or offset + length > entry.length:
        raise VmrtError(
            f"parameter `{entry.key}` range out of bounds (offset={offset}, "
            f"length={length}, size={entry.length})", StatusCode.OUT_OF_RANGE)


def validate_pattern(pattern) -> bytes:
    pattern = bytes(pattern)
    if not 1 <= len(pattern) <= MAX_SPLAT_PATTERN_LENGTH:
        raise VmrtError(f"splat pattern of {len(pattern)} bytes; must be 1 to "
                        f"{MAX_SPLAT_PATTERN_LENGTH} bytes", StatusCode.INVALID_ARGUMENT)
    return pattern


class ParameterIndex:
    """An ordered, thread-safe collection of parameter entries."""

    def __init__(self, entries: Iterable[ParameterIndexEntry] = ()):
        self._entries: list[ParameterIndexEntry] = []
        self._by_key: dict[str, ParameterIndexEntry] = {}
        self._lock = threading.Lock()
        for entry in entries:
            self.add(entry)

    # -- adding ------------------------------------------------------------------------------
    def add(self, entry: ParameterIndexEntry) -> ParameterIndexEntry:
        if not isinstance(entry, ParameterIndexEntry):
            raise VmrtError("expected a ParameterIndexEntry", StatusCode.INVALID_ARGUMENT)
        if (entry.pattern is None) == (entry.file is None):
            raise VmrtError(f"parameter `{entry.key}` must have either a file or a "
                            "splat pattern", StatusCode.INVALID_ARGUMENT)
        if entry.length < 0 or entry.offset < 0:
            raise VmrtError(f"parameter `{entry.key}` has a negative offset or length",
                            StatusCode.INVALID_ARGUMENT)
        with self._lock:
            self._entries.append(entry)
            self._by_key.setdefault(entry.key, entry)
        return entry

    def add_splat(self, key, pattern, length: int, metadata: bytes = b"",
                  info: Mapping | None = None) -> ParameterIndexEntry:
        """Adds a parameter of `length` bytes repeating a 1..16 byte pattern."""
        return self.add(ParameterIndexEntry(
            key=as_key(key), length=int(length), metadata=bytes(metadata),
            pattern=validate_pattern(pattern), info=_freeze(info)))

    def add_file(self, key, file: FileHandle, offset: int, length: int,
                 metadata: bytes = b"", info: Mapping | None = None) -> ParameterIndexEntry:
        """Adds a parameter stored at [offset, offset+length) of `file`."""
        offset, length = int(offset), int(length)
        size = file.size
        if offset < 0 or length < 0 or offset + length > size:
            raise VmrtError(
                f"parameter `{as_key(key)}` storage [{offset}, {offset + length}) lies "
                f"outside its file ({size} bytes)", StatusCode.OUT_OF_RANGE)
        return self.add(ParameterIndexEntry(
            key=as_key(key), length=length, metadata=bytes(metadata), file=file,
            offset=offset, info=_freeze(info)))

    def add_buffer(self, key, buffer, metadata: bytes = b"", *, writable: bool = False,
                   info: Mapping | None = None) -> ParameterIndexEntry:
        """Adds a parameter backed by host memory (no copy)."""
        access = FileAccess.READ | (FileAccess.WRITE if writable else FileAccess.NONE)
        handle = FileHandle.wrap(buffer, access)
        return self.add_file(key, handle, 0, handle.size, metadata, info)

    def merge(self, other: "ParameterIndex") -> "ParameterIndex":
        """Appends every entry of `other` (sharing their file handles)."""
        for entry in list(other):
            self.add(entry)
        return self

    # -- querying -----------------------------------------------------------------------------
    def lookup(self, key) -> ParameterIndexEntry:
        """The first entry named `key`; NOT_FOUND if none."""
        entry = self._by_key.get(as_key(key))
        if entry is None:
            raise VmrtError(f"no parameter found in index with key '{as_key(key)}'",
                            StatusCode.NOT_FOUND)
        return entry

    def entry_getter(self) -> Callable[[str], ParameterIndexEntry | None]:
        """A function of a str key giving its first entry or None: lookup without its
        checks, for callers resolving hundreds of keys (entries added later are seen)."""
        return self._by_key.get

    def get(self, key, default=None):
        return self._by_key.get(as_key(key), default)

    def __contains__(self, key) -> bool:
        return as_key(key) in self._by_key

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ParameterIndexEntry]:
        return iter(list(self._entries))

    def __getitem__(self, i):
        if isinstance(i, str):
            return self.lookup(i)
        return self._entries[i]

    def keys(self) -> list[str]:
        return [entry.key for entry in self._entries]

    def items(self) -> list[tuple[str, ParameterIndexEntry]]:
        return [(entry.key, entry) for entry in self._entries]

    @property
    def total_bytes(self) -> int:
        return sum(entry.length for entry in self._entries)

    def file_handles(self) -> list[FileHandle]:
        """Distinct file handles the entries reference, in first-use order."""
        seen: dict[int, FileHandle] = {}
        for entry in self._entries:
            if entry.file is not None:
                seen.setdefault(id(entry.file), entry.file)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"<ParameterIndex {len(self)} entries, {self.total_bytes} bytes>"

    # -- files ----------------------------------------------------------------------------
    @classmethod
    def load(cls, *paths, format: str | None = None, writable: bool = False,
             mode: FileMode | str = FileMode.MMAP,
             cache: FileCache | None = None) -> "ParameterIndex":
        """An index of every parameter in the given files (merged in order)."""
        index = cls()
        for path in paths:
            index.load_file(path, format=format, writable=writable, mode=mode, cache=cache)
        return index

    def load_file(self, path, *, format: str | None = None, writable: bool = False,
                  mode: FileMode | str = FileMode.MMAP,
                  cache: FileCache | None = None) -> "ParameterIndex":
        """Appends the parameters of one .irpa, .gguf or .safetensors file."""
        _Registered.parse_file(path, self, format=format, writable=writable, mode=mode, cache=cache)
        return self

    def save(self, path, *, format: str | None = None, **options) -> "ParameterIndex":
        """Writes the index as an archive; returns an index over the new file."""
        return _Registered.write_file(self, path, format=format, **options)

    # -- text ------------------------------------------------------------------------------
    def dump(self, scope: str = "") -> str:
        """The listing iree-dump-parameters prints for one scope."""
        return format_index(scope, self)


def _freeze(info: Mapping | None) -> Mapping:
    return MappingProxyType(dict(info)) if info else _EMPTY_INFO


_RULE_TOP = "//===" + "-" * 110 + "===//"
_RULE_COLUMNS = ("//===------------+------------------+------------------+"
                 "-----------------------------------------------------------===//")
_COLUMN_TITLES = "//         Start |              End |           Length | Key"
_RULE_ROWS = ("//---------------+------------------+------------------+"
              "--------------------------------------------------------------//")


def format_index(scope: str, index: ParameterIndex) -> str:
    """iree_io_parameter_index_dump, character for character."""
    entries = list(index)
    total = sum(entry.length for entry in entries)
    name = "<global>" if not scope else f"`{scope}`"
    lines = [
        _RULE_TOP,
        f"// Parameter scope {name} ({len(entries)} entries, {total} total bytes)",
        _RULE_COLUMNS,
        _COLUMN_TITLES,
        _RULE_ROWS,
    ]
    for entry in entries:
        if entry.pattern is not None:
            lines.append(f"               - |                - | {entry.length:16d} | "
                         f"`{entry.key}`")
        else:
            lines.append(f"{entry.offset:16d} | {entry.offset + entry.length:16d} | "
                         f"{entry.length:16d} | `{entry.key}`")
    return "\n".join(lines) + "\n\n"


class ParameterScopes:
    """Indices by scope name, in first-use order ("" is the global scope)."""

    def __init__(self):
        self._indices: dict[str, ParameterIndex] = {}

    def index(self, scope="") -> ParameterIndex:
        """The index of `scope`, created empty on first use."""
        scope = as_key(scope)
        index = self._indices.get(scope)
        if index is None:
            index = self._indices[scope] = ParameterIndex()
        return index

    def add_file(self, path, scope="", **options) -> ParameterIndex:
        return self.index(scope).load_file(path, **options)

    def add_spec(self, spec: str, **options) -> ParameterIndex:
        """Adds a `--parameters` value: `PATH` or `SCOPE=PATH`."""
        scope, path = split_scope(spec)
        return self.add_file(path, scope, **options)

    @classmethod
    def from_specs(cls, specs: Iterable[str], **options) -> "ParameterScopes":
        scopes = cls()
        for spec in specs:
            scopes.add_spec(spec, **options)
        return scopes

    def __getitem__(self, scope) -> ParameterIndex:
        scope = as_key(scope)
        if scope not in self._indices:
            raise VmrtError(f"no parameters in scope '{scope}'", StatusCode.NOT_FOUND)
        return self._indices[scope]

    def __contains__(self, scope) -> bool:
        return as_key(scope) in self._indices

    def __iter__(self):
        return iter(list(self._indices))

    def __len__(self) -> int:
        return len(self._indices)

    def items(self) -> list[tuple[str, ParameterIndex]]:
        return list(self._indices.items())

    def providers(self) -> list:
        """One index provider per scope (as the tools build for io_parameters)."""
        return [_Registered.index_provider(scope, index)
                for scope, index in self._indices.items()]

    def dump(self) -> str:
        return "".join(format_index(scope, index) for scope, index in self._indices.items())


def split_scope(spec: str) -> tuple[str, str]:
    """`SCOPE=PATH` -> (SCOPE, PATH); a bare `PATH` is in the global scope."""
    spec = os.fspath(spec)
    if "=" in spec:
        scope, path = spec.split("=", 1)
        return scope, path
    return "", spec
