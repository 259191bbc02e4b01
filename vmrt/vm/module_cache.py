"""Verified modules kept across processes: a module's read, its verified functions
and its summary (vmrt.vm.module_summary), stored in the code cache directory
(vmrt.vm.code_cache) under a hash of its bytes.

A later process loading the same bytes neither reads them through the verifying
FlatBuffer reader (nor imports numpy for it) nor verifies their bytecode again:
contexts take what they need from the summary, and the definition is made of the
read's snapshot (vmrt.format.module_from_snapshot) only when something asks for it.
Only modules that passed every check are stored, so a hit gives what reading and
verifying would have given, and a module that fails always goes through them and
fails as it did.

The key is a blake2b hash of the bytes up to the end of the FlatBuffer and the
file's size (all that reading and verifying look at: external rodata is only
located, by offsets the FlatBuffer holds and bounds the size gives), the runtime
fingerprint (the reader's and verifier's sources), the layouts of the entry and
the snapshot and the Python. So the key is also a digest of all the module holds
for this runtime (BytecodeModule.content_digest derives from it). The hash must
resist collisions, not only accidents: a module made to collide with a stored one
would skip verification. FlatBuffers over MAX_HASHED_BYTES are not kept (hashing
large embedded data would cost more than the verification it saves, which does
not read it).

A module read from a path also leaves an alias: its key stored under the file's
path, identity and change times (device, inode, size, mtime and ctime to the
nanosecond), so that a later process finds it without hashing the file (0.2 ms
of a 67 KB module's first context), as git's index finds unchanged files (and as
__pycache__ trusts a source's mtime and size). A
rewrite of the file changes its ctime, which no user can set; but a file system
stamps times from a coarse clock (a few milliseconds, or seconds), so two writes
within one tick can leave equal times: as git does with "racy" entries, no alias
is made of a file changed less than SETTLED_SECONDS before (it is hashed each
time until then), so a time still in the current tick is never recorded."""

from __future__ import annotations

import dataclasses
import functools
import marshal
import sys
import time
from importlib.util import MAGIC_NUMBER

from vmrt.format.archive import parse_archive
from vmrt.format.flatbuffer import SNAPSHOT_VERSION
from vmrt.format.mapped import MappedFile
from vmrt.format.module_def import module_from_snapshot, open_module_buffer, \
    read_module_and_snapshot
from vmrt.vm import code_cache
from vmrt.vm.module_summary import ModuleSummary, summarize
from vmrt.vm.verifier import VerifiedFunction, verify_module

MAX_HASHED_BYTES = 16 << 20
#: A file last changed at least this long ago (seconds) has its alias recorded: longer
#: than the coarsest clock of common file systems (FAT's 2 s).
SETTLED_SECONDS = 3.0
#: The layout of the entries below (part of their key).
ENTRY_VERSION = 2
#: How the reader's binders are compiled: kept in a snippet group of their own, which
#: a process reading no definition (all its modules found here) never loads.
_compile_binder = functools.partial(code_cache.compile_snippet, group="binders")
STATS = code_cache.CacheStats()
#: An entry: (the marshalled snapshot, the verified functions' fields, the summary).
MODULE = code_cache.EntryKind(code_cache.MODULE_SUFFIX, lambda entry: (
    type(entry) is tuple and len(entry) == 3 and type(entry[0]) is bytes
    and type(entry[1]) is list and type(entry[2]) is tuple
    and len(entry[2]) == len(ModuleSummary._fields)), STATS)
#: An alias: the key of a module file (see the module docstring).
ALIAS_STATS = code_cache.CacheStats()
ALIAS = code_cache.EntryKind(code_cache.ALIAS_SUFFIX, lambda entry: (
    type(entry) is bytes and len(entry) == 32), ALIAS_STATS)


class VerifiedModule:
    """A module's bytes read and verified: now, or by an earlier process (from the
    cache: then its definition is made from the stored snapshot when first asked for)."""

    __slots__ = ("buf", "key", "verified", "summary", "_definition", "_snapshot")

    def __init__(self, buf: memoryview | None, key: bytes | None, verified: list,
                 summary: ModuleSummary, definition=None, snapshot: bytes | None = None):
        self.buf = buf
        #: module_key of the bytes (None: not kept), a digest of all the module holds.
        self.key = key
        self.verified = verified
        self.summary = summary
        self._definition = definition
        self._snapshot = snapshot

    def definition(self):
        """The module definition (BytecodeModuleDef)."""
        if self._definition is None:
            self._definition = module_from_snapshot(self.buf, marshal.loads(self._snapshot),
                                                    compile_source=_compile_binder)
            self._snapshot = None
        return self._definition

    def rodata(self) -> list[memoryview]:
        """The contents of each rodata segment."""
        ranges = self.summary.rodata
        if ranges is None or self.buf is None:
            return [segment.data for segment in self.definition().rodata_segments]
        buf = self.buf
        return [buf[offset:offset + length] for offset, length in ranges]


def read_verified(source) -> VerifiedModule:
    """The verified module of a path or bytes-like `source`: from the cache when it
    holds it, else read (vmrt.format) and verified, then stored. Raises what
    read_module and verify_module raise."""
    buf = open_module_buffer(source)
    cache = code_cache.default_cache()
    key = _cached_key(cache, buf) if cache is not None else None
    entry = cache.load(key, MODULE) if key is not None else None
    if entry is not None:
        snapshot, functions, summary = entry
        return VerifiedModule(buf, key, [VerifiedFunction(*function) for function in functions],
                              ModuleSummary._make(summary), snapshot=snapshot)
    definition, snapshot = read_module_and_snapshot(buf, compile_source=_compile_binder)
    verified = verify_module(definition)
    summary = summarize(definition, verified)
    if key is not None:
        cache.store(key, (marshal.dumps(snapshot), [_fields(function) for function in verified],
                          tuple(summary)), MODULE)
    return VerifiedModule(buf, key, verified, summary, definition)


def verify_definition(definition) -> VerifiedModule:
    """The verified module of a definition made in memory (nothing of it is kept)."""
    verified = verify_module(definition)
    return VerifiedModule(None, None, verified, summarize(definition, verified), definition)


def _cached_key(cache: code_cache.CodeCache, buf: memoryview) -> bytes | None:
    """module_key of the bytes, from the file's alias when it has one (else computed,
    and the alias recorded when the file has settled)."""
    alias = file_alias(buf)
    key = cache.load(alias, ALIAS) if alias is not None else None
    if key is None:
        key = module_key(buf)
        if key is not None and alias is not None and settled(buf.obj.stat):
            cache.store(alias, key, ALIAS)
    return key


def file_alias(buf: memoryview) -> bytes | None:
    """The alias key of a module mapped from a file (None: not from a file), of
    everything module_key hashes but the bytes, with the file's stat in their stead."""
    mapped = buf.obj
    if not isinstance(mapped, MappedFile) or len(buf) != len(mapped):
        return None
    info = mapped.stat
    if not info.st_ino:  # (a file system without inode numbers tells files apart less)
        return None
    parts = ("alias", *_runtime_parts(), mapped.path, info.st_dev, info.st_ino, info.st_size,
             info.st_mtime_ns, info.st_ctime_ns)
    return code_cache.blake2b(repr(parts).encode(), digest_size=32).digest()


def settled(info) -> bool:
    """Whether a file's last change is SETTLED_SECONDS old (see the module docstring)."""
    return time.time() - max(info.st_mtime, info.st_ctime) >= SETTLED_SECONDS


def module_key(buf: memoryview) -> bytes | None:
    """The key of a module's bytes (see the module docstring), or None when they are
    not kept: too large, or no module at all (reading them reports what is wrong)."""
    try:
        info = parse_archive(buf)
    except Exception:  # noqa: BLE001 - whatever it is, read_module reports it
        return None
    end = info.flatbuffer_offset + info.flatbuffer_length
    if info.flatbuffer_length > MAX_HASHED_BYTES or end > len(buf):
        return None
    parts = ("module", *_runtime_parts(), len(buf))
    digest = code_cache.blake2b(repr(parts).encode(), digest_size=32)
    digest.update(buf[:end])
    return digest.digest()


def _runtime_parts() -> tuple:
    """What a key of module_key's or file_alias's holds of the runtime: the entry and
    snapshot layouts, the cache format, vmrt's sources and the Python."""
    return (ENTRY_VERSION, SNAPSHOT_VERSION, code_cache.FORMAT_VERSION,
            code_cache.runtime_fingerprint(), MAGIC_NUMBER, sys.implementation.cache_tag)


def _fields(function: VerifiedFunction) -> tuple:
    return tuple(getattr(function, field.name) for field in dataclasses.fields(function))
