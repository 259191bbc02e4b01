"""Bytecode verification before any code runs (upstream runtime/src/iree/vm/bytecode/verifier.c).

Every function is walked once: operands decoded through the ISA table, register
ordinals checked against the declared (power-of-two rounded) register counts and
banks, global/rodata/type/function ordinals against the module's tables, call
operands against the callee's cconv, and branch targets against block markers.
A failure raises VerificationError naming the module, function and bytecode offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from vmrt.errors import StatusCode, VerificationError, VmrtError
from vmrt.isa import BLOCK_OPCODE, BY_OPCODE, INSTRUCTIONS, PREFIXES
from vmrt.isa.decoder import DECODERS, DecodeError
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import (
    IMPORT_ORDINAL_BIT, MAX_I32_REGISTERS, REF_MASK, REF_MOVE_BIT, REF_TYPE_BIT,
    round_up_pow2,
)
from vmrt.vm.cconv import Signature, count_registers, signature_of

#: FeatureBits (bytecode_module_def.fbs).
FEATURE_EXT_F32 = 1 << 0
FEATURE_EXT_F64 = 1 << 1
FEATURE_YIELD = 1 << 2
FEATURE_UNWIND = 1 << 3
AVAILABLE_FEATURES = FEATURE_EXT_F32 | FEATURE_EXT_F64 | FEATURE_YIELD | FEATURE_UNWIND
FEATURE_NAMES = ((FEATURE_EXT_F32, "EXT_F32"), (FEATURE_EXT_F64, "EXT_F64"),
                 (FEATURE_YIELD, "YIELD"), (FEATURE_UNWIND, "UNWIND"))

#: Block pcs must stay below this (isa.h IREE_VM_ISA_PC_BLOCK_MAX).
PC_BLOCK_MAX = 0x00FFFFFF

#: The cconv types that take a register (i32, i64, f32, f64, ref).
_REGISTER_KINDS = frozenset("iIfFr")

_PREFIX_FEATURES = {op: (FEATURE_EXT_F32 if s.id == "ext_f32" else FEATURE_EXT_F64)
                    for op, s in PREFIXES.items()}


def format_features(bits: int) -> str:
    names = [name for bit, name in FEATURE_NAMES if bits & bit]
    unknown = bits & ~AVAILABLE_FEATURES
    if unknown:
        names.append(f"{unknown:#x}")
    return "|".join(names) or "0"


def check_features(required: int, available: int, what: str) -> None:
    if required & ~available:
        raise VmrtError(
            f"required {what} features [{format_features(required)}] are not available; "
            f"have [{format_features(available)}]", StatusCode.INVALID_ARGUMENT)


# Per-operand check codes, precomputed per instruction from the ISA table.
(_R32, _R64, _RREF, _RREF_NO_MOVE, _RANY, _V32, _V64, _VREF, _VANY, _REMAP,
 _TARGET, _CASES, _GLOBAL_BYTES4, _GLOBAL_BYTES8, _GLOBAL_REF, _RODATA, _TYPE,
 _SKIP) = range(18)


#: Operands naming an entry of a module table: (what, table label, the ModuleVerifier
#: attribute holding its size, bytes the entry takes).
_MODULE_ORDINALS = {
    _GLOBAL_BYTES4: ("global byte_offset", "rwdata", "rwdata_size", 4),
    _GLOBAL_BYTES8: ("global byte_offset", "rwdata", "rwdata_size", 8),
    _GLOBAL_REF: ("global ref ordinal", "table", "global_ref_count", 1),
    _RODATA: ("rodata ref ordinal", "table", "rodata_count", 1),
    _TYPE: ("type id ordinal", "table", "type_count", 1),
}


def _operand_check(inst, operand) -> int:
    kind, bank = operand.kind, operand.bank
    if kind is OperandKind.REGISTER:
        if bank in ("i32", "f32"):
            return _R32
        if bank in ("i64", "f64"):
            return _R64
        return _RREF if operand.move else _RREF_NO_MOVE
    if kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
        if operand.name == "segment_sizes":
            return _SKIP  # literal span counts, not registers
        return {"i32": _V32, "f32": _V32, "i64": _V64, "f64": _V64,
                "ref": _VREF}.get(bank, _VANY)
    if kind is OperandKind.BRANCH_OPERANDS:
        return _REMAP
    if kind is OperandKind.BRANCH_TARGET:
        return _TARGET
    if kind is OperandKind.BRANCH_TABLE_CASES:
        return _CASES
    if kind is OperandKind.GLOBAL_ATTR:
        value_banks = [o.bank for o in inst.operands if o.kind is OperandKind.REGISTER]
        if "ref" in value_banks:
            return _GLOBAL_REF
        return _GLOBAL_BYTES8 if value_banks and value_banks[-1] in ("i64", "f64") \
            else _GLOBAL_BYTES4
    if kind is OperandKind.RODATA_ATTR:
        return _RODATA
    if kind is OperandKind.TYPE_OF:
        return _TYPE
    return _SKIP  # attributes, strings, func_attr (calls are checked as a whole)


def _build_plans():
    plans = {}
    for inst in INSTRUCTIONS:
        if inst.kind != "op":
            continue
        checks = tuple((i, _operand_check(inst, o)) for i, o in enumerate(inst.operands))
        checks = tuple(c for c in checks if c[1] != _SKIP)
        call = None
        if any(o.kind is OperandKind.FUNC_ATTR for o in inst.operands):
            names = [o.name for o in inst.operands]
            call = (names.index("segment_sizes") if "segment_sizes" in names else None,
                    names.index("operands") if "operands" in names else None,
                    names.index("results") if "results" in names else None)
        # Whether verify_control has anything to check or note.
        control = call is not None or inst.handler == "return" or inst.may_yield
        plans[(inst.opcode_set, inst.opcode)] = (inst, checks, call, control)
    tables = {}
    for set_id, slots in BY_OPCODE.items():
        decoders = DECODERS[set_id]
        tables[set_id] = tuple(
            (plans[(set_id, i)] + (decoders[i],)) if (set_id, i) in plans else None
            for i in range(256))
    return tables


_PLANS = _build_plans()
_CORE_PLANS = _PLANS["core"]
_PREFIX_PLANS = {op: _PLANS[s.id] for op, s in PREFIXES.items()}


class _Fail(Exception):
    """Internal: a verification failure at the current instruction."""

    def __init__(self, message, code=StatusCode.INVALID_ARGUMENT):
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class VerifiedFunction:
    """What verification learned about a function: its block start pcs."""

    ordinal: int
    block_pcs: tuple[int, ...]
    arguments: str
    results: str
    may_yield: bool = False  # contains vm.yield or a yieldable call to an import
    callees: frozenset = frozenset()  # internal functions it calls


class _FunctionVerifier:
    """Single-pass walk of one function's bytecode (state of upstream's verify_state)."""

    def __init__(self, module_verifier, ordinal):
        self.mv = module_verifier
        self.ordinal = ordinal

    def fail(self, message, code=StatusCode.INVALID_ARGUMENT):
        raise _Fail(message, code)

    # -- register checks, named after upstream's macros ------------------------
    def reg_x32(self, ordinal, category):
        if ordinal & REF_TYPE_BIT:
            self.fail(f"{category} register required but ref register {ordinal} provided")
        if ordinal >= self.i32_count:
            self.fail(f"{category} register ordinal {ordinal} out of range {self.i32_count}",
                      StatusCode.OUT_OF_RANGE)

    def reg_x64(self, ordinal, category):
        if ordinal & REF_TYPE_BIT:
            self.fail(f"{category} register required but ref register {ordinal} provided")
        if ordinal & 1:
            self.fail(f"{category} register ordinal {ordinal} not 8-byte aligned")
        if ordinal + 1 >= self.i32_count:
            self.fail(f"{category} register ordinal {ordinal}:{ordinal + 1} out of range "
                      f"{self.i32_count}", StatusCode.OUT_OF_RANGE)

    def reg_ref(self, ordinal):
        if not ordinal & REF_TYPE_BIT:
            self.fail(f"ref register required but non-ref {ordinal} provided")
        if (ordinal & REF_MASK) >= self.ref_count:
            self.fail(f"ref register ordinal {ordinal & REF_MASK} out of range "
                      f"{self.ref_count}", StatusCode.OUT_OF_RANGE)

    def reg_any(self, ordinal):
        if ordinal & REF_TYPE_BIT:
            if (ordinal & REF_MASK) >= self.ref_count:
                self.fail(f"ref register ordinal {ordinal & REF_MASK} out of range "
                          f"{self.ref_count}", StatusCode.OUT_OF_RANGE)
        elif ordinal >= self.i32_count:
            self.fail(f"i32 register ordinal {ordinal} out of range {self.i32_count}",
                      StatusCode.OUT_OF_RANGE)

    # -- blocks ----------------------------------------------------------------
    def declare_block(self, pc):
        if pc >= PC_BLOCK_MAX:
            self.fail(f"block pc {pc:08X} greater than max {PC_BLOCK_MAX:08X}",
                      StatusCode.OUT_OF_RANGE)
        blocks = self.blocks
        if pc in blocks:
            return
        if len(blocks) + 1 > self.block_count:
            self.fail(f"invalid descriptor block count {self.block_count}; found at least "
                      f"{len(blocks) + 1} blocks")
        blocks[pc] = False

    # -- calls -----------------------------------------------------------------
    def check_values(self, steps, segment_sizes, registers):
        """`registers` (a call's operands or results, a return's operands) against one
        side of a Signature, its argument_steps or result_steps: a register per scalar,
        a span's members segment_sizes[step] times over."""
        i32_count, ref_count = self.i32_count, self.ref_count
        count = len(registers)
        index = 0
        for step, element in steps:
            # A scalar is a one-character string: the loop below runs once for it.
            kinds = element * self.span_count(segment_sizes, step) \
                if element.__class__ is tuple else element
            for kind in kinds:
                if index >= count or kind not in _REGISTER_KINDS:
                    self.register_failure(kind, registers, index)
                ordinal = registers[index]
                if kind == "r":
                    if not ordinal & REF_TYPE_BIT or (ordinal & REF_MASK) >= ref_count:
                        self.reg_ref(ordinal)
                elif kind == "i" or kind == "f":
                    if ordinal & REF_TYPE_BIT or ordinal >= i32_count:
                        self.reg_x32(ordinal, "i32/f32")
                elif ordinal & 0x8001 or ordinal + 1 >= i32_count:
                    self.reg_x64(ordinal, "i64/f64")
                index += 1

    def register_failure(self, kind, registers, index):
        if kind not in _REGISTER_KINDS:
            self.fail(f"unsupported cconv fragment char {kind!r}")
        self.fail(f"register list underflow (have {len(registers)}, trying to access "
                  f"{index})", StatusCode.OUT_OF_RANGE)

    def span_count(self, segment_sizes, step) -> int:
        if segment_sizes is None:
            self.fail("function is variadic but no segment size list provided")
        if step >= len(segment_sizes):
            self.fail(f"segment size list underflow (have {len(segment_sizes)}, "
                      f"trying to access {step})", StatusCode.OUT_OF_RANGE)
        return segment_sizes[step]

    def verify_call(self, inst, values, call):
        seg_index, operands_index, results_index = call
        callee = values[0]
        if not inst.is_call:  # names a function without calling it: vm.import.resolved
            if not callee & IMPORT_ORDINAL_BIT:
                self.fail(f"function ordinal {callee} is not an import ordinal")
            self.mv.import_signature(self, callee & ~IMPORT_ORDINAL_BIT)
            return
        segment_sizes = values[seg_index] if seg_index is not None else None
        if callee & IMPORT_ORDINAL_BIT:
            if inst.may_yield:  # internal callees: judged by their own body
                self.may_yield = True
            import_ordinal = callee & ~IMPORT_ORDINAL_BIT
            name, signature = self.mv.import_signature(self, import_ordinal)
            what = f"call to import '{name}'"
        else:
            if seg_index is not None:
                self.fail("variadic calls only supported for imports",
                          StatusCode.FAILED_PRECONDITION)
            if callee >= self.mv.function_count:
                self.fail(f"function ordinal {callee} out of range {self.mv.function_count}")
            signature = self.mv.function_signature(self, callee)
            self.callees.add(callee)
            what = f"call to internal function {callee}"
        try:
            self.check_values(signature.argument_steps, segment_sizes, values[operands_index])
            self.check_values(signature.result_steps, None, values[results_index])
        except _Fail as failure:
            failure.message += f"; {what}"
            raise

    # -- the walk ----------------------------------------------------------------
    def run(self):
        descriptor = self.mv.module.function_descriptors[self.ordinal]
        signature = self.check_descriptor(descriptor)
        start = descriptor.bytecode_offset
        length = descriptor.bytecode_length
        data = self.mv.bytecode[start:start + length]
        self.blocks = {}
        self.may_yield = False
        self.callees = set()
        self.walk(data, length)
        self.pc = None
        self.check_blocks(data, length)
        return VerifiedFunction(self.ordinal, tuple(sorted(self.blocks)),
                                signature.argument_fragment, signature.result_fragment,
                                self.may_yield, frozenset(self.callees))

    def check_descriptor(self, descriptor):
        """Features, block and register counts; returns the function's Signature."""
        mv = self.mv
        check_features(descriptor.requirements, AVAILABLE_FEATURES, "function")
        self.requirements = descriptor.requirements
        self.block_count = descriptor.block_count
        if self.block_count <= 0:
            self.fail("no blocks defined; functions must have at least one block",
                      StatusCode.OUT_OF_RANGE)
        self.i32_count = round_up_pow2(max(1, descriptor.i32_register_count))
        self.ref_count = round_up_pow2(max(1, descriptor.ref_register_count))
        if self.i32_count > MAX_I32_REGISTERS or self.ref_count > REF_MASK:
            self.fail("register count overflow", StatusCode.RESOURCE_EXHAUSTED)
        signature = self.signature = mv.function_signature(self, self.ordinal)
        args_i32, args_ref = mv.count_registers(self, signature.argument_fragment)
        if self.i32_count < args_i32 or self.ref_count < args_ref:
            self.fail("insufficient register storage for function arguments/results")
        return signature

    def walk(self, data, length):
        """Decodes and checks each instruction (rare checks: check_operand)."""
        in_block = False
        end_pc = length - 1  # upstream stops one byte short of the end
        pc = 0
        core_plans = _CORE_PLANS
        reg_x32, reg_x64, reg_ref, reg_any = self.reg_x32, self.reg_x64, self.reg_ref, self.reg_any
        i32_count, ref_count = self.i32_count, self.ref_count
        blocks = self.blocks
        while pc < end_pc:
            self.pc = pc
            opcode = data[pc]
            if opcode == BLOCK_OPCODE:
                in_block = self.enter_block(pc, in_block)
                pc += 1
                continue
            if not in_block:
                self.fail(f"op at pc {pc:08X} is not in a block")
            plan = core_plans[opcode]
            operand_pc = pc + 1
            if plan is None:
                plan = self.extension_plan(data, pc, length, opcode)
                operand_pc = pc + 2
            inst, checks, call, control, decoder = plan
            try:
                values, next_pc = decoder(data, operand_pc, length, pc)
            except DecodeError as error:
                self.fail(error.message, error.code)
            for index, check in checks:
                value = values[index]
                if check == _R32:
                    if value & REF_TYPE_BIT or value >= i32_count:
                        reg_x32(value, inst.operands[index].bank)
                elif check == _R64:
                    if value & 0x8001 or value + 1 >= i32_count:
                        reg_x64(value, inst.operands[index].bank)
                elif check == _RREF:
                    if not value & REF_TYPE_BIT or (value & REF_MASK) >= ref_count:
                        reg_ref(value)
                elif check == _RREF_NO_MOVE:
                    reg_ref(value)
                    if value & REF_MOVE_BIT:
                        self.fail("ref register has MOVE bit but op does not support MOVE")
                elif check == _TARGET:
                    if value not in blocks:
                        self.declare_block(value)
                elif check == _REMAP:
                    for src, dst in value:
                        reg_any(src)
                        reg_any(dst)
                else:
                    self.check_operand(check, value)
            if control:
                self.verify_control(inst, values, call)
            if inst.is_terminator:
                in_block = False
            pc = next_pc
        if in_block:
            self.pc = None
            self.fail("function missing terminator in the last block")

    def enter_block(self, pc, in_block) -> bool:
        if in_block:
            self.fail(f"op at pc {pc:08X} is a block while still in a block")
        if self.blocks.get(pc) is None:
            self.declare_block(pc)
        self.blocks[pc] = True
        return True

    def verify_control(self, inst, values, call):
        """Calls (and function references) against cconvs, returns against the
        function's results; notes an instruction that may suspend the invocation."""
        if call is not None:
            self.verify_call(inst, values, call)
        elif inst.handler == "return":
            self.check_values(self.signature.result_steps, None, values[0])
        elif inst.may_yield:
            self.may_yield = True

    def extension_plan(self, data, pc, length, opcode):
        """The plan of an extension opcode (`opcode` a prefix), or a failure."""
        if opcode not in _PREFIX_PLANS:
            self.fail(f"unhandled opcode {opcode:02X}")
        feature = _PREFIX_FEATURES[opcode]
        if not self.requirements & feature:
            self.fail(f"function does not declare the "
                      f"{format_features(feature)} feature its opcodes need")
        if pc + 1 >= length:
            self.fail(f"bytecode data overrun trying to parse op at {pc:08X}",
                      StatusCode.OUT_OF_RANGE)
        plan = _PREFIX_PLANS[opcode][data[pc + 1]]
        if plan is None:
            self.fail(f"unhandled ext opcode {data[pc + 1]:02X}")
        return plan

    def check_operand(self, check, value):
        """The less frequent operand checks: lists, tables and module ordinals."""
        mv = self.mv
        if check == _VANY:  # (a call's operands: many, so the passing case inline)
            i32_count, ref_count = self.i32_count, self.ref_count
            for r in value:
                if (r & REF_MASK) >= ref_count if r & REF_TYPE_BIT else r >= i32_count:
                    self.reg_any(r)
        elif check == _CASES:
            for target, pairs in value:
                if target not in self.blocks:
                    self.declare_block(target)
                for src, dst in pairs:
                    self.reg_any(src)
                    self.reg_any(dst)
        elif check == _V32:
            for r in value:
                self.reg_x32(r, "i32")
        elif check == _V64:
            for r in value:
                self.reg_x64(r, "i64")
        elif check == _VREF:
            for r in value:
                self.reg_ref(r)
        else:
            what, table, limit, width = _MODULE_ORDINALS[check]
            limit = getattr(mv, limit)
            if value + width > limit:
                self.fail(f"{what} out of range: {value} ({table}={limit})",
                          StatusCode.OUT_OF_RANGE)

    def check_blocks(self, data, length):
        """Every declared block defined, and as many as the descriptor says."""
        blocks = self.blocks
        if len(blocks) != self.block_count:
            self.fail(f"invalid descriptor block count {self.block_count}; "
                      f"found {len(blocks)} blocks")
        for block_pc in sorted(blocks):
            if not blocks[block_pc]:
                self.fail(f"block at pc {block_pc:08X} not defined in bytecode")
            if block_pc + 1 >= length:
                self.fail(f"block at pc {block_pc:08X} out of bytecode data range {length}")
            if data[block_pc] != BLOCK_OPCODE:
                self.fail(f"block at pc {block_pc:08X} does not start with a block marker")


class ModuleVerifier:
    """Shared, cached lookups for verifying all functions of one module."""

    def __init__(self, module):
        self.module = module
        self.name = module.name
        self.bytecode = memoryview(module.bytecode_data)
        self.function_count = len(module.function_descriptors)
        self.type_count = len(module.types)
        self.rodata_count = len(module.rodata_segments)
        state = module.module_state
        self.rwdata_size = state.global_bytes_capacity if state is not None else 0
        self.global_ref_count = state.global_ref_count if state is not None else 0
        self._function_signatures: dict[int, Signature] = {}
        self._import_signatures: dict[int, tuple[str, Signature]] = {}
        self._register_counts: dict[str, tuple[int, int]] = {}
        self._names: dict[int, str] | None = None

    def function_signature(self, fv, ordinal) -> Signature:
        signature = self._function_signatures.get(ordinal)
        if signature is None:
            signature = self._function_signatures[ordinal] = self.signature(
                fv, self.module.function_signatures[ordinal])
        return signature

    def import_signature(self, fv, import_ordinal) -> tuple[str, Signature]:
        """(full name, Signature) of an import."""
        entry = self._import_signatures.get(import_ordinal)
        if entry is None:
            imports = self.module.imported_functions
            if import_ordinal >= len(imports):
                fv.fail(f"import ordinal {import_ordinal} out of range {len(imports)}")
            import_def = imports[import_ordinal]
            entry = self._import_signatures[import_ordinal] = (
                import_def.full_name, self.signature(fv, import_def.signature))
        return entry

    @staticmethod
    def signature(fv, signature_def) -> Signature:
        try:
            return signature_of(signature_def.calling_convention
                                if signature_def is not None else None)
        except VmrtError as error:
            fv.fail(error.message, error.code)

    def count_registers(self, fv, fragment):
        counts = self._register_counts.get(fragment)
        if counts is None:
            try:
                counts = count_registers(fragment)
            except VmrtError as error:
                fv.fail(error.message, error.code)
            self._register_counts[fragment] = counts
        return counts

    def function_name(self, ordinal) -> str | None:
        """Best name for an internal function: its export name or debug-info name."""
        if self._names is None:
            names = {}
            debug = self.module.debug_database
            if debug is not None:
                for i, source_map in enumerate(debug.functions or ()):
                    if source_map is not None and source_map.local_name:
                        names[i] = source_map.local_name
            for export in self.module.exported_functions:
                names.setdefault(export.internal_ordinal, export.local_name)
            self._names = names
        return self._names.get(ordinal)

    def verify_function(self, ordinal) -> VerifiedFunction:
        fv = _FunctionVerifier(self, ordinal)
        fv.pc = None
        try:
            return fv.run()
        except (_Fail, VmrtError) as failure:
            message = failure.message
            code = failure.code
            raise VerificationError(
                message, code, module=self.name, function=self.function_name(ordinal),
                function_ordinal=ordinal, offset=fv.pc if fv.pc is not None else 0,
            ) from None


def verify_module(module) -> list[VerifiedFunction]:
    """Verifies module-level requirements and every function's bytecode.

    Table-level checks (counts, ordinals, versions) are done by the reader
    (vmrt.format.check_module_tables); this adds features and bytecode.
    """
    try:
        check_features(module.requirements, AVAILABLE_FEATURES, "module")
    except VmrtError as error:
        raise VerificationError(error.message, error.code, module=module.name) from None
    verifier = ModuleVerifier(module)
    return [verifier.verify_function(i) for i in range(verifier.function_count)]
