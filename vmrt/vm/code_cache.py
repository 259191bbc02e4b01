"""An on-disk cache of the code generated for bytecode functions, like __pycache__.

Creating the first context of a compiled model is dominated by generating Python
source for its functions (vmrt.vm.codegen) and compiling it, and every new process
would pay that again. BytecodeModule.compiled (vmrt.vm.module) asks this cache
first: an entry holds one function variant's code object, its line -> bytecode
offset map and its source (CompiledFunction), marshalled, in a file of its own.
The same directory and file format keep verified modules (vmrt.vm.module_cache)
and, in one file per group, the small generated helpers every process compiles
alike (compile_snippet).

The key of an entry is a hash of everything the generated code depends on:

- the module's content digest (BytecodeModule.content_digest: the key
  vmrt.vm.module_cache gave its bytes, else its bytecode and the descriptors,
  signatures, imports and names the generator reads; and its name);
- the function ordinal, the CodegenOptions and the host-entry flag;
- the runtime: a hash of the sources of vmrt.vm, vmrt.isa and vmrt.format (the
  generator and everything it reads) and of vmrt.native (its adapters are keyed
  snippets), stronger than the version string, which an editable install keeps
  while the code changes; and vmrt.__version__ when there is one. A source counts
  by its name, size and modification time (to the nanosecond), as __pycache__
  tells a changed source (to the second): reading them all would cost a process
  ~1 ms of its start. The stats run on a C thread started at import
  (_start_fingerprint), beside the process's other first work;
- Python: importlib.util.MAGIC_NUMBER, the implementation's cache tag and the
  optimization level (-O drops asserts at compile time);
- the format of the files (FORMAT_VERSION).

So an entry written by another vmrt, Python or format is never found. A file is
named by its key hash and records the key hash again, its payload's length and
CRC-32 (it detects accidents, as the security note below says of any check here;
blake2b would cost a ~100 KB entry 0.1 ms more to read); it is written to a
temporary file in the same directory and renamed over
(os.replace), so concurrent processes see a whole file or none, and a reader
that finds a short, corrupt or foreign file generates the code again (and
overwrites the file); reading never fails.

Environment:

- VMRT_CACHE=0 (or off, false, no): no cache, nothing read or written;
- VMRT_CACHE_DIR: the cache directory (default $XDG_CACHE_HOME/vmrt, else
  ~/.cache/vmrt);
- VMRT_CACHE_MAX_BYTES: the bound on the total size of the files (default 256
  MiB); a write that takes the total over it deletes the least recently used
  files (oldest mtime; a hit refreshes its file's mtime, if a minute old) down to
  90% of it.

A directory that cannot be created or is not a directory leaves vmrt running
without the cache; one that cannot be written is still read. Neither is an error.

Security: an entry is code that this process runs; its hash only detects
accidents (a torn or truncated file), not an attacker. So the cache must be
writable by its user alone: the directory is created with mode 0o700 and files
with 0o600, and a directory or file owned by another user, or writable by its
group or by others, is never read (the cache is off for such a directory).
Whoever can write the cache directory can run code as its user, as with
__pycache__ or the user's site-packages. On systems without POSIX user ids
(Windows) the ownership checks are skipped.
"""

from __future__ import annotations

import atexit
import marshal
import os
import stat
import struct
import sys
import time
import types
import zlib
from importlib.util import MAGIC_NUMBER

from vmrt.environment import switched_on
from vmrt.memory import c_extension

try:  # hashlib's import loads OpenSSL (~3 ms of start-up); its blake2b is this one
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without the _blake2 module
    from hashlib import blake2b

#: The layout of cache files; part of every key.
FORMAT_VERSION = 3
FILE_MAGIC = b"VMRTCODE"
#: File header: magic, key digest, payload length, payload CRC-32.
HEADER = struct.Struct("<8s32sQI")
#: Files by what they hold: a function variant's code (vmrt.vm.module), a verified
#: module's snapshot and a module file's key (vmrt.vm.module_cache), the snippets
#: compile_snippet compiled.
SUFFIX = ".vmc"
MODULE_SUFFIX = ".vmm"
#: A module file's key by the file's stat (vmrt.vm.module_cache, file_alias).
ALIAS_SUFFIX = ".vma"
SNIPPETS_SUFFIX = ".vms"
ENTRY_SUFFIXES = (SUFFIX, MODULE_SUFFIX, ALIAS_SUFFIX, SNIPPETS_SUFFIX)
TEMP_SUFFIX = ".tmp"
DEFAULT_MAX_BYTES = 256 << 20
#: Eviction goes down to this fraction of the bound, so that it does not run again
#: at the next write.
EVICT_TO = 0.9
#: A temporary file this old (seconds) was left by a writer that died.
STALE_TEMP_SECONDS = 3600
#: A hit refreshes its file's mtime only when it is older than this (seconds): the
#: eviction order needs no finer grain, and each refresh is a metadata write.
REFRESH_SECONDS = 60
#: Packages whose sources shape generated code (hashed into every key): the code
#: generator and what it reads, the C tier's generator (its builds' keys: ctier.build)
#: and the makers of keyed snippets (compile_snippet). Each directory is hashed on its
#: own, its subpackages not: each is named.
RUNTIME_PACKAGES = ("vmrt.vm", "vmrt.vm.ctier", "vmrt.isa", "vmrt.format", "vmrt.native")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


class CacheStats:
    """What the caches of this process did (for tests and benchmarks)."""

    def __init__(self):
        self.hits = 0
        self.misses = 0
        self.stores = 0
        self.rejected = 0  # files found but not trusted: corrupt, foreign, unsafe

    def __repr__(self) -> str:
        return (f"CacheStats(hits={self.hits}, misses={self.misses}, stores={self.stores}, "
                f"rejected={self.rejected})")


STATS = CacheStats()
_CACHES: dict[tuple[str, int], "CodeCache"] = {}
#: What default_cache reads, and the (directory, bound) it found for their values.
_ENVIRONMENT = ("VMRT_CACHE", "VMRT_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "USERPROFILE",
                "VMRT_CACHE_MAX_BYTES")
_SETTINGS: dict[tuple, tuple[str, int] | None] = {}
_runtime_fingerprint: bytes | None = None
#: (pid, vmrt's version) of the C thread stating the fingerprint's sources, or None.
_fingerprint_job: tuple[int, str] | None = None


def is_code_entry(entry) -> bool:
    """Whether a payload is what vmrt.vm.module stores: CompiledFunction.entry()."""
    return (type(entry) is tuple and len(entry) == 2 and type(entry[0]) is types.CodeType
            and type(entry[1]) is bytes)


class CompiledFunction:
    """A function variant's code object, line -> bytecode offset map and source.

    Unpacks as (code, line_pcs, source). In a cache entry the map and the source are
    marshalled and compressed apart from the code (entry()) and decoded when first
    asked for: only errors (VM stacks) and tools read them, and reading them whole
    (a large function's map has thousands of numbers, its source tens of KB) cost a
    process more than reading the code."""

    __slots__ = ("code", "_debug", "_line_pcs", "_source")

    def __init__(self, code: types.CodeType, line_pcs: list | None = None,
                 source: str | None = None, *, debug: bytes | None = None):
        self.code = code
        self._line_pcs = line_pcs
        self._source = source
        self._debug = debug  # (line_pcs, source) marshalled and compressed, not decoded yet

    @classmethod
    def from_entry(cls, entry: tuple) -> "CompiledFunction":
        code, debug = entry
        return cls(code, debug=debug)

    def entry(self) -> tuple:
        """The payload of its cache entry (is_code_entry)."""
        return self.code, zlib.compress(marshal.dumps((self.line_pcs, self.source)), 1)

    @property
    def line_pcs(self) -> list:
        if self._debug is not None:
            self._decode()
        return self._line_pcs

    @property
    def source(self) -> str:
        if self._debug is not None:
            self._decode()
        return self._source

    def _decode(self) -> None:
        self._line_pcs, self._source = marshal.loads(zlib.decompress(self._debug))
        self._debug = None

    def __iter__(self):
        return iter((self.code, self.line_pcs, self.source))


class EntryKind:
    """A kind of entry: its file suffix, the test a payload's shape must pass and
    the stats it counts in (None: STATS, the code entries' own)."""

    def __init__(self, suffix: str, is_entry, stats: CacheStats | None = None):
        self.suffix = suffix
        self.is_entry = is_entry
        self.stats = stats


CODE = EntryKind(SUFFIX, is_code_entry)


def default_cache() -> "CodeCache | None":
    """The cache the environment asks for, or None when it is off or unusable."""
    environment = tuple(map(os.environ.get, _ENVIRONMENT))
    key = _SETTINGS.get(environment, False)
    if key is False:  # (a process asks a few times per module: the path is worked out once)
        key = _settings()
        directory = environment[1]
        if not directory or os.path.isabs(os.path.expanduser(directory)):
            _SETTINGS[environment] = key  # (a relative one follows the working directory)
    if key is None or runtime_fingerprint() is None:
        return None
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = CodeCache(*key)
    return cache if cache.usable else None


def _settings() -> tuple[str, int] | None:
    """(directory, bound) of the cache the environment asks for, or None when it is off."""
    if not switched_on("VMRT_CACHE"):
        return None
    path = cache_directory()
    return (path, max_bytes()) if path is not None else None


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
    digest = blake2b(digest_size=32)
    digest.update(bytecode if not isinstance(bytecode, list) else bytes(bytecode))
    digest.update(description.encode("utf-8", "surrogatepass"))
    return digest.digest()


def entry_key(content: bytes, ordinal: int, options, host_entry: bool) -> bytes:
    """The key of one function variant: see the module docstring."""
    parts = (FORMAT_VERSION, runtime_fingerprint(), MAGIC_NUMBER,
             sys.implementation.cache_tag, sys.flags.optimize, content, ordinal,
             repr(options), host_entry)
    return blake2b(repr(parts).encode(), digest_size=32).digest()


def runtime_fingerprint() -> bytes | None:
    """A hash of the vmrt sources that shape generated code, computed once per process;
    None when there are no source files to hash (a zip import...): then no entry can
    be told to be this runtime's, and the cache is off."""
    global _runtime_fingerprint
    if _runtime_fingerprint is None:
        fingerprint = _started_fingerprint()
        _runtime_fingerprint = fingerprint if fingerprint is not None else \
            _fingerprint(*_runtime_location())
    return _runtime_fingerprint or None


def _runtime_location() -> tuple[str, str]:
    """(vmrt's directory, or "" when it has no file; repr of its version)."""
    vmrt = sys.modules.get("vmrt")
    if vmrt is None:  # pragma: no cover - (vmrt is imported before its subpackages)
        import vmrt
    return (os.path.dirname(getattr(vmrt, "__file__", None) or ""),
            repr(getattr(vmrt, "__version__", None)))


def _package_directories(root: str) -> list[str]:
    """The directories of RUNTIME_PACKAGES under vmrt's `root` (found without importing)."""
    return [os.path.join(root, *package.split(".")[1:]) for package in RUNTIME_PACKAGES]


def _fingerprint(root: str, version: str) -> bytes:
    """runtime_fingerprint's hash (b"": no sources found) of the packages under `root`."""
    digest = blake2b(version.encode(), digest_size=32)
    found = 0
    if root:
        for directory in _package_directories(root):
            found += _hash_sources(digest, directory)
    return digest.digest() if found else b""


def _start_fingerprint() -> None:
    """Starts stating the sources of the fingerprint on a C thread, at import (see
    vmrt_files.c): ~40 stats cost a new process ~0.25 ms of system calls, and it
    mostly does other work (its device, its parameters) before its first cache
    lookup, which then takes the records made meanwhile. The thread never needs the
    GIL. Without the C extension (or a thread) the lookup stats them itself."""
    global _fingerprint_job
    ffi, lib, _ = c_extension()
    root, version = _runtime_location()
    if lib is None or not root or not switched_on("VMRT_CACHE"):
        return
    names = b"".join(os.fsencode(directory) + b"\0" for directory in _package_directories(root))
    if lib.vmrt_records_start(names, len(names)) == 0:
        _fingerprint_job = (os.getpid(), version)


def _started_fingerprint() -> bytes | None:
    """The fingerprint of the records _start_fingerprint's thread made, or None when
    there are none to take (none started in this process: a fork's child inherits
    the job, not the thread; taken; failed)."""
    global _fingerprint_job
    job, _fingerprint_job = _fingerprint_job, None
    if job is None or job[0] != os.getpid():
        return None
    ffi, lib, _ = c_extension()
    count = ffi.new("int64_t *")
    capacity = _TAKE_CAPACITY
    for _ in range(2):  # (too small, the first call says what the second needs)
        out = ffi.new("unsigned char[]", capacity)
        written = lib.vmrt_records_take(out, capacity, count)
        if written != -2:
            break
        capacity = count[0]
    if written < 0:
        return None
    digest = blake2b(job[1].encode(), digest_size=32)
    digest.update(ffi.buffer(out, written))
    return digest.digest() if count[0] else b""


def _hash_sources(digest, directory: str) -> int:
    """Adds the records of a directory's .py (or, sourceless, .pyc) files; returns
    how many."""
    records, count = source_records(directory)
    digest.update(records)
    return count


#: What follows a source's name and NUL in its record: its size and st_mtime_ns.
_SOURCE_STAT = struct.Struct("<qq")
#: The records' room in the C call's first try: ~40 bytes a source.
_RECORDS_CAPACITY = 1 << 14
#: The first try's room for all the packages' records (~1 KB now; fresh pages cost
#: a new process more than a second try would).
_TAKE_CAPACITY = 1 << 13


def source_records(directory: str) -> tuple[bytes, int]:
    """The name, NUL, size and st_mtime_ns (little-endian 64-bit) of each *.py and
    *.pyc entry of `directory` in byte order of the names, and how many; (b"", 0)
    when it or an entry cannot be read. One C call (vmrt_files.c) when the extension
    is there, else python_source_records: the same bytes."""
    ffi, lib, _ = c_extension()
    if lib is None:
        return python_source_records(directory)
    path, count = os.fsencode(directory), ffi.new("int64_t *")
    capacity = _RECORDS_CAPACITY
    for _ in range(2):  # (too small, the first call says what the second needs)
        out = ffi.new("unsigned char[]", capacity)
        written = lib.vmrt_source_records(path, out, capacity, count)
        if written >= 0:
            return ffi.buffer(out, written)[:], count[0]
        if written == -1:
            break
        capacity = count[0]
    return b"", 0


def python_source_records(directory: str) -> tuple[bytes, int]:
    """source_records in Python (the C extension's twin)."""
    try:
        with os.scandir(directory) as entries:
            found = sorted((os.fsencode(entry.name), entry.stat()) for entry in entries
                           if entry.name.endswith((".py", ".pyc")))
    except OSError:
        return b"", 0
    return b"".join(name + b"\0" + _SOURCE_STAT.pack(st.st_size, st.st_mtime_ns)
                    for name, st in found), len(found)


def _private(st: os.stat_result) -> bool:
    """Whether a directory or file is the user's alone (see the module docstring)."""
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
        return stat.S_ISDIR(st.st_mode) and _private(st)

    def entry_path(self, key: bytes, kind: EntryKind = CODE) -> str:
        return os.path.join(self.path, key.hex() + kind.suffix)

    # -- reading ---------------------------------------------------------------------
    def load(self, key: bytes, kind: EntryKind = CODE):
        """The entry of `kind` stored under `key` (code: CompiledFunction.entry()), or None."""
        stats = kind.stats or STATS
        path = self.entry_path(key, kind)
        data, mtime = self.read_private(path, stats)
        entry = decode_entry(data, key, kind.is_entry) if data is not None else None
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
        """The bytes of a regular file of the user's own (else None) and its mtime; a
        file found but not trusted (another user's, writable by others, over the
        bound) counts as rejected in `stats`. Also reads the C tier's builds
        (vmrt.vm.ctier.build)."""
        try:
            fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_BINARY)
        except (OSError, ValueError):
            return None, 0.0
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _private(st) \
                    or st.st_size > max(self.max_bytes, HEADER.size):
                stats.rejected += 1
                return None, 0.0
            chunks, remaining = [], st.st_size
            while remaining > 0:
                chunk = os.read(fd, remaining)
                if not chunk:  # truncated while read: decode_entry rejects it
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks), st.st_mtime
        except OSError:
            return None, 0.0
        finally:
            os.close(fd)

    # -- writing ---------------------------------------------------------------------
    def store(self, key: bytes, entry, kind: EntryKind = CODE) -> None:
        """Writes an entry (atomically replacing any file of that key); gives up
        quietly, for the rest of the process, when the directory cannot be written."""
        if not self.writable:
            return
        data = encode_entry(key, entry)
        if len(data) > self.max_bytes:
            return
        if not self.write_private(self.entry_path(key, kind), data):
            return
        (kind.stats or STATS).stores += 1
        self._account(len(data))

    def write_private(self, path: str, data: bytes) -> bool:
        """Writes `data` as `path` (mode 0o600), atomically replacing any file there: to a
        temporary file beside it, renamed over. False (and no more writes in this
        process) when the directory cannot be written: full, read-only, not ours."""
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

    def _account(self, written: int) -> None:
        """Keeps the total under the bound, scanning the directory only when the
        running total of this process says it may be over (and at its first write)."""
        if self._total_bytes is not None and self._total_bytes + written <= self.max_bytes:
            self._total_bytes += written
        else:
            self._total_bytes = self.evict()

    def evict(self) -> int:
        """Deletes the least recently used files (temporary files left by a writer that
        died among them) until the total is at most EVICT_TO of the bound, if it was
        over it; returns the total."""
        files, total, now = [], 0, time.time()
        try:
            with os.scandir(self.path) as entries:
                for item in entries:
                    if not item.name.endswith((*ENTRY_SUFFIXES, TEMP_SUFFIX)):
                        continue
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if item.name.endswith(TEMP_SUFFIX) and now - st.st_mtime < STALE_TEMP_SECONDS:
                        total += st.st_size  # another process is writing it
                        continue
                    files.append((st.st_mtime_ns, st.st_size, item.path))
                    total += st.st_size
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


def decode_entry(data: bytes, key: bytes, is_entry=is_code_entry):
    """The entry in a file's bytes, or None when they are not a whole, intact entry
    of `key` (short, torn, foreign, or of another shape than `is_entry` wants)."""
    if len(data) < HEADER.size:
        return None
    magic, stored_key, length, payload_crc = HEADER.unpack_from(data)
    payload = memoryview(data)[HEADER.size:]
    if magic != FILE_MAGIC or stored_key != key or length != len(payload) \
            or zlib.crc32(payload) != payload_crc:
        return None
    try:
        entry = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return entry if is_entry(entry) else None


# -- snippets ------------------------------------------------------------------------------------
#: The bound on the snippets kept (the generated helpers are a few dozen).
MAX_SNIPPETS = 1024
SNIPPET_STATS = CacheStats()
SNIPPETS = EntryKind(SNIPPETS_SUFFIX, lambda entry: type(entry) is dict and all(
    type(name) is bytes and type(code) is types.CodeType for name, code in entry.items()),
    SNIPPET_STATS)
#: This process's snippets by group, then by the digest of their file name and source
#: (a group not there: its stored ones not read yet); the groups with new ones, and
#: the cache those go to (None: none new).
_snippets: dict[str, dict[bytes, types.CodeType]] = {}
_new_groups: set[str] = set()
_snippets_cache: "CodeCache | None" = None


def compile_snippet(source, filename: str, key: str | None = None, *,
                    group: str = "") -> types.CodeType:
    """compile(source, filename, "exec") for the small helpers vmrt generates alike in
    every process (FlatBuffer binders, native adapters): all those of a `group` are
    kept in one file, read at the group's first snippet, so a new process compiles
    none of them (a dozen compiles cost milliseconds; a read, tens of microseconds),
    and reads no group it does not use (a module found in vmrt.vm.module_cache needs
    no binder). The files are keyed by the Python (a code object is), the runtime
    fingerprint and the group, snippets by their source. A process writes the groups
    it compiled new snippets of at its exit (store_snippets): once, not per snippet.

    With a `key`, `source` is a function making the source, called only when the
    snippet is not found: the key names the snippet in its stead, so that a process
    finding it does not generate the source either. The key must tell apart all the
    sources its generator makes, and the generator must be in RUNTIME_PACKAGES (the
    fingerprint then changes with the code making the source)."""
    global _snippets_cache
    snippets = _snippets.get(group)
    if snippets is None:
        cache = default_cache()
        snippets = _snippets[group] = (cache.load(_snippets_key(group), SNIPPETS)
                                       if cache is not None else None) or {}
    named = f"{filename}\0key\0{key}" if key is not None else f"{filename}\0{source}"
    name = blake2b(named.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    code = snippets.get(name)
    if code is None:
        code = compile(source() if key is not None else source, filename, "exec")
        if len(snippets) < MAX_SNIPPETS:
            snippets[name] = code
            _new_groups.add(group)
            if _snippets_cache is None:
                _snippets_cache = default_cache()  # (the cache of now: not the one at exit)
                if _snippets_cache is not None:
                    atexit.register(store_snippets)
    return code


def store_snippets() -> None:
    """Writes each group this process compiled new snippets of (the whole file: another
    process's last write wins, and what it lacks is compiled and written again)."""
    global _snippets_cache
    cache, _snippets_cache = _snippets_cache, None
    groups = sorted(_new_groups)
    _new_groups.clear()
    if cache is not None:
        for group in groups:
            cache.store(_snippets_key(group), _snippets[group], SNIPPETS)


def _snippets_key(group: str = "") -> bytes:
    parts = ("snippets", group, FORMAT_VERSION, runtime_fingerprint(), MAGIC_NUMBER,
             sys.implementation.cache_tag, sys.flags.optimize)
    return blake2b(repr(parts).encode(), digest_size=32).digest()


_start_fingerprint()
