"""Native executables that are broken but still look like ELF files: a truncated
system-elf image (the system loader used to map file ranges past its end and die
of SIGBUS) and images whose tables look valid but whose code is not where they
say (a moved code segment, a code segment without file bytes, the library query
moved into a function). Both loaders refuse them with INVALID_ARGUMENT before any
of their code runs. Every case runs in a child process, from the CLI (load and
call) and from the HAL API, so that a crash fails the test instead of pytest.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.hal.native_loader import native_unavailable_reason

pytestmark = pytest.mark.skipif(
    native_unavailable_reason() is not None or not (
        sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")),
    reason="native executables load on x86-64 Linux with the C extension only")

REPO_ROOT = Path(__file__).resolve().parents[2]
LLVM_CPU = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=generic")
FORMATS = {"embedded": ("embedded-elf-x86_64", ()),
           "system": ("system-elf-x86_64", ("--iree-llvmcpu-link-embedded=false",))}
ADD = """
func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
ADD_INPUTS = ("--input=4xf32=1 2 3 4", "--input=4xf32=1 1 1 1")
QUERY = b"iree_hal_executable_library_query"
PHDR = struct.Struct("<IIQQQQQQ")  # type flags offset vaddr paddr filesz memsz align
SYM = struct.Struct("<IBBHQQ")  # name info other shndx value size
PT_LOAD, PT_DYNAMIC, PF_X = 1, 2, 1
DT_STRTAB, DT_SYMTAB = 5, 6


# ---------------------------------------------------------------------------
# Modules and their ELF payloads
# ---------------------------------------------------------------------------


def compile_module(folder: Path, source: str, *flags: str) -> bytes:
    """`source` compiled for llvm-cpu (skips without iree-compile)."""
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile is not installed")
    mlir, vmfb = folder / "source.mlir", folder / "module.vmfb"
    mlir.write_text(source)
    subprocess.run(["iree-compile", *LLVM_CPU, *flags, str(mlir), "-o", str(vmfb)],
                   check=True, capture_output=True)
    return vmfb.read_bytes()


def elf_of(vmfb: bytes) -> bytes:
    """The module's one native executable image."""
    from vmrt.format.module_def import read_module
    images = [bytes(s.data) for s in read_module(vmfb).rodata_segments
              if bytes(s.data[:4]) == b"\x7fELF"]
    assert len(images) == 1, "expected one ELF image in the module"
    return images[0]


def with_elf(vmfb: bytes, image: bytes) -> bytes:
    """The module with its ELF image replaced by `image` (of any length)."""
    from vmrt.format.module_def import read_module, write_module
    module = read_module(vmfb)
    segments = [dataclasses.replace(s, embedded_data=image, external_data=image)
                if bytes(s.data[:4]) == b"\x7fELF" else s for s in module.rodata_segments]
    edited = dataclasses.replace(module, rodata_segments=segments)
    edited._present = module._present  # (which fields the writer emits)
    return write_module(edited)


@pytest.fixture(scope="module")
def add_modules(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("hostile_elf")
    modules = {}
    for name, (_, flags) in FORMATS.items():
        (folder / name).mkdir()
        modules[name] = compile_module(folder / name, ADD, *flags)
    return modules


# ---------------------------------------------------------------------------
# Edits of an ELF image whose tables stay well formed
# ---------------------------------------------------------------------------


def _phdrs(image: bytearray) -> list[tuple[int, tuple]]:
    phoff, phnum = struct.unpack_from("<Q", image, 32)[0], struct.unpack_from("<H", image, 56)[0]
    return [(phoff + i * PHDR.size, PHDR.unpack_from(image, phoff + i * PHDR.size))
            for i in range(phnum)]


def _code_segment(image: bytearray) -> tuple[int, tuple]:
    return next((at, f) for at, f in _phdrs(image) if f[0] == PT_LOAD and f[1] & PF_X)


def _file_offset(image: bytearray, vaddr: int) -> int:
    for _, (p_type, _, offset, start, _, filesz, _, _) in _phdrs(image):
        if p_type == PT_LOAD and start <= vaddr < start + filesz:
            return offset + vaddr - start
    raise LookupError(hex(vaddr))


def _dynamic(image: bytearray, tag: int) -> int:
    fields = next(f for _, f in _phdrs(image) if f[0] == PT_DYNAMIC)
    for at in range(fields[2], fields[2] + fields[5], 16):
        entry_tag, value = struct.unpack_from("<QQ", image, at)
        if entry_tag == tag:
            return value
    raise LookupError(tag)


def move_code_segment(image: bytearray) -> None:
    """The code segment's p_offset moved: by two pages (still page-aligned, still in
    the file, loading other bytes) where the file is long enough, else by 16."""
    at, fields = _code_segment(image)
    offset, filesz = fields[2], fields[5]
    delta = 0x2000 if offset + 0x2000 + filesz <= len(image) else 16
    struct.pack_into("<Q", image, at + 8, offset + delta)


def empty_code_segment(image: bytearray) -> None:
    """p_filesz 0: the code would be all zeros."""
    at, _ = _code_segment(image)
    struct.pack_into("<Q", image, at + 32, 0)


def query_inside_its_function(image: bytearray) -> None:
    """The dynamic symbol of the library query moved 5 bytes into its function."""
    symtab = _file_offset(image, _dynamic(image, DT_SYMTAB))
    strtab = _file_offset(image, _dynamic(image, DT_STRTAB))
    for index in range(1, 64):
        at = symtab + index * SYM.size
        name = SYM.unpack_from(image, at)[0]
        if image[strtab + name:strtab + name + len(QUERY) + 1] == QUERY + b"\0":
            value = struct.unpack_from("<Q", image, at + 8)[0]
            struct.pack_into("<Q", image, at + 8, value + 5)
            return
    raise LookupError("no query symbol")


STRUCTURAL_EDITS = {"moved code segment": move_code_segment,
                    "code segment without file bytes": empty_code_segment,
                    "query inside its function": query_inside_its_function}


def edited(image: bytes, edit) -> bytes:
    data = bytearray(image)
    edit(data)
    return bytes(data)


# ---------------------------------------------------------------------------
# Child processes
# ---------------------------------------------------------------------------


def _child_env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def run_cli(folder: Path, vmfb: bytes) -> subprocess.CompletedProcess:
    path = folder / "case.vmfb"
    path.write_bytes(vmfb)
    return subprocess.run([sys.executable, "-m", "vmrt", "run", f"--module={path}",
                           "--function=add", *ADD_INPUTS], capture_output=True, text=True,
                          env=_child_env(), timeout=300)


HAL_CHILD = """
import sys
from vmrt.errors import HalError
from vmrt.hal import create_device
data = open(sys.argv[1], "rb").read()
device = create_device("local-sync")
try:
    device.create_executable(sys.argv[2], data)
except HalError as error:
    print(error.code.name, error.message)
else:
    print("LOADED")
"""


def run_hal(folder: Path, image: bytes, executable_format: str) -> subprocess.CompletedProcess:
    path = folder / "case.elf"
    path.write_bytes(image)
    return subprocess.run([sys.executable, "-c", HAL_CHILD, str(path), executable_format],
                          capture_output=True, text=True, env=_child_env(), timeout=300)


def assert_cli_refused(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmrt: error: INVALID_ARGUMENT"), lines


def assert_hal_refused(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.startswith("INVALID_ARGUMENT invalid "), result.stdout


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_unedited_modules_run(add_modules, tmp_path, fmt):
    result = run_cli(tmp_path, add_modules[fmt])
    assert result.returncode == 0, result.stderr
    assert "4xf32=2 3 4 5" in result.stdout


@pytest.mark.parametrize("cut", [500, 1000, 4000])
def test_truncated_system_elf_is_refused_by_the_cli(add_modules, tmp_path, cut):
    vmfb = add_modules["system"]
    image = elf_of(vmfb)
    assert cut < len(image)
    assert_cli_refused(run_cli(tmp_path, with_elf(vmfb, image[:cut])))


@pytest.mark.parametrize("cut", [500, 1000, 4000])
def test_truncated_system_elf_is_refused_by_the_hal(add_modules, tmp_path, cut):
    image = elf_of(add_modules["system"])
    assert_hal_refused(run_hal(tmp_path, image[:cut], FORMATS["system"][0]))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("case", sorted(STRUCTURAL_EDITS))
def test_code_not_where_the_tables_say_is_refused(add_modules, tmp_path, fmt, case):
    vmfb = add_modules[fmt]
    image = edited(elf_of(vmfb), STRUCTURAL_EDITS[case])
    assert_cli_refused(run_cli(tmp_path, with_elf(vmfb, image)))
    assert_hal_refused(run_hal(tmp_path, image, FORMATS[fmt][0]))
