"""Fixtures for vmrt.format tests: a format_corpus of modules compiled by IREE's tools.

Every source below is written for these tests.  Modules are compiled once per
session into a temporary directory; tests needing the tools skip (with the
reason) when they are missing.  ``built_module`` needs no tools.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vmrt.format import (
    AttrDef,
    BytecodeLocationDef,
    BytecodeModuleDef,
    CallSiteLocDef,
    DebugDatabaseDef,
    ExportFunctionDef,
    FileLineColLocDef,
    FunctionDescriptor,
    FunctionSignatureDef,
    FunctionSourceMapDef,
    FusedLocDef,
    ImportFunctionDef,
    ModuleDependencyDef,
    ModuleStateDef,
    NameLocDef,
    RodataSegmentDef,
    RwdataSegmentDef,
    TypeDef,
    UncompressedDataDef,
    write_module,
)

MLIR_SOURCES = {
    # A scalar function: no HAL, runs in iree.runtime without devices.
    "mul": """
func.func @mul(%a: i32, %b: i32) -> i32 {
  %0 = arith.muli %a, %b : i32
  return %0 : i32
}
""",
    # A HAL program: imports, dependencies, an external (mime-typed) rodata
    # executable, globals, debug locations.
    "tensor_add": """
func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
""",
    "branchy": """
func.func @select(%c: i1, %a: i64, %b: i64) -> i64 {
  cf.cond_br %c, ^t, ^f
^t:
  return %a : i64
^f:
  %0 = arith.subi %b, %a : i64
  return %0 : i64
}
func.func @twice(%a: f32) -> f32 {
  %0 = arith.addf %a, %a : f32
  return %0 : f32
}
""",
}

#: VM dialect input (iree-compile --compile-from=vm): module attrs and version,
#: optional import (so an optional dependency), globals, mime-typed and large
#: rodata (external), an aligned embedded rodata, fused and named locations,
#: strings that need JSON escaping.
VM_SOURCES = {
    "rich": r'''
"vm.module"() <{sym_name = "rich", version = 3 : i32}> ({
  vm.import private optional @opt_dep.maybe(%a : i32) -> i32
  vm.import private @other.thing() -> !vm.ref<?>
  vm.global.i32 private mutable @g0 : i32
  vm.global.i64 private mutable @g1 : i64
  vm.global.ref private mutable @gr : !vm.buffer
  "vm.rodata"() <{sym_visibility = "private", sym_name = "blob", mime_type = "text/plain", value = dense<[1, 2, 3, 4]> : tensor<4xi8>}> : () -> ()
  vm.rodata private @big dense<7> : tensor<5000xi8>
  "vm.rodata"() <{sym_visibility = "private", sym_name = "small", alignment = 64 : i64, value = dense<[5, 6]> : tensor<2xi32>}> : () -> ()
  vm.func @fn(%arg0 : i32) -> i32 attributes {iree.reflection = {"iree.abi.declaration" = "\01ctl\C3\A9\7F", "k2" = 7 : i32}} {
    %c = vm.const.i32 3 loc(fused<"meta">["a.mlir":1:2, "b.mlir":3:4])
    %0 = vm.mul.i32 %arg0, %c : i32 loc("named"("x.mlir":9:9))
    vm.global.store.i32 %0, @g0 : i32
    %b = vm.const.ref.rodata @blob : !vm.buffer
    %b2 = vm.const.ref.rodata @big : !vm.buffer
    %b3 = vm.const.ref.rodata @small : !vm.buffer
    vm.global.store.ref %b, @gr : !vm.buffer
    vm.return %0 : i32
  }
  vm.export @fn as("renamed_fn")
  vm.export @fn
  vm.module_terminator
}) {iree.reflection = {"some.key" = "va\"l\\ue\n\t", "num" = 42 : i32}} : () -> ()
''',
}

#: Textual VM assembly (iree-as-module): no debug database, rodata, globals,
#: an optional import, aliases.
VMASM_SOURCES = {
    "asm_basic": """vm.module @asm_basic version 2
vm.type i32
vm.type !vm.buffer
vm.rodata[0] = 0A0B0C
vm.rodata[1] = 00112233445566778899
vm.import optional @ext.probe cconv "0i_i"
vm.global.i32 private mutable @counter
vm.export @add
vm.export @plus = @add
vm.func @add(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i0 = vm.add.i32 %i0, %i1
  vm.return %i0
}
vm.export @pick
vm.func @pick(%i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  vm.cond_br %i0, ^bb1(), ^bb2()
^bb1:
  vm.return %i1
^bb2:
  vm.return %i2
}
""",
}


def _tool(name: str) -> str | None:
    return shutil.which(name)


@pytest.fixture(scope="session")
def tools_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("format_corpus")


def _compile_all(out: Path) -> dict[str, Path]:
    compiled: dict[str, Path] = {}
    compiler = _tool("iree-compile")
    assembler = _tool("iree-as-module")
    if compiler:
        for name, text in MLIR_SOURCES.items():
            src = out / f"{name}.mlir"
            src.write_text(text)
            dst = out / f"{name}.vmfb"
            subprocess.run([compiler, "--iree-hal-target-device=local",
                            "--iree-hal-local-target-device-backends=vmvx", str(src),
                            "-o", str(dst)], check=True, cwd=out)
            compiled[name] = dst
        for name, text in VM_SOURCES.items():
            src = out / f"{name}.mlir"
            src.write_text(text)
            dst = out / f"{name}.vmfb"
            subprocess.run([compiler, "--compile-from=vm", str(src), "-o", str(dst)],
                           check=True, cwd=out)
            compiled[name] = dst
        # The same scalar program without the polyglot ZIP header.
        src = out / "mul.mlir"
        dst = out / "mul_nozip.vmfb"
        subprocess.run([compiler, "--iree-hal-target-device=local",
                        "--iree-hal-local-target-device-backends=vmvx",
                        "--iree-vm-emit-polyglot-zip=false", str(src), "-o", str(dst)],
                       check=True, cwd=out)
        compiled["mul_nozip"] = dst
    if assembler:
        for name, text in VMASM_SOURCES.items():
            src = out / f"{name}.vmasm"
            src.write_text(text)
            dst = out / f"{name}.vmfb"
            subprocess.run([assembler, f"--output={dst}", str(src)], check=True)
            compiled[name] = dst
    return compiled


@pytest.fixture(scope="session")
def maybe_corpus(tools_dir) -> dict[str, Path]:
    """Compiled modules by name, or {} when IREE's tools are not installed."""
    if not _tool("iree-compile") or not _tool("iree-as-module"):
        return {}
    return _compile_all(tools_dir)


@pytest.fixture(scope="session")
def format_corpus(maybe_corpus) -> dict[str, Path]:
    """Compiled modules by name; skips when IREE's tools are not installed."""
    if not maybe_corpus:
        pytest.skip("iree-compile / iree-as-module not installed (pip install "
                    "iree-base-compiler==3.13.0)")
    return maybe_corpus


@pytest.fixture(scope="session")
def dump_module():
    """Runs iree-dump-module; returns (returncode, stdout bytes, stderr text)."""
    tool = _tool("iree-dump-module")
    if not tool:
        pytest.skip("iree-dump-module not installed (pip install iree-base-compiler)")

    def run(path, *flags):
        r = subprocess.run([tool, *flags, str(path)], capture_output=True)
        return r.returncode, r.stdout, r.stderr.decode(errors="replace")

    return run


def make_built_module() -> BytecodeModuleDef:
    """A module built from Python objects: every table kind, no tools needed."""
    body = bytes([121, 36, 0, 0, 1, 0, 1, 0, 90, 0, 1, 0, 1, 0])  # i32 mul
    return BytecodeModuleDef(
        name="built",
        version=7,
        requirements=0,
        attrs=[AttrDef(key="k", value="v\u00e9\n")],
        types=[TypeDef(full_name="i32"), TypeDef(full_name="!vm.buffer")],
        dependencies=[ModuleDependencyDef(name="dep", minimum_version=2, flags=2)],
        imported_functions=[ImportFunctionDef(
            full_name="dep.fn", signature=FunctionSignatureDef(calling_convention="0i_i"),
            flags=2)],
        exported_functions=[ExportFunctionDef(local_name="mul", internal_ordinal=0),
                            ExportFunctionDef(local_name="times", internal_ordinal=0)],
        function_signatures=[FunctionSignatureDef(
            calling_convention="0ii_i", attrs=[AttrDef(key="a", value="b")])],
        rodata_segments=[
            RodataSegmentDef(embedded_data=b"\x01\x02\x03"),
            RodataSegmentDef(external=True, external_data=bytes(range(100))),
            RodataSegmentDef(compression_type=UncompressedDataDef(), embedded_data=b"zz"),
        ],
        rwdata_segments=[RwdataSegmentDef(byte_size=16)],
        module_state=ModuleStateDef(global_bytes_capacity=8, global_ref_count=1),
        function_descriptors=[FunctionDescriptor(
            bytecode_offset=0, bytecode_length=len(body), requirements=0, reserved=0,
            block_count=1, i32_register_count=2, ref_register_count=0)],
        bytecode_version=17 << 16,
        bytecode_data=body + bytes(2),
        debug_database=DebugDatabaseDef(
            location_table=[
                FileLineColLocDef(filename="a.mlir", line=1, column=2),
                None,
                CallSiteLocDef(callee=0, caller=0),
                FusedLocDef(metadata="m", locations=[0, 2]),
                NameLocDef(name="n", child_location=0),
            ],
            functions=[FunctionSourceMapDef(local_name="mul", locations=[
                BytecodeLocationDef(bytecode_offset=1, location=0),
                BytecodeLocationDef(bytecode_offset=8, location=4)])],
        ),
    )


@pytest.fixture(scope="session")
def built_bytes() -> bytes:
    return write_module(make_built_module())
