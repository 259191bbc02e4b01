"""The `hal` native module (version 7): every export of IREE 3.13.0's hal module
with its calling convention (runtime/src/iree/modules/hal/exports.inl,
module.c). Each export unpacks VM values, calls vmrt.hal and packs results.

Importing this module registers the HAL objects as ref types (`!hal.buffer`,
`!hal.buffer_view`, `!hal.device`, ...). Its `HostAdapter` (vmrt.modules.host_arrays)
turns numpy arrays into buffer views for `Function` calls and back.
"""

from __future__ import annotations

import struct
import time

from vmrt.elements import element_types_compatible, format_element_type, format_shape
from vmrt.errors import HalError, StatusCode, VmrtError
from vmrt.hal.allocator import HeapAllocator
from vmrt.hal.buffer import Buffer, check_fill_pattern
from vmrt.hal.buffer_view import BufferView
from vmrt.hal.command_buffer import CommandBuffer
from vmrt.hal.device import Device, create_device
from vmrt.hal.executable import Executable
from vmrt.hal.native_loader import NATIVE_FORMATS
from vmrt.hal.file import MemoryFile
from vmrt.hal.semaphore import Fence, Semaphore
from vmrt.hal.types import (
    ACCESS_READ, ACCESS_WRITE, USAGE_SHARING_IMMUTABLE, WHOLE_BUFFER, EncodingType,
    format_buffer_usage, format_memory_type,
)
from vmrt.modules.hal_calls import (
    UINT32_MAX, buffer_string, charged, deref, deref_or_null, fence_or_none, guarded_call, i32,
    queue_bookkeeping, queue_call, u32,
)
from vmrt.modules.host_arrays import HostAdapter
from vmrt.native import NativeModule, export
from vmrt.vm.buffer import ACCESS_MUTABLE, ACCESS_ORIGIN_MODULE, VMBuffer
from vmrt.vm.ref import RefObject, register_ref_type


class Channel(RefObject):
    """hal.channel: collectives are not implemented by the local devices."""

    __slots__ = ()


class Event(RefObject):
    """hal.event (no export of the hal module creates one)."""

    __slots__ = ()


for _name, _cls in (("hal.allocator", HeapAllocator), ("hal.buffer", Buffer),
                    ("hal.buffer_view", BufferView), ("hal.channel", Channel),
                    ("hal.command_buffer", CommandBuffer), ("hal.device", Device),
                    ("hal.event", Event), ("hal.executable", Executable),
                    ("hal.fence", Fence), ("hal.file", MemoryFile),
                    ("hal.semaphore", Semaphore)):
    register_ref_type(_name, _cls)

#: The largest binding count a dispatch may pass (IREE_HAL_MODULE_MAX_DESCRIPTOR_BINDING_COUNT).
MAX_DISPATCH_BINDINGS = 32


def _ref(buffer, slot: int, offset: int, length: int):
    """A command buffer reference: direct when `buffer` is given, else slot `slot`."""
    return deref_or_null(buffer, Buffer, "buffer"), slot & UINT32_MAX, offset, length


def _check_buffer_view(view: BufferView, message, expected_type: int, expected_encoding: int,
                       expected: tuple) -> None:
    """hal.buffer_view.assert's checks, failing with its messages."""
    if view.encoding_type != EncodingType.OPAQUE and view.encoding_type != expected_encoding:
        raise HalError(f"{buffer_string(message)} encoding mismatch; expected "
                       f"{expected_encoding:08X} but have {view.encoding_type:08X}",
                       StatusCode.INVALID_ARGUMENT)
    if not element_types_compatible(view.element_type, expected_type):
        raise HalError(f"{buffer_string(message)} element type mismatch; expected "
                       f"{format_element_type(expected_type)} ({expected_type:08X}) but have "
                       f"{format_element_type(view.element_type)} ({view.element_type:08X})",
                       StatusCode.INVALID_ARGUMENT)
    actual = view.shape
    problem = None
    if len(actual) != len(expected):
        problem = (f"{buffer_string(message)} shape rank mismatch; expected {len(expected)}"
                   f"{' (scalar)' if not expected else ''} but have {len(actual)}"
                   f"{' (scalar)' if not actual else ''}")
    else:
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a != e:
                problem = (f"{buffer_string(message)} shape dimension {i} mismatch; expected {e} "
                           f"but have {a}")
                break
    if problem is not None:
        error = HalError(problem, StatusCode.INVALID_ARGUMENT)
        raise error.annotate(f"expected shape `{format_shape(expected)}`, actual shape "
                             f"`{format_shape(actual)}`")


#: What a command buffer is charged for itself under limits (its recorded commands).
_COMMAND_BUFFER_BYTES = 512
_BUFFER, _FILE = (Buffer, "buffer"), (MemoryFile, "file")


def _queue_transfer(name: str, source_type: tuple, target_type: tuple):
    """The export device.queue.NAME of a queue transfer (copy, read, write): from a
    buffer or file range to another, by the Device method queue_NAME."""
    @export("0rIrrrIrIII_v", name=f"device.queue.{name}", state=True)
    def transfer(self, meter, device, queue_affinity, wait_fence, signal_fence, source,
                 source_offset, target, target_offset, length, flags):
        queue_call(meter, getattr(deref(device, Device, "device"), "queue_" + name),
                   queue_affinity, wait_fence, signal_fence,
                   deref(source, *source_type), source_offset,
                   deref(target, *target_type), target_offset, length, flags)
    transfer.__name__ = transfer.__qualname__ = f"device_queue_{name}"
    return transfer


class HalModule(NativeModule, name="hal", version=7):
    """The hal module over a list of devices (by default one `local-sync` device).

    With `host_arrays` (the default) the context's Function calls take numpy
    arrays for ref arguments and return buffer view results as numpy arrays.
    `buffer_view_trace` is called as f(key, [buffer views]) by hal.buffer_view.trace.
    Native executables (llvm-cpu) cannot be metered or interrupted, so a context
    with Limits refuses them unless the host sets `native_under_limits=True`.
    """

    def __init__(self, devices=None, *, device: str = "local-sync", host_arrays: bool = True,
                 buffer_view_trace=None, native_under_limits: bool = False):
        if devices is None:
            devices = [create_device(device)]
        self.devices: list[Device] = list(devices)
        self.host_arrays = host_arrays
        self.buffer_view_trace = buffer_view_trace
        self.native_under_limits = native_under_limits

    def host_adapter(self) -> "HostAdapter":
        return HostAdapter(self.devices[0] if self.devices else create_device())

    def create_state(self, context):
        # Function calls through this context take and return numpy arrays.
        if self.host_arrays:
            context.set_host_adapter(self.host_adapter())
        # A context with limits: its meter charges what its code allocates and
        # carries its calls' limits into device work (see charged, guarded_call).
        return getattr(context, "meter", None)

    # -- allocator ---------------------------------------------------------------------------
    @export("0rIiiI_r", name="allocator.allocate", state=True)
    def allocator_allocate(self, meter, allocator, queue_affinity, memory_types, buffer_usage,
                           size):
        allocator = deref(allocator, HeapAllocator, "allocator")
        try:
            return charged(meter, size, lambda: allocator.allocate_buffer(
                u32(memory_types), u32(buffer_usage), size, queue_affinity=queue_affinity))
        except VmrtError as error:
            raise error.annotate(f"failed to allocate buffer of length {size}")

    @export("0riIiirII_r", name="allocator.import")
    def allocator_import(self, allocator, is_try, queue_affinity, memory_types, buffer_usage,
                         source, offset, length):
        allocator = deref(allocator, HeapAllocator, "allocator")
        source = deref(source, VMBuffer, "buffer")
        usage = u32(buffer_usage)
        available = source.length
        if length == WHOLE_BUFFER:
            length = available
        if length < 0 or offset < 0 or offset > available or offset + length > available:
            raise HalError(f"byte range out of bounds (requested {offset}-{offset + length - 1} "
                           f"of available {available})", StatusCode.INVALID_ARGUMENT)
        immutable = usage & USAGE_SHARING_IMMUTABLE
        access = ACCESS_READ
        if not source.access & ACCESS_MUTABLE:
            if not immutable:
                raise HalError("source buffer is immutable and can only be imported for "
                               "constant usage", StatusCode.PERMISSION_DENIED)
        elif not immutable:
            access |= ACCESS_WRITE
        try:
            buffer = allocator.import_buffer(source.view[offset:offset + length],
                                             u32(memory_types), usage, access, queue_affinity)
        except VmrtError:
            if is_try:
                return None
            raise
        # Module rodata: a dispatch writing it gets private pages (Buffer.map_binding).
        buffer.copy_on_write = bool(source.access & ACCESS_ORIGIN_MODULE)
        return buffer

    @export("0iiICrID_rI", name="allocator.select")
    def allocator_select(self, memory_types, buffer_usage, flags, pairs):
        if not pairs:
            raise HalError("at least one device/queue affinity pair must be provided",
                           StatusCode.INVALID_ARGUMENT)
        device, affinity = pairs[0]
        return deref(device, Device, "device"), affinity

    # -- buffer --------------------------------------------------------------------------------
    @export("0r_i", name="buffer.allocation.discard")
    def buffer_allocation_discard(self, buffer):
        return 1 if deref(buffer, Buffer, "buffer").allocation_discard() else 0

    @export("0r_i", name="buffer.allocation.is_terminal")
    def buffer_allocation_is_terminal(self, buffer):
        return 1 if deref(buffer, Buffer, "buffer").allocation_is_terminal() else 0

    @export("0r_v", name="buffer.allocation.preserve")
    def buffer_allocation_preserve(self, buffer):
        deref(buffer, Buffer, "buffer").allocation_preserve()

    @export("0rrrIii_v", name="buffer.assert")
    def buffer_assert(self, buffer, message, allocator, minimum_length, memory_types,
                      buffer_usage):
        if not isinstance(buffer, Buffer):
            deref(buffer, Buffer, "buffer")
        if not isinstance(message, VMBuffer):  # (its text only when failing)
            deref(message, VMBuffer, "buffer")
        if buffer.byte_length < minimum_length:
            raise HalError(f"{buffer_string(message)} buffer byte length {buffer.byte_length} less "
                           f"than expected minimum {minimum_length}",
                           StatusCode.INVALID_ARGUMENT)
        required_types = memory_types & UINT32_MAX
        if buffer.memory_type & required_types != required_types:
            raise HalError(f"{buffer_string(message)} buffer memory type is not compatible; buffer "
                           f"has {format_memory_type(buffer.memory_type)}, operation requires "
                           f"{format_memory_type(required_types)}", StatusCode.PERMISSION_DENIED)
        required_usage = buffer_usage & UINT32_MAX
        if buffer.allowed_usage & required_usage != required_usage:
            raise HalError(f"{buffer_string(message)} requested usage was not specified when the "
                           f"buffer was allocated; buffer allows "
                           f"{format_buffer_usage(buffer.allowed_usage)}"
                           f", operation requires {format_buffer_usage(required_usage)}",
                           StatusCode.PERMISSION_DENIED)
        if not isinstance(allocator, HeapAllocator):
            deref(allocator, HeapAllocator, "allocator")

    @export("0r_I", name="buffer.length")
    def buffer_length(self, buffer):
        return deref(buffer, Buffer, "buffer").byte_length

    @export("0rIi_i", name="buffer.load")
    def buffer_load(self, buffer, offset, length):
        buffer = deref(buffer, Buffer, "buffer")
        length = u32(length)
        if length > 4:
            raise HalError(f"load length byte count {length} exceeds max",
                           StatusCode.INVALID_ARGUMENT)
        return i32(int.from_bytes(buffer.map_read(offset, length), "little"))

    @export("0irIi_v", name="buffer.store")
    def buffer_store(self, value, buffer, offset, length):
        buffer = deref(buffer, Buffer, "buffer")
        length = u32(length)
        if length > 4:
            raise HalError(f"store length byte count {length} exceeds max",
                           StatusCode.INVALID_ARGUMENT)
        if offset < 0 or offset + length > buffer.byte_length:
            raise HalError(f"store out of bounds (target_offset={offset}, length={length} into "
                           f"max {buffer.byte_length})", StatusCode.OUT_OF_RANGE)
        buffer.map_write(offset, u32(value).to_bytes(4, "little")[:length])

    @export("0rII_r", name="buffer.subspan")
    def buffer_subspan(self, buffer, offset, length):
        buffer = deref(buffer, Buffer, "buffer")
        try:
            return buffer.subspan(offset, length)
        except VmrtError as error:
            raise error.annotate(f"invalid subspan of an existing buffer (source_offset="
                                 f"{offset}, length={length})")

    # -- buffer view -------------------------------------------------------------------------------
    @export("0rriiCID_v", name="buffer_view.assert")
    def buffer_view_assert(self, view, message, element_type, encoding_type, shape):
        if not isinstance(view, BufferView):
            deref(view, BufferView, "buffer_view")
        if not isinstance(message, VMBuffer):  # (its text only when failing)
            deref(message, VMBuffer, "buffer")
        # The common case first, exactly as expected: a few comparisons.
        if view.element_type == element_type & UINT32_MAX and \
                view.encoding_type == encoding_type & UINT32_MAX:
            actual = view.shape
            if len(actual) == len(shape):
                for a, (e,) in zip(actual, shape):
                    if a != e:
                        break
                else:
                    return
        _check_buffer_view(view, message, u32(element_type), u32(encoding_type),
                           tuple(d for (d,) in shape))

    @export("0r_r", name="buffer_view.buffer")
    def buffer_view_buffer(self, view):
        if not isinstance(view, BufferView):
            deref(view, BufferView, "buffer_view")
        return view.buffer

    @export("0rIIiiCID_r", name="buffer_view.create")
    def buffer_view_create(self, buffer, offset, length, element_type, encoding_type, shape):
        if not isinstance(buffer, Buffer):
            deref(buffer, Buffer, "buffer")
        if offset != 0 or length != buffer.byte_length:
            try:
                buffer = buffer.subspan(offset, length)
            except VmrtError as error:
                raise error.annotate(f"invalid subspan of an existing buffer (source_offset="
                                     f"{offset}, length={length})")
        # (BufferView takes the low 32 bits of the types itself)
        return BufferView(buffer, [d for (d,) in shape], element_type, encoding_type)

    @export("0ri_I", name="buffer_view.dim")
    def buffer_view_dim(self, view, index):
        return deref(view, BufferView, "buffer_view").dim(index)

    @export("0r_i", name="buffer_view.element_type")
    def buffer_view_element_type(self, view):
        return i32(deref(view, BufferView, "buffer_view").element_type)

    @export("0r_i", name="buffer_view.encoding_type")
    def buffer_view_encoding_type(self, view):
        return i32(deref(view, BufferView, "buffer_view").encoding_type)

    @export("0r_i", name="buffer_view.rank")
    def buffer_view_rank(self, view):
        return deref(view, BufferView, "buffer_view").rank

    @export("0rCrD_v", name="buffer_view.trace")
    def buffer_view_trace(self, key, views):
        if self.buffer_view_trace is None:
            return
        if len(views) > 128:
            raise HalError("too many buffer views for a single trace call",
                           StatusCode.RESOURCE_EXHAUSTED)
        self.buffer_view_trace(buffer_string(deref(key, VMBuffer, "buffer")),
                               [deref(v, BufferView, "buffer_view") for (v,) in views])

    # -- channel (collectives are not implemented on the local devices) ----------------------------
    @export("0rIIrrii_r", name="channel.create")
    def channel_create(self, device, queue_affinity, flags, id, group, rank, count):
        deref(device, Device, "device")
        raise HalError("collective channels are not supported by the local devices",
                       StatusCode.UNIMPLEMENTED)

    @export("0r_ii", name="channel.rank_and_count")
    def channel_rank_and_count(self, channel):
        deref(channel, Channel, "channel")
        return 0, 1

    @export("0riiI_r", name="channel.split")
    def channel_split(self, channel, color, key, flags):
        deref(channel, Channel, "channel")
        raise HalError("collective channels are not supported by the local devices",
                       StatusCode.UNIMPLEMENTED)

    # -- command buffer ----------------------------------------------------------------------------
    @export("0rrIIIi_v", name="command_buffer.advise_buffer")
    def command_buffer_advise_buffer(self, command_buffer, buffer, flags, arg0, arg1, slot):
        deref(command_buffer, CommandBuffer, "command_buffer").advise_buffer(
            _ref(buffer, slot, 0, WHOLE_BUFFER), flags, arg0, arg1)

    @export("0rr_v", name="command_buffer.begin_debug_group")
    def command_buffer_begin_debug_group(self, command_buffer, label):
        deref(command_buffer, CommandBuffer, "command_buffer").begin_debug_group(
            buffer_string(deref(label, VMBuffer, "buffer")))

    @export("0rriiiirrIIIII_v", name="command_buffer.collective")
    def command_buffer_collective(self, command_buffer, channel, op, param, send_slot,
                                  recv_slot, send_buffer, recv_buffer, send_offset, send_length,
                                  recv_offset, recv_length, element_count):
        command_buffer = deref(command_buffer, CommandBuffer, "command_buffer")
        deref(channel, Channel, "channel")
        command_buffer.collective()

    @export("0riirIrIII_v", name="command_buffer.copy_buffer")
    def command_buffer_copy_buffer(self, command_buffer, source_slot, target_slot, source,
                                   source_offset, target, target_offset, length, flags):
        deref(command_buffer, CommandBuffer, "command_buffer").copy_buffer(
            _ref(source, source_slot, source_offset, length),
            _ref(target, target_slot, target_offset, length), flags)

    @export("0riiIi_r", name="command_buffer.create", state=True)
    def command_buffer_create(self, meter, device, modes, categories, queue_affinity,
                              binding_capacity):
        device = deref(device, Device, "device")
        # Under limits it is charged as it records (CommandBuffer.charge grows).
        command_buffer = charged(
            meter, _COMMAND_BUFFER_BYTES, lambda: device.create_command_buffer(
                u32(modes), u32(categories), queue_affinity, u32(binding_capacity)))
        command_buffer.begin()
        return command_buffer

    @export("0rrIiiiICiDCiirIID_v", name="command_buffer.dispatch")
    def command_buffer_dispatch(self, command_buffer, executable, function, x, y, z, flags,
                                constants, bindings):
        command_buffer = deref(command_buffer, CommandBuffer, "command_buffer")
        executable = deref(executable, Executable, "executable")
        command_buffer.dispatch(executable, _function_index(function),
                                (u32(x), u32(y), u32(z)), _pack_constants(constants),
                                _binding_refs(bindings), flags)

    @export("0rrIirIICiDCiirIID_v", name="command_buffer.dispatch.indirect")
    def command_buffer_dispatch_indirect(self, command_buffer, executable, function,
                                         workgroups_slot, workgroups_buffer, workgroups_offset,
                                         flags, constants, bindings):
        command_buffer = deref(command_buffer, CommandBuffer, "command_buffer")
        executable = deref(executable, Executable, "executable")
        command_buffer.dispatch(executable, _function_index(function), None,
                                _pack_constants(constants), _binding_refs(bindings), flags,
                                workgroup_count_ref=_ref(workgroups_buffer, workgroups_slot,
                                                         workgroups_offset, 12))

    @export("0r_v", name="command_buffer.end_debug_group")
    def command_buffer_end_debug_group(self, command_buffer):
        deref(command_buffer, CommandBuffer, "command_buffer").end_debug_group()

    @export("0riiI_v", name="command_buffer.execution_barrier")
    def command_buffer_execution_barrier(self, command_buffer, source_stage_mask,
                                         target_stage_mask, flags):
        deref(command_buffer, CommandBuffer, "command_buffer").execution_barrier(
            u32(source_stage_mask), u32(target_stage_mask), flags)

    @export("0rrIIiIiI_v", name="command_buffer.fill_buffer")
    def command_buffer_fill_buffer(self, command_buffer, target, offset, length, slot,
                                   pattern, pattern_length, flags):
        command_buffer = deref(command_buffer, CommandBuffer, "command_buffer")
        command_buffer.fill_buffer(_ref(target, slot, offset, length),
                                   _pattern_bytes(pattern, pattern_length), flags)

    @export("0r_v", name="command_buffer.finalize")
    def command_buffer_finalize(self, command_buffer):
        deref(command_buffer, CommandBuffer, "command_buffer").end()

    @export("0rirII_v", name="command_buffer.flush_buffer")
    def command_buffer_flush_buffer(self, command_buffer, slot, buffer, offset, length):
        # Host memory is coherent: flushes and invalidations have nothing to do.
        deref(command_buffer, CommandBuffer, "command_buffer")
        deref_or_null(buffer, Buffer, "buffer")

    @export("0rirII_v", name="command_buffer.invalidate_buffer")
    def command_buffer_invalidate_buffer(self, command_buffer, slot, buffer, offset, length):
        deref(command_buffer, CommandBuffer, "command_buffer")
        deref_or_null(buffer, Buffer, "buffer")

    @export("0rrIrIIiI_v", name="command_buffer.update_buffer")
    def command_buffer_update_buffer(self, command_buffer, source, source_offset, target,
                                     target_offset, length, slot, flags):
        command_buffer = deref(command_buffer, CommandBuffer, "command_buffer")
        source = deref(source, VMBuffer, "buffer")
        data = source.map_ro(source_offset, length) if length >= 0 else None
        if data is None or len(data) != length:
            raise HalError(f"update source range [{source_offset}, {source_offset + length}) is "
                           f"out of bounds of {source.length} bytes", StatusCode.OUT_OF_RANGE)
        command_buffer.update_buffer(data, _ref(target, slot, target_offset, length), flags)

    # -- device ------------------------------------------------------------------------------------
    @export("0r_r", name="device.allocator")
    def device_allocator(self, device):
        if not isinstance(device, Device):
            deref(device, Device, "device")
        return device.allocator

    @export("0rrr_iI", name="device.query.i64")
    def device_query_i64(self, device, category, key):
        device = deref(device, Device, "device")
        category = buffer_string(deref(category, VMBuffer, "buffer"))
        key = buffer_string(deref(key, VMBuffer, "buffer"))
        try:
            return 1, device.query_i64(category, key)
        except VmrtError:
            return 0, 0

    @export("0rIrrIiiII_r", name="device.queue.alloca", state=True)
    def device_queue_alloca(self, meter, device, queue_affinity, wait_fence, signal_fence, pool,
                            memory_types, buffer_usage, size, flags):
        if not isinstance(device, Device):
            deref(device, Device, "device")
        if pool != 0:
            raise HalError("VM queue allocation pools are not supported",
                           StatusCode.UNIMPLEMENTED)
        # Without limits: queue_bookkeeping's call, made here (no frame, no *args)
        if meter is None:
            return device.queue_alloca(queue_affinity, fence_or_none(wait_fence),
                                       fence_or_none(signal_fence), memory_types & UINT32_MAX,
                                       buffer_usage & UINT32_MAX, size, flags, False)
        # Under limits the memory is zero-filled: a module must not read what the
        # process's heap last held (another context's data); else it is left as is.
        return charged(meter, size, lambda: queue_bookkeeping(
            meter, device.queue_alloca, queue_affinity, wait_fence, signal_fence,
            memory_types & UINT32_MAX, buffer_usage & UINT32_MAX, size, flags, True))

    @export("0rIrrI_v", name="device.queue.barrier", state=True)
    def device_queue_barrier(self, meter, device, queue_affinity, wait_fence, signal_fence,
                             flags):
        queue_bookkeeping(meter, deref(device, Device, "device").queue_barrier,
                          queue_affinity, wait_fence, signal_fence, flags)

    device_queue_copy = _queue_transfer("copy", _BUFFER, _BUFFER)

    @export("0rIrrrI_v", name="device.queue.dealloca", state=True)
    def device_queue_dealloca(self, meter, device, queue_affinity, wait_fence, signal_fence,
                              buffer, flags):
        if not isinstance(device, Device):
            deref(device, Device, "device")
        if not isinstance(buffer, Buffer):
            deref(buffer, Buffer, "buffer")
        if meter is None:  # (as in queue.alloca)
            device.queue_dealloca(queue_affinity, fence_or_none(wait_fence),
                                  fence_or_none(signal_fence), buffer, flags)
            return
        queue_bookkeeping(meter, device.queue_dealloca, queue_affinity, wait_fence,
                          signal_fence, buffer, flags)

    @export("0rIrrrI_v", name="device.queue.execute", state=True)
    def device_queue_execute(self, meter, device, queue_affinity, wait_fence, signal_fence,
                             command_buffer, flags):
        queue_call(meter, deref(device, Device, "device").queue_execute,
                   queue_affinity, wait_fence, signal_fence,
                   deref(command_buffer, CommandBuffer, "command_buffer"), (), flags)

    @export("0rIrrrICrIID_v", name="device.queue.execute.indirect", state=True)
    def device_queue_execute_indirect(self, meter, device, queue_affinity, wait_fence,
                                      signal_fence, command_buffer, flags, bindings):
        # The binding table: a copy of the span's (immutable) entries, their buffers
        # checked.
        for buffer, _, _ in bindings:
            if buffer is not None and not isinstance(buffer, Buffer):
                deref(buffer, Buffer, "buffer")
        if not isinstance(device, Device):
            deref(device, Device, "device")
        if not isinstance(command_buffer, CommandBuffer):
            deref(command_buffer, CommandBuffer, "command_buffer")
        if meter is None:  # (as in queue.alloca)
            device.queue_execute(queue_affinity, fence_or_none(wait_fence),
                                 fence_or_none(signal_fence), command_buffer, list(bindings),
                                 flags, False)
            return
        queue_call(meter, device.queue_execute, queue_affinity, wait_fence, signal_fence,
                   command_buffer, list(bindings), flags, False)

    @export("0rIrrrIIIiI_v", name="device.queue.fill", state=True)
    def device_queue_fill(self, meter, device, queue_affinity, wait_fence, signal_fence, target,
                          offset, length, pattern, pattern_length, flags):
        queue_call(meter, deref(device, Device, "device").queue_fill,
                   queue_affinity, wait_fence, signal_fence,
                   deref(target, Buffer, "buffer"), offset, length,
                   _pattern_bytes(pattern, pattern_length), flags)

    @export("0rI_v", name="device.queue.flush")
    def device_queue_flush(self, device, queue_affinity):
        deref(device, Device, "device").queue_flush(queue_affinity)

    device_queue_read = _queue_transfer("read", _FILE, _BUFFER)

    @export("0rIrrrIrIII_v", name="device.queue.update", state=True)
    def device_queue_update(self, meter, device, queue_affinity, wait_fence, signal_fence,
                            source, source_offset, target, target_offset, length, flags):
        source = deref(source, VMBuffer, "buffer")
        data = source.map_ro(source_offset, length)
        queue_call(meter, deref(device, Device, "device").queue_update,
                   queue_affinity, wait_fence, signal_fence, data,
                   deref(target, Buffer, "buffer"), target_offset, length, flags)

    device_queue_write = _queue_transfer("write", _BUFFER, _FILE)

    @export("0v_i", name="devices.count")
    def devices_count(self):
        return len(self.devices)

    @export("0i_r", name="devices.get")
    def devices_get(self, index):
        return self.devices[index] if 0 <= index < len(self.devices) else None

    # -- files -------------------------------------------------------------------------------------
    @export("0rIirIIi_r", name="ex.file.from_memory")
    def ex_file_from_memory(self, device, queue_affinity, access, buffer, offset, length, flags):
        deref(device, Device, "device")
        if u32(access) & ~ACCESS_READ:
            raise HalError("only read-only memory can be accessed via a file handle (today)",
                           StatusCode.PERMISSION_DENIED)
        buffer = deref(buffer, VMBuffer, "buffer")
        return MemoryFile(buffer.map_ro(offset, length), ACCESS_READ)

    # -- executables -------------------------------------------------------------------------------
    @export("0rIrrr_r", name="executable.create", state=True)
    def executable_create(self, charge, device, queue_affinity, executable_format, data,
                          constants):
        device = deref(device, Device, "device")
        fmt = buffer_string(deref(executable_format, VMBuffer, "buffer"))
        if charge is not None and not self.native_under_limits and fmt in NATIVE_FORMATS:
            raise HalError(f"executable format '{fmt}' is native code, which Limits cannot "
                           "meter or interrupt: refused in a context with limits (the host "
                           "may opt in: HalModule(native_under_limits=True), "
                           "vmrt run --native_under_limits)",
                           StatusCode.PERMISSION_DENIED)
        data = deref(data, VMBuffer, "buffer")
        constant_bytes = b""
        if isinstance(constants, VMBuffer):
            if constants.length % 4:
                raise HalError("constant buffer data must contain 4-byte elements but data "
                               f"length is {constants.length}", StatusCode.INVALID_ARGUMENT)
            constant_bytes = bytes(constants.view)
        # Under limits the executable's module is charged while it lives, and its
        # initializers run metered (vmrt.hal.vmvx_loader).
        return charged(charge, data.length + len(constant_bytes), lambda: guarded_call(
            charge, device.create_executable, fmt, data.view, constant_bytes, queue_affinity))

    @export("0rr_I", name="executable.lookup.function")
    def executable_lookup_function(self, executable, name):
        executable = deref(executable, Executable, "executable")
        return executable.lookup_function(buffer_string(deref(name, VMBuffer, "buffer")))

    # -- fences ------------------------------------------------------------------------------------
    @export("0iICrD_i", name="fence.await", state=True)
    def fence_await(self, meter, timeout_millis, flags, fences):
        for (fence,) in fences:  # (all checked before any is waited for)
            if fence is not None and not isinstance(fence, Fence):
                deref(fence, Fence, "fence")
        pending = []
        for (fence,) in fences:
            if fence is not None and not fence.is_reached():  # raises a failure
                pending.append(fence)
        if not pending:
            return 0
        timeout = u32(timeout_millis)
        deadline = None if timeout == UINT32_MAX else time.monotonic() + timeout / 1000.0
        try:
            guarded_call(meter, _wait_all, pending, deadline)
        except HalError as error:  # (the call's own limits fail it: a VMError)
            # The wait timed out; work that failed with DEADLINE_EXCEEDED fails the call.
            if error.code == StatusCode.DEADLINE_EXCEEDED and deadline is not None and \
                    time.monotonic() >= deadline:
                return int(StatusCode.DEADLINE_EXCEEDED)
            raise
        return 0

    @export("0rI_r", name="fence.create")
    def fence_create(self, device, flags):
        if not isinstance(device, Device):
            deref(device, Device, "device")
        return device.create_fence()

    @export("0ri_v", name="fence.fail")
    def fence_fail(self, fence, status):
        fence = deref(fence, Fence, "fence")
        code = status & 0x1F
        try:
            code = StatusCode(code)
        except ValueError:
            code = StatusCode.UNKNOWN
        fence.fail(HalError(f"fence failed with status {code.name}", code))

    @export("0ICrD_r", name="fence.join")
    def fence_join(self, flags, fences):
        joined = []
        for (fence,) in fences:
            if fence is not None:
                if not isinstance(fence, Fence):
                    deref(fence, Fence, "fence")
                joined.append(fence)
        joined = Fence.join(joined)
        return joined if joined.timepoints else None

    @export("0r_i", name="fence.query")
    def fence_query(self, fence):
        code, _ = deref(fence, Fence, "fence").status()
        return int(code)

    @export("0r_v", name="fence.signal")
    def fence_signal(self, fence):
        deref(fence, Fence, "fence").signal()


def _wait_all(fences, deadline) -> None:
    for fence in fences:
        fence.wait(deadline)


_CONSTANT_FORMATS: dict[int, struct.Struct] = {}


def _pack_constants(constants) -> bytes:
    count = len(constants)
    packer = _CONSTANT_FORMATS.get(count)
    if packer is None:
        packer = _CONSTANT_FORMATS[count] = struct.Struct(f"<{count}I")
    return packer.pack(*[c & UINT32_MAX for (c,) in constants])


def _pattern_bytes(pattern: int, pattern_length: int) -> bytes:
    """The low `pattern_length` bytes of a fill pattern (1, 2 or 4 of them)."""
    size = u32(pattern_length)
    check_fill_pattern(size)
    return (pattern & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")[:size]


def _binding_refs(bindings) -> list:
    if len(bindings) > MAX_DISPATCH_BINDINGS:
        raise HalError(f"binding count {len(bindings)} > {MAX_DISPATCH_BINDINGS}",
                       StatusCode.OUT_OF_RANGE)
    return [_ref(buffer, slot, offset, length) for _, slot, buffer, offset, length in bindings]


def _function_index(function: int) -> int:
    if not 0 <= function <= UINT32_MAX:
        raise HalError(f"function id {function} out of range", StatusCode.OUT_OF_RANGE)
    return function


__all__ = ["Channel", "Event", "HalModule", "HostAdapter", "charged", "deref", "deref_or_null",
           "fence_or_none", "guarded_call"]
