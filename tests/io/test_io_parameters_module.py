"""The io_parameters native module: exports and cconvs, the compiler's key table / key data /
span layout, fences, zero-copy and copying loads, and gather/scatter through a VM program
compared byte for byte with the reference runtime (iree.runtime's io_parameters module)."""

from __future__ import annotations

import mmap
import shutil
import struct
import subprocess

import numpy as np
import pytest

from vmrt.errors import StatusCode, VMError, VmrtError
from vmrt.hal import BufferUsage, Fence, MemoryType, Semaphore, create_device
from vmrt.io import FileCache, FileMode, IndexProvider, ParameterIndex, ParameterScopes
from vmrt.modules.hal import HalModule
from vmrt.modules.io_parameters import IoParametersModule, decode_spans
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.context import Context, Instance
from vmrt.vm.module import load_module

USAGE_CONSTANT = int(BufferUsage.TRANSFER | BufferUsage.DISPATCH_STORAGE |
                     BufferUsage.SHARING_IMMUTABLE)
USAGE_VARIABLE = int(BufferUsage.TRANSFER | BufferUsage.DISPATCH_STORAGE)
DEVICE_LOCAL = int(MemoryType.DEVICE_LOCAL)

# A program calling each export with arguments from the caller (the device is device 0).
DRIVER_MLIR = """
vm.module @param_driver {
  vm.import private @hal.devices.get(%index : i32) -> !vm.ref<!hal.device>
  vm.import private @io_parameters.gather(%device : !vm.ref<!hal.device>, %queue_affinity : i64, %wait_fence : !vm.ref<!hal.fence>, %signal_fence : !vm.ref<!hal.fence>, %source_scope : !vm.buffer, %target_buffer : !vm.ref<!hal.buffer>, %key_table : !vm.buffer, %key_data : !vm.buffer, %spans : !vm.buffer)
  vm.import private @io_parameters.scatter(%device : !vm.ref<!hal.device>, %queue_affinity : i64, %wait_fence : !vm.ref<!hal.fence>, %signal_fence : !vm.ref<!hal.fence>, %source_buffer : !vm.ref<!hal.buffer>, %target_scope : !vm.buffer, %key_table : !vm.buffer, %key_data : !vm.buffer, %spans : !vm.buffer)
  vm.func @gather(%wait : !vm.ref<!hal.fence>, %signal : !vm.ref<!hal.fence>, %scope : !vm.buffer, %buffer : !vm.ref<!hal.buffer>, %table : !vm.buffer, %data : !vm.buffer, %spans : !vm.buffer) {
    %zero = vm.const.i32 0
    %any = vm.const.i64 -1
    %device = vm.call @hal.devices.get(%zero) : (i32) -> !vm.ref<!hal.device>
    vm.call @io_parameters.gather(%device, %any, %wait, %signal, %scope, %buffer, %table, %data, %spans) : (!vm.ref<!hal.device>, i64, !vm.ref<!hal.fence>, !vm.ref<!hal.fence>, !vm.buffer, !vm.ref<!hal.buffer>, !vm.buffer, !vm.buffer, !vm.buffer) -> ()
    vm.return
  }
  vm.export @gather
  vm.func @scatter(%wait : !vm.ref<!hal.fence>, %signal : !vm.ref<!hal.fence>, %buffer : !vm.ref<!hal.buffer>, %scope : !vm.buffer, %table : !vm.buffer, %data : !vm.buffer, %spans : !vm.buffer) {
    %zero = vm.const.i32 0
    %any = vm.const.i64 -1
    %device = vm.call @hal.devices.get(%zero) : (i32) -> !vm.ref<!hal.device>
    vm.call @io_parameters.scatter(%device, %any, %wait, %signal, %buffer, %scope, %table, %data, %spans) : (!vm.ref<!hal.device>, i64, !vm.ref<!hal.fence>, !vm.ref<!hal.fence>, !vm.ref<!hal.buffer>, !vm.buffer, !vm.buffer, !vm.buffer, !vm.buffer) -> ()
    vm.return
  }
  vm.export @scatter
}
"""


def layout(spans):
    """(key table, key data, spans) bytes as the compiler lays them out for (key, p, b, n)."""
    table, data, values = bytearray(), bytearray(), bytearray()
    for key, parameter_offset, buffer_offset, length in spans:
        raw = key.encode()
        table += struct.pack("<II", len(data), len(raw))
        data += raw
        values += struct.pack("<3Q", parameter_offset, buffer_offset, length)
    return bytes(table), bytes(data), bytes(values)


def vm_buffers(spans):
    return [VMBuffer.from_bytes(part, mutable=False) for part in layout(spans)]


@pytest.fixture
def archive(tmp_path):
    """Three file parameters (one unaligned length) and a splat, in an IRPA."""
    index = ParameterIndex()
    index.add_buffer("a", bytes(range(64)))
    index.add_buffer("b", bytes(range(100, 140)))
    index.add_splat("s", b"\x01\x02", 30)
    index.add_buffer("c", b"C" * 24)
    path = tmp_path / "w.irpa"
    index.save(path)
    return path


def module_for(path, scope="m", writable=False, mode=FileMode.MMAP, **options):
    index = ParameterIndex.load(path, writable=writable, mode=mode, cache=FileCache())
    return IoParametersModule([IndexProvider(scope, index)], **options), index


def fence() -> Fence:
    return Fence([(Semaphore(0), 1)])


def scope_buffer(scope: str) -> VMBuffer:
    return VMBuffer.from_bytes(scope.encode(), mutable=False)


GATHER_SPANS = [("a", 8, 0, 16), ("s", 3, 16, 9), ("b", 0, 25, 40), ("c", 20, 65, 4)]


def expected_gather() -> bytes:
    splat = (b"\x01\x02" * 15)[3:12]
    return bytes(range(8, 24)) + splat + bytes(range(100, 140)) + b"CCCC"


# -- decoding ---------------------------------------------------------------------------------------
def test_decode_spans_reads_the_compiler_layout():
    table, data, values = layout([("w", 1, 2, 3), ("", 0, 0, 0), ("name", 10, 20, 30)])
    spans = decode_spans(*(VMBuffer.from_bytes(x) for x in (table, data, values)))
    assert [tuple(s) for s in spans] == [("w", 1, 2, 3), ("", 0, 0, 0), ("name", 10, 20, 30)]


def test_decode_spans_gives_columns_of_utf8_keys():
    named = [("w", 1, 2, 3), ("gewicht\u00e4", 4, 5, 6), ("\u00e9t\u00e9", 7, 8, 9)]
    spans = decode_spans(*(VMBuffer.from_bytes(x) for x in layout(named)))
    assert spans.keys == ["w", "gewicht\u00e4", "\u00e9t\u00e9"]
    assert (spans.parameter_offsets, spans.buffer_offsets, spans.lengths) == \
        ([1, 4, 7], [2, 5, 8], [3, 6, 9])
    assert list(spans) == named and spans[1] == named[1] and spans[1:] == named[1:]
    assert len(decode_spans(*(VMBuffer.from_bytes(b"") for _ in range(3)))) == 0


def test_decode_spans_reports_the_first_key_out_of_range():
    table = struct.pack("<IIII", 0, 1, 1, 9)  # the second key runs past the data
    with pytest.raises(VmrtError) as info:
        decode_spans(*(VMBuffer.from_bytes(x) for x in (table, b"abc", bytes(48))))
    assert "offset=1, length=9" in info.value.message


@pytest.mark.parametrize("table, data, values, code, fragment", [
    (b"", b"", b"\0" * 23, StatusCode.INVALID_ARGUMENT, "aligned"),
    (b"\0" * 8, b"", b"\0" * 48, StatusCode.INVALID_ARGUMENT, "key string table"),
    (struct.pack("<II", 5, 0), b"abc", b"\0" * 24, StatusCode.OUT_OF_RANGE, "off the end"),
    (struct.pack("<II", 1, 3), b"abc", b"\0" * 24, StatusCode.OUT_OF_RANGE, "outside"),
])
def test_decode_spans_rejects_bad_layouts(table, data, values, code, fragment):
    with pytest.raises(VmrtError) as info:
        decode_spans(*(VMBuffer.from_bytes(x) for x in (table, data, values)))
    assert info.value.code == code and fragment in info.value.message


def test_exports_and_cconvs_are_upstreams():
    module = IoParametersModule()
    assert module.name == "io_parameters" and module.version == 0
    assert {name: module.export_cconv(name) for name in module.export_names()} == {
        "load": "0rIrrrIiirrr_r", "gather": "0rIrrrrrrr_v", "scatter": "0rIrrrrrrr_v"}


def test_constructor_takes_scopes_sets_and_single_providers(archive):
    scopes = ParameterScopes()
    scopes.add_file(archive, "m")
    for providers in (scopes, IoParametersModule(scopes).providers,
                      IndexProvider("m", ParameterIndex.load(archive))):
        assert IoParametersModule(providers).providers.query_support("m")


# -- exports called directly ------------------------------------------------------------------------
@pytest.mark.parametrize("device_name", ["local-sync", "local-task"])
def test_gather_waits_for_its_fence_and_signals(archive, device_name):
    module, _ = module_for(archive)
    device = create_device(device_name)
    target = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, 80)
    wait, signal = fence(), fence()
    if device_name == "local-task":
        module.gather(device, -1, wait, signal, scope_buffer("m"), target,
                      *vm_buffers(GATHER_SPANS))
        assert not signal.is_reached() and bytes(target.view()) == bytes(80)
        wait.signal()
    else:
        wait.signal()
        module.gather(device, -1, wait, signal, scope_buffer("m"), target,
                      *vm_buffers(GATHER_SPANS))
    signal.wait(None)
    assert bytes(target.view())[:69] == expected_gather()
    device.close()


@pytest.mark.parametrize("max_concurrency", [1, 3, 8])
def test_large_gathers_split_into_batches_give_the_same_bytes(tmp_path, max_concurrency):
    rng = np.random.default_rng(7)
    blobs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
             for n in (5 << 20, 3 << 20, 1000, 7 << 20)]
    index = ParameterIndex()
    for i, blob in enumerate(blobs):
        index.add_buffer(f"p{i}", blob)
    index.save(tmp_path / "big.irpa")
    module, _ = module_for(tmp_path / "big.irpa", max_concurrency=max_concurrency)
    device = create_device("local-task")
    total = sum(map(len, blobs))
    target = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, total)
    # Reverse order: buffer order differs from file order.
    spans, offset = [], 0
    for i in reversed(range(len(blobs))):
        spans.append((f"p{i}", 0, offset, len(blobs[i])))
        offset += len(blobs[i])
    signal = fence()
    module.gather(device, -1, None, signal, scope_buffer("m"), target, *vm_buffers(spans))
    signal.wait(None)
    assert bytes(target.view()) == b"".join(reversed(blobs))
    device.close()


def test_load_lends_mapped_bytes_for_constants_and_copies_otherwise(archive):
    module, index = module_for(archive)
    device = create_device("local-sync")
    spans = [("a", 4, 0, 8), ("s", 1, 0, 5), ("c", 0, 0, 24)]
    signal = fence()
    lent = module.load(device, -1, None, signal, scope_buffer("m"), -1, DEVICE_LOCAL,
                       USAGE_CONSTANT, *vm_buffers(spans))
    assert signal.is_reached()
    a, s, c = [lent.get_ref(i) for i in range(3)]
    mapping = np.frombuffer(index.lookup("a").file.contents(), np.uint8)
    assert np.shares_memory(np.frombuffer(a.view(), np.uint8), mapping)  # zero-copy
    assert bytes(a.view()) == bytes(range(4, 12))
    assert bytes(s.view()) == b"\x02\x01\x02\x01\x02" and bytes(c.view()) == b"C" * 24
    with pytest.raises(VmrtError):  # lent bytes are read-only
        a.map_write(0, b"x")
    signal = fence()
    copied = module.load(device, -1, None, signal, scope_buffer("m"), -1, DEVICE_LOCAL,
                         USAGE_VARIABLE, *vm_buffers(spans))
    a = copied.get_ref(0)
    assert not np.shares_memory(np.frombuffer(a.view(), np.uint8), mapping)
    a.map_write(0, b"xy")  # a variable's buffer is its own
    assert bytes(a.view()) == b"xy" + bytes(range(6, 12))
    assert index.lookup("a").read(4, 2) == bytes([4, 5])


def test_load_of_no_spans_gives_an_empty_list(archive):
    module, _ = module_for(archive)
    signal = fence()
    loaded = module.load(create_device("local-sync"), -1, None, signal, scope_buffer("m"), -1,
                         DEVICE_LOCAL, USAGE_CONSTANT, *vm_buffers([]))
    assert signal.is_reached() and len(loaded) == 0


def test_load_in_file_mode_reads_with_pread(archive):
    module, index = module_for(archive, mode=FileMode.FILE)
    device = create_device("local-task")
    signal = fence()
    loaded = module.load(device, -1, None, signal, scope_buffer("m"), -1, DEVICE_LOCAL,
                         USAGE_CONSTANT, *vm_buffers([("b", 10, 0, 30)]))
    signal.wait(None)
    assert bytes(loaded.get_ref(0).view()) == bytes(range(110, 140))
    assert not index.lookup("b").file.mapped
    device.close()


@pytest.mark.parametrize("spans, code", [
    ([("a", 0, 0, 4), ("nope", 0, 4, 4)], StatusCode.NOT_FOUND),
    ([("a", 60, 0, 8)], StatusCode.OUT_OF_RANGE),           # outside its entry
    ([("b", 0, 70, 20)], StatusCode.OUT_OF_RANGE),          # outside the target buffer
])
@pytest.mark.parametrize("device_name", ["local-sync", "local-task"])
def test_gather_errors_fail_the_fence_and_raise(archive, spans, code, device_name):
    module, _ = module_for(archive)
    device = create_device(device_name)
    target = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, 80)
    signal = fence()
    with pytest.raises(VmrtError) as info:
        module.gather(device, -1, None, signal, scope_buffer("m"), target, *vm_buffers(spans))
    assert info.value.code == code
    assert signal.status()[0] == code
    assert bytes(target.view()) == bytes(80)
    device.close()


def test_unknown_scope_fails_like_upstream(archive):
    module, _ = module_for(archive)
    device = create_device("local-sync")
    target = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, 8)
    with pytest.raises(VmrtError) as info:
        module.gather(device, -1, None, None, None, target, *vm_buffers([("a", 0, 0, 4)]))
    assert info.value.code == StatusCode.NOT_FOUND
    assert "no provider registered that handles scopes like ''" in info.value.message


def test_a_batch_failing_on_the_queue_fails_the_signal_fence(archive, tmp_path):
    module, index = module_for(archive, mode=FileMode.FILE)
    device = create_device("local-task")
    target = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, 80)
    wait, signal = fence(), fence()
    module.gather(device, -1, wait, signal, scope_buffer("m"), target,
                  *vm_buffers([("c", 0, 0, 24)]))
    with open(archive, "r+b") as file:  # the archive shrinks before the read runs
        file.truncate(index.lookup("c").offset + 4)
    wait.signal()
    with pytest.raises(VmrtError) as info:
        signal.wait(None)
    assert info.value.code == StatusCode.DATA_LOSS
    device.close()


# -- scatter ----------------------------------------------------------------------------------------
def scatter_source(device, data: bytes):
    buffer = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, len(data))
    buffer.map_write(0, data)
    return buffer


@pytest.mark.parametrize("flush", [False, True])
def test_scatter_writes_inside_entries_only(archive, flush):
    index = ParameterIndex.load(archive, writable=True, cache=FileCache())
    module = IoParametersModule([IndexProvider("m", index, flush=flush)])
    device = create_device("local-sync")
    before = archive.read_bytes()
    signal = fence()
    module.scatter(device, -1, None, signal, scatter_source(device, b"0123456789"),
                   scope_buffer("m"), *vm_buffers([("a", 60, 0, 4), ("c", 0, 4, 6)]))
    assert signal.is_reached()
    after = archive.read_bytes()
    a, c = index.lookup("a"), index.lookup("c")
    assert after[a.offset + 60:a.offset + 64] == b"0123"
    assert after[c.offset:c.offset + 6] == b"456789"
    changed = [i for i in range(len(after)) if after[i] != before[i]]
    assert changed == [*range(a.offset + 60, a.offset + 64), *range(c.offset, c.offset + 6)]


@pytest.mark.parametrize("spans, writable, code", [
    ([("a", 0, 0, 4), ("a", 2, 4, 4)], True, StatusCode.INVALID_ARGUMENT),  # overlapping targets
    ([("a", 0, 0, 4), ("b", 38, 4, 4)], True, StatusCode.OUT_OF_RANGE),     # past the entry
    ([("a", 0, 0, 4), ("s", 0, 4, 3)], True, StatusCode.PERMISSION_DENIED),  # a splat
    ([("a", 0, 0, 4), ("zz", 0, 4, 4)], True, StatusCode.NOT_FOUND),
    ([("a", 0, 6, 8)], True, StatusCode.OUT_OF_RANGE),                       # past the source
    ([("a", 0, 0, 4)], False, StatusCode.PERMISSION_DENIED),                 # read-only archive
])
@pytest.mark.parametrize("device_name", ["local-sync", "local-task"])
def test_bad_scatters_leave_the_archive_unchanged(archive, spans, writable, code, device_name):
    before = archive.read_bytes()
    module, _ = module_for(archive, writable=writable)
    device = create_device(device_name)
    signal = fence()
    with pytest.raises(VmrtError) as info:
        module.scatter(device, -1, None, signal, scatter_source(device, b"abcdefgh"),
                       scope_buffer("m"), *vm_buffers(spans))
    assert info.value.code == code
    assert signal.status()[0] == code
    device.wait_idle()
    assert archive.read_bytes() == before
    device.close()


# -- through a VM program, against the reference runtime --------------------------------------------
@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile is not installed")
    out = tmp_path_factory.mktemp("driver")
    (out / "driver.mlir").write_text(DRIVER_MLIR)
    subprocess.run(["iree-compile", "--compile-from=vm", "--output-format=vm-bytecode",
                    str(out / "driver.mlir"), "-o", str(out / "driver.vmfb")],
                   check=True, capture_output=True, timeout=120)
    return out / "driver.vmfb"


def random_archive(path, count=40, seed=3):
    rng = np.random.default_rng(seed)
    index = ParameterIndex()
    for i in range(count):
        index.add_buffer(f"p{i}", rng.integers(0, 256, int(rng.integers(1, 300)),
                                               dtype=np.uint8).tobytes())
    index.add_splat("splat", b"\x11\x22\x33\x44", 96)
    index.save(path)
    return index


def random_spans(index, rng, count, buffer_size, distinct=False):
    """Spans inside their entries at random buffer offsets (distinct keys for scatters)."""
    entries = [e for e in index if not (distinct and e.is_splat)]
    picks = rng.permutation(len(entries))[:count] if distinct else \
        rng.integers(0, len(entries), count)
    spans, cursor = [], 0
    for pick in picks:
        entry = entries[int(pick)]
        offset = int(rng.integers(0, entry.length))
        length = int(rng.integers(0, entry.length - offset + 1))
        if entry.is_splat:
            # The reference fills splats with a command-buffer fill: pattern-aligned
            # ranges only (vmrt also reads unaligned ones, keeping the pattern's phase).
            unit = len(entry.pattern)
            offset, length, cursor = offset // unit * unit, length // unit * unit, \
                -(-cursor // unit) * unit
        if cursor + length > buffer_size:
            break
        spans.append((entry.key, offset, cursor, length))
        cursor += length + int(rng.integers(0, 5))
    return spans


def run_vmrt(driver_path, provider_index, function, spans, buffer_bytes, scope="m"):
    device = create_device("local-sync")
    module = IoParametersModule([IndexProvider(scope, provider_index)])
    hal = HalModule([device], host_arrays=False)
    buffer = device.allocator.allocate_buffer(DEVICE_LOCAL, USAGE_VARIABLE, len(buffer_bytes))
    buffer.map_write(0, buffer_bytes)
    table, data, values = vm_buffers(spans)
    signal = fence()
    with Context(Instance(), [hal, module, load_module(driver_path.read_bytes())]) as context:
        call = context.function(f"param_driver.{function}")
        if function == "gather":
            call(None, signal, scope_buffer(scope), buffer, table, data, values)
        else:
            call(None, signal, buffer, scope_buffer(scope), table, data, values)
    signal.wait(None)
    return bytes(buffer.view())


def run_reference(rt, driver_path, archive, function, spans, buffer_bytes, scope="m",
                  writable=False):
    instance = rt.VmInstance()
    device = rt.get_device("local-sync")
    index = rt.ParameterIndex()
    if writable:  # ParameterIndex.load(writable=True) still hands out read-only entries
        with open(archive, "r+b") as file:
            mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_WRITE)
        index.load_from_file_handle(
            rt.FileHandle.wrap_memory(mapping, readable=True, writable=True), "irpa")
    else:
        index.load(str(archive))
    modules = [rt.create_hal_module(instance, device),
               rt.create_io_parameters_module(instance, index.create_provider(scope=scope)),
               rt.VmModule.copy_buffer(instance, driver_path.read_bytes())]
    context = rt.VmContext(instance, modules=modules)
    buffer = device.allocator.allocate_buffer(
        memory_type=rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE,
        allowed_usage=rt.BufferUsage.DEFAULT | rt.BufferUsage.MAPPING,
        allocation_size=len(buffer_bytes))
    buffer.map().asarray([len(buffer_bytes)], np.dtype(np.uint8))[:] = \
        np.frombuffer(buffer_bytes, np.uint8)

    def vm_buffer(data):
        result = rt.VmBuffer(max(1, len(data)))
        memoryview(result)[:len(data)] = data
        return result
    table, data, values = layout(spans)
    signal = rt.HalFence(1)
    signal.insert(device.create_semaphore(0), 1)
    args = rt.VmVariantList(8)
    args.push_ref(rt.HalFence(1))
    args.push_ref(signal)
    if function == "gather":
        args.push_ref(vm_buffer(scope.encode()))
        args.push_ref(buffer)
    else:
        args.push_ref(buffer)
        args.push_ref(vm_buffer(scope.encode()))
    # Empty key data still needs a buffer object; its length only bounds offsets.
    for part in (table, data, values):
        args.push_ref(vm_buffer(part))
    context.invoke(modules[2].lookup_function(function), args, rt.VmVariantList(0))
    signal.wait()
    return bytes(buffer.map().asarray([len(buffer_bytes)], np.dtype(np.uint8)))


def test_gather_matches_the_reference_runtime(driver, tmp_path):
    rt = pytest.importorskip("iree.runtime")
    index = random_archive(tmp_path / "r.irpa")
    rng = np.random.default_rng(11)
    for trial in range(4):
        spans = random_spans(index, rng, 30, 6000)
        start = bytes(rng.integers(0, 256, 6000, dtype=np.uint8))
        ours = run_vmrt(driver, ParameterIndex.load(tmp_path / "r.irpa", cache=FileCache()),
                        "gather", spans, start)
        theirs = run_reference(rt, driver, tmp_path / "r.irpa", "gather", spans, start)
        assert ours == theirs, spans
        assert ours != start


def test_scatter_matches_the_reference_runtime(driver, tmp_path):
    rt = pytest.importorskip("iree.runtime")
    random_archive(tmp_path / "r.irpa")
    rng = np.random.default_rng(5)
    for trial in range(3):
        ours_path, theirs_path = tmp_path / f"ours{trial}.irpa", tmp_path / f"theirs{trial}.irpa"
        shutil.copy(tmp_path / "r.irpa", ours_path)
        shutil.copy(tmp_path / "r.irpa", theirs_path)
        index = ParameterIndex.load(ours_path, writable=True, cache=FileCache())
        spans = random_spans(index, rng, 20, 4000, distinct=True)
        source = bytes(rng.integers(0, 256, 4000, dtype=np.uint8))
        run_vmrt(driver, index, "scatter", spans, source)
        run_reference(rt, driver, theirs_path, "scatter", spans, source, writable=True)
        assert ours_path.read_bytes() == theirs_path.read_bytes()
        assert ours_path.read_bytes() != (tmp_path / "r.irpa").read_bytes()


def test_errors_through_the_vm_are_vm_errors(driver, archive):
    index = ParameterIndex.load(archive, cache=FileCache())
    with pytest.raises(VMError) as info:
        run_vmrt(driver, index, "gather", [("missing", 0, 0, 4)], bytes(8))
    assert info.value.code == StatusCode.NOT_FOUND and "missing" in info.value.message
    before = archive.read_bytes()
    with pytest.raises(VMError) as info:
        run_vmrt(driver, index, "scatter", [("a", 0, 0, 4)], bytes(8))  # read-only archive
    assert info.value.code == StatusCode.PERMISSION_DENIED
    assert archive.read_bytes() == before
