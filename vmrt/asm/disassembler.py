"""Module -> vmasm text, in the format of `iree-dump-module --output=disassembly`.

Instructions are printed from their syntax templates (vmrt/asm/syntax.py);
module directives, function headers and block labels as iree-dump-module
prints them. The output is byte-identical to iree-dump-module 3.13.0 except
where iree-dump-module's own output could not be assembled back:

* functions that would get the same name (an export named like another
  function's debug name) are told apart: the exported one keeps the name, so
  the `vm.export` lines are iree-dump-module's, and the other is printed as
  `fnN`; a call whose `@module.name` would not resolve to its callee is
  printed `@module:N`;
* instructions iree-dump-module cannot print (`vm.cast.ui64.f32` stops it with
  "unhandled ext opcode", `vm.switch.ref` is mis-decoded) are printed from the
  ISA table like any other.
"""

from __future__ import annotations

import math

from vmrt.asm.lexer import parse_uint32
from vmrt.asm.syntax import Ignored, Literal, Optional, Remaps, Slot, templates
from vmrt.errors import DisassemblyError, StatusCode
from vmrt.format import ImportFlagBits, read_module
from vmrt.format.function_body import decode_function_body
from vmrt.isa.registers import IMPORT_ORDINAL_BIT
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import I32_MASK, REF_MASK, REF_MOVE_BIT, REF_TYPE_BIT

_CCONV_TYPE_NAMES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "!vm.ref<?>"}


# --------------------------------------------------------------------------
# Scalars as C's printf writes them
# --------------------------------------------------------------------------


def format_g(value: float, digits: int) -> str:
    """printf("%.{digits}g") including glibc's inf/nan spellings."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return "%.*g" % (digits, value)


def _i32_name(reg: int) -> str:
    return f"%i{reg & I32_MASK}"


def _i64_name(reg: int) -> str:
    n = reg & I32_MASK
    return f"%i{n}:{n + 1}"


def _ref_name(reg: int, with_move: bool) -> str:
    if with_move and reg & REF_MOVE_BIT:
        return f"%R{reg & REF_MASK}"
    return f"%r{reg & REF_MASK}"


def _any_name(reg: int) -> str:
    """A register of a list or remap: its own ref bit decides (upstream's EMIT_REG_NAME)."""
    if reg & REF_TYPE_BIT:
        return _ref_name(reg, True)
    return _i32_name(reg)


# --------------------------------------------------------------------------
# Naming: functions, types
# --------------------------------------------------------------------------


class ModuleNames:
    """Function, import and type names as iree-dump-module derives them. With
    `as_upstream`, exactly as it prints them, though two functions may then share a
    name (an export and another function's debug name: mlp.vmfb's two `__init`s);
    otherwise such a second function is `fnN`, so the text assembles again."""

    def __init__(self, module, as_upstream: bool = False):
        self.module = module
        self.as_upstream = as_upstream
        self.name = module.name or ""
        n = len(module.function_descriptors)
        exports = [(e.local_name, e.internal_ordinal) for e in module.exported_functions]
        self.exports = exports
        self.debug = [None] * n
        database = module.debug_database
        if database is not None:
            for i, source_map in enumerate(database.functions[:n]):
                if source_map is not None and source_map.local_name:
                    self.debug[i] = source_map.local_name
        first_export = {}
        for local_name, ordinal in exports:
            first_export.setdefault(ordinal, local_name)
        self.first_export = first_export
        self.imports = [imp.full_name or "" for imp in module.imported_functions]
        self.types = [t.full_name if t is not None else None for t in module.types]
        upstream = [first_export.get(i) or self.debug[i] or f"fn{i}" for i in range(n)]
        self.function = upstream if as_upstream else self._disambiguate(upstream)
        self._call_names = [self._call_name(i) for i in range(n)]

    def _disambiguate(self, names: list[str]) -> list[str]:
        taken: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            taken.setdefault(name, []).append(i)
        if all(len(v) == 1 for v in taken.values()):
            return names
        out = list(names)
        used = set(names)
        for name, owners in taken.items():
            if len(owners) == 1:
                continue
            # The export keeps its name: `vm.export @E` reads as upstream prints it.
            keep = next((i for i in owners if self.first_export.get(i) == name), owners[0])
            for i in owners:
                if i == keep:
                    continue
                fresh, k = f"fn{i}", 0
                while fresh in used:
                    k += 1
                    fresh = f"fn{i}_{k}"
                used.add(fresh)
                out[i] = fresh
        return out

    def _call_name(self, ordinal: int) -> str:
        """`module.name` as upstream prints calls, unless that would not lead back here."""
        debug = self.debug[ordinal]
        if debug:
            qualified = f"{self.name}.{debug}"
            if self.as_upstream or (qualified not in self.imports and
                                    self._resolve(debug) == ordinal):
                return qualified
        return f"{self.name}:{ordinal}"

    def _resolve(self, name: str) -> int | None:
        """The function an assembler finds for `@module.name`: the first so named."""
        try:
            return self.function.index(name)
        except ValueError:
            return None

    def callee(self, ordinal: int) -> str:
        if ordinal & IMPORT_ORDINAL_BIT:
            k = ordinal & ~IMPORT_ORDINAL_BIT
            if k < len(self.imports) and self.imports[k]:
                return self.imports[k]
            return f"import:{k}"
        if ordinal < len(self._call_names):
            return self._call_names[ordinal]
        return f"{self.name}:{ordinal}"

    def type_name(self, type_id: int) -> str:
        if type_id < len(self.types) and self.types[type_id]:
            return self.types[type_id]
        return "*"

    def rodata_size(self, ordinal: int) -> int:
        segments = self.module.rodata_segments
        if ordinal < len(segments) and segments[ordinal] is not None:
            return len(segments[ordinal].data)
        return 0


# --------------------------------------------------------------------------
# Instructions
# --------------------------------------------------------------------------


class _Printer:
    def __init__(self, names: ModuleNames, blocks: dict[int, int]):
        self.names = names
        self.blocks = blocks

    def block_ref(self, pc: int) -> str:
        ordinal = self.blocks.get(pc)
        if ordinal is None:
            raise DisassemblyError(f"block target {pc:08X} is not defined")
        return f"^bb{ordinal}"

    def remaps(self, pairs) -> str:
        return ", ".join(f"{_any_name(s)}->{_any_name(d)}" for s, d in pairs)

    def slot(self, slot: Slot, inst, values) -> str:
        value = values[slot.index]
        kind = slot.kind
        operand = inst.operands[slot.index]
        if kind is OperandKind.REGISTER:
            bank = operand.bank
            if bank == "ref":
                return _ref_name(value, operand.move and slot.modifier != "nomove")
            if bank in ("i64", "f64"):
                return _i64_name(value)
            return _i32_name(value)
        if kind is OperandKind.ATTRIBUTE:
            t = operand.type
            if slot.modifier == "hex":
                if t == "i64":
                    return "0x%016X" % (value & 0xFFFFFFFFFFFFFFFF)
                return "0x%08X" % (value & 0xFFFFFFFF)
            if t == "f32":
                return format_g(value, 9)
            if t == "f64":
                return format_g(value, 17)
            return str(value)
        if kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
            if operand.bank == "i32" and operand.name == "segment_sizes":
                return ", ".join(str(v) for v in value)
            return ", ".join(_any_name(v) for v in value)
        if kind is OperandKind.GLOBAL_ATTR:
            if _global_is_ref(inst, slot.index):
                return f".refs[{value}]"
            return f".rwdata[{value}]"
        if kind is OperandKind.FUNC_ATTR:
            return "@" + self.names.callee(value)
        if kind is OperandKind.RODATA_ATTR:
            if slot.modifier == "size":
                return str(self.names.rodata_size(value))
            return str(value)
        if kind is OperandKind.TYPE_OF:
            return self.names.type_name(value)
        if kind is OperandKind.STRING_ATTR:
            return '"' + bytes(value).decode("utf-8", "surrogateescape") + '"'
        if kind is OperandKind.BRANCH_TARGET:
            return self.block_ref(value)
        if kind is OperandKind.BRANCH_OPERANDS:
            return self.remaps(value)
        if kind is OperandKind.BRANCH_TABLE_CASES:
            return "".join(f", {i}: {self.block_ref(target)}({self.remaps(pairs)})"
                           for i, (target, pairs) in enumerate(value))
        raise AssertionError(kind)  # pragma: no cover

    def pieces(self, pieces, inst, values, out: list) -> None:
        for piece in pieces:
            if isinstance(piece, Literal):
                out.append(piece.text)
            elif isinstance(piece, Slot):
                out.append(self.slot(piece, inst, values))
            elif isinstance(piece, Remaps):
                out.append("(" + self.slot(piece.slot, inst, values) + ")")
            elif isinstance(piece, Optional):
                if _group_present(piece.pieces, values):
                    self.pieces(piece.pieces, inst, values, out)
            elif isinstance(piece, Ignored):
                out.append(piece.text)

    def instruction(self, inst, values) -> str:
        template = templates(inst)[0]
        out: list[str] = []
        if template.result is not None:
            value = values[template.result.index]
            if not template.result_optional or value:
                out.append(self.slot(template.result, inst, values))
                out.append(" = ")
        out.append(inst.vm_name)
        self.pieces(template.pieces, inst, values, out)
        self.pieces(template.comment, inst, values, out)
        return "".join(out)


def _group_present(pieces, values) -> bool:
    for piece in pieces:
        if isinstance(piece, Slot):
            value = values[piece.index]
            if isinstance(value, (tuple, list)) and not value:
                return False
    return True


def _global_is_ref(inst, index: int) -> bool:
    """A global operand addresses refs when the register it moves is a ref."""
    for operand in inst.operands[index + 1:]:
        if operand.kind is OperandKind.REGISTER:
            return operand.bank == "ref"
    return False


# --------------------------------------------------------------------------
# Functions and the module
# --------------------------------------------------------------------------


def _signature(cconv: str | None) -> str:
    arguments, results = "", ""
    if cconv:
        if cconv[0] != "0":
            raise DisassemblyError(f"unsupported cconv version {cconv[0]}",
                                   StatusCode.UNIMPLEMENTED)
        arguments, sep, results = cconv[1:].partition("_")
        if arguments == "v":
            arguments = ""
        if results == "v":
            results = ""
    args = []
    i32 = ref = 0
    for c in arguments:
        if c == "v":
            continue
        if c in "if":
            args.append(f"%i{i32}: {_CCONV_TYPE_NAMES[c]}")
            i32 += 1
        elif c in "IF":
            args.append(f"%i{i32}:{i32 + 1}: {_CCONV_TYPE_NAMES[c]}")
            i32 += 2
        elif c == "r":
            args.append(f"%r{ref}: !vm.ref<?>")
            ref += 1
        else:
            raise DisassemblyError(f"unsupported cconv argument type '{c}'",
                                   StatusCode.UNIMPLEMENTED)
    res = []
    for c in results:
        if c == "v":
            continue
        if c not in _CCONV_TYPE_NAMES:
            raise DisassemblyError(f"unsupported cconv type '{c}'", StatusCode.UNIMPLEMENTED)
        res.append(_CCONV_TYPE_NAMES[c])
    return f"({', '.join(args)}) -> ({', '.join(res)})"


def _function_body(module, names: ModuleNames, ordinal: int, bytecode_offsets: bool,
                   out: list[str]) -> None:
    decoded = decode_function_body(module, ordinal)
    blocks = {}
    for d in decoded:
        if d.instruction.kind == "marker":
            blocks[d.pc] = len(blocks)
    printer = _Printer(names, blocks)
    for d in decoded:
        is_block = d.instruction.kind == "marker"
        indent = "" if is_block else "  "
        if bytecode_offsets:
            out.append(f"[{d.pc:08X}]{indent}")
        else:
            out.append(indent)
        if is_block:
            out.append(f"^bb{blocks[d.pc]}:")
        else:
            out.append(printer.instruction(d.instruction, d.values))
        out.append("\n")


def _module_directives(module, out: list[str]) -> None:
    any_directive = False
    for type_def in module.types:
        if type_def is not None and type_def.full_name:
            out.append(f"vm.type {type_def.full_name}\n")
    any_directive = len(module.types) > 0
    for imp in module.imported_functions:
        optional = "optional " if imp.flags & ImportFlagBits.OPTIONAL else ""
        cconv = ""
        if imp.signature is not None and imp.signature.calling_convention is not None:
            cconv = imp.signature.calling_convention
        out.append(f"vm.import {optional}@{imp.full_name} cconv \"{cconv}\"\n")
    any_directive = any_directive or len(module.imported_functions) > 0
    for i, segment in enumerate(module.rodata_segments):
        out.append(f"vm.rodata[{i}] = {bytes(segment.data).hex().upper()}\n")
    any_directive = any_directive or len(module.rodata_segments) > 0
    if any_directive:
        out.append("\n")


def _top_level_spacing(out: list[str]) -> None:
    text = "".join(out[-2:]) if out else ""
    if not out:
        return
    if text.endswith("\n\n"):
        return
    out.append("\n" if text.endswith("\n") else "\n\n")


def disassemble_module(module, function: str | None = None, bytecode_offsets: bool = False,
                       as_upstream: bool = False) -> str:
    """The module as vmasm text; `function` filters by name or internal ordinal;
    `as_upstream` names functions exactly as iree-dump-module does (ModuleNames)."""
    names = ModuleNames(module, as_upstream)
    out: list[str] = [f"vm.module @{names.name} version {module.version}\n"]
    _module_directives(module, out)
    filter_ordinal = None
    if function is not None and function != "":
        filter_ordinal = parse_uint32(function)
    signatures = module.function_signatures
    for i in range(len(module.function_descriptors)):
        upstream_name = (names.first_export.get(i) or names.debug[i] or f"fn{i}")
        name = names.function[i]
        if function:
            if filter_ordinal is not None:
                if i != filter_ordinal:
                    continue
            elif function not in (name, upstream_name):
                continue
        _top_level_spacing(out)
        for local_name, ordinal in names.exports:
            if ordinal != i:
                continue
            if local_name == name:
                out.append(f"vm.export @{local_name}\n")
            else:
                out.append(f"vm.export @{local_name} = @{name}\n")
        signature = signatures[i] if i < len(signatures) else None
        cconv = signature.calling_convention if signature is not None else None
        out.append(f"vm.func @{name}{_signature(cconv)} {{\n")
        _function_body(module, names, i, bytecode_offsets, out)
        out.append("}\n")
    return "".join(out)


def disassemble(module, function: str | None = None, bytecode_offsets: bool = False,
                as_upstream: bool = False) -> str:
    """vmasm text for a module (a ModuleDef, bytes, or a path to a .vmfb)."""
    if not hasattr(module, "function_descriptors"):
        module = read_module(module)
    return disassemble_module(module, function, bytecode_offsets, as_upstream)
