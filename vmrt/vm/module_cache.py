"""Verified modules kept across processes: a module's verified functions and its
summary (vmrt.vm.module_summary), in the code cache (vmrt.vm.code_cache) under a hash
of its bytes.

A later process loading the same bytes neither reads them through the verifying
reader (nor imports numpy for it) nor verifies their bytecode: contexts take what
they need from the summary, and the definition is read again only when something
asks for it (code generation on a cache miss, tools). Only modules that passed every
check are stored, so a module that fails always fails as it did.

The key hashes the bytes up to the end of the FlatBuffer and the file's size (all
that reading and verifying look at: external rodata is only located), with the
runtime's part of every key (code_cache.runtime_key); so it is also a digest of all
the module holds (BytecodeModule.content_digest derives from it). It must resist
collisions: a module made to collide with a stored one would skip verification.
FlatBuffers over MAX_HASHED_BYTES are not kept (hashing them would cost more than
the verification it saves)."""

from __future__ import annotations

import dataclasses
import hashlib

from vmrt.format.archive import parse_archive
from vmrt.format.function_body import function_bytecode
from vmrt.format.module_def import open_module_buffer, read_module
from vmrt.vm import code_cache
from vmrt.vm.module_summary import ModuleSummary, summarize
from vmrt.vm.verifier import VerifiedFunction, verify_module

MAX_HASHED_BYTES = 16 << 20
#: The layout of the entries below (part of their key).
ENTRY_VERSION = 3
#: What the cache did with module entries (each: the verified functions' fields, the summary).
STATS = code_cache.CacheStats()


class VerifiedModule:
    """A module's bytes read and verified: now, or by an earlier process (from the
    cache: then its definition is read again when first asked for)."""

    __slots__ = ("buf", "key", "verified", "summary", "_definition")

    def __init__(self, buf: memoryview | None, key: bytes | None, verified: list,
                 summary: ModuleSummary, definition=None):
        self.buf = buf
        #: module_key of the bytes (None: not kept), a digest of all the module holds.
        self.key = key
        self.verified = verified
        self.summary = summary
        self._definition = definition

    def definition(self):
        """The module definition (BytecodeModuleDef)."""
        if self._definition is None:
            self._definition = read_module(self.buf)
        return self._definition

    def function_bytecode(self, ordinal: int) -> memoryview:
        """The bytecode of internal function `ordinal` (verified: verify_module)."""
        bodies = self.summary.bodies
        if bodies is None or self.buf is None:
            return function_bytecode(self.definition(), ordinal)
        offset, length = bodies[ordinal]
        return self.buf[offset:offset + length]

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
    key = module_key(buf) if cache is not None else None
    entry = cache.load(key, code_cache.MODULE_SUFFIX, STATS) if key is not None else None
    if entry is not None:
        functions, summary = entry
        return VerifiedModule(buf, key, [VerifiedFunction(*function) for function in functions],
                              ModuleSummary._make(summary))
    definition = read_module(buf)
    verified = verify_module(definition)
    summary = summarize(definition, verified)
    if key is not None:
        entry = ([_fields(function) for function in verified], tuple(summary))
        cache.store(key, entry, code_cache.MODULE_SUFFIX, STATS)
    return VerifiedModule(buf, key, verified, summary, definition)


def verify_definition(definition) -> VerifiedModule:
    """The verified module of a definition made in memory (nothing of it is kept)."""
    verified = verify_module(definition)
    return VerifiedModule(None, None, verified, summarize(definition, verified), definition)


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
    return code_cache.runtime_key("module", ENTRY_VERSION, len(buf),
                                  hashlib.blake2b(buf[:end]).digest())


def _fields(function: VerifiedFunction) -> tuple:
    return tuple(getattr(function, field.name) for field in dataclasses.fields(function))
