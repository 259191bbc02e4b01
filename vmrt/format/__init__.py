"""Reading and writing IREE VM bytecode modules (.vmfb) and their JSON dump.

    read_module(data, *, check=True) -> ModuleDef
    write_module(module_def) -> bytes
    check_module_tables(module_def) -> None
    module_to_json(module_def, *, pretty=False) -> str
"""

from vmrt.format.archive import ArchiveInfo, parse_archive
from vmrt.format.flatbuffer_reader import column
from vmrt.format.flatbuffer_schema import is_vector_present
from vmrt.format.json_dump import module_to_json, table_to_json
from vmrt.format.module_def import (
    BYTECODE_VERSION_MAJOR,
    BYTECODE_VERSION_MINOR,
    FILE_IDENTIFIER,
    AttrDef,
    BytecodeLocationDef,
    BytecodeModuleDef,
    CallSiteLocDef,
    CompressionTypeDef,
    DebugDatabaseDef,
    ExportFunctionDef,
    FeatureBits,
    FileLineColLocDef,
    FunctionDescriptor,
    FunctionSignatureDef,
    FunctionSourceMapDef,
    FusedLocDef,
    ImportFlagBits,
    ImportFunctionDef,
    LocationTypeDef,
    ModuleDef,
    ModuleDependencyDef,
    ModuleDependencyFlagBits,
    ModuleStateDef,
    NameLocDef,
    RodataSegmentDef,
    RwdataSegmentDef,
    TypeDef,
    UncompressedDataDef,
    check_module_tables,
    read_module,
    write_module,
)

__all__ = [
    "ArchiveInfo", "parse_archive", "column", "is_vector_present", "module_to_json", "table_to_json",
    "BYTECODE_VERSION_MAJOR", "BYTECODE_VERSION_MINOR", "FILE_IDENTIFIER",
    "AttrDef", "BytecodeLocationDef", "BytecodeModuleDef", "CallSiteLocDef",
    "CompressionTypeDef", "DebugDatabaseDef", "ExportFunctionDef", "FeatureBits",
    "FileLineColLocDef", "FunctionDescriptor", "FunctionSignatureDef",
    "FunctionSourceMapDef", "FusedLocDef", "ImportFlagBits", "ImportFunctionDef",
    "LocationTypeDef", "ModuleDef", "ModuleDependencyDef", "ModuleDependencyFlagBits",
    "ModuleStateDef", "NameLocDef", "RodataSegmentDef", "RwdataSegmentDef", "TypeDef",
    "UncompressedDataDef", "check_module_tables", "read_module", "write_module",
]
