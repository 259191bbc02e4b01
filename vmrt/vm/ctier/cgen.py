"""The C tier's code generator: one C function per compilable VM function
(vmrt/vm/ctier/analysis.py), from the `c` formulas of the instruction rows
(vmrt/isa/ops.py), with blocks as labels and registers as typed C locals.

Each VM function becomes `int32_t vf<N>(vmrt_ctx *c, int32_t depth, args...,
results*...)`, returning 0, or 1 after recording an error (vmrt/vm/ctier/runtime.h).
Exported to the host are `vmrt_entry_<N>` (scalars in, results in c->results) and,
for VMVX dispatch functions, `vmrt_workgroups_<N>`, which runs a list of workgroups
in one call without the GIL.
"""

from __future__ import annotations

from vmrt.isa.registers import is_move, is_ref, ref_index
from vmrt.vm.error_kinds import c_error_kinds
from vmrt.vm.ctier.analysis import (
    FunctionAnalysis, argument_registers, fragment_types, TypeState,
)
from vmrt.vm import emitters
from vmrt.vm.instruction_kinds import branch_edges, call_parts

C_TYPES = {"i32": "int32_t", "i64": "int64_t", "f32": "float", "f64": "double",
           "ref": "vmrt_ref *"}
PREFIX = {"i32": "a", "i64": "b", "f32": "f", "f64": "d"}
#: how an entry passes each type (f32 as its bits, so NaN payloads cross intact).
ENTRY_TYPES = {"i32": "int32_t", "i64": "int64_t", "f32": "uint32_t", "f64": "double",
               "ref": "vmrt_ref *"}
#: VMVX's dispatch calling convention (vmrt.hal.vmvx_loader.ENTRY_SIGNATURE).
WORKGROUP_ARGUMENTS = "rrriiiiiiiii"


def var(register: int, kind: str) -> str:
    if kind == "ref" or is_ref(register):
        return f"r{ref_index(register)}"
    return f"{PREFIX[kind]}{register}"


class FunctionEmitter:
    """Writes the C function of one FunctionShape."""

    def __init__(self, shape, module):
        self.shape = shape
        self.module = module
        self.lines: list[str] = []
        self.locals: dict[str, str] = {}  # C local -> type
        self.state: TypeState | None = None
        self.analysis = FunctionAnalysis(module, shape.ordinal)

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)

    def c_type(self, kind: str) -> str:
        return C_TYPES[kind]

    def use(self, register: int, kind: str) -> str:
        name = var(register, kind)
        self.locals[name] = C_TYPES["ref" if is_ref(register) else kind]
        return name

    def signature(self) -> str:
        shape = self.shape
        params = ["vmrt_ctx *c", "int32_t depth"]
        params += [f"{C_TYPES[t]} p{i}" for i, (_, t) in
                   enumerate(argument_registers(shape.arguments))]
        params += [f"{C_TYPES[t]} *o{i}" for i, t in enumerate(fragment_types(shape.results))]
        return f"VMRT_INTERNAL int32_t vf{shape.ordinal}({', '.join(params)})"

    def generate(self) -> str:
        shape = self.shape
        body_start = len(self.lines)
        for i, (register, kind) in enumerate(argument_registers(shape.arguments)):
            name = f"r{register}" if kind == "ref" else var(register, kind)
            self.locals[name] = C_TYPES[kind]
            self.emit(f"{name} = p{i};" + (f" vmrt_retain({name});" if kind == "ref" else ""))
        charges = self.module.static_cost(shape.ordinal) is None
        if charges:  # (a straight-line function is charged by its callers, vmrt.vm.codegen)
            self.emit("if (VMRT_UNLIKELY(depth > c->max_depth)) "
                      "VMRT_RAISE(-1, VMRT_E_DEPTH, depth, 0, NULL);")
        for index, (pc, instructions) in enumerate(shape.blocks):
            if shape.entry_states[index] is None:
                continue  # unreachable
            self.lines.append(f" B{index}:;")
            if charges:
                self.emit(f"VMRT_CHARGE({pc}, {self.block_cost(instructions)});")
            self.state = TypeState(shape.entry_states[index])
            self.last_pc = instructions[-1].pc if instructions else pc
            self.emit_block(index, instructions)
        releases = " ".join(f"vmrt_release({n});" for n, t in sorted(self.locals.items())
                            if t == "vmrt_ref *")
        head = [f"#define VMRT_ORDINAL {shape.ordinal}", self.signature() + " {"]
        head += [f"  {t}{'' if t.endswith('*') else ' '}{n} = {'NULL' if t.endswith('*') else '0'};"
                 for n, t in sorted(self.locals.items())]
        tail = [" done:", f"  {releases}", "  return 0;", " fail:", f"  {releases}",
                "  return 1;", "}", "#undef VMRT_ORDINAL", ""]
        return "\n".join(head + self.lines[body_start:] + tail)

    def block_cost(self, instructions) -> int:
        """Fuel a block charges, as the Python tier's (FunctionGenerator.block_cost): its
        instructions and those of the straight-line functions it calls."""
        cost = 0
        for d in instructions:
            cost += d.instruction.cost
            if d.instruction.is_call:
                cost += self.module.static_cost(d.values[0]) or 0
        return cost

    # -- blocks ---------------------------------------------------------------------------
    def emit_block(self, index: int, instructions) -> None:
        for d in instructions:
            inst = d.instruction
            self.last_pc = d.pc
            if inst.is_terminator:
                _TERMINATORS[inst.handler](self, d, index)
                if inst.handler != "fail":
                    return
                break
            _EMITTERS[inst.handler](self, d)
            if not inst.handles_moves:
                emitters.c_moves(self, d)
            self.step_types(d)
        self.emit_goto(index + 1, [])

    def step_types(self, d) -> None:
        self.analysis.step(d, self.state)  # (the pass that proved the function)

    def emit_goto(self, target: int, pairs) -> None:
        if target >= len(self.shape.blocks):
            self.emit(f"VMRT_RAISE({self.last_pc}, VMRT_E_FELL_THROUGH, 0, 0, NULL);")
            return
        state = self.state.copy()
        for source, dest in pairs:
            if is_ref(source):
                s, t = self.use(source, "ref"), self.use(dest, "ref")
                if s != t:
                    self.emit(f"VMRT_MOVE_REF({t}, {s});" if is_move(source)
                              else f"VMRT_SET_REF({t}, {s});")
                continue
            kind = state.move(source, dest)
            if kind is not None and source != dest:
                self.emit(f"{self.use(dest, kind)} = {self.use(source, kind)};")
        self.emit(f"goto B{target};")

    # -- instructions -----------------------------------------------------------------------
    def emit_call(self, d) -> None:
        call = call_parts(d)
        callee = call.callee
        verified = self.module.verified[callee]
        args = [self.use(r, t) for r, t in zip(call.operands, fragment_types(verified.arguments))]
        result_types = fragment_types(verified.results)
        temps = [f"t{d.pc}_{i}" for i in range(len(result_types))]
        decl = " ".join(f"{C_TYPES[t]} {n};" for n, t in zip(temps, result_types))
        call_args = ", ".join(["c", "depth + 1"] + args + [f"&{n}" for n in temps])
        self.emit(f"{{ {decl}")
        self.emit(f"  if (vf{callee}({call_args})) {{ vmrt_frame(c, VMRT_ORDINAL, {d.pc}); "
                  "goto fail; }")
        for register, kind, temp in zip(call.results, result_types, temps):
            self.emit(f"  {self.use(register, kind)} = {temp};")
        self.emit("}")
        for register in call.moved_operands():
            self.emit(f"VMRT_DROP_REF({self.use(register, 'ref')});")

    # -- terminators ------------------------------------------------------------------------
    def emit_branch(self, d, index) -> None:
        self.last_pc = d.pc
        (target, pairs), = branch_edges(d)
        self.emit_goto(self.block_id(target), pairs)

    def block_id(self, pc: int) -> int:
        return next(i for i, (p, _) in enumerate(self.shape.blocks) if p == pc)

    def emit_cond_branch(self, d, index) -> None:
        self.last_pc = d.pc
        (t_pc, t_pairs), (f_pc, f_pairs) = branch_edges(d)
        self.emit(f"if ({self.use(d.values[0], 'i32')}) {{")
        self.emit_goto(self.block_id(t_pc), t_pairs)
        self.emit("}")
        self.emit_goto(self.block_id(f_pc), f_pairs)

    def emit_branch_table(self, d, index) -> None:
        self.last_pc = d.pc
        edges = branch_edges(d)
        default, cases = edges[0], edges[1:]
        self.emit(f"switch ({self.use(d.values[0], 'i32')}) {{")
        for case_index, (pc, pairs) in enumerate(cases):
            self.emit(f"case {case_index}: {{")
            self.emit_goto(self.block_id(pc), pairs)
            self.emit("}")
        self.emit("default: {")
        self.emit_goto(self.block_id(default[0]), default[1])
        self.emit("}}")

    def emit_return(self, d, index) -> None:
        for i, (register, kind) in enumerate(zip(d.values[0],
                                                 fragment_types(self.shape.results))):
            self.emit(f"*o{i} = {self.use(register, kind)};")
        self.emit("goto done;")

    def emit_fail(self, d, index) -> None:
        self.last_pc = d.pc
        status = self.use(d.values[0], "i32")
        self.emit(f"if ({status}) VMRT_RAISE({d.pc}, VMRT_E_FAIL, {status}, 0, NULL);")


_EMITTERS = {
    "formula": emitters.c_formula, "method": emitters.c_formula,
    "global": emitters.c_global, "list_get_ref": emitters.c_list_get_ref,
    "assign_ref": emitters.c_assign_ref, "discard_refs": emitters.c_discard_refs,
    "call": FunctionEmitter.emit_call,
}
_TERMINATORS = {
    "branch": FunctionEmitter.emit_branch, "cond_branch": FunctionEmitter.emit_cond_branch,
    "branch_table": FunctionEmitter.emit_branch_table, "return": FunctionEmitter.emit_return,
    "fail": FunctionEmitter.emit_fail,
}


def entry_parameters(shape) -> list[str]:
    """The parameters an entry takes after its context and depth: one per argument."""
    return [f"{ENTRY_TYPES[t]} p{i}" for i, (_, t) in enumerate(argument_registers(shape.arguments))]


def entry_function(shape) -> tuple[str, str]:
    """(C definition, cdef declaration) of the host's entry into function N."""
    arguments = argument_registers(shape.arguments)
    results = fragment_types(shape.results)
    params = ["vmrt_ctx *c", "int32_t depth"] + entry_parameters(shape)
    prototype = f"int32_t vmrt_entry_{shape.ordinal}({', '.join(params)})"
    converted = [f"vmrt_f32_bits(p{i})" if t == "f32" else f"p{i}"
                 for i, (_, t) in enumerate(arguments)]
    outs = [f"&o{i}" for i in range(len(results))]
    body = [prototype + " {"]
    body += [f"  {C_TYPES[t]} o{i} = 0;" for i, t in enumerate(results)]
    body.append("  VMRT_CTRL_C_NOTE(c);")
    body.append(f"  if (vf{shape.ordinal}({', '.join(['c', 'depth'] + converted + outs)})) "
                "return 1;")
    for i, t in enumerate(results):
        value = {"f32": f"(int64_t)vmrt_bits_f32(o{i})", "f64": f"(int64_t)vmrt_bits_f64(o{i})"}.get(
            t, f"(int64_t)o{i}")
        body.append(f"  c->results[{i}] = {value};")
    body += ["  return 0;", "}", ""]
    return "\n".join(body), prototype + ";"


def metered_entry_function(shape) -> tuple[str, str]:
    """(C definition, cdef declaration) of the entry into function N under limits, for
    a function that charges fuel: `fuel` in (c->fuel is 0 between calls), and out
    what is left of it (>= 0, the last charge refilled), or -1 when the call failed
    (what is left then in c->fuel). Passing
    fuel as a value spares the host two cdata accesses a call."""
    params = ["vmrt_ctx *c", "int32_t depth", "int64_t fuel"] + entry_parameters(shape)
    prototype = f"int64_t vmrt_metered_{shape.ordinal}({', '.join(params)})"
    args = ", ".join(["c", "depth"] + [f"p{i}" for i in range(len(params) - 3)])
    return _fuel_by_value(prototype, f"vmrt_entry_{shape.ordinal}({args})")


def _fuel_by_value(prototype: str, call: str) -> tuple[str, str]:
    """(C definition, cdef declaration) of `prototype`, a function taking `fuel` that
    runs `call` with it added to c->fuel: what is left of it all, or -1 when `call`
    failed (what is left then stays in c->fuel)."""
    body = f"""{prototype} {{
  c->fuel += fuel;
  if ({call}) return -1;
  fuel = c->fuel;
  c->fuel = 0;
  return fuel;
}}
"""
    return body, prototype + ";"


#: The parameters of vmrt_workgroups_<N> after depth (and, metered, fuel).
_WORKGROUPS_PARAMETERS = ("vmrt_ref *local, vmrt_ref *constants, vmrt_ref *bindings, "
                          "int64_t start, int64_t stop, int32_t sx, int32_t sy, int32_t sz, "
                          "int32_t cx, int32_t cy, int32_t cz")


def workgroups_function(shape) -> tuple[str, str] | None:
    """For a VMVX dispatch function: the entry running workgroups [start, stop) of the
    linearized range (x fastest, as upstream orders them), made here one by one: a
    huge dispatch needs no list of them. On failure, c->results[0] is the failed
    workgroup's index (or of the one Ctrl-C stopped the dispatch before)."""
    if shape.arguments != WORKGROUP_ARGUMENTS or shape.results:
        return None
    prototype = (f"int32_t vmrt_workgroups_{shape.ordinal}(vmrt_ctx *c, int32_t depth, "
                 f"{_WORKGROUPS_PARAMETERS})")
    body = f"""{prototype} {{
  if (cx <= 0 || cy <= 0 || cz <= 0) return 0;  /* no workgroups (and no division by 0) */
  int64_t plane = (int64_t)cx * cy;
  VMRT_CTRL_C_NOTE(c);
  for (int64_t i = start; i < stop; i++) {{
    if (VMRT_UNLIKELY(VMRT_CTRL_C_PRESSED(c))) {{  /* (a straight-line body never charges) */
      c->results[0] = (uint64_t)i;
      return vmrt_error(c, VMRT_E_CTRL_C, 0, 0, NULL);
    }}
    int32_t z = (int32_t)(i / plane), y = (int32_t)(i % plane / cx), x = (int32_t)(i % cx);
    if (vf{shape.ordinal}(c, depth, local, constants, bindings, x, y, z, sx, sy, sz,
                          cx, cy, cz)) {{
      c->results[0] = (uint64_t)i;
      return 1;
    }}
  }}
  return 0;
}}
"""
    return body, prototype + ";"


def metered_workgroups_function(shape) -> tuple[str, str] | None:
    """vmrt_workgroups_<N> under limits, fuel in and out by value as the metered entry
    takes it (metered_entry_function): -1 when a workgroup failed."""
    if shape.arguments != WORKGROUP_ARGUMENTS or shape.results:
        return None
    prototype = (f"int64_t vmrt_metered_workgroups_{shape.ordinal}(vmrt_ctx *c, "
                 f"int32_t depth, int64_t fuel, {_WORKGROUPS_PARAMETERS})")
    return _fuel_by_value(prototype, f"vmrt_workgroups_{shape.ordinal}(c, depth, local, "
                          "constants, bindings, start, stop, sx, sy, sz, cx, cy, cz)")


def generate_module(module, shapes: dict) -> tuple[str, list[str], list[str]]:
    """For a module's compilable functions: the head every unit of the build starts
    with (error kinds, and the prototypes of the functions and their entries), the C of
    each function followed by its entries, and the cdef declarations of the entries."""
    functions = {o: FunctionEmitter(s, module) for o, s in sorted(shapes.items())}
    prototypes = [emitter.signature() + ";" for emitter in functions.values()]
    parts, declarations = [], []
    for ordinal, emitter in functions.items():
        shape = shapes[ordinal]
        # (a straight-line function is paid for by its callers: its plain entry serves)
        metered = metered_entry_function(shape) if module.static_cost(ordinal) is None else None
        made = [m for m in (entry_function(shape), metered, workgroups_function(shape),
                            metered_workgroups_function(shape)) if m is not None]
        parts.append("\n".join([emitter.generate()] + [body for body, _ in made]))
        declarations += [declaration for _, declaration in made]
    head = "\n".join([c_error_kinds()] + prototypes +
                      [f"VMRT_INTERNAL {declaration}" for declaration in declarations])
    return head + "\n", parts, declarations
