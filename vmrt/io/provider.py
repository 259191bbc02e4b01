"""Parameter providers: where io_parameters operations get their bytes.

Mirrors iree_io_parameter_provider_t (runtime/src/iree/io/parameter_provider.h)
without a HAL: buffers are Python buffer-protocol objects (bytearray, numpy
arrays, memoryviews, ...). A provider answers `query_support(scope)` and
implements `gather` (parameter spans into one buffer), `scatter` (one
buffer's spans into parameters), `load` (one new buffer per span) and
`notify` (suspend, resume, low memory).

Write your own by subclassing `ParameterProvider` and overriding
`query_support` and `gather` (plus `scatter` if writable); `load` then
comes for free. `IndexProvider` serves one scope from a `ParameterIndex`,
and `ProviderSet` routes each scope to the first provider supporting it, as
the io_parameters module does.

Every operation goes through one path: `plan_gather`, `plan_scatter` and
`plan_load` check all spans and return a `vmrt.io.transfer.TransferPlan`
that the caller runs (the io_parameters module runs its batches on a device
queue); `gather`, `scatter` and `load` are those plans run at once. A user
provider's plans call its own `gather`/`scatter`.
"""

from __future__ import annotations

import collections.abc
import enum
import functools
from typing import Callable, Iterable, NamedTuple, Sequence

from vmrt.errors import StatusCode, VmrtError
from vmrt.io.file import FileMode, byte_view
from vmrt.io.index import (
    ParameterIndex, ParameterIndexEntry, as_key, check_span, register_index_provider,
)
from vmrt.io.transfer import READ, WRITE, Move, TransferPlan, check_disjoint_writes, make_move


def as_scope(scope) -> str:
    """A scope name; None (a null scope from the VM) is the global scope ""."""
    return "" if scope is None else as_key(scope)


class ProviderSignal(enum.IntEnum):
    """iree_io_parameter_provider_signal_t."""

    RESUME = 0
    SUSPEND = 1
    LOW_MEMORY = 2


class ParameterSpan(NamedTuple):
    """`length` bytes at `parameter_offset` of parameter `key`, at `buffer_offset`."""

    key: str
    parameter_offset: int
    buffer_offset: int
    length: int


#: ParameterSpan(*fields) from a tuple of its four fields, made in C (see make_move).
make_span = functools.partial(tuple.__new__, ParameterSpan)


class SpanColumns(collections.abc.Sequence):
    """Spans held as four columns: how io_parameters decodes the hundreds of spans of
    one call and how the index provider checks them, with no object per span. To
    anything else a sequence of ParameterSpans."""

    __slots__ = ("keys", "parameter_offsets", "buffer_offsets", "lengths")

    def __init__(self, keys: list[str], parameter_offsets: list[int],
                 buffer_offsets: list[int], lengths: list[int]):
        self.keys = keys
        self.parameter_offsets = parameter_offsets
        self.buffer_offsets = buffer_offsets
        self.lengths = lengths

    @classmethod
    def of(cls, spans: Iterable) -> "SpanColumns":
        """`spans` as columns; spans that are not ParameterSpans go through as_span."""
        if isinstance(spans, SpanColumns):
            return spans
        spans = [span if type(span) is ParameterSpan else as_span(span) for span in spans]
        return cls(*map(list, zip(*spans))) if spans else cls([], [], [], [])

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self)[index]
        return ParameterSpan(self.keys[index], self.parameter_offsets[index],
                             self.buffer_offsets[index], self.lengths[index])

    def __iter__(self):
        return map(make_span, zip(self.keys, self.parameter_offsets, self.buffer_offsets,
                                  self.lengths))


def as_span(span) -> ParameterSpan:
    try:
        key, parameter_offset, buffer_offset, length = span
    except (TypeError, ValueError):
        raise VmrtError("a parameter span is (key, parameter_offset, buffer_offset, length)",
                        StatusCode.INVALID_ARGUMENT) from None
    for name, value in (("parameter_offset", parameter_offset),
                        ("buffer_offset", buffer_offset), ("length", length)):
        if not isinstance(value, int) or value < 0:
            raise VmrtError(f"parameter span {name} must be a non-negative int, got "
                            f"{value!r}", StatusCode.INVALID_ARGUMENT)
    return ParameterSpan(as_key(key), parameter_offset, buffer_offset, length)


class ParameterProvider:
    """Base class of providers; subclasses override what they support."""

    def notify(self, signal: ProviderSignal) -> None:
        """Hears about suspend/resume/low memory; the default ignores them."""

    def query_support(self, scope: str) -> bool:
        raise NotImplementedError

    def gather(self, scope: str, target, spans: Iterable) -> None:
        """Copies each span's parameter bytes into `target` at its buffer offset."""
        raise VmrtError(f"{type(self).__name__} does not support gather",
                        StatusCode.UNIMPLEMENTED)

    def scatter(self, scope: str, source, spans: Iterable) -> None:
        """Copies each span of `source` into its parameter."""
        raise VmrtError(f"{type(self).__name__} does not support scatter",
                        StatusCode.UNIMPLEMENTED)

    def load(self, scope: str, spans: Iterable, *,
             allocate: Callable[[int], object] | None = None) -> list:
        """One buffer per span holding the span's bytes.

        `allocate(length)` makes each buffer (a bytearray by default). Spans of
        a load have no target buffer, so their buffer_offset must be 0.
        """
        spans = [as_span(span) for span in spans]
        _check_load_spans(spans)
        buffers = [allocate(span.length) if allocate else bytearray(span.length)
                   for span in spans]
        for span, buffer in zip(spans, buffers):
            self.gather(scope, buffer, [ParameterSpan(span.key, span.parameter_offset, 0,
                                                      span.length)])
        return buffers

    def plan_gather(self, scope: str, spans: Iterable, target_size: int) -> TransferPlan:
        """The checked work of a gather into a `target_size`-byte buffer (slot 0)."""
        return self._plan_host_call(READ, self.gather, "gather target", scope, spans,
                                    target_size)

    def plan_scatter(self, scope: str, spans: Iterable, source_size: int) -> TransferPlan:
        """The checked work of a scatter from a `source_size`-byte buffer (slot 0)."""
        return self._plan_host_call(WRITE, self.scatter, "scatter source", scope, spans,
                                    source_size)

    def _plan_host_call(self, direction: str, move, what: str, scope: str, spans: Iterable,
                        buffer_size: int) -> TransferPlan:
        """A plan running move(scope, buffer in slot 0, spans) (gather or scatter) once
        the spans are checked against a `buffer_size`-byte buffer."""
        spans = [as_span(span) for span in spans]
        _check_buffer_ranges(what, spans, buffer_size)
        return TransferPlan.host_call(direction, lambda views: move(scope, views[0], spans),
                                      sum(span.length for span in spans))

    def plan_load(self, scope: str, spans: Iterable, *,
                  views: bool = True) -> tuple[list, TransferPlan]:
        """(zero-copy views, plan) of a load: per span a read-only memoryview of its
        bytes when the provider can lend one (and `views`), else None; the plan
        fills a span.length-byte buffer in slot i for every span i given None.
        A lent view is made for this load and handed over: the provider never
        releases it (io_parameters' buffers keep it as their storage)."""
        spans = [as_span(span) for span in spans]
        _check_load_spans(spans)

        def run(buffers):
            for span, buffer in zip(spans, buffers):
                if buffer is not None:
                    self.gather(scope, buffer, [(span.key, span.parameter_offset, 0,
                                                 span.length)])
        return [None] * len(spans), TransferPlan.host_call(
            READ, run, sum(span.length for span in spans))

    def read(self, scope: str, key, parameter_offset: int, target, target_offset: int = 0,
             length: int | None = None) -> None:
        """Gathers one span (iree_io_parameter_provider_read)."""
        if length is None:
            length = byte_view(target, writable=True, what="target buffer").nbytes \
                - target_offset
        self.gather(scope, target, [(key, parameter_offset, target_offset, length)])

    def write(self, scope: str, key, parameter_offset: int, source, source_offset: int = 0,
              length: int | None = None) -> None:
        """Scatters one span (iree_io_parameter_provider_write)."""
        if length is None:
            length = byte_view(source, what="source buffer").nbytes - source_offset
        self.scatter(scope, source, [(key, parameter_offset, source_offset, length)])


def _check_buffer_ranges(what: str, spans: Sequence[ParameterSpan], size: int) -> None:
    for span in spans:
        if span.buffer_offset + span.length > size:
            raise VmrtError(f"{what} range [{span.buffer_offset}, "
                            f"{span.buffer_offset + span.length}) for parameter `{span.key}` "
                            f"out of bounds of the {size}-byte buffer", StatusCode.OUT_OF_RANGE)


def _check_load_spans(spans: Sequence[ParameterSpan]) -> None:
    for span in spans:
        if span.buffer_offset:
            raise VmrtError(f"load span for parameter `{span.key}` has buffer_offset "
                            f"{span.buffer_offset}; loads allocate one buffer per span "
                            "and need offset 0", StatusCode.INVALID_ARGUMENT)


class IndexProvider(ParameterProvider):
    """Serves the parameters of one index under one scope name.

    Every operation resolves and checks all its spans (key, range, access,
    buffer bounds, and for scatters overlapping targets) before moving any
    byte, so a failing call leaves the target buffer or the files untouched.
    Scatters write only inside each entry's storage; with `flush` they sync
    the files to disk when done.
    """

    def __init__(self, scope: str, index: ParameterIndex, *, flush: bool = False):
        self.scope = as_scope(scope)
        self.index = index
        self.flush = flush

    def __repr__(self) -> str:
        return f"<IndexProvider scope={self.scope!r} {self.index!r}>"

    def query_support(self, scope) -> bool:
        return as_scope(scope) == self.scope

    def notify(self, signal: ProviderSignal) -> None:
        if ProviderSignal(signal) in (ProviderSignal.SUSPEND, ProviderSignal.LOW_MEMORY):
            for handle in self.index.file_handles():
                handle.trim()

    def _check_scope(self, scope) -> None:
        if not self.query_support(scope):
            raise VmrtError(f"provider for scope '{self.scope}' asked for scope "
                            f"'{as_scope(scope)}'", StatusCode.NOT_FOUND)

    def _checked(self, spans, write: bool, buffer_size: int | None,
                 what: str) -> tuple[SpanColumns, list[ParameterIndexEntry]]:
        """(spans, their entries): every span resolved and checked, in order, as upstream
        does (key, access, range, then the `buffer_size`-byte buffer's bounds, or for a
        load, with no buffer, a zero buffer offset)."""
        spans = SpanColumns.of(spans)
        index = self.index
        entry_of = index.entry_getter()
        entries = []
        checked_file = None  # spans of one call mostly share a file: check its access once
        for key, parameter_offset, buffer_offset, length in zip(
                spans.keys, spans.parameter_offsets, spans.buffer_offsets, spans.lengths):
            entry = entry_of(key)
            if entry is None:
                entry = index.lookup(key)  # (raises NOT_FOUND, or takes a bytes key)
            file = entry.file
            if file is not checked_file or file is None or entry.pattern is not None:
                _check_access(entry, write)
                checked_file = file
            if parameter_offset + length > entry.length:
                check_span(entry, parameter_offset, length)
            if buffer_size is None:
                if buffer_offset:
                    _check_load_spans([ParameterSpan(key, parameter_offset, buffer_offset,
                                                     length)])
            elif buffer_offset + length > buffer_size:
                raise VmrtError(
                    f"{what} range [{buffer_offset}, {buffer_offset + length}) for "
                    f"parameter `{entry.key}` out of bounds of the {buffer_size}-byte "
                    "buffer", StatusCode.OUT_OF_RANGE)
            entries.append(entry)
        return spans, entries

    def _moves(self, spans, write: bool, buffer_size: int, what: str) -> list[Move]:
        """The moves of a gather or scatter (slot 0) of checked spans."""
        spans, entries = self._checked(spans, write, buffer_size, what)
        return [_move(entry, parameter_offset, buffer_offset, length, 0)
                for entry, parameter_offset, buffer_offset, length in zip(
                    entries, spans.parameter_offsets, spans.buffer_offsets, spans.lengths)]

    def plan_gather(self, scope, spans, target_size: int) -> TransferPlan:
        self._check_scope(scope)
        return TransferPlan(READ, self._moves(spans, False, target_size, "gather target"))

    def plan_scatter(self, scope, spans, source_size: int) -> TransferPlan:
        self._check_scope(scope)
        moves = self._moves(spans, True, source_size, "scatter source")
        check_disjoint_writes(moves)
        return TransferPlan(WRITE, moves, flush=self.flush)

    def plan_load(self, scope, spans, *, views: bool = True) -> tuple[list, TransferPlan]:
        """File spans become zero-copy views of the file's mapping (when `views` and the
        file is mapped or preloaded, not read with FILE mode); splats and the rest
        are read into new buffers."""
        self._check_scope(scope)
        spans, entries = self._checked(spans, False, None, "load")
        lent: list = []
        copies = []
        wholes = {}  # per file (None: splats): its bytes read-only, or None if it lends none
        # The last span's file (none yet), its whole and its size: spans of one call
        # mostly share a file.
        last_file, whole, size = object(), None, None
        for entry, parameter_offset, length in zip(entries, spans.parameter_offsets,
                                                    spans.lengths):
            file = entry.file
            if file is not last_file:
                whole = wholes.get(file, False)
                if whole is False:
                    whole = wholes[file] = None if not views or file is None or \
                        file.mode is FileMode.FILE else file.contents().toreadonly()
                last_file, size = file, None if whole is None else whole.nbytes
            if whole is None:
                copies.append(_move(entry, parameter_offset, 0, length, len(lent)))
                lent.append(None)
                continue
            start = entry.offset + parameter_offset
            end = start + length
            if end > size:
                file.view(start, length)  # raises (the file shrank)
            lent.append(whole[start:end])
        return lent, TransferPlan(READ, copies)

    def gather(self, scope, target, spans) -> None:
        view = byte_view(target, writable=True, what="gather target buffer")
        self.plan_gather(scope, spans, view.nbytes).run([view])

    def scatter(self, scope, source, spans) -> None:
        view = byte_view(source, what="scatter source buffer")
        self.plan_scatter(scope, spans, view.nbytes).run([view])

    def load(self, scope, spans, *, allocate=None, writable: bool = False) -> list:
        """One buffer per span; without `allocate`, file spans are zero-copy views.

        Views over a mapped file are read-only unless `writable` (and the file
        is writable); splats are materialized into bytearrays.
        """
        spans = [as_span(span) for span in spans]
        lent, plan = self.plan_load(scope, spans, views=allocate is None)
        make = allocate or bytearray
        buffers = list(lent)
        for move in plan.moves:
            if buffers[move.slot] is None:
                buffers[move.slot] = make(spans[move.slot].length)
        for i, span in enumerate(spans):
            if buffers[i] is None:  # empty spans have no moves
                buffers[i] = make(span.length)
            elif writable and lent[i] is not None:
                entry = self.index.lookup(span.key)
                if entry.file.writable:
                    buffers[i] = entry.file.view(entry.offset + span.parameter_offset,
                                                 span.length)
        plan.run([None if lent[i] is not None else
                  byte_view(buffer, writable=True, what="load buffer")
                  for i, buffer in enumerate(buffers)])
        return buffers


register_index_provider(IndexProvider)


def _move(entry: ParameterIndexEntry, parameter_offset: int, buffer_offset: int, length: int,
          slot: int) -> Move:
    """The move of a checked span of `entry` to or from slot `slot`."""
    if entry.pattern is not None:
        return make_move((None, 0, slot, buffer_offset, length, entry.pattern, parameter_offset))
    return make_move((entry.file, entry.offset + parameter_offset, slot, buffer_offset, length,
                      None, 0))


def _check_access(entry, write: bool) -> None:
    if write:
        if entry.pattern is not None:
            raise VmrtError(
                f"parameter `{entry.key}` storage does not support the requested access "
                "type; parameter allows READ, operation requires WRITE",
                StatusCode.PERMISSION_DENIED)
        if not entry.file.writable:
            raise VmrtError(
                f"parameter `{entry.key}` storage does not support the requested access "
                "type; its file is read-only (load it with writable=True)",
                StatusCode.PERMISSION_DENIED)
    elif entry.file is not None and not entry.file.readable:
        raise VmrtError(f"parameter `{entry.key}` storage is not readable",
                        StatusCode.PERMISSION_DENIED)


class ProviderSet(ParameterProvider):
    """Several providers; each scope goes to the first one that supports it."""

    def __init__(self, providers: Iterable[ParameterProvider] = ()):
        self.providers: list[ParameterProvider] = list(providers)

    def add(self, provider: ParameterProvider) -> ParameterProvider:
        self.providers.append(provider)
        return provider

    def __iter__(self):
        return iter(list(self.providers))

    def __len__(self) -> int:
        return len(self.providers)

    def resolve(self, scope) -> ParameterProvider:
        scope = as_scope(scope)
        for provider in self.providers:
            if provider.query_support(scope):
                return provider
        # (upstream says only the first sentence: say which flag gives them)
        flag, keyword = (f"--parameters={scope}=FILE", f"parameters={{'{scope}': FILE}}") \
            if scope else ("--parameters=FILE", "parameters=FILE")
        raise VmrtError(f"no provider registered that handles scopes like '{scope}': the "
                        f"module needs parameters of scope '{scope}'; give an archive "
                        f"(.irpa, .safetensors, .gguf) with `{flag}` (vmrt run) or "
                        f"`{keyword}` (vmrt.load)", StatusCode.NOT_FOUND)

    def query_support(self, scope) -> bool:
        scope = as_scope(scope)
        return any(provider.query_support(scope) for provider in self.providers)

    def notify(self, signal: ProviderSignal) -> None:
        for provider in self.providers:
            provider.notify(ProviderSignal(signal))

    def gather(self, scope, target, spans) -> None:
        self.resolve(scope).gather(as_scope(scope), target, spans)

    def scatter(self, scope, source, spans) -> None:
        self.resolve(scope).scatter(as_scope(scope), source, spans)

    def load(self, scope, spans, **options) -> list:
        return self.resolve(scope).load(as_scope(scope), spans, **options)

    def plan_gather(self, scope, spans, target_size: int) -> TransferPlan:
        return self.resolve(scope).plan_gather(as_scope(scope), spans, target_size)

    def plan_scatter(self, scope, spans, source_size: int) -> TransferPlan:
        return self.resolve(scope).plan_scatter(as_scope(scope), spans, source_size)

    def plan_load(self, scope, spans, **options) -> tuple[list, TransferPlan]:
        return self.resolve(scope).plan_load(as_scope(scope), spans, **options)
