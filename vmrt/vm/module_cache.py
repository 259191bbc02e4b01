"""Verified modules kept across processes: a module's read and its verified functions,
stored in the code cache directory (vmrt.vm.code_cache) under a hash of its bytes.

A later process loading the same bytes neither reads them through the verifying
FlatBuffer reader (nor imports numpy for it) nor verifies their bytecode again:
it makes the same module of the read's snapshot (vmrt.format.module_from_snapshot).
Only modules that passed every check are stored, so a hit gives what reading and
verifying would have given, and a module that fails always goes through them and
fails as it did.

The key is a blake2b hash of the bytes up to the end of the FlatBuffer and the
file's size (all that reading and verifying look at: external rodata is only
located, by offsets the FlatBuffer holds and bounds the size gives), the runtime
fingerprint (the reader's and verifier's sources), the snapshot layout and the
Python. The hash must resist collisions, not only accidents: a module made to
collide with a stored one would skip verification. FlatBuffers over
MAX_HASHED_BYTES are not kept (hashing large embedded data would cost more than
the verification it saves, which does not read it).
"""

from __future__ import annotations

import dataclasses
import sys
from importlib.util import MAGIC_NUMBER

from vmrt.format.archive import parse_archive
from vmrt.format.flatbuffer import SNAPSHOT_VERSION
from vmrt.format.module_def import module_from_snapshot, open_module_buffer, \
    read_module_and_snapshot
from vmrt.vm import code_cache
from vmrt.vm.verifier import VerifiedFunction, verify_module

MAX_HASHED_BYTES = 16 << 20
STATS = code_cache.CacheStats()
MODULE = code_cache.EntryKind(code_cache.MODULE_SUFFIX, lambda entry: (
    type(entry) is tuple and len(entry) == 2 and type(entry[0]) is list
    and type(entry[1]) is list), STATS)


def read_verified(source) -> tuple:
    """(module def, verified functions) of a path or bytes-like `source`: from the
    cache when it holds them, else read (vmrt.format) and verified, then stored.
    Raises what read_module and verify_module raise."""
    buf = open_module_buffer(source)
    cache = code_cache.default_cache()
    key = module_key(buf) if cache is not None else None
    entry = cache.load(key, MODULE) if key is not None else None
    if entry is not None:
        snapshot, functions = entry
        module_def = module_from_snapshot(buf, snapshot,
                                          compile_source=code_cache.compile_snippet)
        return module_def, [VerifiedFunction(*function) for function in functions]
    module_def, snapshot = read_module_and_snapshot(buf, compile_source=code_cache.compile_snippet)
    verified = verify_module(module_def)
    if key is not None:
        cache.store(key, (snapshot, [_fields(function) for function in verified]), MODULE)
    return module_def, verified


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
    parts = ("module", SNAPSHOT_VERSION, code_cache.FORMAT_VERSION,
             code_cache.runtime_fingerprint(), MAGIC_NUMBER, sys.implementation.cache_tag,
             len(buf))
    digest = code_cache.blake2b(repr(parts).encode(), digest_size=32)
    digest.update(buf[:end])
    return digest.digest()


def _fields(function: VerifiedFunction) -> tuple:
    return tuple(getattr(function, field.name) for field in dataclasses.fields(function))
