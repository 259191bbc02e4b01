"""Native executables (llvm-cpu formats) at the HAL level, with a library written by
hand against IREE's executable library ABI (tests/hal/native/test_library.c, built
by the system C compiler): both loaders, the library checks, constants, local
memory, workgroups split over workers, failing dispatches, and releases."""

from __future__ import annotations

import gc
import os
import random
import struct
import subprocess
from pathlib import Path

import pytest

from vmrt.errors import StatusCode
from vmrt.hal import BufferUsage, CommandCategory, HalError, MemoryType, create_device
from vmrt.hal.native_loader import (
    EMBEDDED_FORMAT, SYSTEM_FORMAT, NativeLoader, native_unavailable_reason,
)

pytestmark = pytest.mark.skipif(native_unavailable_reason() is not None,
                                reason=str(native_unavailable_reason()))

FORMATS = (EMBEDDED_FORMAT, SYSTEM_FORMAT)
DEVICE_LOCAL = int(MemoryType.DEVICE_LOCAL)
DEFAULT = int(BufferUsage.DEFAULT)
ANY = int(CommandCategory.ANY)


@pytest.fixture(params=["local-sync", "local-task"])
def device(request):
    device = create_device(request.param)
    yield device
    device.close()


def _buffer(device, values):
    buffer = device.allocator.allocate_buffer(DEVICE_LOCAL, DEFAULT, 4 * len(values))
    buffer.map_write(0, struct.pack(f"<{len(values)}i", *values))
    return buffer


def _values(buffer):
    return list(struct.unpack(f"<{buffer.byte_length // 4}i", buffer.map_read(0, -1)))


def _run(device, record) -> None:
    """Records a command buffer with record(cb), runs it and waits for it."""
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    record(cb)
    cb.end()
    signal = device.create_fence()
    try:
        device.queue_execute(-1, None, signal, cb)
    except HalError:
        pass  # local-sync raises as well as failing the fence: the wait raises for both
    signal.wait()


def _dispatch(device, executable, function, count, constants=b"", bindings=()):
    _run(device, lambda cb: cb.dispatch(executable, function, count, constants,
                                        list(bindings)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_exports_and_attributes(build, fmt):
    executable = NativeLoader().load(fmt, build())
    assert [f.name for f in executable.functions] == ["add_constant", "fail_at",
                                                      "use_local_memory"]
    add, _, local = executable.functions
    assert (add.constant_count, add.binding_count, add.local_memory_size) == (1, 2, 0)
    assert (local.binding_count, local.local_memory_size) == (1, 8192)
    assert executable.lookup_function("fail_at") == 1
    assert executable.library_name == "vmrt_test_library"


@pytest.mark.parametrize("fmt", FORMATS)
def test_workgroups_bindings_and_constants(build, device, fmt):
    executable = device.create_executable(fmt, build())
    source = _buffer(device, list(range(-20, 20)))
    target = _buffer(device, [0] * 40)
    _dispatch(device, executable, 0, (5, 4, 2), struct.pack("<i", 1000),
              [(source, 0, 0, -1), (target, 0, 0, -1)])
    assert _values(target) == [v + 1000 for v in range(-20, 20)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failing_workgroup_is_a_clean_error(build, device, fmt):
    executable = device.create_executable(fmt, build())
    with pytest.raises(HalError) as info:
        _dispatch(device, executable, 1, (64, 1, 1), struct.pack("<i", 37))
    assert info.value.code == StatusCode.INTERNAL
    assert "fail_at workgroup (37, 0, 0)" in info.value.message
    assert "catastrophic error 42" in info.value.message


@pytest.mark.parametrize("fmt", FORMATS)
def test_bounds_the_library_checks_itself(build, device, fmt):
    # The library refuses indices past its bindings' lengths: the lengths vmrt
    # passes are the bound ranges, not the whole buffers.
    executable = device.create_executable(fmt, build())
    source = _buffer(device, list(range(8)))
    target = _buffer(device, [0] * 8)
    with pytest.raises(HalError, match="catastrophic error 7"):
        _dispatch(device, executable, 0, (8, 1, 1), struct.pack("<i", 1),
                  [(source, 0, 0, 16), (target, 0, 0, -1)])


def test_binding_count_must_match_the_export(build):
    device = create_device("local-sync")
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    cb = device.create_command_buffer(0, ANY)
    cb.begin()
    with pytest.raises(HalError, match="binding count mismatch"):
        cb.dispatch(executable, 0, (1, 1, 1), struct.pack("<i", 1),
                    [(_buffer(device, [1]), 0, 0, -1)])


@pytest.mark.parametrize("fmt", FORMATS)
def test_local_memory_and_executable_constants(build, device, fmt):
    executable = device.create_executable(fmt, build(TEST_CONSTANTS=1),
                                          struct.pack("<I", 77))
    out = _buffer(device, [0] * 16)
    _dispatch(device, executable, 2, (8, 1, 1), b"", [(out, 0, 0, -1)])
    values = _values(out)
    expected_sum = sum((k + i) & 0xFF for k in range(8192) for i in [0])
    assert values[0] == expected_sum
    assert values[1::2] == [77] * 8


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("macros, code, text", [
    ({"TEST_REQUIRED_IMPORT": 1}, StatusCode.NOT_FOUND, "vmrt_test_missing_fn"),
    ({"TEST_VERSION": 7}, StatusCode.FAILED_PRECONDITION, "version"),
    ({"TEST_SANITIZER": 1}, StatusCode.UNAVAILABLE, "sanitizer"),
    ({"TEST_CONSTANTS": 1}, StatusCode.FAILED_PRECONDITION, "requires 1 constants"),
])
def test_libraries_vmrt_cannot_serve_are_refused(build, fmt, macros, code, text):
    with pytest.raises(HalError) as info:
        NativeLoader().load(fmt, build(**macros))
    assert info.value.code == code and text in info.value.message


@pytest.mark.parametrize("fmt", FORMATS)
def test_optional_imports_resolve_to_null(build, fmt):
    executable = NativeLoader().load(fmt, build(TEST_OPTIONAL_IMPORT=1))
    assert len(executable.functions) == 3


def test_other_architectures_and_garbage_are_refused(build):
    data = bytearray(build())
    data[18:20] = struct.pack("<H", 183)  # EM_AARCH64
    for fmt in FORMATS:
        with pytest.raises(HalError):
            NativeLoader().load(fmt, bytes(data))
        with pytest.raises(HalError):
            NativeLoader().load(fmt, b"\x7fELF" + b"\0" * 60)
        with pytest.raises(HalError):
            NativeLoader().load(fmt, b"")


def _resources() -> tuple[int, int]:
    with open("/proc/self/maps") as maps:
        mappings = sum(1 for _ in maps)
    return mappings, len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_load_and_release_1000_times_leaves_nothing(build, fmt):
    data = build()
    loader = NativeLoader()
    for _ in range(20):  # warm up allocators and the loader's own state
        loader.load(fmt, data)
    gc.collect()
    before = _resources()
    for _ in range(1000):
        executable = loader.load(fmt, data)
        del executable
    gc.collect()
    # A leak would grow by ~1000; other tests' lingering threads (device workers,
    # their stacks and arenas) may come and go by a few meanwhile.
    after = _resources()
    assert after[0] - before[0] <= 8 and after[1] - before[1] <= 4, (before, after)


def test_without_the_c_extension_loading_says_why():
    import sys
    mlp_cpu = Path(__file__).resolve().parents[2] / "examples" / "mlp_cpu.vmfb"
    result = subprocess.run(
        [sys.executable, "-m", "vmrt.tools.cli", "run", f"--module={mlp_cpu}",
         "--function=predict", "--input=1x4xf32=1 0.5 -0.5 2"],
        capture_output=True, text=True, env={**os.environ, "VMRT_NO_NATIVE": "1"})
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr and "VMRT_NO_NATIVE" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _outcome(device, cb, table, buffers):
    """What running `cb` with `table` did: the error (code, message) or every buffer's
    values (each starting from 0, 1, 2, ...)."""
    for buffer in buffers:
        count = buffer.byte_length // 4
        buffer.map_write(0, struct.pack(f"<{count}i", *range(count)))
    try:
        device.queue_execute(-1, None, None, cb, table)
    except HalError as error:
        return error.code, error.message
    return [_values(buffer) for buffer in buffers]


def test_bindings_resolve_alike_in_c_and_in_python(build, monkeypatch):
    # Native plans resolve their bindings through the table in C; VMRT_BIND_IN_C=0
    # takes the Python twin. Both must bind the same bytes and refuse the same
    # tables with the same first error, whatever the table holds.
    from vmrt.hal import native_loader
    device = create_device("local-sync")
    executable = device.create_executable(EMBEDDED_FORMAT, build())
    source = _buffer(device, list(range(100, 132)))
    targets = [_buffer(device, [0] * 32) for _ in range(2)]
    cb = device.create_command_buffer(0, ANY, binding_capacity=3)
    cb.begin()
    # slot 0 -> slot 1 over four workgroups, then a direct source -> slot 2 over two
    cb.dispatch(executable, 0, (4, 1, 1), struct.pack("<i", 1),
                [(None, 0, 8, 16), (None, 1, 4, -1)])
    cb.dispatch(executable, 0, (2, 1, 1), struct.pack("<i", 7),
                [(source, 0, 64, 8), (None, 2, 0, 8)])
    cb.end()
    rng = random.Random(33)
    buffers = [source, *targets]
    choices = [*buffers, targets[0].subspan(16, 64), source.subspan(4, 100), None]
    fallbacks = []  # the runs the twin bound
    python_bind = native_loader.NativePlan._bind_in_python

    def counted_python_bind(plan, *args):
        fallbacks.append(1)
        return python_bind(plan, *args)
    monkeypatch.setattr(native_loader.NativePlan, "_bind_in_python", counted_python_bind)
    kinds = set()
    for _ in range(1000):
        table = [(rng.choice(choices), rng.choice([0, 4, 8, 12, 16, 60, 64, 128, 200, -4]),
                  rng.choice([-1, -1, 0, 4, 8, 16, 40, 60, 64, 68, 124, 128, 132, 1 << 62]))
                 for _ in range(rng.choice([3, 3, 3, 2]))]
        fallbacks.clear()
        monkeypatch.setattr(native_loader, "BIND_IN_C", True)
        in_c = _outcome(device, cb, table, buffers)
        took_c = not fallbacks
        monkeypatch.setattr(native_loader, "BIND_IN_C", False)
        in_python = _outcome(device, cb, table, buffers)
        assert in_c == in_python, table
        kinds.add((isinstance(in_c, list), took_c))
        if isinstance(in_c, list):
            assert took_c, table  # every table the twin binds, C binds itself
    # both ways saw tables that run and tables refused
    assert (True, True) in kinds and (False, False) in kinds

