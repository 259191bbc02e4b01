"""Benchmark: the io_parameters module, vmrt side by side with iree.runtime in one run.

    python benchmarks/params_bench.py [--dir /tmp] [--repeat 3] [--keep]

Builds (under --dir, deleted afterwards unless --keep) a 1 GiB IRPA of 256
parameters of 4 MiB and an archive of 10,000 parameters of 1 KiB, compiles a
model whose 256 `#flow.parameter.named` globals come from the big archive and a
small VM program calling io_parameters.gather, then reports (page cache warm,
best of --repeat):

- model load, zero-copy: creating a context of the compiled model (its
  initializer calls io_parameters.load for all 256 parameters) with the
  archive mapped; vmrt vs iree.runtime (ParameterIndex.load, mmap). vmrt's
  figure includes compiling the module's functions to Python on first use;
  the "module compiled" row is a second context of the same module.
- io_parameters.load alone, zero-copy: the export's own time in vmrt.
- model load, copying: the same with parameters read into new buffers (vmrt
  --parameter_mode=file; the reference with mode="file_async").
- copying load vs pread: io_parameters.load of the 256 spans for a mutable use
  (allocate + read) against plain os.preadv of the same bytes, into fresh
  buffers and into one buffer already touched.
- gather 10,000 x 1 KiB into one buffer through the VM program; vmrt vs reference.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import tempfile
import time

import numpy as np

from vmrt.hal import BufferUsage, Fence, MemoryType, Semaphore, create_device
from vmrt.io import FileCache, FileMode, IndexProvider, ParameterIndex
from vmrt.modules.hal import HalModule
from vmrt.modules.io_parameters import IoParametersModule
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.context import Context, Instance
from vmrt.vm.module import load_module

BIG_COUNT, BIG_SIZE = 256, 4 << 20
SMALL_COUNT, SMALL_SIZE = 10_000, 1024
COMPILE = ["iree-compile", "--iree-hal-target-device=local",
           "--iree-hal-local-target-device-backends=vmvx"]
DRIVER_MLIR = """
vm.module @gather_driver {
  vm.import private @hal.devices.get(%index : i32) -> !vm.ref<!hal.device>
  vm.import private @io_parameters.gather(%device : !vm.ref<!hal.device>, %queue_affinity : i64, %wait_fence : !vm.ref<!hal.fence>, %signal_fence : !vm.ref<!hal.fence>, %source_scope : !vm.buffer, %target_buffer : !vm.ref<!hal.buffer>, %key_table : !vm.buffer, %key_data : !vm.buffer, %spans : !vm.buffer)
  vm.func @gather(%wait : !vm.ref<!hal.fence>, %signal : !vm.ref<!hal.fence>, %scope : !vm.buffer, %buffer : !vm.ref<!hal.buffer>, %table : !vm.buffer, %data : !vm.buffer, %spans : !vm.buffer) {
    %zero = vm.const.i32 0
    %any = vm.const.i64 -1
    %device = vm.call @hal.devices.get(%zero) : (i32) -> !vm.ref<!hal.device>
    vm.call @io_parameters.gather(%device, %any, %wait, %signal, %scope, %buffer, %table, %data, %spans) : (!vm.ref<!hal.device>, i64, !vm.ref<!hal.fence>, !vm.ref<!hal.fence>, !vm.buffer, !vm.ref<!hal.buffer>, !vm.buffer, !vm.buffer, !vm.buffer) -> ()
    vm.return
  }
  vm.export @gather
}
"""
USAGE_CONSTANT = int(BufferUsage.TRANSFER | BufferUsage.DISPATCH_STORAGE |
                     BufferUsage.SHARING_IMMUTABLE)
USAGE_VARIABLE = int(BufferUsage.TRANSFER | BufferUsage.DISPATCH_STORAGE)


# -- inputs ------------------------------------------------------------------------------------
def build_archives(workdir: str) -> tuple[str, str]:
    big, small = os.path.join(workdir, "big.irpa"), os.path.join(workdir, "small.irpa")
    block = np.random.default_rng(0).integers(0, 256, BIG_SIZE, dtype=np.uint8)
    index = ParameterIndex()
    for i in range(BIG_COUNT):
        data = block.copy()
        data[:8] = np.frombuffer(struct.pack("<Q", i), np.uint8)
        index.add_buffer(f"p{i}", data)
    index.save(big)
    index = ParameterIndex()
    for i in range(SMALL_COUNT):
        index.add_buffer(f"s{i}", np.full(SMALL_SIZE, i % 251, np.uint8))
    index.save(small)
    return big, small


def compile_inputs(workdir: str) -> tuple[str, str]:
    model = os.path.join(workdir, "model.mlir")
    lines = [f'util.global private @p{i} = #flow.parameter.named<"model"::"p{i}"> : '
             f'tensor<{BIG_SIZE // 4}xf32>' for i in range(BIG_COUNT)]
    types = ", ".join([f"tensor<{BIG_SIZE // 4}xf32>"] * BIG_COUNT)
    lines.append(f"func.func @all() -> ({types}) {{")
    lines += [f"  %{i} = util.global.load @p{i} : tensor<{BIG_SIZE // 4}xf32>"
              for i in range(BIG_COUNT)]
    lines.append("  return " + ", ".join(f"%{i}" for i in range(BIG_COUNT)) + f" : {types}")
    lines.append("}")
    with open(model, "w") as file:
        file.write("\n".join(lines) + "\n")
    subprocess.run([*COMPILE, model, "-o", model[:-5] + ".vmfb"], check=True)
    driver = os.path.join(workdir, "driver.mlir")
    with open(driver, "w") as file:
        file.write(DRIVER_MLIR)
    subprocess.run(["iree-compile", "--compile-from=vm", "--output-format=vm-bytecode", driver,
                    "-o", driver[:-5] + ".vmfb"], check=True)
    return model[:-5] + ".vmfb", driver[:-5] + ".vmfb"


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def row(label: str, ours: float, theirs: float | None = None, nbytes: int = 0) -> None:
    text = f"{label:44s} vmrt {ours * 1e3:9.2f} ms"
    if nbytes:
        text += f" ({nbytes / ours / 1e9:5.2f} GB/s)"
    if theirs is not None:
        text += f" | reference {theirs * 1e3:9.2f} ms"
        if nbytes:
            text += f" ({nbytes / theirs / 1e9:5.2f} GB/s)"
        text += f" | vmrt/ref {ours / theirs:5.2f}"
    print(text, flush=True)


# -- vmrt -------------------------------------------------------------------------------------
def vmrt_model_load(vmfb_bytes: bytes, index: ParameterIndex, device_name: str) -> float:
    device = create_device(device_name)
    module = load_module(vmfb_bytes)
    start = time.perf_counter()
    context = Context(Instance(), [HalModule([device], host_arrays=False),
                                   IoParametersModule([IndexProvider("model", index)]), module])
    elapsed = time.perf_counter() - start
    context.close()
    device.close()
    return elapsed


def vmrt_model_load_warm(module, index: ParameterIndex, device_name: str) -> float:
    """Context creation with `module` already compiled by an earlier context
    (what a process creating many contexts of one model pays)."""
    device = create_device(device_name)
    start = time.perf_counter()
    context = Context(Instance(), [HalModule([device], host_arrays=False),
                                   IoParametersModule([IndexProvider("model", index)]), module])
    elapsed = time.perf_counter() - start
    context.close()
    device.close()
    return elapsed


def vm_layout(keys, spans_array) -> list[VMBuffer]:
    raw = [k.encode() for k in keys]
    offsets = np.cumsum([0] + [len(k) for k in raw[:-1]])
    table = np.empty((len(raw), 2), np.uint32)
    table[:, 0] = offsets
    table[:, 1] = [len(k) for k in raw]
    return [VMBuffer.from_bytes(table.tobytes(), mutable=False),
            VMBuffer.from_bytes(b"".join(raw), mutable=False),
            VMBuffer.from_bytes(np.ascontiguousarray(spans_array, np.uint64).tobytes(),
                                mutable=False)]


def fence() -> Fence:
    return Fence([(Semaphore(0), 1)])


def vmrt_export_load(path: str, usage: int, mode=FileMode.MMAP) -> tuple[float, list]:
    index = ParameterIndex.load(path, mode=mode, cache=FileCache())
    module = IoParametersModule([IndexProvider("model", index)])
    device = create_device("local-sync")
    keys = [f"p{i}" for i in range(BIG_COUNT)]
    spans = np.zeros((BIG_COUNT, 3), np.uint64)
    spans[:, 2] = BIG_SIZE
    args = vm_layout(keys, spans)
    scope = VMBuffer.from_bytes(b"model", mutable=False)
    signal = fence()
    start = time.perf_counter()
    buffers = module.load(device, -1, None, signal, scope, -1, int(MemoryType.DEVICE_LOCAL),
                          usage, *args)
    signal.wait(None)
    elapsed = time.perf_counter() - start
    return elapsed, [buffers.get_ref(i) for i in range(BIG_COUNT)]


def vmrt_gather(driver_bytes: bytes, small: str, device_name: str, repeat: int) -> tuple:
    index = ParameterIndex.load(small, cache=FileCache())
    device = create_device(device_name)
    keys = [f"s{i}" for i in range(SMALL_COUNT)]
    spans = np.zeros((SMALL_COUNT, 3), np.uint64)
    spans[:, 1] = np.arange(SMALL_COUNT) * SMALL_SIZE
    spans[:, 2] = SMALL_SIZE
    args = vm_layout(keys, spans)
    target = device.allocator.allocate_buffer(int(MemoryType.DEVICE_LOCAL), USAGE_VARIABLE,
                                              SMALL_COUNT * SMALL_SIZE)
    scope = VMBuffer.from_bytes(b"s", mutable=False)
    with Context(Instance(), [HalModule([device], host_arrays=False),
                              IoParametersModule([IndexProvider("s", index)]),
                              load_module(driver_bytes)]) as context:
        call = context.function("gather_driver.gather")

        def once():
            signal = fence()
            call(None, signal, scope, target, *args)
            signal.wait(None)
        elapsed = best_of(repeat, once)
    data = np.frombuffer(target.view(), np.uint8)
    assert (data[::SMALL_SIZE] == np.arange(SMALL_COUNT) % 251).all()
    device.close()
    return elapsed


# -- reference --------------------------------------------------------------------------------
def reference_model_load(rt, vmfb_bytes: bytes, path: str, device_name: str,
                         mode: str | None) -> float:
    instance = rt.VmInstance()
    device = rt.get_device(device_name)
    index = rt.ParameterIndex()
    if mode:
        index.load(path, mode=mode)
    else:
        index.load(path)
    module = rt.VmModule.copy_buffer(instance, vmfb_bytes)
    hal = rt.create_hal_module(instance, device)
    params = rt.create_io_parameters_module(instance, index.create_provider(scope="model"))
    start = time.perf_counter()
    context = rt.VmContext(instance, modules=[hal, params, module])
    elapsed = time.perf_counter() - start
    del context
    return elapsed


def reference_gather(rt, driver_bytes: bytes, small: str, device_name: str, repeat: int):
    instance = rt.VmInstance()
    device = rt.get_device(device_name)
    index = rt.ParameterIndex()
    index.load(small)
    driver = rt.VmModule.copy_buffer(instance, driver_bytes)
    context = rt.VmContext(instance, modules=[
        rt.create_hal_module(instance, device),
        rt.create_io_parameters_module(instance, index.create_provider(scope="s")), driver])
    fn = driver.lookup_function("gather")

    def vm_buffer(data: bytes):
        result = rt.VmBuffer(len(data))
        memoryview(result)[:] = data
        return result
    raw = [f"s{i}".encode() for i in range(SMALL_COUNT)]
    offsets = np.cumsum([0] + [len(k) for k in raw[:-1]])
    table = np.stack([offsets, [len(k) for k in raw]], 1).astype(np.uint32).tobytes()
    spans = np.zeros((SMALL_COUNT, 3), np.uint64)
    spans[:, 1] = np.arange(SMALL_COUNT) * SMALL_SIZE
    spans[:, 2] = SMALL_SIZE
    parts = [vm_buffer(table), vm_buffer(b"".join(raw)), vm_buffer(spans.tobytes())]
    target = device.allocator.allocate_buffer(
        memory_type=rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE,
        allowed_usage=rt.BufferUsage.DEFAULT | rt.BufferUsage.MAPPING,
        allocation_size=SMALL_COUNT * SMALL_SIZE)
    scope = vm_buffer(b"s")

    def once():
        signal = rt.HalFence(1)
        signal.insert(device.create_semaphore(0), 1)
        args = rt.VmVariantList(7)
        for value in (rt.HalFence(1), signal, scope, target, *parts):
            args.push_ref(value)
        context.invoke(fn, args, rt.VmVariantList(0))
        signal.wait()
    elapsed = best_of(repeat, once)
    data = target.map().asarray([SMALL_COUNT * SMALL_SIZE], np.dtype(np.uint8))
    assert (data[::SMALL_SIZE] == np.arange(SMALL_COUNT) % 251).all()
    return elapsed


# -- pread floor ------------------------------------------------------------------------------
def pread_fresh(path: str, entries) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        keep = []
        for offset, length in entries:
            buffer = bytearray(length)
            os.preadv(fd, [buffer], offset)
            keep.append(buffer)
    finally:
        os.close(fd)


def pread_touched(path: str, entries, target: bytearray) -> None:
    fd = os.open(path, os.O_RDONLY)
    view = memoryview(target)
    try:
        position = 0
        for offset, length in entries:
            os.preadv(fd, [view[position:position + length]], offset)
            position += length
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the archives")
    args = parser.parse_args()
    import iree.runtime as rt

    free = shutil.disk_usage(args.dir).free
    if free < 3 << 30:
        raise SystemExit(f"need 3 GiB free in {args.dir}, have {free >> 20} MiB")
    workdir = tempfile.mkdtemp(prefix="vmrt-params-bench-", dir=args.dir)
    try:
        print(f"building archives and compiling in {workdir} ...", flush=True)
        big, small = build_archives(workdir)
        model, driver = compile_inputs(workdir)
        model_bytes = open(model, "rb").read()
        driver_bytes = open(driver, "rb").read()
        nbytes = BIG_COUNT * BIG_SIZE
        entries = [(e.offset, e.length) for e in ParameterIndex.load(big, cache=FileCache())]
        pread_fresh(big, entries)  # page cache warm
        repeat = args.repeat

        print(f"\n256 x 4 MiB parameters ({nbytes >> 20} MiB IRPA), page cache warm, "
              f"best of {repeat}")
        index = ParameterIndex.load(big, cache=FileCache())
        for device in ("local-sync", "local-task"):
            ours = min(vmrt_model_load(model_bytes, index, device) for _ in range(repeat))
            theirs = min(reference_model_load(rt, model_bytes, big, device, None)
                         for _ in range(repeat))
            row(f"model load, zero-copy ({device})", ours, theirs)
        warm_module = load_module(model_bytes)
        vmrt_model_load_warm(warm_module, index, "local-sync")
        ours = min(vmrt_model_load_warm(warm_module, index, "local-sync") for _ in range(repeat))
        row("model load, zero-copy, module compiled (local-sync)", ours, theirs)
        ours = min(vmrt_export_load(big, USAGE_CONSTANT)[0] for _ in range(repeat))
        row("io_parameters.load alone, zero-copy", ours)
        file_index = ParameterIndex.load(big, mode=FileMode.FILE, cache=FileCache())
        for device in ("local-sync", "local-task"):
            ours = min(vmrt_model_load(model_bytes, file_index, device) for _ in range(repeat))
            theirs = min(reference_model_load(rt, model_bytes, big, device, "file_async")
                         for _ in range(repeat))
            row(f"model load, copying ({device})", ours, theirs, nbytes)
        copy_mmap = min(vmrt_export_load(big, USAGE_VARIABLE)[0] for _ in range(repeat))
        copy_file = min(vmrt_export_load(big, USAGE_CONSTANT, FileMode.FILE)[0]
                        for _ in range(repeat))
        fresh = best_of(repeat, lambda: pread_fresh(big, entries))
        touched_target = bytearray(nbytes)
        touched = best_of(repeat, lambda: pread_touched(big, entries, touched_target))
        del touched_target
        row("io_parameters.load copying (mmap archive)", copy_mmap, nbytes=nbytes)
        row("io_parameters.load copying (file mode)", copy_file, nbytes=nbytes)
        row("plain pread into fresh buffers", fresh, nbytes=nbytes)
        row("plain pread into one touched buffer", touched, nbytes=nbytes)
        for label, value in (("mmap", copy_mmap), ("file", copy_file)):
            print(f"  copying load ({label}) bandwidth vs pread: "
                  f"{fresh / value * 100:5.1f}% of fresh-buffer pread, "
                  f"{touched / value * 100:5.1f}% of touched-buffer pread")

        print(f"\ngather {SMALL_COUNT} x {SMALL_SIZE} B parameters into one buffer, "
              f"best of {repeat}")
        for device in ("local-sync", "local-task"):
            ours = vmrt_gather(driver_bytes, small, device, repeat)
            theirs = reference_gather(rt, driver_bytes, small, device, repeat)
            row(f"gather ({device})", ours, theirs, SMALL_COUNT * SMALL_SIZE)
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
