"""The `vmrt-python-v0` executable format (vmrt.hal.python_loader) on its own: what a
kernel receives, the builtin fill and copy kernels, registry rules and the errors of
bad executable data, unknown kernels and bad dispatches."""

from __future__ import annotations

import numpy as np
import pytest

from vmrt.errors import StatusCode, VmrtError
from vmrt.hal import BufferUsage, MemoryType, create_device
from vmrt.hal.python_loader import (FORMAT, KernelRegistry, PythonLoader, decode_executable,
                                    encode_executable)

_MEMORY = int(MemoryType.DEVICE_LOCAL)
_USAGE = int(BufferUsage.TRANSFER | BufferUsage.DISPATCH_STORAGE)


def _device(registry, name="local-sync"):
    return create_device(name, loaders=[PythonLoader(registry)])


def _dispatch(device, executable, function, buffers, constants=b"", count=(1, 1, 1)):
    command_buffer = device.create_command_buffer(1, 3)
    command_buffer.begin()
    command_buffer.dispatch(executable, function, count, constants,
                            [(buffer, 0, offset, length) for buffer, offset, length in buffers])
    command_buffer.end()
    device.queue_execute(-1, None, None, command_buffer)
    device.wait_idle()


def _buffer(device, data: bytes):
    buffer = device.allocator.allocate_buffer(_MEMORY, _USAGE, len(data))
    buffer.map_write(0, data)
    return buffer


@pytest.mark.parametrize("device_name", ["local-sync", "local-task"])
def test_a_kernel_gets_uint8_arrays_over_its_ranges_and_u32_constants(device_name):
    registry = KernelRegistry()
    calls = []

    @registry.register("ex::scale")
    def scale(source, target, factor, offset):
        calls.append((source.dtype, len(source), len(target), factor, offset))
        target.view(np.float32)[:] = source.view(np.float32) * factor + offset

    device = _device(registry, device_name)
    try:
        executable = device.create_executable(
            FORMAT, encode_executable([("scale", "ex::scale", 2, 2)]))
        assert executable.lookup_function("scale") == 0
        source = _buffer(device, np.arange(8, dtype=np.float32).tobytes())
        target = _buffer(device, bytes(64))
        _dispatch(device, executable, 0, [(source, 8, 16), (target, 32, 16)],
                  np.array([3, 0xFFFFFFFF], "<u4").tobytes())
        assert calls == [(np.uint8, 16, 16, 3, 0xFFFFFFFF)]
        out = np.frombuffer(target.map_read(0, 64), np.float32)
        assert np.array_equal(out[8:12], np.array([2, 3, 4, 5], np.float32) * 3 + 0xFFFFFFFF)
        assert not out[:8].any() and not out[12:].any()
    finally:
        device.close()


def test_builtin_fill_and_copy_kernels():
    device = _device(KernelRegistry())
    executable = device.create_executable(FORMAT, encode_executable(
        [("fill", "vmrt.fill", 1, 3), ("copy", "vmrt.copy", 2, 0)]))
    buffer = _buffer(device, bytes(range(32)))
    # An 8-byte pattern at an odd offset: what hal fills cannot do.
    _dispatch(device, executable, 0, [(buffer, 3, 16)],
              np.array([0x04030201, 0x08070605, 8], "<u4").tobytes())
    data = buffer.map_read(0, 32)
    assert data[3:19] == bytes(range(1, 9)) * 2 and data[:3] == bytes(range(3))
    # Overlapping ranges of one buffer copy as memmove does.
    _dispatch(device, executable, 1, [(buffer, 0, 8), (buffer, 4, 8)])
    assert buffer.map_read(0, 12) == bytes([0, 1, 2, 1, 0, 1, 2, 1, 2, 3, 4, 5])


def test_default_devices_load_python_and_vmvx_executables():
    device = create_device("local-sync")
    assert device.query_i64("hal.executable.format", FORMAT) == 1
    assert device.query_i64("hal.executable.format", "vmvx-bytecode-fb") == 1


def test_unknown_kernel_is_not_found_at_creation():
    device = _device(KernelRegistry())
    with pytest.raises(VmrtError) as info:
        device.create_executable(FORMAT, encode_executable([("f", "ex::missing", 1, 0)]))
    assert info.value.code == StatusCode.NOT_FOUND and "ex::missing" in info.value.message


@pytest.mark.parametrize("data", [b"\xff", b"{}", b'{"functions": [{"name": 1}]}',
                                  b'{"functions": [{"name": "f", "kernel": "k", '
                                  b'"bindings": -1}]}', b"[]"])
def test_bad_executable_data_is_invalid_argument(data):
    with pytest.raises(VmrtError) as info:
        decode_executable(data)
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_executable_constants_and_workgroup_counts_are_refused():
    registry = KernelRegistry()
    registry.register("ex::k", lambda target: None)
    device = _device(registry)
    data = encode_executable([("k", "ex::k", 1, 0)])
    with pytest.raises(VmrtError) as info:
        device.create_executable(FORMAT, data, b"\0\0\0\0")
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    executable = device.create_executable(FORMAT, data)
    with pytest.raises(VmrtError) as info:
        _dispatch(device, executable, 0, [(_buffer(device, bytes(4)), 0, 4)], count=(2, 1, 1))
    assert info.value.code == StatusCode.INVALID_ARGUMENT and "one workgroup" in str(info.value)


def test_a_raising_kernel_is_an_internal_error_naming_it():
    registry = KernelRegistry()
    registry.register("ex::bad", lambda target: 1 / 0)
    device = _device(registry)
    executable = device.create_executable(FORMAT, encode_executable([("b", "ex::bad", 1, 0)]))
    with pytest.raises(VmrtError) as info:
        _dispatch(device, executable, 0, [(_buffer(device, bytes(4)), 0, 4)])
    assert info.value.code == StatusCode.INTERNAL
    assert "ex::bad" in str(info.value) and "ZeroDivisionError" in str(info.value)


def test_registry_rules():
    registry = KernelRegistry()
    registry.register("a", len)
    registry.register("a", abs)                      # replacing is the default
    assert registry.lookup("a") is abs and "a" in registry and "vmrt.fill" in registry
    with pytest.raises(VmrtError) as info:
        registry.register("a", len, replace=False)
    assert info.value.code == StatusCode.ALREADY_EXISTS
    for name, kernel in (("", len), ("b", 3)):
        with pytest.raises(VmrtError) as info:
            registry.register(name, kernel)
        assert info.value.code == StatusCode.INVALID_ARGUMENT
    registry.unregister("a")
    assert "a" not in registry and registry.names() == []
