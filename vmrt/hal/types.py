"""HAL enumerations and bit fields with IREE's numeric values.

Values match runtime/src/iree/hal/{buffer,buffer_view,command_buffer}.h so that
the numbers a compiled module passes to the `hal` module mean the same here.
Flags are plain ints on hot paths; the IntFlag classes give them names for
messages (`format_bits`).
"""

from __future__ import annotations

import enum

# (Element types are IREE's HAL element types, but they live in vmrt.elements, below
# the HAL, since parameter archives read them too; HalError lives in vmrt.errors.
# Re-exported here only for vmrt.modules.hal until it imports them from there.)

#: IREE_HAL_WHOLE_BUFFER as the VM passes it (an i64 of -1) and as a device size.
WHOLE_BUFFER = -1
#: Largest device size (iree_device_size_t is 64-bit unsigned upstream).
DEVICE_SIZE_MAX = (1 << 64) - 1


class MemoryType(enum.IntFlag):
    NONE = 0
    OPTIMAL = 1 << 0
    HOST_VISIBLE = 1 << 1
    HOST_COHERENT = 1 << 2
    HOST_CACHED = 1 << 3
    HOST_LOCAL = (1 << 1) | (1 << 2) | (1 << 6)
    DEVICE_VISIBLE = 1 << 4
    DEVICE_LOCAL = (1 << 4) | (1 << 5)
    OPTIMAL_FOR_HOST = 1 | HOST_LOCAL
    OPTIMAL_FOR_DEVICE = 1 | DEVICE_LOCAL


class MemoryAccess(enum.IntFlag):
    NONE = 0
    READ = 1 << 0
    WRITE = 1 << 1
    DISCARD = 1 << 2
    DISCARD_WRITE = (1 << 1) | (1 << 2)
    MAY_ALIAS = 1 << 3
    UNALIGNED = 1 << 4
    ANY = 1 << 5
    ALL = (1 << 0) | (1 << 1) | (1 << 2)


class BufferUsage(enum.IntFlag):
    NONE = 0
    TRANSFER_SOURCE = 1 << 0
    TRANSFER_TARGET = 1 << 1
    TRANSFER = (1 << 0) | (1 << 1)
    DISPATCH_INDIRECT_PARAMETERS = 1 << 8
    DISPATCH_UNIFORM_READ = 1 << 9
    DISPATCH_STORAGE_READ = 1 << 10
    DISPATCH_STORAGE_WRITE = 1 << 11
    DISPATCH_STORAGE = (1 << 10) | (1 << 11)
    DISPATCH_IMAGE_READ = 1 << 12
    DISPATCH_IMAGE_WRITE = 1 << 13
    DISPATCH_IMAGE = (1 << 12) | (1 << 13)
    DISPATCH = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13)
    SHARING_EXPORT = 1 << 16
    SHARING_REPLICATE = 1 << 17
    SHARING_CONCURRENT = 1 << 18
    SHARING_IMMUTABLE = 1 << 19
    MAPPING_SCOPED = 1 << 24
    MAPPING_PERSISTENT = 1 << 25
    MAPPING_OPTIONAL = 1 << 26
    MAPPING_ACCESS_RANDOM = 1 << 27
    MAPPING_ACCESS_SEQUENTIAL_WRITE = 1 << 28
    MAPPING = (1 << 24) | (1 << 27)
    DEFAULT = TRANSFER | DISPATCH_STORAGE


class BufferCompatibility(enum.IntFlag):
    NONE = 0
    ALLOCATABLE = 1 << 0
    IMPORTABLE = 1 << 1
    EXPORTABLE = 1 << 2
    QUEUE_TRANSFER = 1 << 10
    QUEUE_DISPATCH = 1 << 11
    LOW_PERFORMANCE = 1 << 20


class CommandBufferMode(enum.IntFlag):
    DEFAULT = 0
    ONE_SHOT = 1 << 0
    ALLOW_INLINE_EXECUTION = 1 << 4
    UNVALIDATED = 1 << 5
    UNRETAINED = 1 << 6
    RETAIN_PROFILE_METADATA = 1 << 7
    RETAIN_DISPATCH_METADATA = 1 << 8


class CommandCategory(enum.IntFlag):
    NONE = 0
    TRANSFER = 1 << 0
    DISPATCH = 1 << 1
    ANY = (1 << 0) | (1 << 1)


class DispatchFlags(enum.IntFlag):
    NONE = 0
    DYNAMIC_INDIRECT_PARAMETERS = 1 << 0
    STATIC_INDIRECT_PARAMETERS = 1 << 1
    CUSTOM_DIRECT_ARGUMENTS = 1 << 2
    DYNAMIC_INDIRECT_ARGUMENTS = 1 << 3
    STATIC_INDIRECT_ARGUMENTS = 1 << 4
    ALLOW_INLINE_EXECUTION = 1 << 5
    BORROW_RESOURCE_LIFETIMES = 1 << 6


class EncodingType(enum.IntEnum):
    OPAQUE = 0
    DENSE_ROW_MAJOR = 1


# -- plain ints -----------------------------------------------------------------------------------
# The flags that hot paths test, as plain ints: an IntFlag's & and | run Python code.
MEMORY_OPTIMAL = int(MemoryType.OPTIMAL)
MEMORY_HOST_VISIBLE = int(MemoryType.HOST_VISIBLE)
MEMORY_DEVICE_VISIBLE = int(MemoryType.DEVICE_VISIBLE)
ACCESS_READ = int(MemoryAccess.READ)
ACCESS_WRITE = int(MemoryAccess.WRITE)
ACCESS_DISCARD_WRITE = int(MemoryAccess.DISCARD_WRITE)
ACCESS_ANY = int(MemoryAccess.ANY)
ACCESS_ALL = int(MemoryAccess.ALL)
USAGE_DEFAULT = int(BufferUsage.DEFAULT)
USAGE_TRANSFER_SOURCE = int(BufferUsage.TRANSFER_SOURCE)
USAGE_TRANSFER_TARGET = int(BufferUsage.TRANSFER_TARGET)
USAGE_DISPATCH_STORAGE = int(BufferUsage.DISPATCH_STORAGE)
USAGE_DISPATCH_INDIRECT_PARAMETERS = int(BufferUsage.DISPATCH_INDIRECT_PARAMETERS)
USAGE_SHARING_IMMUTABLE = int(BufferUsage.SHARING_IMMUTABLE)
USAGE_MAPPING_PERSISTENT = int(BufferUsage.MAPPING_PERSISTENT)
COMPATIBILITY_ALLOCATABLE = int(BufferCompatibility.ALLOCATABLE)
COMPATIBILITY_IMPORTABLE = int(BufferCompatibility.IMPORTABLE)
COMPATIBILITY_QUEUE_TRANSFER = int(BufferCompatibility.QUEUE_TRANSFER)
COMPATIBILITY_QUEUE_DISPATCH = int(BufferCompatibility.QUEUE_DISPATCH)
CATEGORY_TRANSFER = int(CommandCategory.TRANSFER)
CATEGORY_DISPATCH = int(CommandCategory.DISPATCH)
MODE_UNVALIDATED = int(CommandBufferMode.UNVALIDATED)
#: The dispatch flags that pass custom arguments.
CUSTOM_ARGUMENTS = int(DispatchFlags.CUSTOM_DIRECT_ARGUMENTS |
                       DispatchFlags.STATIC_INDIRECT_ARGUMENTS |
                       DispatchFlags.DYNAMIC_INDIRECT_ARGUMENTS)
ENCODING_DENSE_ROW_MAJOR = int(EncodingType.DENSE_ROW_MAJOR)


# -- names ----------------------------------------------------------------------------------------
# Upstream's bitfield formatting: composite names first, each bit named once, joined by '|'.
_MEMORY_TYPE_NAMES = [
    (MemoryType.HOST_LOCAL, "HOST_LOCAL"), (MemoryType.DEVICE_LOCAL, "DEVICE_LOCAL"),
    (MemoryType.OPTIMAL, "OPTIMAL"), (MemoryType.HOST_VISIBLE, "HOST_VISIBLE"),
    (MemoryType.HOST_COHERENT, "HOST_COHERENT"), (MemoryType.HOST_CACHED, "HOST_CACHED"),
    (MemoryType.DEVICE_VISIBLE, "DEVICE_VISIBLE"),
]
_MEMORY_ACCESS_NAMES = [
    (MemoryAccess.ALL, "ALL"), (MemoryAccess.DISCARD_WRITE, "DISCARD_WRITE"),
    (MemoryAccess.READ, "READ"), (MemoryAccess.WRITE, "WRITE"),
    (MemoryAccess.DISCARD, "DISCARD"), (MemoryAccess.MAY_ALIAS, "MAY_ALIAS"),
    (MemoryAccess.ANY, "ANY"),
]
_BUFFER_USAGE_NAMES = [
    (BufferUsage.TRANSFER, "TRANSFER"), (BufferUsage.DISPATCH, "DISPATCH"),
    (BufferUsage.DISPATCH_STORAGE, "DISPATCH_STORAGE"),
    (BufferUsage.DISPATCH_IMAGE, "DISPATCH_IMAGE"), (BufferUsage.MAPPING, "MAPPING"),
] + [(member, member.name) for member in BufferUsage
     if member.value and member.value & (member.value - 1) == 0]


def _format_bits(value: int, names) -> str:
    if value == 0:
        return "NONE"
    parts = []
    remaining = value
    for bits, name in names:
        bits = int(bits)
        if bits and remaining & bits == bits:
            parts.append(name)
            remaining &= ~bits
    if remaining:
        parts.append(f"{remaining:X}h")
    return "|".join(parts)


def format_memory_type(value: int) -> str:
    return _format_bits(value, _MEMORY_TYPE_NAMES)


def format_memory_access(value: int) -> str:
    return _format_bits(value, _MEMORY_ACCESS_NAMES)


def format_buffer_usage(value: int) -> str:
    return _format_bits(value, _BUFFER_USAGE_NAMES)


def format_command_category(value: int) -> str:
    return _format_bits(value, [(CommandCategory.TRANSFER, "TRANSFER"),
                                (CommandCategory.DISPATCH, "DISPATCH")])
