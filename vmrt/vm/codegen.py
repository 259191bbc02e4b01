"""Compiles one verified bytecode function into Python source, once.

The generated function keeps every register in a Python local (`i4` holds the
i32/f32 in register 4, or the whole i64/f64 of the pair 4:5; `r2` holds ref
register 2), so executing an instruction is one or two Python statements with no
decoding, dict lookups or allocation. Blocks become `if blk == N:` arms of one
`while True:` loop in bytecode order, so a forward branch falls through to the
next arm and only backward branches pay a `continue`; a block that branches to
itself becomes its own inner `while True:` loop (the hot shape of compiled loops),
and so does a short cycle of blocks, the test and the body of an ordinary loop
(Loop).

Per-context state (globals storage, rodata buffers, resolved imports, the other
functions) is read through the generated code's module globals, which the module
instance fills in (vmrt.vm.module). Every generated line is mapped back to the
bytecode offset it came from, so a Python exception raised inside generated code
becomes a VMError with a precise VM stack (vmrt.vm.call_errors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from vmrt.isa.decoder import Decoded
from vmrt.isa.operands import OperandKind
from vmrt.isa.registers import is_move
from vmrt.vm import generated_abi
from vmrt.vm.cconv import register_names, walk_fragment
from vmrt.vm import emitters
from vmrt.vm.emitters import reg_name
from vmrt.vm.error_kinds import ERRORS, ErrorKind
from vmrt.vm.instruction_kinds import branch_edges, call_parts
from vmrt.vm.loops import entered_at, inner_first, simple_cycles

def cconv_registers(fragment: str) -> list[str]:
    """Register names an ABI fragment occupies in a callee frame (i64 pairs aligned)."""
    return register_names(fragment)


@dataclass
class CallTarget:
    """What the generator needs to know about a callee."""

    kind: str  # 'internal' or 'import'
    index: int
    arguments: str
    results: str
    is_generator: bool = False  # internal callee compiled as a generator
    name: str = ""
    static_cost: int | None = None  # instructions of a straight-line callee (limits)


#: Simple cycles of blocks become Python loops up to these sizes (MAX_LOOP_BLOCKS:
#: vmrt/vm/loops.py): their code is emitted twice (the loop; and block by block in
#: the dispatch, for code entering them past their first block), and in a larger
#: loop the dispatch and per-block charges are a small part of an iteration.
MAX_LOOP_INSTRUCTIONS = 64

class Loop(NamedTuple):
    """Blocks emitted as one Python loop (`while True:`): each continues in the next
    by falling into its code, or leaves (`blk = N; break`); the last continues in the
    first (`continue`). With limits each block charges itself, as in the dispatch."""

    blocks: tuple[int, ...]

    def after(self, block: int) -> int | None:
        """The block that follows `block` in an iteration (None: it is the last)."""
        position = self.blocks.index(block) + 1
        return self.blocks[position] if position < len(self.blocks) else None


@dataclass
class FunctionPlan:
    """Inputs for generating one function."""

    ordinal: int
    name: str
    arguments: str
    results: str
    blocks: list[tuple[int, list[Decoded]]]  # (block pc, instructions after the marker)
    is_generator: bool
    call_target: object = None  # callable (ordinal_or_import_bit) -> CallTarget
    options: "CodegenOptions" = None  # what to weave into the code besides the semantics
    static_cost: int | None = None  # this function is straight-line: its instruction count

    def __post_init__(self):
        if self.options is None:
            self.options = CodegenOptions()

    @property
    def checkpoints(self) -> bool:
        return self.options.checkpoints


class CodegenOptions(NamedTuple):
    """Variants of the generated code; a context compiles each function once per variant.

    `checkpoints`: the limits of vmrt.vm.context (see "Limits" below).
    `instrumented`: per-instruction hooks (tracing, profiling, debugging);
    plain code pays nothing for either.

    Limits. Each function takes its frame depth `D` as a last parameter and
    fails (RESOURCE_EXHAUSTED) when it exceeds MAXD. Fuel is a counter `FUEL`
    shared by the context's functions (a closure cell): each block charges its
    instruction count on entry (`FUEL -= n`) and calls REFILL(n) when the
    counter goes negative (vmrt.vm.limits, Meter.refill). A straight-line
    function (one block, calls only to such functions) is charged by its
    caller's block, so it pays nothing itself and neither takes nor checks a
    depth (it cannot recurse); its host entry charges it (Meter.entry). Import
    call sites leave the depth in the cell `CUR`, where a host re-entering the
    context finds it. The names are declared in vmrt.vm.generated_abi.
    """

    checkpoints: bool = False
    instrumented: bool = False


@dataclass
class GeneratedFunction:
    source: str
    line_pcs: list[int | None] = field(default_factory=list)  # 1-based line -> pc
    entry_name: str = ""


class _Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.pcs: list[int | None] = []
        self.pc: int | None = None

    def emit(self, indent: int, text: str) -> None:
        for line in text.split("\n"):
            self.lines.append("    " * indent + line)
            self.pcs.append(self.pc)


class FunctionGenerator:
    """Turns a FunctionPlan into Python source (see the module docstring)."""

    def __init__(self, plan: FunctionPlan):
        self.plan = plan
        self.out = _Emitter()
        self.block_index = {pc: i for i, (pc, _) in enumerate(plan.blocks)}
        self.temp_counter = 0

    # -- helpers ------------------------------------------------------------------------
    def block_id(self, pc: int) -> int:
        return self.block_index[pc]

    def temp(self) -> str:
        self.temp_counter += 1
        return f"_t{self.temp_counter}"

    def remap(self, pairs) -> list[str]:
        """Branch operand moves, applied one after another as upstream does."""
        stmts = []
        for src, dst in pairs:
            s, d = reg_name(src), reg_name(dst)
            if s != d:
                stmts.append(f"{d} = {s}")
            if is_move(src) and s != d:
                stmts.append(f"{s} = None")
        return stmts

    # -- whole function ---------------------------------------------------------------------
    def generate(self) -> GeneratedFunction:
        plan = self.plan
        params = cconv_registers(plan.arguments)
        out = self.out
        limits = plan.checkpoints
        entry = f"F{plan.ordinal}"
        # (with limits, its depth last; not a straight-line function's: it is unchecked)
        depth = limits and plan.static_cost is None
        out.emit(0, f"def {entry}({', '.join(params + ['D'] if depth else params)}):")
        if limits:
            self.emit_limits_prologue()
        self.emit_registers(params)
        loops = self.loops()
        body_start = len(out.lines)
        if len(plan.blocks) == 1 and not loops:
            self.emit_block(0, 1)
        else:
            out.emit(1, "blk = 0")
            out.emit(1, "while True:")
            for index in range(len(plan.blocks)):
                out.pc = plan.blocks[index][0]
                out.emit(2, f"if blk == {index}:")
                if index in loops:
                    self.emit_loop(loops[index], 3)
                else:
                    self.emit_block(index, 3)
        if plan.options.instrumented:
            self.wrap_instrumented(body_start)
        if limits:
            self.wrap_limits_scope()
        return GeneratedFunction("\n".join(out.lines) + "\n", out.pcs, entry)

    def emit_registers(self, params: list[str]) -> None:
        """Every register the function uses that is not a parameter, zero or null."""
        used = self.collect_registers()
        initial = [r for r in sorted(used, key=lambda n: (n[0], int(n[1:]))) if r not in params]
        i_regs = [r for r in initial if r[0] == "i"]
        r_regs = [r for r in initial if r[0] == "r"]
        if i_regs:
            self.out.emit(1, " = ".join(i_regs) + " = 0")
        if r_regs:
            self.out.emit(1, " = ".join(r_regs) + " = None")
        if self.plan.is_generator:
            # Make this a generator even when no yield is reachable in the body.
            self.out.emit(1, "if False: yield")

    def wrap_body(self, body_start: int, head: str, tail: str) -> None:
        """Indents the lines from `body_start` under `head` and adds `tail` after them
        (both at the function's top level), keeping the line -> pc map aligned."""
        out = self.out
        body = ["    " + line for line in out.lines[body_start:]]
        body_pcs = out.pcs[body_start:]
        del out.lines[body_start:], out.pcs[body_start:]
        out.pc = None
        out.emit(1, head)
        out.lines.extend(body)
        out.pcs.extend(body_pcs)
        out.pc = None
        out.emit(1, tail)

    def wrap_instrumented(self, body_start: int) -> None:
        """Encloses the body in ENTER ... LEAVE (vmrt.vm.hooks) once it is generated.

        ENTER comes after the register initialisation so a hook sees every
        register; UNWIND records the error of a frame left by an exception.
        """
        self.wrap_body(body_start, f"_vf = ENTER({self.plan.ordinal})\ntry:",
                       "except BaseException:\n    UNWIND(_vf)\n    raise\n"
                       "finally:\n    LEAVE(_vf)")

    # -- limits (see CodegenOptions) ----------------------------------------------------------
    def calls_in(self, instructions) -> list[CallTarget]:
        return [self.plan.call_target(d.values[0]) for d in instructions
                if d.instruction.is_call]

    def block_cost(self, index: int) -> int:
        """Fuel a block charges: its instructions and those of its straight-line callees."""
        instructions = self.plan.blocks[index][1]
        own = sum(d.instruction.cost for d in instructions)
        return own + sum(t.static_cost or 0 for t in self.calls_in(instructions)
                         if t.kind == "internal")

    def emit_limits_prologue(self) -> None:
        calls = [t for _, instructions in self.plan.blocks for t in self.calls_in(instructions)]
        out = self.out
        out.pc = None
        if self.plan.static_cost is not None:  # (paid by its callers; it cannot recurse)
            return
        imports = any(t.kind == "import" for t in calls)
        out.emit(1, "nonlocal FUEL, CUR" if imports else "nonlocal FUEL")
        out.emit(1, "if D > MAXD: DEPTH_EXCEEDED(D)")
        if any(t.kind == "internal" and t.static_cost is None for t in calls):
            out.emit(1, "D1 = D + 1")

    def emit_charge(self, index: int, indent: int) -> None:
        cost = self.block_cost(index)
        self.out.emit(indent, f"FUEL -= {cost}\nif FUEL < 0: REFILL({cost})")

    def wrap_limits_scope(self) -> None:
        """Nests the function in a scope holding FUEL and CUR, so that they are closure
        cells (the context binds its meter's: vmrt.vm.module, vmrt.vm.limits)."""
        out = self.out
        cells = list(generated_abi.CELLS)
        # `global`: the function's calls of itself must not find it in this scope.
        out.lines[:] = [f"def LIMITS_SCOPE({', '.join(cells)}):",
                        f"    global F{self.plan.ordinal}"] + \
            ["    " + line for line in out.lines]
        out.pcs[:] = [None, None] + out.pcs

    def collect_registers(self) -> set[str]:
        names = set()
        for _, instructions in self.plan.blocks:
            for d in instructions:
                for operand, value in zip(d.instruction.operands, d.values):
                    kind = operand.kind
                    if kind is OperandKind.REGISTER:
                        names.add(reg_name(value))
                    elif kind in (OperandKind.VARIADIC_OPERANDS, OperandKind.VARIADIC_RESULTS):
                        if operand.name != "segment_sizes":
                            names.update(reg_name(v) for v in value)
                    elif kind is OperandKind.BRANCH_OPERANDS:
                        for s, t in value:
                            names.add(reg_name(s))
                            names.add(reg_name(t))
                    elif kind is OperandKind.BRANCH_TABLE_CASES:
                        for _, pairs in value:
                            for s, t in pairs:
                                names.add(reg_name(s))
                                names.add(reg_name(t))
        return names

    def successors(self, index: int) -> list[int]:
        """The blocks block `index` may continue in (a vm.fail with a zero status, and a
        block without a terminator, fall into the next one)."""
        _, instructions = self.plan.blocks[index]
        last = instructions[-1] if instructions else None
        if last is None or not last.instruction.is_terminator or \
                last.instruction.handler == "fail":
            return [index + 1] if index + 1 < len(self.plan.blocks) else []
        targets = []
        for operand, value in zip(last.instruction.operands, last.values):
            if operand.kind is OperandKind.BRANCH_TARGET and value in self.block_index:
                targets.append(self.block_id(value))
            elif operand.kind is OperandKind.BRANCH_TABLE_CASES:
                targets.extend(self.block_id(t) for t, _ in value)
        return targets

    # -- loops ------------------------------------------------------------------------------------
    def loops(self) -> dict[int, Loop]:
        """The loops emitted as Python loops, by the block they start at (see Loop):
        every self-loop, and simple cycles of up to MAX_LOOP_INSTRUCTIONS instructions;
        inner and shorter cycles first, no block in two but the first block of a
        """
        count = len(self.plan.blocks)
        successors = [set(self.successors(i)) for i in range(count)]
        predecessors = [set() for _ in range(count)]
        for block, following in enumerate(successors):
            for target in following:
                predecessors[target].add(block)
        taken, loops = set(), {}
        cycles = [entered_at(cycle, predecessors) for cycle in simple_cycles(successors)]
        for cycle in inner_first(cycles):
            if taken.intersection(cycle):
                continue
            size = sum(len(self.plan.blocks[i][1]) for i in cycle)
            if len(cycle) > 1 and size > MAX_LOOP_INSTRUCTIONS:
                continue
            loops[cycle[0]] = Loop(cycle)
            taken.update(cycle)
        return loops

    def emit_loop(self, loop: Loop, indent: int) -> None:
        self.out.emit(indent, "while True:")
        for index in loop.blocks:
            self.emit_block(index, indent + 1, loop)

    # -- blocks ---------------------------------------------------------------------------------
    def emit_block(self, index: int, indent: int, loop: Loop | None = None) -> None:
        """Block `index` in the dispatch or in `loop` (charged, with limits)."""
        pc, instructions = self.plan.blocks[index]
        out = self.out
        if self.plan.checkpoints and self.plan.static_cost is None:
            out.pc = pc
            self.emit_charge(index, indent)
        instrumented = self.plan.options.instrumented
        if instrumented:
            # The block marker is an executed op upstream (traced, a breakpoint site).
            out.pc = pc
            out.emit(indent, f"STEP(_vf, {pc})")
        for d in instructions:
            out.pc = d.pc
            if instrumented:
                out.emit(indent, f"STEP(_vf, {d.pc})")
            if d.instruction.is_terminator:
                self.emit_terminator(d, index, indent, loop)
            else:
                self.emit_instruction(d, indent)
        if not instructions or not instructions[-1].instruction.is_terminator:
            # Verified code always ends blocks with a terminator; a vm.fail with a zero
            # status falls through into the next block (upstream keeps executing).
            self.emit_goto(index + 1, index, indent, loop)

    @staticmethod
    def falls_through(target: int, moves, current: int, loop: Loop | None) -> bool:
        """Whether going to `target` is running on into the next block's code."""
        return loop is not None and not moves and target == loop.after(current)

    def emit_goto(self, target: int, current: int, indent: int, loop: Loop | None,
                  moves=()) -> None:
        out = self.out
        for stmt in moves:
            out.emit(indent, stmt)
        if target >= len(self.plan.blocks):
            # Only a vm.fail with a zero status in the last block gets here.
            fell = ERRORS[ErrorKind.FELL_THROUGH]
            out.emit(indent, f"FAIL({int(fell.status)}, {fell.template!r})")
            return
        if loop is None:
            out.emit(indent, f"blk = {target}")
            if target <= current:
                out.emit(indent, "continue")
            return
        following = loop.after(current)
        if following is None and target == loop.blocks[0]:
            out.emit(indent, "continue")
        elif target == following:
            pass  # (on into the next block's code)
        else:
            out.emit(indent, f"blk = {target}\nbreak")

    # -- terminators (chosen by the row's handler kind, vmrt/isa/ops.py) ---------------------------
    def emit_terminator(self, d: Decoded, index: int, indent: int, loop: Loop | None) -> None:
        _TERMINATORS[d.instruction.handler](self, d, index, indent, loop)

    def emit_branch(self, d, index, indent, loop):
        """An unconditional branch (`vm.br`, and `vm.break`/`vm.cond_break`, whose
        debugger stop vmrt does not make): remap, then continue at the target."""
        (target, pairs), = branch_edges(d)
        self.emit_goto(self.block_id(target), index, indent, loop, self.remap(pairs))

    def emit_cond_branch(self, d, index, indent, loop):
        cond = d.values[0]
        (t_pc, t_ops), (f_pc, f_ops) = branch_edges(d)
        out = self.out
        taken, not_taken = (self.block_id(t_pc), self.remap(t_ops)), \
            (self.block_id(f_pc), self.remap(f_ops))
        # An edge that falls into the loop's next block needs no statement, nor a jump.
        if self.falls_through(*taken, index, loop):
            out.emit(indent, f"if not {reg_name(cond)}:")
            self.emit_arm(not_taken[0], index, indent + 1, loop, not_taken[1])
            return
        out.emit(indent, f"if {reg_name(cond)}:")
        self.emit_arm(taken[0], index, indent + 1, loop, taken[1])
        if not self.falls_through(*not_taken, index, loop):
            out.emit(indent, "else:")
            self.emit_arm(not_taken[0], index, indent + 1, loop, not_taken[1])

    def emit_branch_table(self, d, index, indent, loop):
        (default_pc, default_ops), *cases = branch_edges(d)
        out = self.out
        name = reg_name(d.values[0])
        for case_index, (case_pc, case_ops) in enumerate(cases):
            out.emit(indent, f"{'if' if case_index == 0 else 'elif'} {name} == {case_index}:")
            self.emit_arm(self.block_id(case_pc), index, indent + 1, loop, self.remap(case_ops))
        if cases:
            out.emit(indent, "else:")
            self.emit_arm(self.block_id(default_pc), index, indent + 1, loop,
                          self.remap(default_ops))
        else:
            self.emit_goto(self.block_id(default_pc), index, indent, loop,
                           self.remap(default_ops))

    def emit_arm(self, target: int, current: int, indent: int, loop: Loop | None, moves):
        """emit_goto as the body of an `if` arm, which needs a statement."""
        lines = len(self.out.lines)
        self.emit_goto(target, current, indent, loop, moves)
        if len(self.out.lines) == lines:
            self.out.emit(indent, "pass")  # (on into the next block's code)

    def emit_return(self, d, index, indent, loop):
        names = [reg_name(r) for r in d.values[0]]
        if not names:
            self.out.emit(indent, "return")
        elif len(names) == 1:
            self.out.emit(indent, f"return {names[0]}")
        else:
            self.out.emit(indent, f"return ({', '.join(names)})")

    def emit_fail(self, d, index, indent, loop):
        status, message = d.values
        self.out.emit(indent, f"if {reg_name(status)}:")
        text = bytes(message).decode("utf-8", "replace")
        self.out.emit(indent + 1, f"FAIL({reg_name(status)}, {text!r})")
        # A zero status is not a failure: execution continues with the next block.
        self.emit_goto(index + 1, index, indent, loop)

    def emit_yield(self, d, index, indent, loop):
        target, pairs = d.values
        for stmt in self.remap(pairs):
            self.out.emit(indent, stmt)
        self.out.emit(indent, "yield")
        self.emit_goto(self.block_id(target), index, indent, loop)

    def emit_yieldable_call(self, d, index, indent, loop):
        self.emit_call(d, indent, yieldable=True)
        dest = d.values[-2]
        self.emit_goto(self.block_id(dest), index, indent, loop)

    # -- calls ---------------------------------------------------------------------------------------
    def call_arguments(self, target: CallTarget, segment_sizes, operands) -> list[str]:
        """Argument expressions: one per cconv element; spans become lists of tuples."""
        if segment_sizes is None:
            return [reg_name(r) for r in operands]
        args, reg_i = [], 0
        for seg_i, element in walk_fragment(target.arguments):
            if isinstance(element, tuple):  # a span: segment_sizes[seg_i] tuples
                tuples = []
                for _ in range(segment_sizes[seg_i]):
                    members = [reg_name(r) for r in operands[reg_i:reg_i + len(element)]]
                    reg_i += len(element)
                    tuples.append("(" + ", ".join(members) + ("," if len(members) == 1 else "") + ")")
                args.append("[" + ", ".join(tuples) + "]")
            else:
                args.append(reg_name(operands[reg_i]))
                reg_i += 1
        return args

    def emit_call(self, d: Decoded, indent: int, yieldable: bool) -> None:
        call = call_parts(d)
        target: CallTarget = self.plan.call_target(call.callee)
        args = self.call_arguments(target, call.segment_sizes, call.operands)
        if self.plan.checkpoints:
            if target.kind == "internal":
                args = args + ([] if target.static_cost is not None else ["D1"])
            else:
                self.out.emit(indent, "CUR = D")
        if target.kind == "internal":
            fn = f"F{target.index}"
        else:
            # Yieldable sites get the raw import (it may return a generator); plain
            # sites get a callable that always completes (vmrt.vm.context binds both).
            fn = f"IY{target.index}" if yieldable else f"I{target.index}"
        moved = call.moved_operands()
        result_names = [reg_name(r) for r in call.results]
        call = f"{fn}({', '.join(args)})"
        out = self.out
        if yieldable and target.kind == "import":
            # A native import may hand back a generator: each of its yields suspends
            # the whole VM stack (upstream's DEFERRED), and its return is the result.
            tmp = self.temp()
            out.emit(indent, f"{tmp} = {call}")
            out.emit(indent, f"if {tmp}.__class__ is GENERATOR: {tmp} = yield from {tmp}")
            call = tmp
        elif target.kind == "internal" and target.is_generator:
            if yieldable or self.plan.is_generator:
                call = f"(yield from {call})"
            else:
                call = f"RUN_TO_COMPLETION({call})"
        if not result_names:
            out.emit(indent, call)
        elif len(result_names) == 1:
            out.emit(indent, f"{result_names[0]} = {call}")
        else:
            out.emit(indent, f"{', '.join(result_names)} = {call}")
        for r in moved:
            out.emit(indent, f"{reg_name(r)} = None")

    # -- ordinary instructions (chosen by the row's handler kind, vmrt/isa/ops.py) ---------------
    def emit_instruction(self, d: Decoded, indent: int) -> None:
        inst = d.instruction
        _EMITTERS[inst.handler](self, d, indent)
        if not inst.handles_moves:
            emitters.python_moves(self, d, indent)

    def emit_plain_call(self, d, indent):
        self.emit_call(d, indent, yieldable=False)


#: handler kind -> emitter of a block's body instruction / of its terminator.
_EMITTERS = {
    "formula": emitters.python_formula, "method": emitters.python_formula,
    "global": emitters.python_global, "global_ref": emitters.python_global_ref,
    "resolved": emitters.python_resolved, "list_get_ref": emitters.python_list_get_ref,
    "assign_ref": emitters.python_assign_ref, "discard_refs": emitters.python_discard_refs,
    "call": FunctionGenerator.emit_plain_call,
}
_TERMINATORS = {
    "branch": FunctionGenerator.emit_branch, "cond_branch": FunctionGenerator.emit_cond_branch,
    "branch_table": FunctionGenerator.emit_branch_table,
    "return": FunctionGenerator.emit_return, "fail": FunctionGenerator.emit_fail,
    "yield": FunctionGenerator.emit_yield,
    "call_yieldable": FunctionGenerator.emit_yieldable_call,
}
