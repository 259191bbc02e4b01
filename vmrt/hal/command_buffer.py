"""Command buffers: recorded fill/update/copy/dispatch commands separated by
barriers, validated as they are recorded (runtime/src/iree/hal/
command_buffer_validation.c) and replayed by a device against a binding table.

A buffer reference is `(buffer, slot, offset, length)`: a direct reference
names a buffer, an indirect one (buffer None) names a binding-table slot that
is resolved when the command buffer is executed.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from vmrt.errors import HalError, StatusCode
from vmrt.hal.allocator import HeapAllocator, queue_compatibility
from vmrt.hal.buffer import (
    buffers_overlap, calculate_range, fill_view,
    validate_access, validate_memory_type, validate_usage,
)
from vmrt.hal.executable import DispatchState, Executable
from vmrt.hal.types import (
    ACCESS_ANY, ACCESS_READ, ACCESS_WRITE, CATEGORY_DISPATCH, CATEGORY_TRANSFER,
    COMPATIBILITY_QUEUE_DISPATCH, COMPATIBILITY_QUEUE_TRANSFER, CUSTOM_ARGUMENTS,
    MEMORY_DEVICE_VISIBLE, MODE_UNVALIDATED, USAGE_DISPATCH_INDIRECT_PARAMETERS,
    USAGE_DISPATCH_STORAGE, USAGE_TRANSFER_SOURCE, USAGE_TRANSFER_TARGET, WHOLE_BUFFER,
    format_buffer_usage, format_command_category,
)
from vmrt.vm.call_guard import current_guard
from vmrt.vm.ref import RefObject

_WORKGROUP_COUNT = struct.Struct("<3I")
#: What one recorded command (or binding reference) is charged under limits, besides
#: the bytes it copies: about its Python objects' size.
_COMMAND_BYTES = 160
#: How many buffer properties a BindingNeeds remembers as admitted.
_ADMITTED_PROPERTIES = 64


class BindingNeeds:
    """What one kind of recorded command needs of each buffer it references
    (queue compatibility, usage, access, memory type), with the buffer
    properties (memory type, usage, access) that passed the checks against it:
    a model records hundreds of copies and dispatches of buffers alike. A
    bounded number are remembered, whatever a module records."""

    __slots__ = ("compatibility", "usage", "access", "memory_type", "admitted")

    def __init__(self, compatibility: int, usage: int, access: int, memory_type: int):
        self.compatibility = compatibility
        self.usage = usage
        self.access = access
        self.memory_type = memory_type
        self.admitted: set[tuple[int, int, int]] = set()

    def admit(self, buffer, properties: tuple[int, int, int]) -> None:
        """validate_bindings' checks of a direct reference when it is recorded, then its
        `properties` are admitted. Its binding is the buffer from 0 to the
        reference's end, so only the buffer's own properties can fail here (the
        range is checked when the command runs). Only the heap allocator exists,
        so its compatibility rule is used directly."""
        if self.usage:  # (advise_buffer requires nothing of a direct reference)
            _validate_binding_properties(buffer, self, queue_compatibility(
                buffer.memory_type, buffer.allowed_usage & self.usage))
        if len(self.admitted) < _ADMITTED_PROPERTIES:
            self.admitted.add(properties)


_ADVISE_NEEDS = BindingNeeds(0, 0, 0, MEMORY_DEVICE_VISIBLE)
_SOURCE_NEEDS = BindingNeeds(COMPATIBILITY_QUEUE_TRANSFER, USAGE_TRANSFER_SOURCE, ACCESS_READ,
                             MEMORY_DEVICE_VISIBLE)
_TARGET_NEEDS = BindingNeeds(COMPATIBILITY_QUEUE_TRANSFER, USAGE_TRANSFER_TARGET, ACCESS_WRITE,
                             MEMORY_DEVICE_VISIBLE)
_WORKGROUP_COUNT_NEEDS = BindingNeeds(COMPATIBILITY_QUEUE_DISPATCH,
                                      USAGE_DISPATCH_INDIRECT_PARAMETERS, ACCESS_READ,
                                      MEMORY_DEVICE_VISIBLE)
_DISPATCH_BINDING_NEEDS = BindingNeeds(COMPATIBILITY_QUEUE_DISPATCH, USAGE_DISPATCH_STORAGE,
                                       ACCESS_ANY, MEMORY_DEVICE_VISIBLE)


class Requirements:
    """What the recorded commands need of one buffer (upstream's
    iree_hal_buffer_binding_requirements_t); merged per binding-table slot."""

    __slots__ = ("compatibility", "usage", "access", "memory_type", "max_byte_offset",
                 "alignment", "merged_needs", "admitted")

    def __init__(self):  # nothing needed yet: merge() adds each use
        self.compatibility = self.usage = self.access = self.memory_type = 0
        self.max_byte_offset = self.alignment = 0
        #: The BindingNeeds merged so far: merging one again cannot add to the four above.
        self.merged_needs: set[BindingNeeds] = set()
        #: (memory type, usage, access) of buffers that passed the checks of their
        #: properties (a reusable command buffer sees the same few on every submit).
        self.admitted: set[tuple[int, int, int]] = set()

    def merge(self, needs: BindingNeeds, max_byte_offset: int, alignment: int) -> None:
        if needs not in self.merged_needs:
            self._merge_needs(needs)
        if max_byte_offset > self.max_byte_offset:
            self.max_byte_offset = max_byte_offset
        if alignment:
            self.alignment = math.lcm(self.alignment or 1, alignment)

    def _merge_needs(self, needs: BindingNeeds) -> None:
        self.merged_needs.add(needs)
        before = (self.compatibility, self.usage, self.access, self.memory_type)
        self.compatibility |= needs.compatibility
        self.usage |= needs.usage
        self.access |= needs.access
        self.memory_type |= needs.memory_type
        if (self.compatibility, self.usage, self.access, self.memory_type) != before:
            self.admitted = set()  # they passed the checks against less than is needed now


def validate_bindings(allocator: HeapAllocator, table, slot_requirements: dict) -> None:
    """iree_hal_command_buffer_validate_binding_requirements of every slot of
    `slot_requirements` against its entry of `table` (in one frame: a command
    buffer's submission checks all of its slots every time)."""
    for slot, req in slot_requirements.items():
        if req.usage == 0:
            continue
        buffer, offset, length = table[slot]
        if buffer is None:
            raise HalError("binding table slot requires a buffer but none was provided",
                           StatusCode.INVALID_ARGUMENT)
        properties = (buffer.memory_type, buffer.allowed_usage, buffer.allowed_access)
        if properties not in req.admitted:
            compatibility, _, _ = allocator.query_compatibility(
                buffer.memory_type, buffer.allowed_usage & req.usage)
            _validate_binding_properties(buffer, req, compatibility)
            if len(req.admitted) < 16:
                req.admitted.add(properties)
        if req.max_byte_offset > 0 and length != WHOLE_BUFFER and \
                offset + req.max_byte_offset > offset + length:
            raise HalError("at least one command attempted to access an address outside of "
                           f"the valid bound buffer range (length={req.max_byte_offset}, "
                           f"binding offset={offset}, binding length={length})",
                           StatusCode.OUT_OF_RANGE)
        if req.alignment and offset % req.alignment:
            raise HalError("binding offset does not match the required alignment of one or "
                           f"more command (offset={offset}, min_byte_alignment="
                           f"{req.alignment})", StatusCode.INVALID_ARGUMENT)


def _validate_binding_properties(buffer, needs: BindingNeeds | Requirements,
                                 compatibility: int) -> None:
    """The checks of validate_bindings that depend on the buffer's properties
    alone; `compatibility` is what the allocator gives the buffer's memory type
    with the usage needed."""
    if compatibility & needs.compatibility != needs.compatibility:
        raise HalError("requested buffer usage is not supported for the buffer on this queue; "
                       f"buffer allows usage {format_buffer_usage(buffer.allowed_usage)}, "
                       f"operation requires {format_buffer_usage(needs.usage)}",
                       StatusCode.PERMISSION_DENIED)
    validate_usage(buffer.allowed_usage, needs.usage)
    validate_access(buffer.allowed_access, needs.access)
    validate_memory_type(buffer.memory_type, needs.memory_type)


def resolve_ref(table, ref) -> tuple[object, int, int]:
    """(buffer, offset, length) of a reference; indirect ones go through
    `table`, a sequence of (buffer, offset, length) bindings
    (iree_hal_buffer_binding_table_resolve_ref)."""
    buffer, slot, offset, length = ref
    if buffer is not None:
        return buffer, offset, length
    if not table:
        return None, 0, 0
    if slot >= len(table):
        raise HalError(f"buffer binding {slot} out of range of binding table with capacity "
                       f"{len(table)}", StatusCode.OUT_OF_RANGE)
    bound, bound_offset, bound_length = table[slot]
    if bound is None:
        return None, 0, 0
    max_length = bound_length if bound_length != WHOLE_BUFFER else \
        bound.byte_length - bound_offset
    start, length = calculate_range(bound_offset, max_length, offset, length)
    return bound, start, length


# -- commands --------------------------------------------------------------------------------------
class FillCommand:
    __slots__ = ("target", "pattern")

    def __init__(self, target, pattern: bytes):
        self.target = target
        self.pattern = pattern

    def run(self, table, runner) -> None:
        buffer, offset, length = resolve_ref(table, self.target)
        _require(buffer, "fill target")
        if length == 0:
            return
        fill_view(buffer.map_range(ACCESS_WRITE, offset, length), offset, self.pattern)


class UpdateCommand:
    __slots__ = ("data", "target")

    def __init__(self, data: bytes, target):
        self.data = data
        self.target = target

    def run(self, table, runner) -> None:
        buffer, offset, length = resolve_ref(table, self.target)
        _require(buffer, "update target")
        view = buffer.map_range(ACCESS_WRITE, offset, length)
        view[:] = self.data[:len(view)]


class CopyCommand:
    __slots__ = ("source", "target")

    def __init__(self, source, target):
        self.source = source
        self.target = target

    def run(self, table, runner) -> None:
        src, src_offset, src_length = resolve_ref(table, self.source)
        dst, dst_offset, dst_length = resolve_ref(table, self.target)
        _require(src, "copy source")
        _require(dst, "copy target")
        if buffers_overlap(src, src_offset, src_length, dst, dst_offset, dst_length):
            raise HalError("source and target ranges overlap within the same buffer",
                           StatusCode.INVALID_ARGUMENT)
        source = src.map_range(ACCESS_READ, src_offset, src_length)
        target = dst.map_range(ACCESS_WRITE, dst_offset, dst_length)
        count = min(len(source), len(target))
        target[:count] = source[:count]


@dataclass(slots=True, eq=False)
class DispatchCommand:
    executable: Executable
    function: int
    workgroup_count: tuple
    workgroup_count_ref: object  # a binding reference, or None for a static count
    constants: bytes
    bindings: list
    flags: int

    def resolve(self, table) -> DispatchState:
        """The dispatch with its bindings mapped and its workgroup count read."""
        return DispatchState(self.function, self.count_of(table), (1, 1, 1), self.constants,
                             self.binding_views(table), guard=current_guard())

    def count_of(self, table) -> tuple:
        """The workgroup count: recorded, or read from its buffer now."""
        if self.workgroup_count_ref is None:
            return tuple(self.workgroup_count)
        buffer, offset, _ = resolve_ref(table, self.workgroup_count_ref)
        _require(buffer, "workgroup count buffer")
        return _WORKGROUP_COUNT.unpack(buffer.map_range(ACCESS_READ, offset, 12))

    def binding_views(self, table) -> list[memoryview]:
        """The bytes of every binding, mapped for the dispatch."""
        return [root.storage[start:start + length]
                for root, start, length in self.binding_spans(table)]

    def binding_spans(self, table) -> list[tuple]:
        """(allocated buffer, start, length) of every binding (Buffer.binding_span)."""
        spans = []
        for index, ref in enumerate(self.bindings):
            buffer, offset, length = resolve_ref(table, ref)
            if buffer is None:
                raise HalError(f"required binding {index} is NULL; all bindings must have a "
                               "valid pointer", StatusCode.FAILED_PRECONDITION)
            spans.append(buffer.binding_span(offset, length))
        return spans

    def run(self, table, runner) -> None:
        runner(self.executable, self.resolve(table))


def _require(buffer, what: str) -> None:
    if buffer is None:
        raise HalError(f"{what} is NULL", StatusCode.INVALID_ARGUMENT)


class BarrierCommand:
    __slots__ = ()

    def run(self, table, runner) -> None:
        pass


_BARRIER = BarrierCommand()


class CommandBuffer(RefObject):
    """A hal.command_buffer recorded between begin() and end()."""

    __slots__ = ("allocator", "mode", "categories", "queue_affinity", "binding_capacity",
                 "binding_count", "commands", "slot_requirements", "_began", "_ended",
                 "_debug_depth", "_validate", "_open", "_regions", "_plans", "charge")

    def __init__(self, allocator: HeapAllocator, mode: int, categories: int,
                 queue_affinity: int = -1, binding_capacity: int = 0):
        self.allocator = allocator
        self.mode = mode
        self.categories = categories
        self.queue_affinity = queue_affinity
        self.binding_capacity = binding_capacity
        self.binding_count = 0
        self.commands: list = []
        self.slot_requirements: dict[int, Requirements] = {}
        self._began = False
        self._ended = False
        self._debug_depth = 0
        self._validate = not mode & MODE_UNVALIDATED
        self._open = False  # between begin() and end(): the fast path of recording checks
        self._regions = None
        self._plans: dict = {}
        # A vmrt.vm.memory_limit.MemoryHold when a context with limits records it: each
        # recorded command and the bytes it copies are charged while it lives.
        self.charge = None

    def __repr__(self) -> str:
        return f"<hal.command_buffer {len(self.commands)} commands>"

    # -- recording state ----------------------------------------------------------------------
    def begin(self) -> None:
        if self._began and self._ended:
            raise HalError("command buffer has already been recorded; re-recording command "
                           "buffers is not allowed", StatusCode.FAILED_PRECONDITION)
        if self._began:
            raise HalError("command buffer is already in a recording state",
                           StatusCode.FAILED_PRECONDITION)
        self._began = True
        self._open = True

    def end(self) -> None:
        if self._debug_depth != 0:
            raise HalError(f"unbalanced debug group depth (expected 0, is {self._debug_depth})",
                           StatusCode.FAILED_PRECONDITION)
        if not self._began or self._ended:
            raise HalError("command buffer is not in a recording state",
                           StatusCode.FAILED_PRECONDITION)
        self._ended = True
        self._open = False

    def _check_recording(self, categories: int) -> None:
        if not self._began or self._ended:
            raise HalError("command buffer is not in a recording state; all recording must "
                           "happen between a begin/end pair", StatusCode.FAILED_PRECONDITION)
        if categories and self.categories & categories != categories:
            raise HalError(f"operation requires categories {format_command_category(categories)}"
                           " but command buffer only supports "
                           f"{format_command_category(self.categories)}",
                           StatusCode.FAILED_PRECONDITION)

    def _require(self, ref, needs: BindingNeeds, alignment: int = 0) -> None:
        """Validates a direct reference now; an indirect one adds what it needs
        to its slot's requirements, checked against the binding table at submission."""
        buffer = ref[0]
        if buffer is not None:
            properties = (buffer.memory_type, buffer.allowed_usage, buffer.allowed_access)
            if properties not in needs.admitted:
                needs.admit(buffer, properties)
            return
        merged = self.slot_requirements.get(ref[1])
        if merged is None:  # (_add_slot's checks depend on the slot alone: once is enough)
            merged = self._add_slot(ref[1])
        length = ref[3]
        merged.merge(needs, ref[2] + length if length != WHOLE_BUFFER else 0, alignment)

    def _add_slot(self, slot: int) -> Requirements:
        """The requirements of a binding-table slot that no command used before."""
        if slot >= self.binding_capacity:
            raise HalError(f"indirect buffer reference slot {slot} is out range of the declared "
                           f"binding capacity of the command buffer {self.binding_capacity}",
                           StatusCode.OUT_OF_RANGE)
        if slot >= self.binding_count:
            self.binding_count = slot + 1
        self.slot_requirements[slot] = merged = Requirements()
        return merged

    # -- commands ---------------------------------------------------------------------------------
    def begin_debug_group(self, label: str) -> None:
        self._check_recording(0)
        self._debug_depth += 1

    def end_debug_group(self) -> None:
        self._check_recording(0)
        self._debug_depth -= 1

    def execution_barrier(self, source_stage_mask: int = 0, target_stage_mask: int = 0,
                          flags: int = 0) -> None:
        if not self._open:
            self._check_recording(0)
        if self.charge is not None:
            self.charge.grow(_COMMAND_BYTES)
        self.commands.append(_BARRIER)

    def advise_buffer(self, ref, flags: int = 0, arg0: int = 0, arg1: int = 0) -> None:
        self._check_recording(CATEGORY_TRANSFER)
        if self._validate:
            self._require(ref, _ADVISE_NEEDS)

    def fill_buffer(self, target, pattern: bytes, flags: int = 0) -> None:
        if not (self._open and self.categories & CATEGORY_TRANSFER):
            self._check_recording(CATEGORY_TRANSFER)
        size = len(pattern)
        if size not in (1, 2, 4):
            raise HalError("fill value length is not one of the supported values "
                           f"(pattern_length={size})", StatusCode.INVALID_ARGUMENT)
        _, _, offset, length = target
        if offset % size or length % size:
            raise HalError("binding offset and/or length do not match the required alignment "
                           f"of one or more command (offset={offset}, length={length}, "
                           f"pattern_length={size})", StatusCode.INVALID_ARGUMENT)
        if self._validate:
            self._require(target, _TARGET_NEEDS, size)
        if self.charge is not None:
            self.charge.grow(_COMMAND_BYTES)
        self.commands.append(FillCommand(target, bytes(pattern)))

    def update_buffer(self, data, target, flags: int = 0) -> None:
        if not (self._open and self.categories & CATEGORY_TRANSFER):
            self._check_recording(CATEGORY_TRANSFER)
        if self._validate:
            self._require(target, _TARGET_NEEDS)
        # The source is copied now: the caller's memory may change after recording.
        if self.charge is not None:  # before the copy: its size is the caller's to pick
            self.charge.grow(_COMMAND_BYTES + len(data))
        self.commands.append(UpdateCommand(bytes(data), target))

    def copy_buffer(self, source, target, flags: int = 0) -> None:
        if not (self._open and self.categories & CATEGORY_TRANSFER):
            self._check_recording(CATEGORY_TRANSFER)
        if source[3] != target[3]:
            raise HalError("copy spans between source and target must match (source_length="
                           f"{source[3]}, target_length={target[3]})",
                           StatusCode.INVALID_ARGUMENT)
        if self._validate:
            # (_require's usual case inline: direct buffers of admitted properties, as
            # an initializer's hundreds of parameter copies are)
            src, dst = source[0], target[0]
            if src is None or (src.memory_type, src.allowed_usage, src.allowed_access) \
                    not in _SOURCE_NEEDS.admitted:
                self._require(source, _SOURCE_NEEDS)
            if dst is not None:
                if (dst.memory_type, dst.allowed_usage, dst.allowed_access) \
                        not in _TARGET_NEEDS.admitted:
                    self._require(target, _TARGET_NEEDS)
            else:  # (a slot: Requirements.merge's usual case inline, its needs merged)
                merged = self.slot_requirements.get(target[1])
                if merged is None or _TARGET_NEEDS not in merged.merged_needs or \
                        target[3] == WHOLE_BUFFER:
                    self._require(target, _TARGET_NEEDS)
                elif target[2] + target[3] > merged.max_byte_offset:
                    merged.max_byte_offset = target[2] + target[3]
            # (two different allocated buffers cannot overlap: no call for them)
            if src is not None and dst is not None and (
                    src is dst or src._root is not None or dst._root is not None) and \
                    buffers_overlap(src, source[2], source[3], dst, target[2], target[3]):
                raise HalError("source and target ranges overlap within the same buffer",
                               StatusCode.INVALID_ARGUMENT)
        if self.charge is not None:
            self.charge.grow(_COMMAND_BYTES)
        self.commands.append(CopyCommand(source, target))

    def dispatch(self, executable: Executable, function: int, workgroup_count=None,
                 constants: bytes = b"", bindings=(), flags: int = 0,
                 workgroup_count_ref=None) -> None:
        """Records a dispatch of `executable`'s function. `workgroup_count` is
        (x, y, z), or `workgroup_count_ref` names a buffer holding three u32s."""
        if not (self._open and self.categories & CATEGORY_DISPATCH):
            self._check_recording(CATEGORY_DISPATCH)
        if flags & CUSTOM_ARGUMENTS:
            raise HalError("direct/indirect arguments are not supported on the local command "
                           "buffers", StatusCode.UNIMPLEMENTED)
        if len(constants) % 4:
            raise HalError(f"invalid alignment {len(constants)}, must be 4-byte aligned",
                           StatusCode.INVALID_ARGUMENT)
        info = executable.function_info(function)
        if len(constants) != info.constant_count * 4:
            raise HalError(f"constant count mismatch, expected {info.constant_count} but was "
                           f"provided {len(constants) // 4}", StatusCode.INVALID_ARGUMENT)
        if len(bindings) != info.binding_count:
            raise HalError(f"binding count mismatch, expected {info.binding_count} but was "
                           f"provided {len(bindings)}", StatusCode.INVALID_ARGUMENT)
        if workgroup_count_ref is not None:
            offset, length = workgroup_count_ref[2], workgroup_count_ref[3]
            if offset % 4:
                raise HalError("workgroup count offset does not match the required natural "
                               f"alignment of uint32_t (offset={offset}, min_byte_alignment=4)",
                               StatusCode.INVALID_ARGUMENT)
            if length != WHOLE_BUFFER and length < 12:
                raise HalError("workgroup count buffer does not have the capacity to store the "
                               f"required 3 uint32_t values (length={length}, min_length=12)",
                               StatusCode.OUT_OF_RANGE)
            if self._validate:
                ref = (workgroup_count_ref[0], workgroup_count_ref[1], offset, 12)
                self._require(ref, _WORKGROUP_COUNT_NEEDS, 4)
        elif workgroup_count is None or len(workgroup_count) != 3:
            raise HalError("a dispatch needs three workgroup counts", StatusCode.INVALID_ARGUMENT)
        if self._validate:
            for ref in bindings:
                self._require(ref, _DISPATCH_BINDING_NEEDS)
        if self.charge is not None:
            self.charge.grow(_COMMAND_BYTES + len(constants) + _COMMAND_BYTES * len(bindings))
        self.commands.append(DispatchCommand(
            executable, function,
            tuple(int(c) & 0xFFFFFFFF for c in workgroup_count) if workgroup_count else None,
            workgroup_count_ref, bytes(constants), list(bindings), flags))

    def collective(self, *args) -> None:
        self._check_recording(CATEGORY_DISPATCH)
        raise HalError("collectives not yet implemented on CPU", StatusCode.UNIMPLEMENTED)

    # -- execution --------------------------------------------------------------------------------
    def validate_submission(self, table) -> None:
        """Checks a binding table against what the recorded commands need
        (run when the command buffer is submitted)."""
        if not self._ended:
            raise HalError("command buffer must be finalized before it can be submitted",
                           StatusCode.FAILED_PRECONDITION)
        if len(table) < self.binding_count:
            raise HalError(f"indirect command buffer requires at least {self.binding_count} "
                           f"bindings but only {len(table)} were provided",
                           StatusCode.INVALID_ARGUMENT)
        if self._validate:
            validate_bindings(self.allocator, table, self.slot_requirements)

    def regions(self) -> list[list]:
        """The commands split at barriers: commands of one region may run concurrently.
        Computed once when finalized (reusable command buffers run many times);
        callers must not modify the lists."""
        if self._regions is not None:
            return self._regions
        regions: list[list] = [[]]
        for command in self.commands:
            if command is _BARRIER:
                if regions[-1]:
                    regions.append([])
            else:
                regions[-1].append(command)
        if not regions[-1]:
            regions.pop()
        if self._ended:
            self._regions = regions
        return regions

    def plan(self, key, build):
        """`build(self)`, kept under `key` once the buffer is finalized: how a device
        runs it (devices key by what their plan depends on)."""
        plan = self._plans.get(key)
        if plan is None:
            plan = build(self)
            if self._ended:
                self._plans[key] = plan
        return plan

