"""The non-formula instructions on refs and globals, each kind's Python-tier and C-tier
emission side by side: vmrt/vm/codegen.py and vmrt/vm/ctier/cgen.py dispatch here
by the row's handler kind (vmrt/isa/ops.py), and both read the instruction through
vmrt/vm/instruction_kinds.py.

A Python emitter takes (FunctionGenerator, decoded, indent) and writes through
`gen.out.emit`; a C emitter takes (FunctionEmitter, decoded) and writes through
`em.emit`, naming registers with `em.use(register, type)`."""

from __future__ import annotations

from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import IMPORT_ORDINAL_BIT, REF_MASK, REF_TYPE_BIT, is_move
from vmrt.vm.instruction_kinds import global_access, moved_refs


def reg_name(ordinal: int) -> str:
    """The Python local holding a register: `i3` (i64/f64: the pair's first), `r2`."""
    if ordinal & REF_TYPE_BIT:
        return f"r{ordinal & REF_MASK}"
    return f"i{ordinal}"


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
