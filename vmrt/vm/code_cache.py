"""An on-disk cache of what vmrt makes of a module, like __pycache__: one directory, a
file per entry, each keyed by content and by the build of vmrt.

BytecodeModule.compiled (vmrt.vm.module) asks it first for a function's generated code
(CompiledFunction); the same directory keeps verified modules (vmrt.vm.module_cache),
the C tier's builds and compiled models. Every key (runtime_key) hashes the content
with the file format, the build of vmrt (build_id) and the Python. A file is named by
its key and records it again, with its payload's length and CRC-32 (against accidents
only); it is written beside and renamed over, so concurrent processes see a whole file
or none, and a short, corrupt or foreign file is ignored (and made again).

Environment: VMRT_CACHE=0 (off, false, no) turns it off; VMRT_CACHE_DIR is the
directory (default $XDG_CACHE_HOME/vmrt, else ~/.cache/vmrt); VMRT_CACHE_MAX_BYTES
bounds the files' total (default 256 MiB; past it, the least recently used go, down
to 90%). A directory that cannot be made leaves vmrt without the cache, one that
cannot be written is only read; neither is an error.

Security: an entry is code that this process runs, so the cache must be writable by
its user alone: the directory is made 0o700, files 0o600, and a directory or file
owned by another user, or writable by its group or others, is never read (whoever
can write it can run code as its user, as with __pycache__). Systems without POSIX
user ids (Windows) skip the ownership checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import marshal
import os
import stat
import struct
import sys
import time
import types
import zlib
from importlib.util import MAGIC_NUMBER
from typing import NamedTuple

from vmrt.environment import switched_on

#: The layout of cache files; part of every key.
FORMAT_VERSION = 5
FILE_MAGIC = b"VMRTCODE"
#: File header: magic, key digest, payload length, payload CRC-32.
HEADER = struct.Struct("<8s32sQI")
#: Files of code (vmrt.vm.module) and of verified modules (vmrt.vm.module_cache).
SUFFIX = ".vmc"
MODULE_SUFFIX = ".vmm"
TEMP_SUFFIX = ".tmp"
DEFAULT_MAX_BYTES = 256 << 20
#: Eviction goes down to this fraction of the bound (not to run again at the next write).
EVICT_TO = 0.9
#: A temporary file this old (seconds) was left by a writer that died.
STALE_TEMP_SECONDS = 3600
#: A hit refreshes its file's mtime only when it is older than this (seconds): the
#: eviction order needs no finer grain, and each refresh is a metadata write.
REFRESH_SECONDS = 60
#: The packages (with their subpackages) whose sources shape what the cache keeps:
#: the code generator and what it reads, the reader and verifier, the C tier's
#: generator. A source checkout hashes them into build_id.
RUNTIME_PACKAGES = ("vm", "isa", "format", "native")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


@dataclasses.dataclass
class CacheStats:
    """What a cache did in this process; `rejected`: files found but not trusted."""

    hits: int = 0
    misses: int = 0
    stores: int = 0
    rejected: int = 0


STATS = CacheStats()
_CACHES: dict[tuple[str, int], "CodeCache"] = {}
_build_id: bytes | None = None


class CompiledFunction(NamedTuple):
    """A function variant's code object, line -> bytecode offset map and source; its
    cache entry is the plain tuple of the three."""

    code: types.CodeType
    line_pcs: list
    source: str


def default_cache() -> "CodeCache | None":
    """The cache the environment asks for, or None when it is off or unusable."""
    if not switched_on("VMRT_CACHE"):
        return None
    path = cache_directory()
    if path is None or not build_id():
        return None
    key = (path, max_bytes())
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = CodeCache(*key)
    return cache if cache.usable else None


def cache_directory() -> str | None:
    """VMRT_CACHE_DIR, else $XDG_CACHE_HOME/vmrt, else ~/.cache/vmrt (None: no home)."""
    path = os.environ.get("VMRT_CACHE_DIR")
    if path:
        return os.path.abspath(os.path.expanduser(path))
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):  # the XDG spec: a relative path is ignored
        home = os.path.expanduser("~")
        if home == "~" or not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "vmrt")


def max_bytes() -> int:
    """VMRT_CACHE_MAX_BYTES, or the default when it is unset or not a number."""
    try:
        return max(0, int(os.environ.get("VMRT_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES)))
    except ValueError:
        return DEFAULT_MAX_BYTES


def content_digest(bytecode, description: str) -> bytes:
    """The digest of a module's content as the code generator sees it: its bytecode
    and a description (repr) of the rest it reads."""
    digest = hashlib.blake2b(bytecode if not isinstance(bytecode, list) else bytes(bytecode),
                             digest_size=32)
    digest.update(description.encode("utf-8", "surrogatepass"))
    return digest.digest()


def runtime_key(*parts) -> bytes:
    """The hash of `parts` with what every key holds of the runtime: the cache format,
    build_id and the Python."""
    runtime = (FORMAT_VERSION, build_id(), MAGIC_NUMBER, sys.implementation.cache_tag,
               sys.flags.optimize)
    return hashlib.blake2b(repr(runtime + parts).encode(), digest_size=32).digest()


def build_id() -> bytes:
    """The id setup.py writes into an installed vmrt, else the hash of a source
    checkout's runtime packages; b"" (the cache then off) when neither is there."""
    global _build_id
    if _build_id is None:
        try:
            from vmrt._build_id import BUILD_ID  # written by setup.py's build_py
            _build_id = BUILD_ID.encode()
        except ImportError:
            _build_id = source_digest(os.path.dirname(os.path.dirname(__file__)))
    return _build_id


def source_digest(root: str, packages: tuple = RUNTIME_PACKAGES) -> bytes:
    """A hash of the paths and contents of the *.py files of `packages` under vmrt's
    directory `root`; b"" when none can be read. (Unbuffered reads and sha256: this
    runs in every process of a source checkout.)"""
    digest, found = hashlib.sha256(), 0
    for package in packages:
        for directory, _, files in sorted(os.walk(os.path.join(root, package))):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(directory, name)
                try:
                    with open(path, "rb", buffering=0) as source:
                        data = source.read()
                except OSError:
                    continue
                digest.update(f"{path[len(root):]}\0{len(data)}\0".encode(
                    "utf-8", "surrogateescape") + data)
                found += 1
    return digest.digest() if found else b""


def is_private(st: os.stat_result) -> bool:
    """Whether a directory or file is the user's alone."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # no POSIX ownership to check
        return True
    return st.st_uid == getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class CodeCache:
    """One cache directory: entries by key, bounded to `max_bytes` in total."""

    def __init__(self, path: str, max_bytes: int):
        self.path = path
        self.max_bytes = max_bytes
        self.usable = self._open_directory()
        self.writable = self.usable
        self._total_bytes: int | None = None  # of the files, known after a scan

    def _open_directory(self) -> bool:
        try:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:  # (made once: later processes only look)
                os.makedirs(self.path, mode=0o700, exist_ok=True)
                st = os.stat(self.path)
        except (OSError, ValueError):  # unwritable parent, a file in the way, a NUL...
            return False
        return stat.S_ISDIR(st.st_mode) and is_private(st)

    def entry_path(self, key: bytes, suffix: str = SUFFIX) -> str:
        return os.path.join(self.path, key.hex() + suffix)

    # -- reading ---------------------------------------------------------------------
    def load(self, key: bytes, suffix: str = SUFFIX, stats: CacheStats | None = None):
        """The entry stored under `key` in a file of `suffix`, or None; counted in
        `stats` (default STATS, the code entries')."""
        stats = stats or STATS
        path = self.entry_path(key, suffix)
        data, mtime = self.read_private(path, stats)
        entry = decode_entry(data, key) if data is not None else None
        if entry is None:
            stats.misses += 1
            if data is not None:
                stats.rejected += 1
            return None
        stats.hits += 1
        if not 0 <= time.time() - mtime < REFRESH_SECONDS:
            try:
                os.utime(path)  # recently used: evicted last
            except OSError:
                pass
        return entry

    def read_private(self, path: str, stats: CacheStats) -> tuple[bytes | None, float]:
        """The bytes (else None) and mtime of a regular file of the user's alone, not
        over the bound; another file found there counts as rejected in `stats`."""
        try:
            with open(os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_BINARY), "rb") as file:
                st = os.fstat(file.fileno())
                if not stat.S_ISREG(st.st_mode) or not is_private(st) \
                        or st.st_size > max(self.max_bytes, HEADER.size):
                    stats.rejected += 1
                    return None, 0.0
                return file.read(st.st_size), st.st_mtime
        except (OSError, ValueError):
            return None, 0.0

    # -- writing ---------------------------------------------------------------------
    def store(self, key: bytes, entry, suffix: str = SUFFIX,
              stats: CacheStats | None = None) -> None:
        """Writes an entry (see write_private), counted in `stats` (default STATS)."""
        if not self.writable:  # (nothing to encode for a directory it cannot write)
            return
        data = encode_entry(key, entry)
        path = self.entry_path(key, suffix)
        if len(data) > self.max_bytes or not self.write_private(path, data):
            return
        (stats or STATS).stores += 1
        # A scan at the first write, then only when the running total may be over.
        if self._total_bytes is not None and self._total_bytes + len(data) <= self.max_bytes:
            self._total_bytes += len(data)
        else:
            self._total_bytes = self.evict()

    def write_private(self, path: str, data: bytes) -> bool:
        """Writes `data` as `path` (mode 0o600): to a temporary file, renamed over. False
        (and no more writes in this process) when the directory cannot be written."""
        if not self.writable:
            return False
        temp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY,
                         0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(temp, path)
        except OSError:
            self.writable = False
            try:
                os.remove(temp)
            except OSError:
                pass
            return False
        return True

    def evict(self) -> int:
        """Deletes the least recently used files (and stale temporary ones) down to
        EVICT_TO of the bound, if over it; returns the total."""
        files, total, now = [], 0, time.time()
        try:
            with os.scandir(self.path) as entries:
                for item in entries:
                    if not item.name.endswith((SUFFIX, MODULE_SUFFIX, TEMP_SUFFIX)):
                        continue
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_size
                    if item.name.endswith(TEMP_SUFFIX) and now - st.st_mtime < STALE_TEMP_SECONDS:
                        continue  # another process is writing it
                    files.append((st.st_mtime_ns, st.st_size, item.path))
        except OSError:
            return 0
        if total <= self.max_bytes:
            return total
        files.sort()
        for _, size, path in files:
            if total <= self.max_bytes * EVICT_TO:
                break
            try:
                os.remove(path)
            except FileNotFoundError:  # evicted by another process meanwhile
                pass
            except OSError:
                continue
            total -= size
        return total


def encode_entry(key: bytes, entry) -> bytes:
    payload = marshal.dumps(entry)
    return HEADER.pack(FILE_MAGIC, key, len(payload), zlib.crc32(payload)) + payload


def decode_entry(data: bytes, key: bytes):
    """The entry in a file's bytes, or None when they are not a whole, intact entry
    of `key` (short, torn or foreign)."""
    if len(data) < HEADER.size:
        return None
    magic, stored_key, length, payload_crc = HEADER.unpack_from(data)
    payload = memoryview(data)[HEADER.size:]
    if magic != FILE_MAGIC or stored_key != key or length != len(payload) \
            or zlib.crc32(payload) != payload_crc:
        return None
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
