"""Execution traces in the format of iree-run-module's --trace_execution.

Each executed op (block markers included) is one line, as upstream's
iree_vm_bytecode_trace_disassembly writes it (runtime/src/iree/vm/bytecode/
disassembler.c, format INLINE_VALUES):

    [module.function+0000001F]    %i3 = vm.add.i32 %i1(0), %i0(3)

The function is named by its export, else by the debug database, else
`@ordinal`. (Upstream asks the debug database only, whose entries iree-compile
does not always write by ordinal: examples/scalar.vmfb's holds one, `demo`,
so upstream's label for gcd's ops would be `demo` and for collatz's `@1`.) The
op is its iree-dump-module disassembly with three changes: a block marker is
`<block>`, a branch target is `^` and the block's offset (`^0000001E`), and
every register the op reads is followed by its value in parentheses (i32 and
i64 signed, f32 `%.9g`, f64 `%.17g`, refs `null` or `!type/address`; inside
operand and branch lists `%u` of the low 32 bits, as upstream prints raw
registers). Global loads also show the loaded value, i8/i16 stores the
truncated value, and vm.import.resolved whether the import is resolved.

The IREE 3.13.0 release binaries are built without execution tracing (the
flag is accepted and prints nothing), so the format follows upstream's source.
Where vmrt keeps a value differently from upstream's raw register file the
text can differ: the high register of an i64 pair named on its own in a list
shows what vmrt holds there (vmrt keeps the whole i64 in the low register), a
float in a branch list prints its f32 bits (or the low bits of its f64 bits
when it is not an f32), and a ref's address is a Python object id.
"""

from __future__ import annotations

import struct
import sys

from vmrt.asm.disassembler import ModuleNames, _Printer, _any_name, format_g
from vmrt.asm.syntax import Slot
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import REF_MASK, REF_TYPE_BIT
from vmrt.vm.hooks import ExecutionHooks

_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_GLOBAL_FORMATS = {"i32": "<i", "i64": "<q", "f32": "<f", "f64": "<d"}
_GLOBAL_WIDTHS = {"i32": 4, "i64": 8, "f32": 4, "f64": 8, "ref": 0}
_FLOAT_LIST_KINDS = {"f32": "f", "f64": "F"}


def _ref_text(value) -> str:
    if value is None:
        return "null"
    ref_type = getattr(type(value), "ref_type", None)
    type_name = ref_type.name if ref_type is not None else type(value).__name__
    return f"!{type_name}/0x{id(value):x}"


def _signed_bits(value, bits: int) -> int:
    """An integer register's value; a float in it is read as its bit pattern."""
    if isinstance(value, float):
        packer = _F32 if bits == 32 else _F64
        value = int.from_bytes(packer.pack(value), "little")
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _float(value, bits: int) -> float:
    if isinstance(value, float):
        return value
    value = int(value) & ((1 << bits) - 1)
    return (_F32 if bits == 32 else _F64).unpack(value.to_bytes(bits // 8, "little"))[0]


def register_value_text(bank: str, value) -> str:
    """A register's value as upstream's EMIT_OPTIONAL_VALUE_* prints it."""
    if bank == "ref":
        return _ref_text(value)
    if bank in ("i32", "i64"):
        return str(_signed_bits(value or 0, 32 if bank == "i32" else 64))
    if bank == "f32":
        return format_g(_float(value or 0, 32), 9)
    return format_g(_float(value or 0, 64), 17)


def list_value_text(value, kind: str = "") -> str:
    """A register inside an operand or branch list: upstream prints `%u` of its i32 slot.

    `kind` is the register's cconv type when the list has a signature ('f'/'F'
    tell an f32 from an f64)."""
    if value is None or not isinstance(value, (int, float)):
        return _ref_text(value)
    if isinstance(value, float):
        single = kind == "f" or (kind != "F" and _fits_f32(value))
        bits = int.from_bytes((_F32 if single else _F64).pack(value), "little")
        return str(bits & 0xFFFFFFFF)
    return str(value & 0xFFFFFFFF)


def _fits_f32(value: float) -> bool:
    try:
        return value != value or _F32.unpack(_F32.pack(value))[0] == value
    except OverflowError:
        return False


def _local(register: int) -> str:
    if register & REF_TYPE_BIT:
        return f"r{register & REF_MASK}"
    return f"i{register}"


def _cconv_kinds(fragment: str) -> list[str]:
    """One kind per register of a span-free cconv fragment (i64/f64 pairs count once)."""
    return [c for c in fragment if c in "iIfFr"]


class _TracePrinter(_Printer):
    """The disassembly printer with upstream's trace-time differences."""

    def __init__(self, names: ModuleNames):
        super().__init__(names, {})
        self.registers = {}
        self.list_kinds: list[str] = []

    def block_ref(self, pc: int) -> str:
        return f"^{pc:08X}"

    def register_list(self, registers, kinds=()) -> str:
        parts = []
        for i, register in enumerate(registers):
            kind = kinds[i] if i < len(kinds) else ""
            value = self.registers.get(_local(register))
            parts.append(f"{_any_name(register)}({list_value_text(value, kind)})")
        return ", ".join(parts)

    def remaps(self, pairs) -> str:
        return ", ".join(
            f"{_any_name(s)}({list_value_text(self.registers.get(_local(s)))})->{_any_name(d)}"
            for s, d in pairs)

    def slot(self, slot: Slot, inst, values) -> str:
        text = super().slot(slot, inst, values)
        operand = inst.operands[slot.index]
        kind = slot.kind
        if kind is OperandKind.REGISTER and operand.access == "r":
            value = self.registers.get(_local(values[slot.index]))
            if inst.store_bits and operand.name == "value":
                # Stores of narrow integers show the value as the store truncates it.
                return f"{text}({int(value or 0) & ((1 << inst.store_bits) - 1)})"
            return f"{text}({register_value_text(operand.bank, value)})"
        if kind is OperandKind.VARIADIC_OPERANDS and operand.name != "segment_sizes":
            return self.register_list(values[slot.index], self.list_kinds)
        return text


class TraceFormatter:
    """Renders one executed op of a frame (vmrt.vm.hooks.VMFrame) as a trace line."""

    def __init__(self):
        self._printers: dict[int, tuple] = {}

    def _printer(self, module) -> _TracePrinter:
        entry = self._printers.get(id(module))
        if entry is None or entry[0] is not module:
            entry = self._printers[id(module)] = (module, _TracePrinter(ModuleNames(
                module.definition)))
        return entry[1]

    def function_label(self, frame) -> str:
        module = frame.instance.module
        ordinal = frame.function.ordinal
        names = self._printer(module).names
        name = names.first_export.get(ordinal) or (
            names.debug[ordinal] if ordinal < len(names.debug) else None)
        return f"{module.name}.{name}" if name else f"{module.name}@{ordinal}"

    def format(self, frame, decoded) -> str:
        prefix = f"[{self.function_label(frame)}+{decoded.pc:08X}]    "
        inst = decoded.instruction
        if inst.kind == "marker":
            return prefix + "<block>"
        printer = self._printer(frame.instance.module)
        printer.registers = frame.registers
        printer.list_kinds = self._list_kinds(frame, decoded)
        text = printer.instruction(inst, decoded.values)
        return prefix + self._annotate(frame, decoded, text)

    @staticmethod
    def _list_kinds(frame, decoded) -> list[str]:
        """cconv kinds of the registers in the op's operand list, where known."""
        inst = decoded.instruction
        module = frame.instance.module
        operands = inst.operands
        if inst.is_call and not any(o.name == "segment_sizes" for o in operands):
            target = module.call_target(decoded.values[0])
            return _cconv_kinds(target.arguments)
        if inst.handler == "return":
            return _cconv_kinds(module.verified[frame.function.ordinal].results)
        for operand, value in zip(operands, decoded.values):  # vm.switch.f32/f64
            if operand.kind is OperandKind.VARIADIC_OPERANDS and operand.bank in _FLOAT_LIST_KINDS:
                return [_FLOAT_LIST_KINDS[operand.bank]] * len(value)
        return []

    def _annotate(self, frame, decoded, text: str) -> str:
        """Appends what upstream prints beyond the operands: loaded globals, import state."""
        inst = decoded.instruction
        if inst.handler in ("global", "global_ref") and inst.operands[-1].access == "w":
            bank = inst.operands[-1].bank
            width = _GLOBAL_WIDTHS[bank]
            registers = frame.registers
            values = dict(zip((o.name for o in inst.operands), decoded.values))
            indirect = inst.operands[0].kind is OperandKind.REGISTER
            if bank == "ref":
                index = values["global"]
                if indirect:
                    index = registers.get(_local(index), 0)
                refs = frame.instance.global_refs
                shown = _ref_text(refs[index]) if 0 <= index < len(refs) else "null"
                head, sep, tail = text.rpartition(" : ")
                return f"{head}({shown}){sep}{tail}"
            offset = values["byte_offset"]
            if indirect:
                offset = registers.get(_local(offset), 0)
            data = frame.instance.rwdata
            if 0 <= offset <= len(data) - width:
                loaded = struct.unpack_from(_GLOBAL_FORMATS[bank], data, offset)[0]
                return f"{text}({register_value_text(bank, loaded)})"
            return text
        if inst.handler == "resolved":
            index = decoded.values[0] & 0x7FFFFFFF
            resolved = frame.instance.namespace["RESOLVED"]
            state = "resolved" if index < len(resolved) and resolved[index] else "unresolved"
            return f"{text} // ({state})"
        return text


class Tracer(ExecutionHooks):
    """Writes a trace line per executed op (to stderr by default, as upstream)."""

    def __init__(self, out=None):
        self.out = out
        self.formatter = TraceFormatter()

    def on_instruction(self, frame, decoded) -> None:
        out = self.out if self.out is not None else sys.stderr
        out.write(self.formatter.format(frame, decoded) + "\n")
