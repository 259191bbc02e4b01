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
"""

from __future__ import annotations

import enum
from typing import Callable, Iterable, NamedTuple, Sequence

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import spans as span_io
from vmrt.io.file import byte_view
from vmrt.io.index import ParameterIndex, as_key, check_span


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


def _check_buffer_range(what: str, view: memoryview, offset: int, length: int, key) -> None:
    if offset + length > view.nbytes:
        raise VmrtError(f"{what} range [{offset}, {offset + length}) for parameter `{key}` "
                        f"out of bounds of the {view.nbytes}-byte buffer",
                        StatusCode.OUT_OF_RANGE)


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


def _check_load_spans(spans: Sequence[ParameterSpan]) -> None:
    for span in spans:
        if span.buffer_offset:
            raise VmrtError(f"load span for parameter `{span.key}` has buffer_offset "
                            f"{span.buffer_offset}; loads allocate one buffer per span "
                            "and need offset 0", StatusCode.INVALID_ARGUMENT)


class IndexProvider(ParameterProvider):
    """Serves the parameters of one index under one scope name.

    Every operation resolves and checks all its spans (key, range, access,
    buffer bounds) before moving any byte, so a failing call leaves the target
    buffer or the files untouched.
    """

    def __init__(self, scope: str, index: ParameterIndex):
        self.scope = as_scope(scope)
        self.index = index

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

    def _resolve(self, span, write: bool):
        span = as_span(span)
        entry = self.index.lookup(span.key)
        if write:
            if entry.is_splat:
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
        check_span(entry, span.parameter_offset, span.length)
        return span, entry

    def gather(self, scope, target, spans) -> None:
        self._check_scope(scope)
        view = byte_view(target, writable=True, what="gather target buffer")
        reads, fills = [], []
        for span in spans:
            span, entry = self._resolve(span, write=False)
            _check_buffer_range("gather target", view, span.buffer_offset, span.length,
                                span.key)
            if entry.is_splat:
                fills.append((view, span.buffer_offset, span.length, entry.pattern,
                              span.parameter_offset))
            else:
                reads.append((entry.file, entry.offset + span.parameter_offset, view,
                              span.buffer_offset, span.length))
        span_io.fill_spans(fills)
        span_io.read_file_spans(reads)

    def scatter(self, scope, source, spans) -> None:
        self._check_scope(scope)
        view = byte_view(source, what="scatter source buffer")
        writes = []
        for span in spans:
            span, entry = self._resolve(span, write=True)
            _check_buffer_range("scatter source", view, span.buffer_offset, span.length,
                                span.key)
            writes.append((entry.file, entry.offset + span.parameter_offset, view,
                           span.buffer_offset, span.length))
        span_io.write_file_spans(writes)

    def load(self, scope, spans, *, allocate=None, writable: bool = False) -> list:
        """One buffer per span; without `allocate`, file spans are zero-copy views.

        Views over a mapped file are read-only unless `writable` (and the file
        is writable); splats are materialized into bytearrays.
        """
        self._check_scope(scope)
        resolved = [self._resolve(span, write=False) for span in spans]
        _check_load_spans([span for span, _ in resolved])
        if allocate is not None:
            return super().load(scope, [span for span, _ in resolved], allocate=allocate)
        buffers = []
        for span, entry in resolved:
            if entry.is_splat:
                buffer = bytearray(span.length)
                span_io.fill_spans([(memoryview(buffer), 0, span.length, entry.pattern,
                                     span.parameter_offset)])
                buffers.append(buffer)
                continue
            view = entry.file.view(entry.offset + span.parameter_offset, span.length)
            buffers.append(view if writable and not view.readonly else view.toreadonly())
        return buffers


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
        raise VmrtError(f"no provider registered that handles scopes like '{scope}'",
                        StatusCode.NOT_FOUND)

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
