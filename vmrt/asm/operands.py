"""Operand text -> encoded values for the assembler: registers and register lists,
attributes, types, and function, global and label references resolved once their
addresses are known (a part of vmrt.asm.assembler.Assembler)."""

from __future__ import annotations

import re

from vmrt.asm.lexer import parse_f32, parse_f64, parse_int32, parse_int64, parse_uint32
from vmrt.asm.matching import LIST_CACHES, PLANS_BY_SYMBOL
from vmrt.asm.state import (
    Function, LineError, MAX_I32_ORDINAL, MAX_REF_ORDINAL, Pending, STORAGE_SIZES,
)
from vmrt.asm.syntax import Slot
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import IMPORT_ORDINAL_BIT, encode_ref

_REGISTER = re.compile(r"%([irR])(\w+)(?::(\w+))?$")


class OperandReader:
    """Turns the operand text of an instruction into its encoded values."""


    def resolve(self, function: Function, pending: Pending, module_level: bool) -> None:
        """Fills in addresses; re-encodes the instruction once all are known."""
        unresolved = []
        values = pending.values
        for ref in pending.refs:
            kind, index, case, name, line, offset, extra = ref
            if kind == "label":
                pc = function.labels.get(name)
                if pc is None:
                    self.error(offset, f"undefined block label ^{name}", line=line)
                    continue
                if case is None:
                    values[index] = pc
                else:
                    cases = list(values[index])
                    cases[case] = (pc, cases[case][1])
                    values[index] = tuple(cases)
            elif not module_level:
                unresolved.append(ref)
            elif kind == "func_ordinal":
                if name >= len(self.functions):
                    self.error(offset, f"function ordinal {name} is out of range "
                                       f"({len(self.functions)} functions)", line=line)
            elif kind == "func":
                ordinal = self.function_index.get(name)
                if ordinal is None:
                    self.error(offset, f"unknown function @{name}", line=line)
                    continue
                values[index] = ordinal
            elif kind == "global":
                g = self.global_index.get(name)
                if g is None:
                    self.error(offset, f"unknown global @{name}", line=line)
                    continue
                if g.size != extra:
                    self.error(offset, f"global @{name} has the wrong storage class for "
                                       f"{pending.inst.vm_name}", line=line)
                    continue
                values[index] = g.ordinal
        if unresolved:
            pending.refs = unresolved
            self.module_pending.append((function, pending))
            return
        data = PLANS_BY_SYMBOL[pending.inst.symbol].encode(values, pending.pc)
        function.data[pending.pc:pending.pc + len(data)] = data

    # -- operands ----------------------------------------------------------------
    def convert(self, slot: Slot, text: str, at: int, inst, refs: list):
        operand = inst.operands[slot.index]
        kind = slot.kind
        function = self.current
        if kind is OperandKind.REGISTER:
            return self.register(text, operand.bank, operand.move, at, function, operand.name)
        if kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
            if operand.name == "segment_sizes":
                return tuple(self.u16(item, item_at) for item, item_at in _items(text, at))
            bank = operand.bank
            return tuple(self.list_register(item, bank, item_at, function)
                         for item, item_at in _items(text, at))
        if kind is OperandKind.ATTRIBUTE:
            return self.attribute(text, operand.type, at)
        if kind is OperandKind.BRANCH_TARGET:
            refs.append(("label", slot.index, None, text[1:], self.lineno, at, None))
            return 0
        if kind is OperandKind.BRANCH_OPERANDS:
            return self.remaps(text, at, function)
        if kind is OperandKind.BRANCH_TABLE_CASES:
            return self.cases(text, at, slot.index, refs, function)
        if kind is OperandKind.TYPE_OF:
            return self.type_ordinal(text.strip())
        if kind is OperandKind.FUNC_ATTR:
            return self.function_ordinal(text, at, slot.index, refs)
        if kind is OperandKind.GLOBAL_ATTR:
            return self.global_ordinal(text, at, slot.index, refs, inst)
        if kind is OperandKind.RODATA_ATTR:
            ordinal = parse_uint32(text)
            if ordinal is None:
                raise LineError(at, f"expected a rodata ordinal, got '{text}'")
            if ordinal >= len(self.rodata):
                raise LineError(at, f"undefined rodata segment {ordinal} "
                                 f"({len(self.rodata)} declared with vm.rodata[N])")
            return ordinal
        if kind is OperandKind.STRING_ATTR:
            data = text[1:-1].encode("utf-8", "surrogateescape")
            if len(data) > 0xFFFF:
                raise LineError(at, "string attribute is too large")
            return data
        raise AssertionError(kind)  # pragma: no cover

    def register(self, text: str, bank: str, move_ok: bool, at: int, function: Function,
                 name: str | None = None) -> int:
        value, i32_end, ref_end = self.register_info(text, bank, move_ok, at, name)
        if i32_end > function.i32_count:
            function.i32_count = i32_end
        if ref_end > function.ref_count:
            function.ref_count = ref_end
        return value

    def register_info(self, text: str, bank: str, move_ok: bool, at: int,
                      name: str | None = None) -> tuple[int, int, int]:
        """(encoded register, i32 registers needed, ref registers needed)."""
        m = _REGISTER.match(text)
        what = f"'{name}' " if name else ""
        if m is None:
            raise LineError(at, f"expected {_bank_words(bank)} for operand {what}"
                             f"but got '{text}'")
        letter, number, high = m.groups()
        ordinal = parse_uint32(number)
        if ordinal is None:
            raise LineError(at, f"invalid register number in '{text}'")
        if bank == "ref":
            if letter == "i":
                raise LineError(at, f"wrong register bank: operand {what}takes a ref register "
                                 f"(%rN), not '{text}'")
            if high is not None:
                raise LineError(at, f"ref registers have no pair: '{text}'")
            if letter == "R" and not move_ok:
                raise LineError(at, f"operand {what}does not allow a ref move (%R); "
                                 f"write %r{number}")
            if ordinal > MAX_REF_ORDINAL:
                raise LineError(at, f"ref register '{text}' is beyond the ref register file "
                                 f"(%r0..%r{MAX_REF_ORDINAL})")
            return encode_ref(ordinal, letter == "R"), 0, ordinal + 1
        if letter != "i":
            raise LineError(at, f"wrong register bank: operand {what}takes "
                             f"{_bank_words(bank)}, not '{text}'")
        span = 1
        if bank in ("i64", "f64"):
            if high is None:
                raise LineError(at, f"operand {what}takes {_bank_words(bank)}: write "
                                 f"%i{ordinal}:{ordinal + 1}")
            if parse_uint32(high) != ordinal + 1:
                raise LineError(at, f"an {bank} register names two adjacent i32 registers "
                                 f"(%i{ordinal}:{ordinal + 1}), not '{text}'")
            if ordinal & 1 and not self.in_signature:
                raise LineError(at, f"an {bank} register pair starts at an even register "
                                 f"(%i{ordinal - 1}:{ordinal} or %i{ordinal + 1}:"
                                 f"{ordinal + 2}), not '{text}': the verifier rejects it")
            span = 2
        elif high is not None:
            raise LineError(at, f"wrong register bank: operand {what}takes "
                             f"{_bank_words(bank)}, not the pair '{text}'")
        if ordinal + span - 1 > MAX_I32_ORDINAL:
            raise LineError(at, f"register '{text}' is beyond the i32 register file "
                             f"(%i0..%i{MAX_I32_ORDINAL})")
        return ordinal, ordinal + span, 0

    def list_register(self, text: str, bank: str, at: int, function: Function) -> int:
        """A register of a list: 'any' takes whichever bank it names; i64 lists
        may name the first register of the pair only."""
        cache = LIST_CACHES[bank]
        known = cache.get(text)
        if known is not None:
            if known[1] > function.i32_count:
                function.i32_count = known[1]
            if known[2] > function.ref_count:
                function.ref_count = known[2]
            return known[0]
        scratch = Function("", 0, 0, "")
        value = self.list_register_slow(text, bank, at, scratch)
        cache[text] = (value, scratch.i32_count, scratch.ref_count)
        return self.list_register(text, bank, at, function)

    def list_register_slow(self, text: str, bank: str, at: int, function: Function) -> int:
        if bank == "any":
            if text.startswith(("%r", "%R")):
                return self.register(text, "ref", True, at, function)
            return self.register(text, "i64" if ":" in text else "i32", False, at, function)
        if bank == "ref":
            return self.register(text, "ref", True, at, function)
        if bank in ("i64", "f64") and ":" not in text:
            ordinal = self.register(text, "i32", False, at, function)
            if ordinal + 2 > function.i32_count:
                function.i32_count = ordinal + 2
            return ordinal
        return self.register(text, bank, False, at, function)

    def remaps(self, text: str, at: int, function: Function) -> tuple:
        pairs = []
        for item, item_at in _items(text, at):
            source, arrow, target = item.partition("->")
            if not arrow:
                raise LineError(item_at, f"expected a remap like %i0->%i1, got '{item}'")
            s = self.list_register(source.strip(), "any", item_at, function)
            t_at = item_at + len(source) + 2 + len(target) - len(target.lstrip())
            t = self.list_register(target.strip(), "any", t_at, function)
            pairs.append((s, t))
        return tuple(pairs)

    def cases(self, text: str, at: int, index: int, refs: list, function: Function):
        cases = []
        for m in re.finditer(r"\s*,\s*([^,:{}]*?)\s*:\s*(\^[\w$.]+)\s*(?:\(([^()]*)\))?",
                             text):
            number = parse_uint32(m.group(1))
            if number is None or number != len(cases):
                raise LineError(at + m.start(1), f"branch table cases must be numbered 0, 1, ... "
                                              f"in order (expected {len(cases)})")
            refs.append(("label", index, len(cases), m.group(2)[1:], self.lineno,
                         at + m.start(2), None))
            pairs = self.remaps(m.group(3) or "", at + (m.start(3) if m.group(3) else 0),
                                function)
            cases.append((0, pairs))
        if len(cases) > 0xFFFF:
            raise LineError(at, "branch table is too large")
        return tuple(cases)

    def u16(self, text: str, at: int) -> int:
        value = parse_uint32(text)
        if value is None or value > 0xFFFF:
            raise LineError(at, f"expected a u16 value, got '{text}'")
        return value

    def attribute(self, text: str, type_: str, at: int):
        if type_ == "i32":
            value = parse_int32(text)
        elif type_ == "i64":
            value = parse_int64(text)
        elif type_ == "f32":
            value = parse_f32(text)
        else:
            value = parse_f64(text)
        if value is None:
            raise LineError(at, f"expected an {type_} constant, got '{text}'")
        return value

    def type_ordinal(self, name: str) -> int:
        """As iree-as-module: `vm.x` finds `!vm.x`; unknown types are appended."""
        if name.startswith("vm."):
            ordinal = self.type_index.get("!" + name)
            if ordinal is not None:
                return ordinal
        ordinal = self.type_index.get(name)
        if ordinal is None:
            ordinal = len(self.types)
            self.type_index[name] = ordinal
            self.types.append(name)
        return ordinal

    def function_ordinal(self, text: str, at: int, index: int, refs: list) -> int:
        name = text[1:]
        if not name:
            raise LineError(at, "expected a function name after '@'")
        prefix, colon, ordinal_text = name.partition(":")
        if colon:
            if prefix != self.module_name:
                raise LineError(at, f"'{text}': an internal function ordinal must be written "
                                 f"@{self.module_name}:N")
            ordinal = parse_uint32(ordinal_text)
            if ordinal is None:
                raise LineError(at, f"expected a function ordinal in '{text}'")
            refs.append(("func_ordinal", index, None, ordinal, self.lineno, at, None))
            return ordinal
        import_ordinal = self.import_index.get(name)
        if import_ordinal is not None:
            return IMPORT_ORDINAL_BIT | import_ordinal
        prefix, dot, local = name.partition(".")
        if dot and prefix == self.module_name:
            name = local
        refs.append(("func", index, None, name, self.lineno, at, None))
        return 0

    def global_ordinal(self, text: str, at: int, index: int, refs: list, inst) -> int:
        size = _global_storage_size(inst, index)
        m = re.fullmatch(r"\.(\w+)\s*\[\s*([^\]]*?)\s*\]", text)
        if m is not None:
            storage, number = m.groups()
            expected = "refs" if size == 0 else "rwdata"
            if storage != expected:
                raise LineError(at, f"{inst.vm_name} addresses .{expected}[N], not .{storage}[...]")
            ordinal = parse_uint32(number)
            if ordinal is None:
                raise LineError(at + m.start(2), f"invalid storage ordinal '{number}'")
            if size == 0:
                self.global_refs = max(self.global_refs, ordinal + 1)
            else:
                if ordinal % size:
                    raise LineError(at, f".rwdata[{ordinal}] is not {size}-byte aligned")
                self.global_bytes = max(self.global_bytes, ordinal + size)
            return ordinal
        name = self.symbol(text, at, "global")
        refs.append(("global", index, None, name, self.lineno, at, size))
        return 0

    def assign_global_ordinals(self) -> None:
        """iree-as-module's layout: refs in order, then bytes by size class, aligned."""
        next_ref = 0
        for g in self.globals:
            if g.size == 0:
                g.ordinal = next_ref
                next_ref += 1
        self.global_refs = max(self.global_refs, next_ref)
        offset = 0
        for size in range(1, 9):
            sized = [g for g in self.globals if g.size == size]
            if not sized:
                continue
            offset = (offset + size - 1) & ~(size - 1)
            for g in sized:
                g.ordinal = offset
                offset += size
        self.global_bytes = max(self.global_bytes, offset)




def _items(text: str, at: int):
    """Comma-separated items of a list with their offsets (empty list for blank text)."""
    if not text.strip():
        return
    pos = 0
    for item in text.split(","):
        stripped = item.strip()
        offset = at + pos + len(item) - len(item.lstrip())
        if not stripped:
            raise LineError(offset, "empty list entry")
        yield stripped, offset
        pos += len(item) + 1


def _bank_words(bank: str) -> str:
    return {"i32": "an i32 register (%iN)", "f32": "an f32 register (%iN)",
            "i64": "an i64 register pair (%iN:M)", "f64": "an f64 register pair (%iN:M)",
            "ref": "a ref register (%rN)", "any": "a register"}[bank]


def _global_storage_size(inst, index: int) -> int:
    for operand in inst.operands[index + 1:]:
        if operand.kind is OperandKind.REGISTER:
            return STORAGE_SIZES[operand.bank]
    return 0
