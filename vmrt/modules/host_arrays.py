"""The hal module's host adapter: numpy arrays (and what numpy.asarray takes, where
a function's reflection declares a tensor) passed to `Function` calls become
buffer views on a device; buffer view results come back as numpy arrays.
(vmrt.vm.invocation.HostAdapter is the protocol; HalModule.host_adapter makes one.)
"""

from __future__ import annotations

from vmrt.errors import HalError, StatusCode
from vmrt.hal.buffer_view import BufferView
from vmrt.hal.buffer_view_io import (buffer_view_from_numpy, buffer_view_to_numpy,
                                     buffer_views_from_numpy)
from vmrt.hal.device import Device
from vmrt.hal.semaphore import Fence
from vmrt.vm.cconv import Signature
from vmrt.vm.ref import RefObject


#: Signature arguments -> the positions of their refs (HostAdapter.convert_arguments).
_REF_POSITIONS: dict = {}


class HostAdapter:
    """Host values <-> VM values for `Function` calls through a context with the
    hal module: numpy arrays (anything exposing `__array_interface__`) passed as
    ref arguments become buffer views on `device`, buffer view results come back
    as numpy arrays the host owns (copies: buffer_view_to_numpy)."""

    def __init__(self, device: Device):
        self.device = device

    def convert_arguments(self, signature: Signature, args) -> tuple:
        """Arrays at ref positions become buffer views (spans pass through unchanged)."""
        positions = _REF_POSITIONS.get(signature.arguments)
        if positions is None:
            positions = _REF_POSITIONS[signature.arguments] = tuple(
                position for position, element in enumerate(signature.arguments)
                if element == "r")
        at, arrays = [], []
        for position in positions:
            if position >= len(args):
                break
            value = args[position]
            # (the class first: ndarray's __array_interface__ builds a dict per lookup)
            if hasattr(value.__class__, "__array_interface__") or \
                    not isinstance(value, RefObject) and value is not None and \
                    hasattr(value, "__array_interface__"):
                at.append(position)
                arrays.append(value)
        if not arrays:
            return args
        views = buffer_views_from_numpy(arrays, self.device)
        if len(args) == 1:  # (a one-argument call: its one array)
            return (views[0],)
        converted = list(args)
        for position, view in zip(at, views):
            converted[position] = view
        return tuple(converted)

    def tensor_arguments(self, args: tuple, inputs) -> tuple:
        """Values at the declaration's tensor `inputs` (vmrt.vm.declaration.ValueInfo)
        that are not arrays or refs, nested lists and numbers, become numpy arrays of
        the declared dtype, as numpy.asarray(value, dtype) makes them."""
        converted = list(args)
        for position, (value, info) in enumerate(zip(args, inputs)):
            if not info.is_tensor or info.dtype is None or value is None or \
                    isinstance(value, RefObject) or hasattr(value, "__array_interface__"):
                continue
            import numpy as np
            try:
                converted[position] = np.asarray(value, dtype=info.dtype)
            except (TypeError, ValueError, OverflowError) as error:
                raise HalError(f"argument {position} ({info}): {error}",
                               StatusCode.INVALID_ARGUMENT) from None
        return tuple(converted)

    def create_signal_fence(self) -> Fence:
        """A fence for an async-external call to signal (vmrt.vm.invocation.AsyncFunction)."""
        return self.device.create_fence()

    def wait_fence(self, fence: Fence) -> None:
        fence.wait()

    def convert_results(self, signature: Signature, result):
        if isinstance(result, BufferView):  # (one result, to_host's case, without its frame)
            return buffer_view_to_numpy(result)
        if isinstance(result, tuple):
            return tuple(self.to_host(value) for value in result)
        return self.to_host(result)

    def to_host(self, value):
        if isinstance(value, BufferView):
            return buffer_view_to_numpy(value)
        return value

    def to_vm(self, value):
        if isinstance(value, RefObject) or value is None:
            return value
        return buffer_view_from_numpy(value, self.device)
