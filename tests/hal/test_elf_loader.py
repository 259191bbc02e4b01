"""vmrt.hal.elf / csrc/vmrt_elf*.c: loading the embedded-elf-x86_64 images that
iree-compile's llvm-cpu backend emits, and refusing every malformed variant of
them with the right status code, without ever crashing (fuzzed).

Only two tests call into loaded code: the library query of a real image (a
constant-returning function) and a gcc-built object that checks initializers.
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.errors import StatusCode
from vmrt.hal import elf as elf_module
from vmrt.hal.elf import ElfModule
from vmrt.errors import HalError

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")),
    reason="embedded-elf-x86_64 images load on x86-64 Linux only")

needs_native = pytest.mark.skipif(not elf_module.AVAILABLE, reason="C extension not available")

QUERY = "iree_hal_executable_library_query"
LLVM_CPU = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu")

MATMUL_TANH = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %init = tensor.empty() : tensor<4x3xf32>
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>)
                      outs(%fill : tensor<4x3xf32>) -> tensor<4x3xf32>
  %t = math.tanh %mm : tensor<4x3xf32>
  return %t : tensor<4x3xf32>
}
"""


def compile_elf(folder: Path, source: str, *flags: str) -> bytes:
    """The embedded ELF of `source` compiled for llvm-cpu (skips without iree-compile)."""
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile is not installed")
    from vmrt.vm.module import load_module

    mlir = folder / "source.mlir"
    vmfb = folder / "module.vmfb"
    mlir.write_text(source)
    subprocess.run(["iree-compile", *LLVM_CPU, *flags, str(mlir), "-o", str(vmfb)],
                   check=True, capture_output=True)
    module = load_module(vmfb.read_bytes())
    images = [bytes(s.data) for s in module.definition.rodata_segments
              if bytes(s.data[:4]) == b"\x7fELF"]
    assert len(images) == 1, "expected one embedded ELF in the module"
    return images[0]


@pytest.fixture(scope="session")
def generic_elf(tmp_path_factory) -> bytes:
    return compile_elf(tmp_path_factory.mktemp("elf_generic"), MATMUL_TANH)


@pytest.fixture(scope="session")
def host_elf(tmp_path_factory) -> bytes:
    return compile_elf(tmp_path_factory.mktemp("elf_host"), MATMUL_TANH,
                       "--iree-llvmcpu-target-cpu=host")


@pytest.fixture(scope="session", params=["generic", "host"])
def real_elf(request) -> bytes:
    return request.getfixturevalue(f"{request.param}_elf")


INIT_SOURCE = r"""
static int flag;
static int order;
/* DT_INIT (named with -Wl,-init=first) runs before any DT_INIT_ARRAY entry. */
__attribute__((visibility("hidden"))) void first(void) { order = 1; }
__attribute__((constructor)) static void second(void) { order = order * 10 + 2; }
__attribute__((constructor)) static void third(void) { flag = order * 10 + 3; }
int get_flag(void) { return flag; }
"""


@pytest.fixture(scope="session")
def init_elf(tmp_path_factory) -> bytes:
    """A freestanding shared object with DT_INIT and DT_INIT_ARRAY (and DT_GNU_HASH)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    folder = tmp_path_factory.mktemp("elf_init")
    (folder / "init.c").write_text(INIT_SOURCE)
    subprocess.run(["gcc", "-shared", "-nostdlib", "-fPIC", "-O1", "-Wl,-init=first",
                    "-Wl,--hash-style=gnu", "-Wl,-z,relro,-z,now", "-o", str(folder / "init.so"),
                    str(folder / "init.c")], check=True, capture_output=True)
    return (folder / "init.so").read_bytes()


# ---------------------------------------------------------------------------
# Reading and editing ELF64 structures (to check the loader and craft bad inputs)
# ---------------------------------------------------------------------------

PHDR = struct.Struct("<IIQQQQQQ")  # type flags offset vaddr paddr filesz memsz align
DYN = struct.Struct("<QQ")
RELA = struct.Struct("<QQQ")
SYM = struct.Struct("<IBBHQQ")  # name info other shndx value size
PT_LOAD, PT_DYNAMIC, PT_GNU_RELRO = 1, 2, 0x6474E552
PF_X, PF_W, PF_R = 1, 2, 4
DT_NULL, DT_HASH, DT_SYMTAB, DT_RELA, DT_RELASZ, DT_INIT, DT_REL = 0, 4, 6, 7, 8, 12, 17
R_X86_64_RELATIVE = 8


class Elf:
    """A mutable ELF64 image with just enough parsing to find and patch fields."""

    def __init__(self, data: bytes):
        self.b = bytearray(data)

    def u16(self, offset, value=None):
        return self._field("<H", offset, value)

    def u64(self, offset, value=None):
        return self._field("<Q", offset, value)

    def _field(self, fmt, offset, value):
        if value is None:
            return struct.unpack_from(fmt, self.b, offset)[0]
        struct.pack_into(fmt, self.b, offset, value % (1 << (8 * struct.calcsize(fmt))))
        return value

    def phdrs(self) -> list[tuple[int, tuple]]:
        """(file offset, fields) of each program header."""
        phoff, phnum = self.u64(32), self.u16(56)
        return [(phoff + i * PHDR.size, PHDR.unpack_from(self.b, phoff + i * PHDR.size))
                for i in range(phnum)]

    def phdr(self, p_type, p_flags=None) -> int:
        """File offset of the first program header of that type (and flags)."""
        for at, fields in self.phdrs():
            if fields[0] == p_type and (p_flags is None or fields[1] == p_flags):
                return at
        raise LookupError(p_type)

    def set_phdr(self, at: int, **changes) -> None:
        names = ("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align")
        fields = dict(zip(names, PHDR.unpack_from(self.b, at)))
        fields.update(changes)
        PHDR.pack_into(self.b, at, *(fields[n] % (1 << 64) for n in names))

    def file_offset(self, vaddr: int) -> int:
        for _, (p_type, _, offset, start, _, filesz, _, _) in self.phdrs():
            if p_type == PT_LOAD and start <= vaddr < start + filesz:
                return offset + vaddr - start
        raise LookupError(hex(vaddr))

    def dynamic(self) -> list[tuple[int, int, int]]:
        """(file offset, tag, value) of the PT_DYNAMIC entries up to DT_NULL."""
        fields = PHDR.unpack_from(self.b, self.phdr(PT_DYNAMIC))
        entries = []
        for at in range(fields[2], fields[2] + fields[5], DYN.size):
            tag, value = DYN.unpack_from(self.b, at)
            entries.append((at, tag, value))
            if tag == DT_NULL:
                break
        return entries

    def dyn_value(self, tag: int) -> int:
        return next(value for _, t, value in self.dynamic() if t == tag)

    def dyn_entry(self, tag: int) -> int:
        return next(at for at, t, _ in self.dynamic() if t == tag)

    def relas(self) -> list[tuple[int, int, int, int]]:
        """(file offset, r_offset, r_info, r_addend) of the DT_RELA table."""
        start = self.file_offset(self.dyn_value(DT_RELA))
        return [(at, *RELA.unpack_from(self.b, at))
                for at in range(start, start + self.dyn_value(DT_RELASZ), RELA.size)]

    def symbol(self, index: int) -> int:
        """File offset of dynamic symbol `index`."""
        return self.file_offset(self.dyn_value(DT_SYMTAB)) + index * SYM.size

    def bytes(self) -> bytes:
        return bytes(self.b)


def min_vaddr(data: bytes) -> int:
    return min(f[3] for _, f in Elf(data).phdrs() if f[0] == PT_LOAD) & ~0xFFF


def mappings(lo: int, hi: int) -> list[tuple[int, int, str]]:
    """(start, end, perms) of the lines of /proc/self/maps overlapping [lo, hi)."""
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if start < hi and lo < end:
                found.append((start, end, perms))
    return found


def assert_no_write_exec(module: ElfModule) -> None:
    spans = mappings(module.base, module.base + module.size)
    assert spans, "the image is not mapped"
    for start, end, perms in spans:
        assert not ("w" in perms and "x" in perms), f"W+X pages {start:#x}-{end:#x}"


def refused(data, code: StatusCode) -> HalError:
    with pytest.raises(HalError) as info:
        ElfModule(data, run_initializers=False).close()
    assert info.value.code == code, info.value.message
    assert info.value.message.startswith("invalid embedded ELF: ")
    return info.value


# ---------------------------------------------------------------------------
# Real images
# ---------------------------------------------------------------------------


@needs_native
def test_loads_and_finds_the_library_query(real_elf):
    module = ElfModule(real_elf)
    base, size = module.base, module.size
    address = module.lookup(QUERY)
    assert address and base <= address < base + size
    assert size % os.sysconf("SC_PAGE_SIZE") == 0
    assert_no_write_exec(module)
    # The executable segment is mapped r-x exactly where the query lives.
    text = [p for s, e, p in mappings(base, base + size) if s <= address < e]
    assert text == ["r-xp"]
    module.close()
    assert mappings(base, base + size) == []


@needs_native
def test_relocations_are_applied(real_elf):
    image = Elf(real_elf)
    relocations = [r for r in image.relas() if r[2] & 0xFFFFFFFF == R_X86_64_RELATIVE]
    assert relocations, "an IREE library always has relative relocations"
    with ElfModule(real_elf) as module:
        bias = module.base - min_vaddr(real_elf)
        for _, offset, _, addend in relocations:
            stored = int.from_bytes(ctypes.string_at(bias + offset, 8), "little")
            assert stored == bias + addend


@needs_native
def test_library_query_returns_the_relocated_header(generic_elf):
    # Version 6 is IREE_HAL_EXECUTABLE_LIBRARY_VERSION_0_6 (LATEST in IREE 3.x);
    # the header's name pointer is only valid if relocation worked.
    with ElfModule(generic_elf) as module:
        query = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p)(
            module.lookup(QUERY))
        library = query(6, None)
        if not library:
            pytest.skip("this compiler's library version is not 6")
        header = ctypes.cast(library, ctypes.POINTER(ctypes.c_void_p))[0]
        version = ctypes.c_uint32.from_address(header).value
        name = ctypes.string_at(ctypes.c_void_p.from_address(header + 8).value)
        assert version == 6
        assert name == b"main_dispatch_0"


@needs_native
def test_initializers_run_in_order(init_elf):
    with ElfModule(init_elf) as module:
        assert_no_write_exec(module)
        get_flag = ctypes.CFUNCTYPE(ctypes.c_int)(module.lookup("get_flag"))
        assert get_flag() == 123  # DT_INIT, then both DT_INIT_ARRAY entries in order
    with ElfModule(init_elf, run_initializers=False) as module:
        assert ctypes.CFUNCTYPE(ctypes.c_int)(module.lookup("get_flag"))() == 0


@needs_native
def test_lookup_only_finds_exported_functions(real_elf, init_elf):
    with ElfModule(real_elf) as module:
        for name in ("", "iree_hal_executable_library", QUERY + "x", QUERY + "\0x",
                     "main_dispatch_0"):
            with pytest.raises(HalError) as info:
                module.lookup(name)
            assert info.value.code == StatusCode.NOT_FOUND
    with ElfModule(init_elf, run_initializers=False) as module:
        with pytest.raises(HalError):
            module.lookup("first")  # hidden: not exported


@needs_native
def test_close_is_idempotent_and_final(generic_elf):
    with ElfModule(generic_elf) as module:
        assert not module.closed
    assert module.closed
    module.close()
    with pytest.raises(HalError) as info:
        module.lookup(QUERY)
    assert info.value.code == StatusCode.FAILED_PRECONDITION
    assert "closed" in repr(module)


@needs_native
def test_garbage_collection_unmaps(generic_elf):
    module = ElfModule(memoryview(generic_elf))
    base, size = module.base, module.size
    assert mappings(base, base + size)
    del module
    gc.collect()
    assert mappings(base, base + size) == []


@needs_native
def test_load_close_cycles_leak_nothing(generic_elf):
    def counts():
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps), len(os.listdir("/proc/self/fd"))

    for _ in range(20):  # warm up allocator arenas first
        ElfModule(generic_elf).close()
    gc.collect()
    before = counts()
    for _ in range(1000):
        ElfModule(generic_elf).close()
    gc.collect()
    # A leak would grow by ~1000; other tests' lingering threads (device workers,
    # their stacks and arenas) may come and go by a few meanwhile.
    after = counts()
    assert after[0] - before[0] <= 8 and after[1] - before[1] <= 4, (before, after)


def test_unavailable_without_the_extension(monkeypatch, generic_elf):
    monkeypatch.setattr(elf_module, "_lib", None)
    with pytest.raises(HalError) as info:
        ElfModule(generic_elf)
    assert info.value.code == StatusCode.UNAVAILABLE
    assert "C extension" in info.value.message


# ---------------------------------------------------------------------------
# Malformed images
# ---------------------------------------------------------------------------


def _set_ident(index, value):
    def edit(image):
        image.b[index] = value
    return edit


def _set_u16(offset, value):
    return lambda image: image.u16(offset, value)


def _set_u64(offset, value):
    return lambda image: image.u64(offset, value)


def _text(image):
    return image.phdr(PT_LOAD, PF_R | PF_X)


def _undefined_symbol(image):
    image.u16(image.symbol(1) + 6, 0)  # st_shndx = SHN_UNDEF


def _relocation(field, value):
    """Sets r_offset (field 0), r_info (8) or r_addend (16) of the first RELA entry."""
    def edit(image):
        at = image.relas()[0][0]
        image.u64(at + field, value)
    return edit


def _dyn_tag(old, new):
    return lambda image: image.u64(image.dyn_entry(old), new)


def _overlap(image):
    text = PHDR.unpack_from(image.b, _text(image))
    rodata = image.phdr(PT_LOAD, PF_R)
    image.set_phdr(rodata, vaddr=text[3], flags=PF_R | PF_X)


BAD_IMAGES = {
    "wrong magic": (_set_ident(1, ord("e")), StatusCode.INVALID_ARGUMENT),
    "32-bit class": (_set_ident(4, 1), StatusCode.INCOMPATIBLE),
    "unknown class": (_set_ident(4, 3), StatusCode.INVALID_ARGUMENT),
    "big endian": (_set_ident(5, 2), StatusCode.INCOMPATIBLE),
    "ident version": (_set_ident(6, 0), StatusCode.INVALID_ARGUMENT),
    "aarch64": (_set_u16(18, 183), StatusCode.INCOMPATIBLE),
    "ET_EXEC": (_set_u16(16, 2), StatusCode.INVALID_ARGUMENT),
    "phentsize": (_set_u16(54, 32), StatusCode.INVALID_ARGUMENT),
    "no phdrs": (_set_u16(56, 0), StatusCode.INVALID_ARGUMENT),
    "phoff out of range": (_set_u64(32, 1 << 40), StatusCode.INVALID_ARGUMENT),
    "phoff wraps": (_set_u64(32, (1 << 64) - 8), StatusCode.INVALID_ARGUMENT),
    "PT_LOAD beyond data": (lambda i: i.set_phdr(_text(i), offset=1 << 20),
                            StatusCode.INVALID_ARGUMENT),
    "PT_LOAD offset wraps": (lambda i: i.set_phdr(_text(i), offset=-16),
                             StatusCode.INVALID_ARGUMENT),
    "filesz > memsz": (lambda i: i.set_phdr(_text(i), memsz=1), StatusCode.INVALID_ARGUMENT),
    "huge memsz": (lambda i: i.set_phdr(_text(i), memsz=1 << 40), StatusCode.INVALID_ARGUMENT),
    "vaddr wraps": (lambda i: i.set_phdr(_text(i), vaddr=-4096), StatusCode.INVALID_ARGUMENT),
    "span over 1 GiB": (lambda i: i.set_phdr(_text(i), vaddr=3 << 30),
                        StatusCode.INVALID_ARGUMENT),
    "W+X segment": (lambda i: i.set_phdr(_text(i), flags=PF_R | PF_W | PF_X),
                    StatusCode.INVALID_ARGUMENT),
    "bad alignment": (lambda i: i.set_phdr(_text(i), align=3000), StatusCode.INVALID_ARGUMENT),
    "overlapping segments": (_overlap, StatusCode.INVALID_ARGUMENT),
    "no PT_DYNAMIC": (lambda i: i.set_phdr(i.phdr(PT_DYNAMIC), type=0x70000000),
                      StatusCode.INVALID_ARGUMENT),
    "PT_DYNAMIC outside": (lambda i: i.set_phdr(i.phdr(PT_DYNAMIC), vaddr=1 << 30),
                           StatusCode.INVALID_ARGUMENT),
    "PT_TLS": (lambda i: i.set_phdr(i.phdr(PT_GNU_RELRO), type=7), StatusCode.INVALID_ARGUMENT),
    "RELRO outside": (lambda i: i.set_phdr(i.phdr(PT_GNU_RELRO), vaddr=1 << 32),
                      StatusCode.INVALID_ARGUMENT),
    "relocation outside the image": (_relocation(0, 0x4000_0000), StatusCode.INVALID_ARGUMENT),
    "relocation at the last byte": (lambda i: _relocation(0, max(
        f[3] + f[6] for _, f in i.phdrs() if f[0] == PT_LOAD) - 4)(i),
        StatusCode.INVALID_ARGUMENT),
    "symbol index out of range": (_relocation(8, (99 << 32) | R_X86_64_RELATIVE),
                                  StatusCode.INVALID_ARGUMENT),
    "unsupported relocation": (_relocation(8, 37), StatusCode.INVALID_ARGUMENT),
    "GLOB_DAT without symbol": (_relocation(8, 6), StatusCode.INVALID_ARGUMENT),
    "32-bit relocation overflow": (lambda i: (_relocation(8, 10)(i), _relocation(16, 1 << 32)(i)),
                                   StatusCode.INVALID_ARGUMENT),
    "DT_REL": (_dyn_tag(DT_RELASZ, DT_REL), StatusCode.INVALID_ARGUMENT),
    "no hash table": (_dyn_tag(DT_HASH, 0x60000000), StatusCode.INVALID_ARGUMENT),
    "symtab outside": (lambda i: i.u64(i.dyn_entry(DT_SYMTAB) + 8, 1 << 33),
                       StatusCode.INVALID_ARGUMENT),
    "rela outside": (lambda i: i.u64(i.dyn_entry(DT_RELA) + 8, 1 << 33),
                     StatusCode.INVALID_ARGUMENT),
    "relasz not a multiple": (lambda i: i.u64(i.dyn_entry(DT_RELASZ) + 8, 25),
                              StatusCode.INVALID_ARGUMENT),
    "DT_INIT not code": (_dyn_tag(DT_RELASZ, DT_INIT), StatusCode.INVALID_ARGUMENT),
    "undefined symbol": (_undefined_symbol, StatusCode.NOT_FOUND),
}


@needs_native
def test_empty_is_refused():
    refused(b"", StatusCode.INVALID_ARGUMENT)
    refused(bytearray(), StatusCode.INVALID_ARGUMENT)


@needs_native
@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_malformed_image_is_refused(generic_elf, case):
    edit, code = BAD_IMAGES[case]
    image = Elf(generic_elf)
    edit(image)
    error = refused(image.bytes(), code)
    if case == "undefined symbol":
        assert QUERY in error.message


@needs_native
def test_truncated_images(real_elf):
    # Everything up to the end of the last PT_LOAD's file bytes is needed; the
    # section headers after it are not.
    needed = max(f[2] + f[5] for _, f in Elf(real_elf).phdrs() if f[0] == PT_LOAD)
    lengths = set(range(0, needed, 41)) | {1, 4, 63, 64, 65, 120, needed - 1}
    for length in sorted(lengths):
        refused(real_elf[:length], StatusCode.INVALID_ARGUMENT)
    for length in (needed, len(real_elf) - 1):
        ElfModule(real_elf[:length], run_initializers=False).close()


# ---------------------------------------------------------------------------
# Fuzzing: mutated images load or are refused, never crash
# ---------------------------------------------------------------------------

INTERESTING_64 = (0, 1, 0x7F, 0x80, 0xFF, 0x1000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                  1 << 32, 1 << 40, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 24)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """`data` with 1..8 random edits, weighted towards the headers and tables
    (the first 0x300 bytes and PT_DYNAMIC), where the loader's decisions are."""
    image = bytearray(data)
    try:
        dyn = PHDR.unpack_from(Elf(data).b, Elf(data).phdr(PT_DYNAMIC))
        hot = [(0, min(len(image), 0x300)), (dyn[2], min(len(image), dyn[2] + dyn[5]))]
    except (LookupError, struct.error):
        hot = [(0, min(len(image), 0x300))]
    for _ in range(rng.randint(1, 8)):
        lo, hi = rng.choice(hot) if rng.random() < 0.8 else (0, len(image))
        if hi <= lo:
            continue
        at = rng.randrange(lo, hi)
        kind = rng.randrange(4)
        if kind == 0:
            image[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            image[at] = rng.randrange(256)
        elif kind == 2 and at + 8 <= len(image):
            at &= ~7
            value = rng.choice(INTERESTING_64) if rng.random() < 0.7 else rng.getrandbits(64)
            image[at:at + 8] = value.to_bytes(8, "little")
        elif kind == 3 and at + 2 <= len(image):
            image[at:at + 2] = rng.getrandbits(16).to_bytes(2, "little")
    if rng.random() < 0.05:
        del image[rng.randrange(len(image) + 1):]
    return bytes(image)


def try_load(data: bytes) -> int | None:
    """0 when `data` loaded (then looked up and closed), else the refusal's code.

    Initializers are never run: mutated code must not execute."""
    try:
        module = ElfModule(data, run_initializers=False)
    except HalError as error:
        assert error.code in (StatusCode.INVALID_ARGUMENT, StatusCode.NOT_FOUND,
                              StatusCode.INCOMPATIBLE, StatusCode.RESOURCE_EXHAUSTED), error
        return int(error.code)
    with module:
        try:
            address = module.lookup(QUERY)
            assert module.base <= address < module.base + module.size
        except HalError as error:  # (no such export, or not at the start of code)
            assert error.code in (StatusCode.NOT_FOUND, StatusCode.INVALID_ARGUMENT), error
    return 0


@needs_native
def test_fuzzed_images_never_crash(generic_elf, host_elf, init_elf):
    rng = random.Random(0xE1F)
    seeds = [generic_elf, host_elf, init_elf]
    results = {}
    for case in range(5000):
        data = mutate(seeds[case % len(seeds)], rng)
        code = try_load(data)
        results[code] = results.get(code, 0) + 1
        if code == 0 and case % 16 == 0:
            with ElfModule(data, run_initializers=False) as module:
                assert_no_write_exec(module)
    # Both outcomes occur: mutations hit bytes that matter and bytes that don't.
    assert results.get(0, 0) > 200 and results.get(3, 0) > 200, results


@needs_native
def test_fuzzed_images_hypothesis(generic_elf):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    edits = st.lists(st.tuples(st.integers(0, 0x2FF), st.integers(0, 255)), min_size=1,
                     max_size=6)

    @hypothesis.settings(max_examples=300, derandomize=True, deadline=None, database=None)
    @hypothesis.given(edits)
    def check(changes):
        image = bytearray(generic_elf)
        for at, value in changes:
            image[at] = value
        try_load(bytes(image))

    check()
