"""Print a module's metadata, disassembly or FlatBuffer (as iree-dump-module does).

    vmrt dump MODULE [--output=metadata|disassembly|all|flatbuffer-json|flatbuffer-binary]
                     [--pretty] [--function=F] [--bytecode_offsets] [--no_verify]

`--output` takes iree-dump-module's values: `metadata`, `disassembly`
(iree-dump-module's text, function names included; `--function` and
`--bytecode_offsets` apply to it), `all` (the default, as iree-dump-module's:
metadata, a blank line, disassembly), `flatbuffer-json` (`--pretty` indents it) and
`flatbuffer-binary` (the FlatBuffer's bytes). `--format=text|json`, the older
spelling of `--output=metadata|flatbuffer-json`, is still accepted.
The module is verified first (use --no_verify to dump modules whose bytecode
is invalid but whose tables read).
"""

from __future__ import annotations

import sys

from vmrt.format import is_vector_present, module_to_json, read_module
from vmrt.tools.disasm import add_disassembly_flags, write_disassembly
from vmrt.tools.flags import add_flag
from vmrt.vm import cconv as cconv_mod

RULE = "//===" + "-" * 110 + "===//"
FEATURE_EXT_F32 = 1 << 0
FEATURE_EXT_F64 = 1 << 1
#: sizeof(iree_vm_ref_t) on 64-bit hosts, which iree-dump-module counts per ref global.
REF_SIZE = 16
_TYPE_NAMES = {"i": "i32", "f": "f32", "I": "i64", "F": "f64", "r": "!vm.ref<?>"}
OUTPUTS = ("metadata", "disassembly", "all", "flatbuffer-json", "flatbuffer-binary")
def add_arguments(parser) -> None:
    parser.add_argument("module", help="a .vmfb file")
    parser.add_argument("--output", choices=OUTPUTS, default="all",
                        help="what to print (default all, as iree-dump-module)")
    parser.add_argument("--pretty", action="store_true", help="indent JSON output")
    add_disassembly_flags(parser)
    add_flag(parser, "--no_verify", hidden=("--no-verify",), action="store_true",
             help="skip bytecode verification")


def run(args) -> int:
    module = read_module(args.module)
    if not args.no_verify:
        from vmrt.vm.verifier import verify_module
        verify_module(module)
    if args.output == "flatbuffer-binary":
        sys.stdout.flush()
        sys.stdout.buffer.write(flatbuffer_bytes(args.module, module.archive))
    elif args.output == "flatbuffer-json":
        # No trailing newline: byte-identical to iree-dump-module's output.
        sys.stdout.write(module_to_json(module, pretty=args.pretty))
    elif args.output in ("metadata", "all"):
        sys.stdout.write(format_metadata(module))
    if args.output == "all":
        sys.stdout.write("\n")
    if args.output in ("disassembly", "all"):
        write_disassembly(module, args, as_upstream=True)
    sys.stdout.flush()
    return 0


def flatbuffer_bytes(path: str, archive) -> bytes:
    """The FlatBuffer of the module file at `path` (without its size prefix)."""
    with open(path, "rb") as file:
        file.seek(archive.flatbuffer_offset)
        return file.read(archive.flatbuffer_length)


# -- text form ------------------------------------------------------------------------------
def section_header(title: str) -> str:
    return f"{RULE}\n// {title}\n{RULE}\n"


def format_feature_bits(bits: int) -> str:
    """Names for the float extensions; every other bit as one hex word, as upstream."""
    parts = []
    if bits & FEATURE_EXT_F32:
        parts.append("EXT_F32")
        bits &= ~FEATURE_EXT_F32
    if bits & FEATURE_EXT_F64:
        parts.append("EXT_F64")
        bits &= ~FEATURE_EXT_F64
    if bits:
        parts.append(f"{bits:08X}")
    return " | ".join(parts)


def format_cconv_fragment(fragment: str) -> str:
    out = []
    i = 0
    while i < len(fragment):
        if i > 0:
            out.append(", ")
        ch = fragment[i]
        if ch == "C":
            end = fragment.find("D", i + 1)
            if end < 0:
                out.append("<unterminated span>")
                break
            out.append("tuple<" + format_cconv_fragment(fragment[i + 1:end]) + ">...")
            i = end
        elif ch in _TYPE_NAMES:
            out.append(_TYPE_NAMES[ch])
        elif ch != "v":
            out.append(f"<{ch}?>")
        i += 1
    return "".join(out)


def format_cconv(calling_convention: str) -> str:
    try:
        arguments, results = cconv_mod.split_fragments(calling_convention)
    except Exception:  # an unknown cconv version: show it verbatim
        return f"<cconv {calling_convention!r}>"
    return f"({format_cconv_fragment(arguments)}) -> ({format_cconv_fragment(results)})"


def _attrs(attrs, indent: int) -> list[str]:
    return [" " * indent + f"{a.key}: {a.value}" for a in attrs or ()]


def _printable_prefix(data) -> int | None:
    """Length of the leading C string if every byte of it is printable, else None."""
    raw = bytes(data)
    end = raw.find(0)
    if end < 0:
        end = len(raw)
    if all(0x20 <= b < 0x7F for b in raw[:end]):
        return end
    return None


def format_metadata(module) -> str:
    """The metadata listing iree-dump-module prints: header, imports and exports,
    sections, the function table and the debug summary."""
    lines: list[str] = []
    for section in (_header_lines, _import_lines, _export_lines, _section_lines,
                    _function_table_lines, _debug_lines):
        lines.extend(section(module))
    return "\n".join(lines) + "\n"


def _header_lines(module) -> list[str]:
    lines = [section_header(f"@{module.name} : version {module.version}")]
    if module.requirements:
        lines.append(f"Requirements: {format_feature_bits(module.requirements)}\n")
    if is_vector_present(module, "attrs"):
        lines += ["Attributes:", *_attrs(module.attrs, 2), ""]
    if is_vector_present(module, "types"):
        lines.append("Required Types:")
        lines += [f"  [{i:3d}] {type_def.full_name}" for i, type_def in enumerate(module.types)]
        lines.append("")
    if is_vector_present(module, "dependencies"):
        lines.append("Module Dependencies:")
        for dep in module.dependencies:
            kind = "optional" if dep.flags & 2 else "required"
            lines.append(f"  {dep.name}, version >= {dep.minimum_version}, {kind}")
        lines.append("")
    return lines


def _function_lines(index: int, name: str, signature) -> list[str]:
    """One imported or exported function: `[  i] name(cconv)` and its attributes."""
    cconv = ""
    if signature is not None and signature.calling_convention is not None:
        cconv = format_cconv(signature.calling_convention)
    lines = [f"  [{index:3d}] {name}{cconv}"]
    if signature is not None:
        lines += _attrs(signature.attrs, 8)
    return lines


def _import_lines(module) -> list[str]:
    if not is_vector_present(module, "imported_functions"):
        return []
    lines = ["Imported Functions:"]
    for i, import_def in enumerate(module.imported_functions):
        optional = "?" if import_def.flags & 2 else ""
        lines += _function_lines(i, optional + import_def.full_name, import_def.signature)
    return lines + [""]


def _export_lines(module) -> list[str]:
    if not is_vector_present(module, "exported_functions"):
        return []
    lines = ["Exported Functions:"]
    signatures = module.function_signatures
    for i, export in enumerate(module.exported_functions):
        signature = signatures[export.internal_ordinal] \
            if 0 <= export.internal_ordinal < len(signatures) else None
        lines += _function_lines(i, export.local_name, signature)
    return lines + [""]


def _section_lines(module) -> list[str]:
    lines = [section_header("Sections")]
    state = module.module_state
    if state is not None:
        total = state.global_bytes_capacity + REF_SIZE * state.global_ref_count
        lines += ["Module State:", f"  {state.global_bytes_capacity} bytes, "
                  f"{state.global_ref_count} refs, ~{total} bytes total\n"]
    lines.append(f"FlatBuffer: {module.archive.flatbuffer_length} bytes")
    if is_vector_present(module, "bytecode_data"):
        lines.append(f"  Bytecode: {len(module.bytecode_data)} bytes")
    external_size = 0
    for i, segment in enumerate(module.rodata_segments):
        lines.append(_rodata_line(i, segment))
        if not is_vector_present(segment, "embedded_data"):
            external_size += segment.external_data_length
    lines += [f"  .rwdata[{i:3d}] {segment.byte_size} bytes"
              for i, segment in enumerate(module.rwdata_segments)]
    lines.append("")
    if external_size:
        lines.append(f"External .rodata: ~{external_size} bytes\n")
    return lines


def _rodata_line(index: int, segment) -> str:
    prefix = f"  .rodata[{index:3d}] "
    if segment.compression_type is not None:
        prefix += "uncompressed "
    if not is_vector_present(segment, "embedded_data"):
        offset, length = segment.external_data_offset, segment.external_data_length
        return (f"{prefix}external {length:8d} bytes (offset {offset} / {offset:X}h to "
                f"{offset + length:X}h)")
    data = segment.embedded_data
    text = f"{prefix}embedded {len(data):8d} bytes"
    length = _printable_prefix(data)
    if length is not None:
        shown = bytes(data[:min(32, length)]).decode("ascii")
        text += f" `{shown}`" + ("..." if length >= 32 else "")
    return text


def _function_table_lines(module) -> list[str]:
    lines = [section_header(f"Bytecode : version {module.version}")]
    if is_vector_present(module, "function_descriptors"):
        lines.append("  # | Offset   |   Length | Blocks | i32 # | ref # | Requirements | "
                     "Aliases")
        lines.append("----+----------+----------+--------+-------+-------+--------------+-"
                     + "-" * 52)
        aliases: dict[int, list[str]] = {}
        for export in module.exported_functions:
            aliases.setdefault(export.internal_ordinal, []).append(export.local_name)
        for i, d in enumerate(module.function_descriptors):
            bits = format_feature_bits(d.requirements)
            lines.append(
                f"{i:3d} | {d.bytecode_offset & 0xFFFFFFFF:08X} | {d.bytecode_length:8d} | "
                f"{d.block_count:6d} | {d.i32_register_count:5d} | {d.ref_register_count:5d} | "
                f"{bits:<12} | {', '.join(aliases.get(i, []))}")
    return lines + [""]


def _debug_lines(module) -> list[str]:
    debug = module.debug_database
    if debug is None:
        return []
    return [section_header("Debug Information").rstrip("\n"),
            "// NOTE: debug databases are large and should be stripped in deployed "
            "artifacts.\n", f"Locations: {len(debug.location_table)}", ""]
