"""Instruction emission of both tiers side by side, by handler kind: formula rows and
the non-formula instructions on refs and globals: vmrt/vm/codegen.py and vmrt/vm/ctier/cgen.py dispatch here
by the row's handler kind (vmrt/isa/ops.py), and both read the instruction through
vmrt/vm/instruction_kinds.py.

A Python emitter takes (FunctionGenerator, decoded, indent) and writes through
`gen.out.emit`; a C emitter takes (FunctionEmitter, decoded) and writes through
`em.emit`, naming registers with `em.use(register, type)`."""

from __future__ import annotations

import math

from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import IMPORT_ORDINAL_BIT, REF_MASK, REF_TYPE_BIT, is_move
from vmrt.vm.instruction_kinds import global_access, moved_refs


def reg_name(ordinal: int) -> str:
    """The Python local holding a register: `i3` (i64/f64: the pair's first), `r2`."""
    if ordinal & REF_TYPE_BIT:
        return f"r{ordinal & REF_MASK}"
    return f"i{ordinal}"


# Formula rows: the row's `py` and `c` text with the operands filled in ------------------
_WRAP32 = ("if not -2147483648 <= {x} <= 2147483647: "
           "{x} = (({x} + 2147483648) & 4294967295) - 2147483648")
_WRAP64 = ("if not -9223372036854775808 <= {x} <= 9223372036854775807: "
           "{x} = (({x} + 9223372036854775808) & 18446744073709551615) - 9223372036854775808")
_ROUND32 = "F32_SLOT[0] = {x}; {x} = F32_SLOT[0]"
#: Python formula lines starting with one of these expand to the statement above.
_MACROS = {"W32": _WRAP32, "W64": _WRAP64, "F32": _ROUND32}


def python_literal(value) -> str:
    if isinstance(value, float):
        if value != value:
            return "NAN"
        if math.isinf(value):
            return "INF" if value > 0 else "-INF"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "-0.0"
    return repr(value)


def c_literal(value, kind: str) -> str:
    if kind in ("f32", "f64"):
        value = float(value)
        if value != value:
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "-INFINITY"
        return value.hex()
    return f"(int64_t)0x{int(value) & 0xFFFFFFFFFFFFFFFF:x}ull"


def python_operands(d) -> dict[str, str]:
    mapping = {}
    for operand, value in zip(d.instruction.operands, d.values):
        kind = operand.kind
        if kind is OperandKind.REGISTER:
            mapping[operand.name] = reg_name(value)
        elif kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
            names = [reg_name(r) for r in value]
            mapping[operand.name] = ", ".join(names)
            mapping["count"] = str(len(value))
            mapping[operand.name + "_tuple"] = \
                f"({', '.join(names)}{',' if len(names) == 1 else ''})"
        elif kind is OperandKind.STRING_ATTR:
            mapping[operand.name] = repr(bytes(value).decode("utf-8", "replace"))
        else:
            mapping[operand.name] = python_literal(value)
    return mapping


def python_formula(gen, d, indent: int) -> None:
    mapping = python_operands(d)
    for line in d.instruction.py.split("\n"):
        macro, _, target = line.partition(" ")
        if macro in _MACROS:
            gen.out.emit(indent, _MACROS[macro].format(x=target.format(**mapping)))
        else:
            gen.out.emit(indent, line.format(**mapping))


def c_operands(em, d) -> dict[str, str]:
    mapping = {"pc": str(d.pc)}
    for operand, value in zip(d.instruction.operands, d.values):
        if operand.kind is OperandKind.REGISTER:
            mapping[operand.name] = em.use(value, operand.bank)
        elif operand.kind is OperandKind.ATTRIBUTE:
            mapping[operand.name] = c_literal(value, operand.type)
        else:
            mapping[operand.name] = str(value)
    return mapping


def c_formula(em, d) -> None:
    em.emit(d.instruction.c.format(**c_operands(em, d)))


# Moves: a ref read with the move bit leaves its register -------------------------------
def python_moves(gen, d, indent: int) -> None:
    for register in moved_refs(d):
        gen.out.emit(indent, f"{reg_name(register)} = None")


def c_moves(em, d) -> None:
    for register in moved_refs(d):
        em.emit(f"VMRT_DROP_REF({em.use(register, 'ref')});")


# vm.assign.ref --------------------------------------------------------------------------
def python_assign_ref(gen, d, indent: int) -> None:
    source, dest = d.values
    if reg_name(source) != reg_name(dest):
        gen.out.emit(indent, f"{reg_name(dest)} = {reg_name(source)}")
        if is_move(source):
            gen.out.emit(indent, f"{reg_name(source)} = None")


def c_assign_ref(em, d) -> None:
    source, dest = d.values
    s, t = em.use(source, "ref"), em.use(dest, "ref")
    if s != t:
        em.emit(f"VMRT_MOVE_REF({t}, {s});" if is_move(source) else f"VMRT_SET_REF({t}, {s});")


# vm.discard.refs: upstream releases every listed register, move bit or not ---------------
def python_discard_refs(gen, d, indent: int) -> None:
    names = [f"r{r & REF_MASK}" for r in d.values[0]]
    if names:
        gen.out.emit(indent, " = ".join(names) + " = None")


def c_discard_refs(em, d) -> None:
    for register in d.values[0]:
        em.emit(f"VMRT_DROP_REF({em.use(register, 'ref')});")


# vm.list.get.ref: a move bit on the result moves the element out of the list -----------
# (upstream; the C tier compiles no such move, vmrt/vm/ctier/analysis.py)
def python_list_get_ref(gen, d, indent: int) -> None:
    lst, index, type_id, result = d.values
    getter = "take_ref" if is_move(result) else "get_ref"
    gen.out.emit(indent, f"{reg_name(result)} = REF_OR_NULL({reg_name(lst)}.{getter}("
                         f"{reg_name(index)}), {type_id})")


def c_list_get_ref(em, d) -> None:
    lst, index, _, result = d.values
    em.emit(f"VMRT_LIST_GET_REF({d.pc}, {em.use(result, 'ref')}, "
            f"{em.use(lst, 'ref')}, {em.use(index, 'i32')});")


# Value globals: vm.global.{load,store}[.indirect].{i32,i64,f32,f64} ----------------------
def python_global(gen, d, indent: int) -> None:
    access = global_access(d)
    code = access.bank.upper()
    name = reg_name(access.value)
    if access.indirect:
        offset = reg_name(access.offset)
        gen.out.emit(indent, f"GLOBAL_STORE_{code}({offset}, {name})" if access.store
                     else f"{name} = GLOBAL_LOAD_{code}({offset})")
        return
    offset, width = access.offset, access.width
    slot = f"RW_{code}[{offset // width}]" if offset % width == 0 else None
    if access.store:
        gen.out.emit(indent, f"{slot} = {name}" if slot else
                     f"GLOBAL_STORE_{code}({offset}, {name})")
    else:
        gen.out.emit(indent, f"{name} = {slot}" if slot else
                     f"{name} = GLOBAL_LOAD_{code}({offset})")


def c_global(em, d) -> None:
    access = global_access(d)
    name = em.use(access.value, access.bank)
    offset = em.use(access.offset, "i32") if access.indirect else str(access.offset)
    macro = "VMRT_GLOBAL_STORE" if access.store else "VMRT_GLOBAL_LOAD"
    em.emit(f"{macro}({d.pc}, {em.c_type(access.bank)}, {name}, {offset});")


# Ref globals and resolved imports: the Python tier's alone (the C tier leaves functions
# using them to Python, vmrt/vm/ctier/analysis.py) ------------------------------------------
def python_global_ref(gen, d, indent: int) -> None:
    operands = d.instruction.operands
    indirect = operands[0].kind is OperandKind.REGISTER
    store = operands[-1].access == "r"
    index, type_id, reg = d.values
    name = reg_name(reg)
    slot = f"REFS[{reg_name(index) if indirect else index}]"
    if indirect:
        gen.out.emit(indent, f"CHECK_GLOBAL_REF({reg_name(index)})")
    if store:
        gen.out.emit(indent, f"{slot} = CAST({name}, {type_id})")
        if is_move(reg):
            gen.out.emit(indent, f"{name} = None")
    else:
        gen.out.emit(indent, f"{name} = CAST({slot}, {type_id})")


def python_resolved(gen, d, indent: int) -> None:
    ordinal, result = d.values
    gen.out.emit(indent, f"{reg_name(result)} = RESOLVED[{ordinal & ~IMPORT_ORDINAL_BIT}]")
