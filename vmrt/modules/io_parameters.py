"""The `io_parameters` native module (version 0): load, gather and scatter of named
parameters into and out of HAL buffers, with the exports and calling conventions of
IREE 3.13.0 (runtime/src/iree/modules/io/parameters/module.c).

Providers (vmrt.io) resolve and check the spans and plan the byte moves; this module
decodes the key table, key data and spans the compiler lays out, and runs each plan
as one operation on the device queue: after the wait fence its batches run with
bounded concurrency (`max_concurrency`), then the signal fence is signalled. Any
failure fails the signal fence with the error (and, when it happens before the call
returns, is raised as well).
"""

from __future__ import annotations

import operator

from vmrt.errors import StatusCode, VmrtError
from vmrt.hal.buffer import Buffer
from vmrt.hal.device import Device, as_error
from vmrt.hal.semaphore import Fence
from vmrt.hal.types import (
    ACCESS_READ, ACCESS_WRITE, COMPATIBILITY_IMPORTABLE, USAGE_SHARING_IMMUTABLE, WHOLE_BUFFER,
)
from vmrt.io import ParameterScopes, ProviderSet, ProviderSignal
from vmrt.io.provider import ParameterProvider, SpanColumns
from vmrt.io.transfer import MAX_CONCURRENCY, TransferPlan, host_memory
# (importing it registers the !hal.* ref types)
from vmrt.modules.hal_calls import charged, deref, fence_or_none, guarded_call
from vmrt.native import NativeModule, export
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.list import VMList

#: sizeof(iree_io_parameters_string_entry_t): u32 offset, u32 length into the key data.
KEY_ENTRY_BYTES = 8
#: sizeof(iree_io_parameters_span_entry_t): u64 parameter_offset, buffer_offset, length.
SPAN_ENTRY_BYTES = 24


def as_provider_set(providers) -> ProviderSet:
    """A ProviderSet from a ProviderSet, a ParameterScopes, one provider or an iterable."""
    if isinstance(providers, ProviderSet):
        return providers
    if isinstance(providers, ParameterScopes):
        return ProviderSet(providers.providers())
    if isinstance(providers, ParameterProvider):
        return ProviderSet([providers])
    return ProviderSet(providers or ())


def _string(buffer) -> str:
    """iree_vm_buffer_as_string (null is ""), kept byte-exact for non-UTF-8 keys."""
    if buffer is None:
        return ""
    return bytes(deref(buffer, VMBuffer, "buffer").view).decode("utf-8", "surrogateescape")


def _call_spans(key_table, key_data, spans) -> SpanColumns:
    """decode_spans of an export's three buffer arguments (refs checked first)."""
    return decode_spans(deref(key_table, VMBuffer, "buffer"), deref(key_data, VMBuffer, "buffer"),
                        deref(spans, VMBuffer, "buffer"))


def decode_spans(key_table: VMBuffer, key_data: VMBuffer, spans: VMBuffer) -> SpanColumns:
    """The spans of one call: span i is key i of the table with 3 u64s of `spans`."""
    if spans.length % SPAN_ENTRY_BYTES:
        raise VmrtError("buffer span storage must be aligned to "
                        "iree_io_parameters_span_entry_t", StatusCode.INVALID_ARGUMENT)
    count = spans.length // SPAN_ENTRY_BYTES
    if key_table.length < count * KEY_ENTRY_BYTES:
        raise VmrtError("key string table must have enough data to service all defined "
                        "spans", StatusCode.INVALID_ARGUMENT)
    if not count:
        return SpanColumns([], [], [], [])
    # Both layouts are little-endian host structs upstream reads in place; so do we.
    # They are read column by column (a model loads hundreds of parameters in one call).
    table = key_table.view[:count * KEY_ENTRY_BYTES].cast("I").tolist()
    offsets, ends = table[0::2], list(map(operator.add, table[0::2], table[1::2]))
    data = bytes(key_data.view)
    capacity = len(data)
    if max(ends) > capacity:  # (an offset past the end has its end past it too)
        _check_key_ranges(offsets, table[1::2], capacity)
    if data.isascii():  # byte offsets are character offsets: one decode for all keys
        text = data.decode("ascii")
        keys = [text[start:end] for start, end in zip(offsets, ends)]
    else:
        keys = [data[start:end].decode("utf-8", "surrogateescape")
                for start, end in zip(offsets, ends)]
    values = spans.view.cast("Q").tolist()
    return SpanColumns(keys, values[0::3], values[1::3], values[2::3])


def _check_key_ranges(offsets: list[int], lengths: list[int], capacity: int) -> None:
    """Raises upstream's error for the first key outside the key data."""
    for offset, length in zip(offsets, lengths):
        if offset > capacity:
            raise VmrtError(
                "attempted to access an address off the end of the valid buffer range "
                f"(offset={offset}, length={length}, data_capacity={capacity})",
                StatusCode.OUT_OF_RANGE)
        if length and offset + length > capacity:
            raise VmrtError(
                "attempted to access an address outside of the valid buffer range "
                f"(offset={offset}, length={length}, end(inc)={offset + length - 1}, "
                f"data_capacity={capacity})", StatusCode.OUT_OF_RANGE)


class IoParametersModule(NativeModule, name="io_parameters", version=0):
    """io_parameters over `providers`: a ProviderSet, a ParameterScopes (one index
    provider per scope, as `vmrt run --parameters` builds), one provider or an
    iterable of them. Each scope goes to the first provider supporting it.

    `max_concurrency` (1..8, upstream's max_concurrent_operations) bounds the
    batches of one operation that run at once.
    """

    def __init__(self, providers=(), *, max_concurrency: int = MAX_CONCURRENCY):
        self.providers = as_provider_set(providers)
        self.max_concurrency = max(1, min(int(max_concurrency), MAX_CONCURRENCY))

    def create_state(self, context):
        # A context with limits: buffers loaded for its code are charged to it and
        # the transfers it schedules run under its calls' limits (vmrt.modules.hal).
        return getattr(context, "meter", None)

    def notify(self, signal: ProviderSignal) -> None:
        """Forwards suspend/resume/low-memory to every provider (iree_vm_module notify)."""
        try:
            signal = ProviderSignal(signal)
        except ValueError:
            return  # other VM signals (fork) are not the providers' concern
        self.providers.notify(signal)

    # -- exports -------------------------------------------------------------------------------
    # The exports pass the context's meter (None without limits) on to the methods,
    # which the host may also call directly.
    @export("0rIrrrIiirrr_r", name="load", state=True)
    def _load_export(self, meter, *args):
        return self.load(*args, meter=meter)

    @export("0rIrrrrrrr_v", name="gather", state=True)
    def _gather_export(self, meter, *args):
        self.gather(*args, meter=meter)

    @export("0rIrrrrrrr_v", name="scatter", state=True)
    def _scatter_export(self, meter, *args):
        self.scatter(*args, meter=meter)

    def load(self, device, queue_affinity, wait_fence, signal_fence, source_scope,
             target_queue_affinity, target_memory_types, target_buffer_usage, key_table,
             key_data, spans, meter=None):
        signal = fence_or_none(signal_fence)
        try:
            device = deref(device, Device, "device")
            scope = _string(source_scope)
            spans = _call_spans(key_table, key_data, spans)
            memory_types = target_memory_types & 0xFFFFFFFF
            usage = target_buffer_usage & 0xFFFFFFFF
            allocator = device.allocator
            # Parameter bytes can back the buffer in place only when nobody will write it.
            lend = bool(usage & USAGE_SHARING_IMMUTABLE) and bool(
                allocator.query_compatibility(memory_types, usage)[0] & COMPATIBILITY_IMPORTABLE)
            lent, plan = self.providers.plan_load(scope, spans, views=lend)
            # The lent views are the load's own (ParameterProvider.plan_load): the buffers
            # keep them. Importing checks the parameters: only done for a view to import.
            views = [view for view in lent if view is not None]
            if views and len(views) == len(lent):  # all lent (hundreds alike): in one call
                buffers = allocator.import_views(views, memory_types, usage, ACCESS_READ,
                                                 target_queue_affinity)
            else:  # imports and new buffers (the plan fills them), in span order
                import_view = allocator.importer(memory_types, usage, ACCESS_READ,
                                                 target_queue_affinity,
                                                 views_handed_over=True) if views else None

                def new_buffer(length: int) -> Buffer:
                    return charged(meter, length, lambda: allocator.import_buffer(
                        host_memory(length), memory_types, usage, 0, target_queue_affinity))
                buffers = [new_buffer(length) if view is None else import_view(view)
                           for length, view in zip(spans.lengths, lent)]
            targets = [None if view is not None else buffer
                       for view, buffer in zip(lent, buffers)]
            self._schedule(meter, device, queue_affinity, fence_or_none(wait_fence), signal, plan,
                           lambda: [None if b is None else b.map_range(ACCESS_WRITE)
                                    for b in targets])
            return VMList.from_values(buffers, "!hal.buffer")
        except Exception as exc:
            raise _fail(signal, exc)

    def gather(self, device, queue_affinity, wait_fence, signal_fence, source_scope,
               target_buffer, key_table, key_data, spans, meter=None):
        self._move_spans(meter, device, queue_affinity, wait_fence, signal_fence, source_scope,
                         target_buffer, key_table, key_data, spans, "plan_gather", ACCESS_WRITE)

    def scatter(self, device, queue_affinity, wait_fence, signal_fence, source_buffer,
                target_scope, key_table, key_data, spans, meter=None):
        self._move_spans(meter, device, queue_affinity, wait_fence, signal_fence, target_scope,
                         source_buffer, key_table, key_data, spans, "plan_scatter", ACCESS_READ)

    def _move_spans(self, meter, device, queue_affinity, wait_fence, signal_fence, scope,
                    buffer, key_table, key_data, spans, plan_name: str, buffer_access: int):
        """gather and scatter, which differ only in direction: the providers' `plan_name`
        plans the moves between `scope` and the whole of `buffer`, mapped for
        `buffer_access` (written by a gather, read by a scatter)."""
        signal = fence_or_none(signal_fence)
        try:
            device = deref(device, Device, "device")
            buffer = deref(buffer, Buffer, "buffer")
            scope = _string(scope)
            spans = _call_spans(key_table, key_data, spans)
            plan = getattr(self.providers, plan_name)(scope, spans, buffer.byte_length)
            self._schedule(meter, device, queue_affinity, fence_or_none(wait_fence), signal, plan,
                           lambda: [buffer.map_range(buffer_access, 0, WHOLE_BUFFER)])
        except Exception as exc:
            raise _fail(signal, exc)

    # -- scheduling ------------------------------------------------------------------------------
    def _schedule(self, meter, device: Device, queue_affinity: int, wait: Fence | None,
                  signal: Fence | None, plan: TransferPlan, map_views) -> None:
        """The plan as one queue operation after `wait` that signals `signal`: its
        batches run up to max_concurrency at once, then it finishes (flushes)."""
        guarded_call(meter, device.queue_host_call, queue_affinity, wait, signal,
                 lambda: plan.run(map_views(), self.max_concurrency))


def _fail(signal: Fence | None, exc: Exception) -> VmrtError:
    """The error to raise; the signal fence fails with it first (as upstream's
    iree_io_parameter_op_batch_end does) so waiters see it too."""
    error = as_error(exc)
    if signal is not None:
        signal.fail(error)
    return error


__all__ = ["IoParametersModule", "as_provider_set", "decode_spans", "KEY_ENTRY_BYTES",
           "SPAN_ENTRY_BYTES"]
