"""The host HAL: buffers, buffer views, command buffers, semaphores and fences,
executables and the local devices (`local-sync`, `local-task`) that run them.

It knows nothing of the VM's calling conventions: `vmrt.modules.hal` exposes it
to VM programs and registers its objects as ref types.
"""

from vmrt.elements import ElementType
from vmrt.errors import HalError
from vmrt.hal.allocator import HeapAllocator
from vmrt.hal.buffer import Buffer
from vmrt.hal.buffer_view import BufferView, compute_view_size
from vmrt.hal.command_buffer import CommandBuffer
from vmrt.hal.device import Device, SyncDevice, TaskDevice, create_device
from vmrt.hal.executable import DispatchState, Executable, ExecutableLoader, FunctionInfo
from vmrt.hal.file import MemoryFile
from vmrt.hal.semaphore import Fence, Semaphore
from vmrt.hal.types import (
    BufferUsage, CommandBufferMode, CommandCategory, EncodingType, MemoryAccess, MemoryType,
)

__all__ = [
    "Buffer", "BufferUsage", "BufferView", "CommandBuffer", "CommandBufferMode",
    "CommandCategory", "Device", "DispatchState", "ElementType", "EncodingType", "Executable",
    "ExecutableLoader", "Fence", "FunctionInfo", "HalError", "HeapAllocator", "MemoryAccess",
    "MemoryFile", "MemoryType", "Semaphore", "SyncDevice", "TaskDevice", "compute_view_size",
    "create_device",
]
