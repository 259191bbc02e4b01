"""Compiled models kept across processes, in the `compiled/` folder of vmrt's cache
directory (vmrt.vm.code_cache: VMRT_CACHE_DIR; off with VMRT_CACHE=0).

An entry is a .vmfb (and its .irpa when the weights went to one) and a record of
how it was made: the flags chosen and why, the entry function, the inputs and
outputs the source named. Its key hashes the source's content, the target and
options, the compiler's version and the host's CPU (code for
`--iree-llvmcpu-target-cpu=host` runs only on a CPU with its features). A source
file read by path leaves an alias, its key by the file's identity and change
times, so that a later process finds the entry without reading, hashing, let
alone importing, a large model: a hit imports neither onnx nor the compiler (the
one place vmrt finds a file again by its stat: hashing a model of hundreds of MB
would cost more than loading its build).

Files are written to a temporary name and renamed over; the record is written
last, so a record names only whole files. The builds are bounded in total
(VMRT_COMPILE_CACHE_MAX_BYTES, default 4 GiB): a store going over deletes the
least recently used ones. Records are read through the code
cache's checks (owner, modes, CRC); the files they name are used only when they
are regular files of the user's own with the size recorded, and are mapped, not
read (a model's weights stay in the page cache).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from vmrt.compiler.flags import compiler_identity, host_cpu_features
from vmrt.vm import code_cache

__all__ = ["CompileCache", "STATS", "compile_cache", "source_key"]

#: The layout of the records (part of every key).
RECORD_VERSION = 1
#: The bound on the folder's builds (VMRT_COMPILE_CACHE_MAX_BYTES): a store taking the
#: total over it deletes the least recently used builds (a hit refreshes its mtime).
DEFAULT_MAX_BYTES = 4 << 30
RECORD_SUFFIX = ".vcr"
#: A source file's alias: its key by identity and change times -> its content digest.
ALIAS_SUFFIX = ".vca"
BUILD_SUFFIXES = (".vmfb", ".irpa", RECORD_SUFFIX, ALIAS_SUFFIX)
MAX_RECORD_BYTES = 1 << 20
STATS = code_cache.CacheStats()
ALIAS_STATS = code_cache.CacheStats()  # (apart: STATS counts builds found)
#: A file last changed at least this long ago (seconds) has its alias recorded: longer
#: than the coarsest clock of common file systems (FAT's 2 s), so that a file changed
#: again within its clock's tick is not taken for the one hashed.
SETTLED_SECONDS = 3.0
_folders: dict[str, "CompileCache"] = {}


@dataclass
class CachedBuild:
    """A hit: the module file, its parameter archive (or None) and the record."""

    vmfb: str
    irpa: Optional[str]
    record: dict


class CompileCache:
    """The `compiled/` folder of a cache directory."""

    def __init__(self, folder: code_cache.CodeCache):
        self.folder = folder

    def lookup(self, key: bytes) -> Optional[CachedBuild]:
        record = self.folder.load(key, RECORD_SUFFIX, STATS)
        if record is None:
            return None
        vmfb = os.path.join(self.folder.path, record["vmfb"])
        irpa = os.path.join(self.folder.path, record["irpa"]) if record.get("irpa") else None
        if not _vetted(vmfb, record["vmfb_size"]) or \
                (irpa is not None and not _vetted(irpa, record.get("irpa_size"))):
            STATS.hits -= 1  # (load counted it: the files it names do not pass)
            STATS.rejected += 1
            STATS.misses += 1
            return None
        for path in (vmfb, irpa):
            _refresh(path)
        return CachedBuild(vmfb, irpa, record)

    def store(self, key: bytes, vmfb: bytes, record: dict,
              irpa: Optional[Path] = None) -> Optional[CachedBuild]:
        """Keeps a build (`irpa`: a parameter archive to move in); None when the
        folder cannot be written."""
        name = key.hex()
        vmfb_path = os.path.join(self.folder.path, f"{name}.vmfb")
        if not self.folder.write_private(vmfb_path, vmfb):
            return None
        record = dict(record, vmfb=f"{name}.vmfb", vmfb_size=len(vmfb), irpa="")
        irpa_path = None
        if irpa is not None:
            irpa_path = os.path.join(self.folder.path, f"{name}.irpa")
            try:
                os.chmod(irpa, 0o600)
                os.replace(irpa, irpa_path)  # (written in this folder: a rename)
            except OSError:
                return None
            record.update(irpa=f"{name}.irpa", irpa_size=os.path.getsize(irpa_path))
        self.folder.store(key, record, RECORD_SUFFIX, STATS)
        self.evict(_max_bytes())
        return CachedBuild(vmfb_path, irpa_path, record)

    def evict(self, max_bytes: int) -> None:
        """Deletes the least recently used builds (all files of a key at once) while the
        builds take more than `max_bytes`."""
        builds: dict[str, list] = {}
        try:
            with os.scandir(self.folder.path) as entries:
                for item in entries:
                    name, dot, suffix = item.name.partition(".")
                    if dot and "." + suffix in BUILD_SUFFIXES:
                        info = item.stat(follow_symlinks=False)
                        builds.setdefault(name, []).append((info.st_mtime, info.st_size,
                                                            item.path))
        except OSError:
            return
        total = sum(size for files in builds.values() for _, size, _ in files)
        for files in sorted(builds.values(), key=lambda files: max(f[0] for f in files)):
            if total <= max_bytes:
                break
            for _, size, path in files:
                try:
                    os.remove(path)
                    total -= size
                except OSError:
                    pass

    def temporary_path(self, suffix: str) -> Path:
        """A fresh name in the folder for a file the compiler writes (an .irpa): a
        rename then moves it in; one a crash leaves behind is evicted as stale."""
        return Path(self.folder.path) / \
            f"new.{os.getpid()}.{os.urandom(4).hex()}{suffix}{code_cache.TEMP_SUFFIX}"


def _max_bytes() -> int:
    try:
        return max(0, int(os.environ.get("VMRT_COMPILE_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES)))
    except ValueError:
        return DEFAULT_MAX_BYTES


def _refresh(path: Optional[str]) -> None:
    """Marks a build's file recently used (eviction keeps it longest), if a minute old."""
    if path is None:
        return
    try:
        if time.time() - os.stat(path).st_mtime >= code_cache.REFRESH_SECONDS:
            os.utime(path)
    except OSError:
        pass


def _vetted(path: str, size: object) -> bool:
    """Whether `path` is a regular file of the user's alone, of the recorded size."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and code_cache.is_private(info) and info.st_size == size


def compile_cache() -> Optional[CompileCache]:
    """The compile cache of the environment's cache directory, or None when the cache
    is off, the folder is not the user's alone, or the compiler is not installed."""
    cache = code_cache.default_cache()
    if cache is None or compiler_identity() is None:
        return None
    found = _folders.get(cache.path)
    if found is None:
        folder = code_cache.CodeCache(os.path.join(cache.path, "compiled"), MAX_RECORD_BYTES)
        found = _folders[cache.path] = CompileCache(folder)
    return found if found.folder.usable else None


def content_digest(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=32).digest()


def source_key(cache: Optional[CompileCache], path: Optional[Path], content_of,
               options: tuple) -> bytes:
    """The key of a build: the source's digest (from its file's alias when it has one;
    else of `content_of()`, the bytes, and the alias recorded once the file has
    settled), the options, the compiler and the host."""
    digest = None
    alias = _file_alias(path) if path is not None else None
    if cache is not None and alias is not None:
        digest = cache.folder.load(alias[0], ALIAS_SUFFIX, ALIAS_STATS)
    if digest is None:
        digest = content_digest(content_of())
        if cache is not None and alias is not None and _settled(alias[1]):
            cache.folder.store(alias[0], digest, ALIAS_SUFFIX, ALIAS_STATS)
    parts = ("compiled", RECORD_VERSION, _package_fingerprint(), compiler_identity(),
             host_cpu_features(), options, digest)
    return hashlib.blake2b(repr(parts).encode(), digest_size=32).digest()


_fingerprint: Optional[bytes] = None


def _package_fingerprint() -> bytes:
    """vmrt's build id and this package's sources (the flags and imports that made a
    build change with them), found once per process."""
    global _fingerprint
    if _fingerprint is None:
        vmrt_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        _fingerprint = code_cache.build_id() + code_cache.source_digest(vmrt_root,
                                                                        ("compiler",))
    return _fingerprint


def _settled(info: os.stat_result) -> bool:
    return time.time() - max(info.st_mtime, info.st_ctime) >= SETTLED_SECONDS


def _file_alias(path: Path):
    """(the alias key of a source file, its stat), or None when it cannot be told apart."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not info.st_ino:
        return None
    parts = ("source", RECORD_VERSION, os.path.abspath(path), info.st_dev, info.st_ino,
             info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    return hashlib.blake2b(repr(parts).encode(), digest_size=32).digest(), info
