"""A hostile module using the hal module, for the limits tests, the untrusted-input
suite and scripts/fuzz_limits.py: it allocates through queue.alloca, records
dispatches with any workgroup count and creates executables from bytes the host
passes in (the VMVX executable of examples/mlp.vmfb, or a mutation of it)."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import vmrt
from vmrt.asm import assemble
from vmrt.modules.hal import HalModule

ROOT = Path(__file__).resolve().parents[2]
MLP_VMFB = ROOT / "examples" / "mlp.vmfb"
#: Offset of the executable's FlatBuffer inside its ZIP wrapper (mutations go after it).
EXECUTABLE_BODY = 0x50

SOURCE = """
vm.module @hostile version 0
vm.type i32
vm.type !vm.buffer
vm.type !hal.device
vm.type !hal.allocator
vm.type !hal.buffer
vm.type !hal.command_buffer
vm.type !hal.executable
vm.type !hal.fence
vm.import @hal.devices.get cconv "0i_r"
vm.import @hal.device.allocator cconv "0r_r"
vm.import @hal.allocator.allocate cconv "0rIiiI_r"
vm.import @hal.device.queue.alloca cconv "0rIrrIiiII_r"
vm.import @hal.device.queue.fill cconv "0rIrrrIIIiI_v"
vm.import @hal.executable.create cconv "0rIrrr_r"
vm.import @hal.command_buffer.create cconv "0riiIi_r"
vm.import @hal.command_buffer.dispatch cconv "0rrIiiiICiDCiirIID_v"
vm.import @hal.command_buffer.finalize cconv "0r_v"
vm.import @hal.device.queue.execute cconv "0rIrrrI_v"
vm.import @hal.fence.create cconv "0rI_r"
vm.import @hal.fence.await cconv "0iICrD_i"
vm.import @hal.command_buffer.update_buffer cconv "0rrIrIIiI_v"
vm.rodata[0] = 766D76782D62797465636F64652D6662

// queue.alloca of %i0 bytes, returned.
vm.export @alloca
vm.func @alloca(%i0: i32) -> (!hal.buffer) {
^bb0:
  %r0 = vm.const.ref.zero
  %r1 = vm.call @alloca_after(%i0, %r0)
  vm.return %r1
}

// queue.alloca of %i0 bytes after a fence no one signals, returned (on local-sync
// the allocation waits for it: only the call's limits end the wait).
vm.export @alloca_waiting
vm.func @alloca_waiting(%i0: i32) -> (!hal.buffer) {
^bb0:
  %i1 = vm.const.i32.zero
  %r0 = vm.call @hal.devices.get(%i1)
  %i2:3 = vm.const.i64.zero
  %r1 = vm.call @hal.fence.create(%r0, %i2)
  %r2 = vm.call @alloca_after(%i0, %r1)
  vm.return %r2
}

// queue.alloca of %i0 bytes once the fence %r0 is reached (null: at once).
vm.func @alloca_after(%i0: i32, %r0: !hal.fence) -> (!hal.buffer) {
^bb0:
  %i1 = vm.const.i32.zero
  %r1 = vm.call @hal.devices.get(%i1)
  %i2:3 = vm.ext.i32.i64.s %i0
  %i6:7 = vm.const.i64 -1
  %i8:9 = vm.const.i64.zero
  %r2 = vm.const.ref.zero
  %i10 = vm.const.i32 48
  %i11 = vm.const.i32 3075
  %r3 = vm.call @hal.device.queue.alloca(%r1, %i6, %r0, %r2, %i8, %i10, %i11, %i2, %i8)
  vm.return %r3
}

// As dispatch, for executables whose functions take no bindings.
vm.export @dispatch_unbound
vm.func @dispatch_unbound(%r0: !vm.buffer, %i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  %i3 = vm.const.i32.zero
  %r1 = vm.call @hal.devices.get(%i3)
  %i4:5 = vm.const.i64 -1
  %i6:7 = vm.const.i64.zero
  %r5 = vm.const.ref.rodata 0
  %r6 = vm.const.ref.zero
  %r7 = vm.call @hal.executable.create(%r1, %i4, %r5, %r0, %r6)
  %i12 = vm.const.i32 1
  %i13 = vm.const.i32 3
  %r8 = vm.call @hal.command_buffer.create(%r1, %i12, %i13, %i4, %i3)
  %i14:15 = vm.ext.i32.i64.u %i0
  vm.call.variadic @hal.command_buffer.dispatch segments[65535, 65535, 65535, 65535, 65535, 65535, 65535, 0, 0](%r8, %r7, %i14, %i1, %i2, %i12, %i6)
  vm.call @hal.command_buffer.finalize(%r8)
  %r9 = vm.call @hal.fence.create(%r1, %i6)
  vm.call @hal.device.queue.execute(%r1, %i4, %r6, %r9, %r8, %i6)
  %i16 = vm.const.i32 -1
  %i17 = vm.call.variadic @hal.fence.await segments[65535, 65535, 1](%i16, %i6, %r9)
  vm.return %i17
}

// allocator.allocate of %i0 bytes, returned.
vm.export @allocate
vm.func @allocate(%i0: i32) -> (!hal.buffer) {
^bb0:
  %i1 = vm.const.i32.zero
  %r0 = vm.call @hal.devices.get(%i1)
  %r1 = vm.call @hal.device.allocator(%r0)
  %i2:3 = vm.ext.i32.i64.s %i0
  %i4:5 = vm.const.i64 -1
  %i6 = vm.const.i32 48
  %i7 = vm.const.i32 3075
  %r2 = vm.call @hal.allocator.allocate(%r1, %i4, %i6, %i7, %i2)
  vm.return %r2
}

// Records %i0 updates of all of %r0 (at most 4 KiB) into one command buffer.
vm.export @record_updates
vm.func @record_updates(%r0: !vm.buffer, %i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %r1 = vm.call @hal.devices.get(%i1)
  %r2 = vm.call @hal.device.allocator(%r1)
  %i4:5 = vm.const.i64 -1
  %i6:7 = vm.const.i64.zero
  %i8 = vm.const.i32 48
  %i9 = vm.const.i32 3075
  %i10:11 = vm.const.i64 4096
  %r3 = vm.call @hal.allocator.allocate(%r2, %i4, %i8, %i9, %i10)
  %i12 = vm.const.i32 1
  %i13 = vm.const.i32 3
  %r4 = vm.call @hal.command_buffer.create(%r1, %i12, %i13, %i4, %i1)
  %i14:15 = vm.buffer.length %r0
  vm.br ^bb1()
^bb1:
  vm.call @hal.command_buffer.update_buffer(%r4, %r0, %i6, %r3, %i6, %i14, %i1, %i6)
  %i1 = vm.add.i32 %i1, %i12
  %i16 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i16, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}

// queue.alloca of %i0 MiB, then queue.fill of all of it.
vm.export @alloca_fill
vm.func @alloca_fill(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %r0 = vm.call @hal.devices.get(%i1)
  %i2:3 = vm.ext.i32.i64.s %i0
  %i4:5 = vm.const.i64 20
  %i2:3 = vm.shl.i64 %i2:3, %i4
  %i6:7 = vm.const.i64 -1
  %i8:9 = vm.const.i64.zero
  %r1 = vm.const.ref.zero
  %i10 = vm.const.i32 48
  %i11 = vm.const.i32 3075
  %r2 = vm.call @hal.device.queue.alloca(%r0, %i6, %r1, %r1, %i8, %i10, %i11, %i2, %i8)
  %i12 = vm.const.i32 1
  vm.call @hal.device.queue.fill(%r0, %i6, %r1, %r1, %r2, %i8, %i2, %i8, %i12, %i8)
  vm.return %i0
}

// Creates an executable from %r0 and dispatches its function %i0 on %i1 x %i2 x 1
// workgroups over two 4 KiB buffers.
vm.export @dispatch
vm.func @dispatch(%r0: !vm.buffer, %i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  %i3 = vm.const.i32.zero
  %r1 = vm.call @hal.devices.get(%i3)
  %r2 = vm.call @hal.device.allocator(%r1)
  %i4:5 = vm.const.i64 -1
  %i6:7 = vm.const.i64.zero
  %i8 = vm.const.i32 48
  %i9 = vm.const.i32 3075
  %i10:11 = vm.const.i64 4096
  %r3 = vm.call @hal.allocator.allocate(%r2, %i4, %i8, %i9, %i10)
  %r4 = vm.call @hal.allocator.allocate(%r2, %i4, %i8, %i9, %i10)
  %r5 = vm.const.ref.rodata 0
  %r6 = vm.const.ref.zero
  %r7 = vm.call @hal.executable.create(%r1, %i4, %r5, %r0, %r6)
  %i12 = vm.const.i32 1
  %i13 = vm.const.i32 3
  %r8 = vm.call @hal.command_buffer.create(%r1, %i12, %i13, %i4, %i3)
  %i14:15 = vm.ext.i32.i64.u %i0
  vm.call.variadic @hal.command_buffer.dispatch segments[65535, 65535, 65535, 65535, 65535, 65535, 65535, 0, 2](%r8, %r7, %i14, %i1, %i2, %i12, %i6, %i3, %i3, %r3, %i6, %i10, %i3, %i3, %r4, %i6, %i10)
  vm.call @hal.command_buffer.finalize(%r8)
  %r9 = vm.call @hal.fence.create(%r1, %i6)
  vm.call @hal.device.queue.execute(%r1, %i4, %r6, %r9, %r8, %i6)
  %i16 = vm.const.i32 -1
  %i17 = vm.call.variadic @hal.fence.await segments[65535, 65535, 1](%i16, %i6, %r9)
  vm.return %i17
}
"""


@functools.lru_cache(maxsize=None)
def module_bytes() -> bytes:
    return assemble(SOURCE)


@functools.lru_cache(maxsize=None)
def mlp_executable() -> bytes:
    """The VMVX executable (ZIP-wrapped vmvx-bytecode-fb) of examples/mlp.vmfb."""
    definition = vmrt.load_module(MLP_VMFB.read_bytes()).definition
    return next(bytes(segment.data) for segment in definition.rodata_segments
                if bytes(segment.data[:2]) == b"PK")


#: A VMVX executable whose one dispatch function never returns.
SPINNING_EXECUTABLE = """
vm.module @spinning version 0
vm.type i32
vm.type !vm.buffer
vm.type !vm.list<!vm.buffer>
vm.export @spin
vm.func @spin(%r0: !vm.buffer, %r1: !vm.buffer, %r2: !vm.list<!vm.buffer>, %i0: i32, %i1: i32, %i2: i32, %i3: i32, %i4: i32, %i5: i32, %i6: i32, %i7: i32, %i8: i32) -> () {
^bb0:
  %i8 = vm.add.i32 %i8, %i0
  vm.discard.refs %r2
  vm.br ^bb1()
^bb1:
  vm.br ^bb1()
}
"""


@functools.lru_cache(maxsize=None)
def spinning_executable() -> bytes:
    return assemble(SPINNING_EXECUTABLE)


def context(limits, device: str = "local-sync"):
    """A context running the hostile module under `limits` with a hal module."""
    return vmrt.Context(modules=[HalModule(device=device, host_arrays=False),
                                 vmrt.load_module(module_bytes())], limits=limits)


def close(ctx) -> None:
    """Closes the context and its device (local-task's threads end now)."""
    devices = ctx.module("hal").module.devices
    ctx.close()
    for device in devices:
        device.close()


# -- fuzzing: hostile calls under limits (tests/vm/test_untrusted.py, scripts/fuzz_limits.py) ---
FUZZ_LIMITS = dict(fuel=200_000, max_depth=200, max_memory=4 << 20, timeout=0.05)
#: How far past its deadline a call may end in scripts/fuzz_limits.py (the issue's bar,
#: a measurement on a quiet machine); the suite passes a limit only a hang reaches.
DEADLINE_SLACK = 0.1


def mutate(data: bytes, rng) -> bytes:
    """1 to 6 random bytes of the executable's FlatBuffer replaced (its ZIP wrapper kept)."""
    mutated = bytearray(data)
    end = len(mutated) - 200  # (the central directory)
    for _ in range(rng.randint(1, 6)):
        mutated[rng.randrange(EXECUTABLE_BODY, end)] = rng.randrange(256)
    return bytes(mutated)


class Fuzzer:
    """Runs hostile calls in one context (per device) under FUZZ_LIMITS and checks
    each: no call ending more than `deadline_slack` seconds past its deadline, no
    Python exception leaked (as INTERNAL), memory_in_use back to 0 after every call."""

    def __init__(self, device: str = "local-sync", deadline_slack: float = DEADLINE_SLACK):
        from vmrt.vm.limits import Limits
        self.limits = Limits(**FUZZ_LIMITS)
        self.deadline_slack = deadline_slack
        self.context = context(self.limits, device)
        self.devices = self.context.module("hal").module.devices
        self.calls = {name: self.context.function(f"hostile.{name}")
                      for name in ("dispatch", "alloca_fill", "alloca", "record_updates")}
        self.outcomes: dict[str, int] = {}
        self.problems: list[str] = []
        self.longest = 0.0  # the longest call, in seconds

    def case(self, rng) -> str:
        kind = rng.random()
        if kind < 0.75:  # a mutated executable, a few workgroups
            args = ("dispatch", _buffer(mutate(mlp_executable(), rng)), rng.randrange(3),
                    rng.randint(1, 3), rng.randint(1, 3))
        elif kind < 0.85:  # the real one on a huge grid
            args = ("dispatch", _buffer(mlp_executable()), rng.randrange(3),
                    rng.choice([400, 4096, 65535]), rng.choice([1, 400, 65535]))
        elif kind < 0.95:
            args = rng.choice([("alloca_fill", rng.randint(-2, 2048)),
                               ("alloca", rng.choice([-1, 0, 6000, 1 << 20, 1 << 30]))])
        else:
            args = ("record_updates", bytes(rng.choice([0, 16, 4096])), rng.randint(0, 5000))
        return self.call(*args)

    def call(self, name: str, *args) -> str:
        from vmrt.errors import StatusCode, VmrtError
        start = time.monotonic()
        try:
            result = self.calls[name](*args)
            label = "result"
        except VmrtError as error:
            label = error.code.name
            if error.code == StatusCode.INTERNAL or "internal error" in error.message:
                self.problems.append(f"{name}: leaked {error}")
        elapsed = time.monotonic() - start
        result = None  # (a returned buffer is dropped: its bytes must go back)
        self.longest = max(self.longest, elapsed)
        if elapsed > self.limits.timeout + self.deadline_slack:
            self.problems.append(f"{name}{args[1:]}: {elapsed:.3f} s past a "
                                 f"{self.limits.timeout} s deadline")
        for device in self.devices:  # (work a call submits without waiting holds its buffers)
            device.wait_idle()
        if self.context.memory_in_use:
            self.problems.append(f"{name}: {self.context.memory_in_use} bytes held after it")
        self.context.refuel(self.limits.fuel - self.context.fuel_remaining)
        key = f"{name}: {label}"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        return label


def _buffer(data: bytes):
    from vmrt.vm.buffer import VMBuffer
    return VMBuffer.from_bytes(data)
