"""Benchmark: reading a module with many functions (vmrt.format).

    python benchmarks/format_bench.py [--functions N] [--debug]

Builds a module with N functions (signature, export, descriptor and, with
--debug, a source map per function) with write_module, then times read_module
plus touching every function descriptor and every signature's calling
convention, and the JSON dump.
"""

from __future__ import annotations

import argparse
import time

from vmrt.format import (
    BytecodeLocationDef,
    BytecodeModuleDef,
    DebugDatabaseDef,
    ExportFunctionDef,
    FileLineColLocDef,
    FunctionDescriptor,
    FunctionSignatureDef,
    FunctionSourceMapDef,
    AttrDef,
    TypeDef,
    module_to_json,
    read_module,
    write_module,
)

#: Body of `func @f(%a: i32, %b: i32) -> i32 { return %a * %b }` as compiled.
MUL_BODY = bytes([121, 36, 0, 0, 1, 0, 1, 0, 90, 0, 1, 0, 1, 0])


def build_module(functions: int, debug: bool = False) -> bytes:
    stride = 16
    body = MUL_BODY + bytes(stride - len(MUL_BODY))
    module = BytecodeModuleDef(
        name="many",
        types=[TypeDef(full_name="i32")],
        exported_functions=[ExportFunctionDef(local_name=f"f{i}", internal_ordinal=i)
                            for i in range(functions)],
        function_signatures=[
            FunctionSignatureDef(calling_convention="0ii_i",
                                 attrs=[AttrDef(key="iree.abi.declaration",
                                                value=f"sync func @f{i}(%a: i32, %b: i32)")])
            for i in range(functions)],
        function_descriptors=[
            FunctionDescriptor(bytecode_offset=i * stride, bytecode_length=len(MUL_BODY),
                               block_count=1, i32_register_count=2)
            for i in range(functions)],
        bytecode_version=17 << 16,
        bytecode_data=body * functions,
    )
    if debug:
        module.debug_database = DebugDatabaseDef(
            location_table=[FileLineColLocDef(filename="many.mlir", line=i, column=1)
                            for i in range(functions)],
            functions=[FunctionSourceMapDef(local_name=f"f{i}", locations=[
                BytecodeLocationDef(bytecode_offset=1, location=i),
                BytecodeLocationDef(bytecode_offset=8, location=i)])
                for i in range(functions)])
    return write_module(module)


def read_and_touch(data: bytes) -> float:
    start = time.perf_counter()
    module = read_module(data)
    total = 0
    for descriptor in module.function_descriptors:
        total += descriptor.bytecode_offset + descriptor.i32_register_count
    for signature in module.function_signatures:
        total += len(signature.calling_convention)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--functions", type=int, default=10_000)
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    t0 = time.perf_counter()
    data = build_module(args.functions, args.debug)
    print(f"write_module: {len(data)} bytes in {time.perf_counter() - t0:.3f} s")
    times = [read_and_touch(data) for _ in range(args.repeat)]
    print(f"read_module + touch {args.functions} descriptors/signatures: "
          f"best {min(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms")
    t0 = time.perf_counter()
    module_to_json(read_module(data))
    print(f"module_to_json: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
