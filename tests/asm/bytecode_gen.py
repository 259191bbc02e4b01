"""Random but verifiable bytecode covering every instruction of the ISA table.

`random_module(seed)` builds a module (vmrt.format tables) with one function
per instruction: a block holding the instruction with random operands (ref
move bits where allowed, odd float values, long lists), then whatever the
verifier wants after it (a return, or blocks for branch targets). Used to
compare vmrt disasm with iree-dump-module and to round-trip disasm -> asm.
"""

from __future__ import annotations

import random
import struct

from vmrt.format import (
    BytecodeModuleDef, ExportFunctionDef, FunctionDescriptor, FunctionSignatureDef,
    ImportFunctionDef, ModuleStateDef, RodataSegmentDef, TypeDef,
)
from vmrt.isa import BYTECODE_VERSION, INSTRUCTIONS
from vmrt.isa.encoder import encode
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import REF_MOVE_BIT, REF_TYPE_BIT

TYPES = ("i32", "!vm.buffer", "!vm.list<i32>", "!vm.opaque", "!hal.buffer", "f32")
REF_TYPES = (1, 2, 3, 4)
I32_REGS = 48
REF_REGS = 12
CAPACITY = 64
REF_GLOBALS = 4
FEATURES = {"ext_f32": 1, "ext_f64": 2}
FEATURE_YIELD = 4

_F32_SPECIALS = (0.0, -0.0, 1.0, -2.5, 3.4028234663852886e38, 1.401298464324817e-45,
                 float("inf"), float("-inf"), float("nan"), 0.1, 1e-10, 123456792.0)
_F64_SPECIALS = (0.0, -0.0, 1.0, -2.5, 1.7976931348623157e308, 5e-324, float("inf"),
                 float("-inf"), float("nan"), 0.1, 1e-300, 2.0 ** 60)
_I32_SPECIALS = (0, 1, -1, 2 ** 31 - 1, -2 ** 31, 255, 65536)
_I64_SPECIALS = (0, 1, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 32, -2 ** 40)


def _f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


class _Gen:
    def __init__(self, rng: random.Random, result_moves: bool):
        self.rng = rng
        self.result_moves = result_moves
        self.imports: list[tuple[str, str]] = []

    def i32(self):
        return self.rng.randrange(I32_REGS)

    def i64(self):
        return self.rng.randrange(I32_REGS // 2) * 2

    def ref(self, move: bool):
        reg = REF_TYPE_BIT | self.rng.randrange(REF_REGS)
        if move and self.rng.random() < 0.5:
            reg |= REF_MOVE_BIT
        return reg

    def reg(self, bank: str, move: bool = False):
        if bank in ("i32", "f32"):
            return self.i32()
        if bank in ("i64", "f64"):
            return self.i64()
        return self.ref(move)

    def any_reg(self):
        kind = self.rng.choice("iIr")
        return kind, (self.i32() if kind == "i" else self.i64() if kind == "I" else
                      self.ref(True))

    def attribute(self, type_: str):
        rng = self.rng
        if type_ == "i32":
            return rng.choice(_I32_SPECIALS) if rng.random() < 0.5 else \
                rng.randrange(-2 ** 31, 2 ** 31)
        if type_ == "i64":
            return rng.choice(_I64_SPECIALS) if rng.random() < 0.5 else \
                rng.randrange(-2 ** 63, 2 ** 63)
        if type_ == "f32":
            value = rng.choice(_F32_SPECIALS) if rng.random() < 0.5 else \
                rng.uniform(-1e6, 1e6) * 10 ** rng.randrange(-30, 30)
            return _f32(value) if abs(value) < 3.4e38 or value != value else value
        value = rng.choice(_F64_SPECIALS) if rng.random() < 0.5 else \
            rng.uniform(-1e6, 1e6) * 10.0 ** rng.randrange(-200, 200)
        return value

    def remaps(self):
        pairs = []
        for _ in range(self.rng.randrange(4)):
            kind = self.rng.choice("iIr")
            if kind == "i":
                pairs.append((self.i32(), self.i32()))
            elif kind == "I":
                pairs.append((self.i64(), self.i64()))
            else:
                pairs.append((self.ref(True), self.ref(False)))
        return tuple(pairs)

    def call_operands(self, variadic: bool, count_results: bool = True):
        """(cconv, segment sizes, operands, results) for a call to a new import."""
        rng = self.rng
        args = []
        operands = []
        segments = []
        for _ in range(rng.randrange(4)):
            kind, reg = self.any_reg()
            args.append(kind)
            operands.append(reg)
            segments.append(0xFFFF)
        if variadic:
            span_kind = rng.choice("iIr")
            count = rng.randrange(3)
            args.append("C" + span_kind + "D")
            segments.append(count)
            for _ in range(count):
                operands.append(self.i32() if span_kind == "i" else
                                self.i64() if span_kind == "I" else self.ref(True))
        results = []
        res_kinds = []
        if count_results:
            for _ in range(rng.randrange(3)):
                kind, reg = self.any_reg()
                if kind == "r":
                    reg &= ~REF_MOVE_BIT
                res_kinds.append(kind)
                results.append(reg)
        cconv = "0" + ("".join(args) or "v") + "_" + ("".join(res_kinds) or "v")
        name = f"ext.f{len(self.imports)}"
        self.imports.append((name, cconv))
        return len(self.imports) - 1, tuple(segments), tuple(operands), tuple(results)


def _function(gen: _Gen, inst) -> tuple[bytes, int, str]:
    """(bytecode, block count, cconv) of a function exercising `inst`."""
    rng = gen.rng
    values: list = []
    targets = []  # operand indices holding branch targets
    result_cconv = "v"
    return_regs: tuple = ()
    call = None
    for i, operand in enumerate(inst.operands):
        kind = operand.kind
        if kind is OperandKind.REGISTER:
            # Compilers never mark results as moves (vm.const.ref.zero's result
            # is printed without the marker); `result_moves` sets them anyway.
            move = operand.move and (operand.access == "r" or gen.result_moves)
            values.append(gen.reg(operand.bank, move))
        elif kind is OperandKind.ATTRIBUTE:
            values.append(gen.attribute(operand.type))
        elif kind is OperandKind.GLOBAL_ATTR:
            banks = [o.bank for o in inst.operands if o.kind is OperandKind.REGISTER]
            if "ref" in banks:
                values.append(rng.randrange(REF_GLOBALS))
            elif banks[-1] in ("i64", "f64"):
                values.append(rng.randrange(CAPACITY // 8) * 8)
            else:
                values.append(rng.randrange(CAPACITY // 4) * 4)
        elif kind is OperandKind.RODATA_ATTR:
            values.append(rng.randrange(3))
        elif kind is OperandKind.TYPE_OF:
            if operand.name == "element_type":
                values.append(rng.randrange(len(TYPES)))
            else:
                values.append(rng.choice(REF_TYPES))
        elif kind is OperandKind.STRING_ATTR:
            values.append("".join(rng.choice("abc xyz.<>=_09") for _ in range(rng.randrange(12))))
        elif kind is OperandKind.FUNC_ATTR:
            if inst.symbol == "ImportResolved":
                gen.imports.append((f"ext.f{len(gen.imports)}", "0i_i"))
                values.append(0x80000000 | (len(gen.imports) - 1))
            else:
                call = gen.call_operands("segment_sizes" in [o.name for o in inst.operands])
                values.append(0x80000000 | call[0])
        elif kind is OperandKind.VARIADIC_OPERANDS:
            if call is not None:
                values.append(call[1] if operand.name == "segment_sizes" else call[2])
            elif inst.symbol == "Return":
                regs, kinds = [], []
                for _ in range(rng.randrange(4)):
                    k, reg = gen.any_reg()
                    kinds.append(k)
                    regs.append(reg)
                result_cconv = "".join(kinds) or "v"
                return_regs = tuple(regs)
                values.append(return_regs)
            elif operand.bank == "any":
                values.append(tuple(gen.any_reg()[1] for _ in range(rng.randrange(5))))
            else:
                values.append(tuple(gen.reg(operand.bank, True)
                                    for _ in range(rng.randrange(1, 5))))
        elif kind is OperandKind.VARIADIC_RESULTS:
            values.append(call[3])
        elif kind is OperandKind.BRANCH_TARGET:
            targets.append(i)
            values.append(0)
        elif kind is OperandKind.BRANCH_OPERANDS:
            values.append(gen.remaps())
        elif kind is OperandKind.CONST_I16:
            values.append(rng.randrange(4))
        elif kind is OperandKind.BRANCH_TABLE_CASES:
            values.append(tuple((0, gen.remaps()) for _ in range(values[i - 1])))
        else:  # pragma: no cover
            raise AssertionError(kind)
    # Layout: ^bb0: inst [return] ^bb1: return ^bb2: return
    def build(target_pcs):
        vals = list(values)
        for n, i in enumerate(targets):
            vals[i] = target_pcs[n % len(target_pcs)]
        if inst.symbol == "BranchTable":
            cases = vals[4]
            vals[4] = tuple((target_pcs[(k + 1) % 2], pairs) for k, (_, pairs) in
                            enumerate(cases))
        out = bytearray(encode("Block", (), 0))
        out += encode(inst, tuple(vals), len(out))
        needs_return = not inst.is_terminator
        if needs_return:
            out += encode("Return", (return_regs,), len(out))
        pcs = []
        for _ in range(2):
            pcs.append(len(out))
            out += encode("Block", (), len(out))
            out += encode("Return", (return_regs,), len(out))
        return bytes(out), pcs

    _, pcs = build([0, 0])
    data, _ = build(pcs)
    cconv = "0v_" + result_cconv
    return data, 3, cconv


def random_module(seed: int, instructions=None, name: str = "gen",
                  result_moves: bool = False) -> BytecodeModuleDef:
    rng = random.Random(seed)
    gen = _Gen(rng, result_moves)
    bytecode = bytearray()
    descriptors = []
    signatures = []
    exports = []
    requirements = 0
    for inst in instructions or [i for i in INSTRUCTIONS if i.kind == "op"]:
        data, blocks, cconv = _function(gen, inst)
        feature = FEATURES.get(inst.opcode_set, 0)
        if inst.symbol in ("Yield", "CallYieldable", "CallVariadicYieldable"):
            feature |= FEATURE_YIELD
        requirements |= feature
        descriptors.append(FunctionDescriptor(
            bytecode_offset=len(bytecode), bytecode_length=len(data),
            requirements=feature, reserved=0, block_count=blocks,
            i32_register_count=I32_REGS, ref_register_count=REF_REGS))
        signatures.append(FunctionSignatureDef(calling_convention=cconv))
        if rng.random() < 0.5:
            exports.append(ExportFunctionDef(local_name=inst.symbol.lower(),
                                             internal_ordinal=len(descriptors) - 1))
        bytecode += data
        bytecode += bytes(-len(bytecode) % 8)
    imports = [ImportFunctionDef(full_name=n, signature=FunctionSignatureDef(
        calling_convention=c), flags=2 if rng.random() < 0.3 else 1)
        for n, c in gen.imports]
    rodata = [RodataSegmentDef(embedded_data=bytes(rng.randrange(256)
                                                   for _ in range(rng.randrange(40))))
              for _ in range(3)]
    return BytecodeModuleDef(
        name=name, version=rng.randrange(5), requirements=requirements,
        types=[TypeDef(full_name=t) for t in TYPES], imported_functions=imports,
        exported_functions=exports, function_signatures=signatures,
        rodata_segments=rodata,
        module_state=ModuleStateDef(global_bytes_capacity=CAPACITY,
                                    global_ref_count=REF_GLOBALS),
        function_descriptors=descriptors,
        bytecode_version=(BYTECODE_VERSION[0] << 16) | BYTECODE_VERSION[1],
        bytecode_data=bytes(bytecode))
