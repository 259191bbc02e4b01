"""Which functions of a module the C tier can compile, and the C type of every
register read: a forward data-flow pass over each function's blocks.

The Python tier keeps each register in one Python local whatever it holds; the C
tier gives a register one C local per type it is used with (`a4` as i32, `b4` as
i64, `f4` as f32, `d4` as f64). That is the same program only where every read of
a register finds the type of the last write to it on every path, so that is what
this pass proves, or it leaves the function to the Python tier (as it does for
instructions with no C formula, imports, lists other than lists of buffers, ref
results and yields). A function is compiled only with all of its callees.
"""

from __future__ import annotations

from dataclasses import dataclass

from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import IMPORT_ORDINAL_BIT, is_move, is_ref
from vmrt.vm.cconv import register_names
from vmrt.vm.instruction_kinds import branch_edges, call_parts

WIDE = ("i64", "f64")
#: cconv element -> register type.
CCONV_TYPES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "ref"}
#: register states besides a type: the high half of a wide value, and "unknown".
HIGH, MIXED = "hi", "mixed"
#: handler kinds the generator emits itself (formula rows need a `c` formula).
EMITTED_KINDS = frozenset({"global", "list_get_ref", "assign_ref", "discard_refs", "call",
                           "branch", "cond_branch", "branch_table", "return", "fail",
                           "marker"})


class NotCompilable(Exception):
    """Why a function stays in the Python tier."""


@dataclass
class FunctionShape:
    """What the generator needs of one function the C tier compiles."""

    ordinal: int
    arguments: str                      # cconv fragments
    results: str
    blocks: list                        # (pc, [Decoded]) in bytecode order
    entry_states: list                  # per block: {register: type} on entry
    callees: frozenset[int]


def c_formula(instruction) -> str:
    return instruction.c


def fragment_types(fragment: str) -> list[str]:
    """Register types of a cconv fragment, or NotCompilable for spans."""
    types = []
    for element in fragment:
        if element not in CCONV_TYPES:
            raise NotCompilable(f"calling convention element {element!r}")
        types.append(CCONV_TYPES[element])
    return types


def argument_registers(fragment: str) -> list[tuple[int, str]]:
    """(register, type) of each argument, i64/f64 in aligned pairs (vmrt.vm.cconv)."""
    kinds = fragment_types(fragment)  # (refuses spans first)
    return [(int(name[1:]), kind) for name, kind in zip(register_names(fragment), kinds)]


class TypeState:
    """The type each i-bank register holds at one point of a function."""

    def __init__(self, types=None):
        self.types: dict[int, str] = dict(types or {})

    def copy(self) -> "TypeState":
        return TypeState(self.types)

    def read(self, register: int, kind: str) -> None:
        held = self.types.get(register)
        if held is not None and held != kind:
            raise NotCompilable(f"register i{register} read as {kind} holds {held}")

    def write(self, register: int, kind: str) -> None:
        below = self.types.get(register - 1)
        if below in WIDE:
            self.types[register - 1] = MIXED
        if self.types.get(register) in WIDE and self.types.get(register + 1) == HIGH:
            self.types[register + 1] = MIXED
        self.types[register] = kind
        if kind in WIDE:
            if self.types.get(register + 1) in WIDE:
                self.types[register + 2] = MIXED
            self.types[register + 1] = HIGH

    def move(self, source: int, target: int) -> str | None:
        """A branch operand remap; the type copied (None when nothing is)."""
        held = self.types.get(source)
        if held is None:
            raise NotCompilable(f"branch operand i{source} is never written")
        if held == HIGH:
            self.types[target] = HIGH
            return None
        if held == MIXED:
            self.types[target] = MIXED
            return None
        self.write(target, held)
        return held

    def join(self, other: "TypeState") -> bool:
        """Merges another path into this state; True when this state changed."""
        changed = False
        for register, kind in other.types.items():
            mine = self.types.get(register)
            if mine is None:
                self.types[register] = kind
                changed = True
            elif mine != kind and mine != MIXED:
                self.types[register] = MIXED
                changed = True
        return changed


def operand_values(d):
    return zip(d.instruction.operands, d.values)


class FunctionAnalysis:
    """Proves one function compilable (see the module docstring) or raises
    NotCompilable; `callee_results` gives each internal callee's cconv fragments."""

    def __init__(self, module, ordinal: int):
        self.module = module
        self.ordinal = ordinal
        verified = module.verified[ordinal]
        self.arguments, self.results = verified.arguments, verified.results
        self.rw_size = module.summary.global_bytes
        self.callees: set[int] = set()

    def blocks(self) -> list:
        blocks: list[tuple[int, list]] = []
        for d in self.module.instructions(self.ordinal):
            if d.instruction.kind == "marker":
                blocks.append((d.pc, []))
            elif blocks:
                blocks[-1][1].append(d)
        return blocks

    def run(self) -> FunctionShape:
        if self.ordinal in self.module.generators:
            raise NotCompilable("may yield")
        if any(t == "ref" for t in fragment_types(self.results)):
            raise NotCompilable("returns a ref")
        blocks = self.blocks()
        index = {pc: i for i, (pc, _) in enumerate(blocks)}
        entry = TypeState({r: t for r, t in argument_registers(self.arguments) if t != "ref"})
        for register, kind in list(entry.types.items()):
            if kind in WIDE:
                entry.types[register + 1] = HIGH
        states: list[TypeState | None] = [None] * len(blocks)
        states[0] = entry
        work = [0]
        while work:
            i = work.pop()
            state = states[i].copy()
            for successor, exit_state in self.block_exits(blocks, i, index, state):
                if states[successor] is None:
                    states[successor] = exit_state
                    work.append(successor)
                elif states[successor].join(exit_state):
                    work.append(successor)
        # Blocks no path reaches are never run: they need no proof (and get none).
        entry_states = [s.types if s is not None else None for s in states]
        return FunctionShape(self.ordinal, self.arguments, self.results, blocks,
                             entry_states, frozenset(self.callees))

    def block_exits(self, blocks, i: int, index: dict, state: TypeState):
        """Runs block i over `state`; yields (successor, entry state) per edge."""
        _, instructions = blocks[i]
        for d in instructions:
            self.step(d, state)
        last = instructions[-1] if instructions else None
        if last is not None and last.instruction.is_terminator:
            if last.instruction.handler == "return":
                return
            for target, pairs in branch_edges(last):
                if target not in index:
                    raise NotCompilable(f"branch to {target:#x} outside the function")
                moved = state.copy()
                for source, dest in pairs:
                    self.remap(moved, source, dest)
                yield index[target], moved
            if last.instruction.handler != "fail":
                return
        if i + 1 < len(blocks):  # a fall-through (and a vm.fail with status 0)
            yield i + 1, state

    @staticmethod
    def remap(state: TypeState, source: int, dest: int) -> None:
        if is_ref(source) != is_ref(dest):
            raise NotCompilable("branch operand moves a ref into an i-bank register")
        if not is_ref(source):
            state.move(source, dest)

    def step(self, d, state: TypeState) -> None:
        inst = d.instruction
        handler = inst.handler
        if handler not in EMITTED_KINDS and not (handler in ("formula", "method")
                                                 and c_formula(inst)):
            raise NotCompilable(f"{inst.vm_name} has no C formula")
        if handler == "call":
            self.step_call(d, state)
            return
        if handler == "list_get_ref":
            self.check_list_get_ref(d)
        elif handler == "global":
            self.check_global(d)
        elif handler == "return":
            self.check_typed(state, d.values[0], fragment_types(self.results))
        for operand, value in operand_values(d):
            if operand.kind is not OperandKind.REGISTER or operand.bank == "ref":
                continue
            if operand.access == "r":
                state.read(value, operand.bank)
        for operand, value in operand_values(d):
            if operand.kind is OperandKind.REGISTER and operand.bank != "ref" \
                    and operand.access == "w":
                state.write(value, operand.bank)

    @staticmethod
    def check_typed(state: TypeState, registers, types) -> None:
        if len(registers) != len(types):
            raise NotCompilable("operand count differs from the calling convention")
        for register, kind in zip(registers, types):
            if (kind == "ref") != is_ref(register):
                raise NotCompilable("operand bank differs from the calling convention")
            if kind != "ref":
                state.read(register, kind)

    def step_call(self, d, state: TypeState) -> None:
        call = call_parts(d)
        if call.segment_sizes is not None:
            raise NotCompilable("variadic call")
        callee = call.callee
        if callee & IMPORT_ORDINAL_BIT:
            raise NotCompilable("calls an import")
        if not 0 <= callee < len(self.module.verified):
            raise NotCompilable("calls a function that does not exist")
        verified = self.module.verified[callee]
        self.check_typed(state, call.operands, fragment_types(verified.arguments))
        result_types = fragment_types(verified.results)
        if len(result_types) != len(call.results) or "ref" in result_types:
            raise NotCompilable("call results differ from the callee's")
        for register, kind in zip(call.results, result_types):
            if is_ref(register):
                raise NotCompilable("call result bank differs from the callee's")
            state.write(register, kind)
        self.callees.add(callee)

    def check_list_get_ref(self, d) -> None:
        _, _, type_id, result = d.values
        type_defs = self.module.type_defs
        if not 0 <= type_id < len(type_defs) or type_defs[type_id].name != "!vm.buffer":
            raise NotCompilable("vm.list.get.ref of something other than a buffer")
        if is_move(result):
            raise NotCompilable("vm.list.get.ref moving the element out")

    def check_global(self, d) -> None:
        operands = d.instruction.operands
        if operands[0].kind is not OperandKind.REGISTER:
            width = 4 if operands[-1].bank in ("i32", "f32") else 8
            if not 0 <= d.values[0] <= self.rw_size - width:
                raise NotCompilable("global offset out of range")


def compilable_functions(module) -> tuple[dict[int, FunctionShape], dict[int, str]]:
    """The shapes of the functions the C tier compiles, and why each other one is not."""
    shapes: dict[int, FunctionShape] = {}
    reasons: dict[int, str] = {}
    for ordinal in range(len(module.verified)):
        try:
            shapes[ordinal] = FunctionAnalysis(module, ordinal).run()
        except NotCompilable as why:
            reasons[ordinal] = str(why)
    changed = True
    while changed:  # a function is compiled only with all its callees
        changed = False
        for ordinal, shape in list(shapes.items()):
            missing = [c for c in shape.callees if c not in shapes]
            if missing:
                reasons[ordinal] = f"calls function {missing[0]}, which stays in Python"
                del shapes[ordinal]
                changed = True
    return shapes, reasons


def may_compile(module, ordinal: int) -> bool:
    """Whether function `ordinal` itself passes the analysis (its callees aside): a
    cheap first look, so a module whose called functions all stay in Python (an
    `__init` calling the hal module) never loads or builds its C."""
    verdicts = module.__dict__.setdefault("_c_verdicts", {})
    verdict = verdicts.get(ordinal)
    if verdict is None:
        try:
            FunctionAnalysis(module, ordinal).run()
            verdict = True
        except NotCompilable:
            verdict = False
        verdicts[ordinal] = verdict
    return verdict
