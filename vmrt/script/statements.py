"""Statements of scripts, one function at a time: assignments (typed at their
first assignment), if/while/for-range, break/continue, return, assert."""

from __future__ import annotations

import ast

from vmrt.errors import ScriptError, StatusCode
from vmrt.script.calls import CallCompiler, Tuple
from vmrt.script.emitter import FunctionEmitter, Line
from vmrt.script.expressions import Value, literal_int
from vmrt.script.refusals import REFUSED, refuse
from vmrt.script.types import BOOL, FLOAT, INT, Type, annotation_type, inner


class FunctionCompiler(CallCompiler):
    """Compiles one module-level def into vmasm lines (see FunctionEmitter)."""

    def __init__(self, module, node: ast.FunctionDef, in_prelude: bool = False):
        self.module = module
        self.in_prelude = in_prelude
        self.filename = module.filename
        self.node = node
        self.params, self.results = module.functions[node.name]
        self.out = FunctionEmitter(self.at(node))
        self.names: dict[str, Value] = {}
        self.first_assigned: dict[str, int] = {}
        self.loops: list[tuple[str, str]] = []  # (continue label, break label)

    def compile(self) -> tuple[str, list[Line]]:
        """(the vm.func header, the body lines)."""
        header = self.parameters()
        body = self.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
        self.block(body)
        if not self.out.terminated:
            where = self.at(self.node)
            if self.results:
                self.out.jump(self.out.trap(StatusCode.FAILED_PRECONDITION,
                                            f"function '{self.node.name}' ended without "
                                            "returning a value", where), where)
            else:
                self.out.emit("vm.return", where, terminator=True)
        self.cover_arguments()
        results = ", ".join(t.vm or t.bank for t in self.results)
        return f"vm.func @{self.node.name}({header}) -> ({results}) {{", self.out.lines()

    def parameters(self) -> str:
        """Declares the arguments as iree-as-module numbers them (one after another)
        while using them where they arrive (i64/f64 in aligned pairs)."""
        declared, next_i32, next_ref = [], 0, 0
        self.argument_registers = []
        for arg, type_ in zip(self.node.args.args, self.params):
            register = self.out.allocate(type_.bank, fresh=True)
            self.argument_registers.append(register)
            if type_.bank == "ref":
                declared.append(f"%r{next_ref}: {type_.vm}")
                next_ref += 1
            elif type_.bank in ("i64", "f64"):
                declared.append(f"%i{next_i32}:{next_i32 + 1}: {type_.bank}")
                next_i32 += 2
            else:
                declared.append(f"%i{next_i32}: {type_.bank}")
                next_i32 += 1
        # Widened only once every argument has its register (they arrive together).
        for arg, type_, register in zip(self.node.args.args, self.params,
                                        self.argument_registers):
            value = Value(type_, register)
            if type_.inner:
                wide = self.widen(arg, register, type_)
                value = Value(wide.type, self.out.allocate(wide.type.bank))
                self.move(arg, value.reg, wide)
            self.names[arg.arg] = value
            self.first_assigned[arg.arg] = arg.lineno
        self.out.release_temps()
        return ", ".join(declared)

    def cover_arguments(self) -> None:
        """A block no branch reaches, reading the last argument register of each
        bank: the assembler (as iree-as-module) sizes the register file by what the
        body names, and the runtime needs it to hold every argument."""
        last = {}
        for type_, value in zip(self.params, self.argument_registers):
            last["ref" if type_.bank == "ref" else "i"] = (type_, value)
        if not last:
            return
        label = self.out.new_label("arguments")
        lines = [Line(label + ":", None)]
        test = {"i32": "vm.cmp.nz.i32", "f32": "vm.cmp.nz.i32", "i64": "vm.cmp.nz.i64",
                "f64": "vm.cmp.nan.f64", "ref": "vm.cmp.nz.ref"}
        for type_, register in last.values():
            flag = self.out.allocate("i32", fresh=True)
            bank = "i32" if type_.bank == "f32" else type_.bank
            lines.append(Line(f"{flag} = {test[bank]} {register}", self.at(self.node)))
        lines.append(Line(f'vm.fail {flag}, "unreachable"', self.at(self.node)))
        self.out.cold += lines

    # -- statements -------------------------------------------------------------------------
    def block(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            method = getattr(self, "stmt_" + type(statement).__name__, None)
            if method is None:
                raise refuse(statement, self.filename)
            method(statement)
            self.out.release_temps()

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node: ast.Expr):
        if type(node.value).__name__ in REFUSED:
            raise refuse(node.value, self.filename)
        if not isinstance(node.value, ast.Call):
            raise self.fail(node, "an expression statement must be a call (its value is "
                                  "not used)")
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign):
        if len(node.targets) == 1:
            return self.assign(node.targets[0], node.value)
        value = self.stable(node, self.expr(node.value))
        for target in node.targets:
            self.assign_value(target, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if not isinstance(node.target, ast.Name):
            raise self.fail(node, "annotations are only supported on plain names")
        declared = annotation_type(node.annotation)
        if not declared:
            raise self.fail(node.annotation, f"unknown type '{ast.unparse(node.annotation)}'"
                                             "; use int, float, bool, bytearray, list[int] "
                                             "or list[float]")
        declared = inner(declared)
        name = node.target.id
        existing = self.names.get(name)
        if existing is not None and existing.type != declared:
            raise self.conflict(node.target, existing.type, declared)
        if existing is None:
            self.check_assignable(node.target)
            existing = Value(declared, self.out.variable(declared.bank))
            self.names[name] = existing
            self.first_assigned[name] = node.lineno
        if node.value is None:
            if declared.bank == "ref":
                raise self.fail(node, f"'{name}' needs a value ({declared} cannot be empty)")
            self.move(node, existing.reg, self.const(node, 0 if declared != FLOAT else 0.0)
                      if declared != BOOL else self.const(node, False))
            return
        self.expr_into(node.value, existing.reg, declared)

    def assign(self, target: ast.expr, value_node: ast.expr) -> None:
        if isinstance(target, ast.Name):
            existing = self.names.get(target.id)
            dest = existing
            value = self.expr(value_node, dest)
            return self.assign_value(target, value)
        if isinstance(target, ast.Subscript):
            return self.store_item(target, value_node)
        if isinstance(target, ast.Tuple):
            if isinstance(value_node, ast.Tuple):
                if len(value_node.elts) != len(target.elts):
                    raise self.fail(target, f"{len(target.elts)} names for "
                                            f"{len(value_node.elts)} values")
                values = [self.stable(e, self.expr(e)) for e in value_node.elts]
            else:
                value = self.expr(value_node)
                if not isinstance(value, Tuple) or len(value.values) != len(target.elts):
                    raise self.fail(target, f"{len(target.elts)} names for a value of type "
                                            f"{value.type}")
                values = value.values
            for element, value in zip(target.elts, values):
                self.assign_value(element, value)
            return None
        raise self.fail(target, f"cannot assign to {type(target).__name__}")

    def stable(self, node: ast.AST, value: Value) -> Value:
        """`value` in a register no assignment of this statement overwrites."""
        if isinstance(value, Tuple) or value.constant is not None or \
                any(value.reg == register for _, register in self.out.temps):
            return value
        copy = self.out.temp(value.type)
        self.move(node, copy, value)
        return Value(value.type, copy)

    def assign_value(self, target: ast.expr, value: Value) -> None:
        if isinstance(target, ast.Subscript):
            return self.store_item(target, None, value)
        if not isinstance(target, ast.Name):
            raise self.fail(target, "only names and items can be assigned to here")
        if value.type.bank == "none":
            raise self.fail(target, f"cannot assign a {value.type} result to a variable")
        existing = self.names.get(target.id)
        if existing is None:
            self.check_assignable(target)
            register = self.out.variable(value.type.bank, value.reg)
            self.move(target, register, value)
            value = Value(value.type, register)
            self.names[target.id] = Value(value.type, value.reg)
            self.first_assigned[target.id] = target.lineno
            return None
        try:
            value = self.convert(target, value, existing.type)
        except ScriptError:
            raise self.conflict(target, existing.type, value.type) from None
        self.move(target, existing.reg, value)
        return None

    def check_assignable(self, target: ast.Name) -> None:
        name = target.id
        if name in self.module.constants or name in self.module.functions or \
                name in self.module.host_names:
            raise self.fail(target, f"'{name}' is defined at module level; module-level "
                                    "names cannot be assigned (global variables that change "
                                    "are not supported); use another name")

    def conflict(self, target: ast.Name, was: Type, now: Type) -> ScriptError:
        line = self.first_assigned.get(target.id, "?")
        return self.fail(target, f"'{target.id}' is {was} (since line {line}) but is "
                                 f"assigned a {now} here; use another name or convert "
                                 f"with {was}(...)")

    def stmt_AugAssign(self, node: ast.AugAssign):
        target = node.target
        if isinstance(target, ast.Name):
            current = self.expr(target)
            value = self.binary(node, node.op, current, self.expr(node.value), current) \
                if current.type.is_number else None
            if value is None:
                raise self.fail(node, f"augmented assignment needs a number, got "
                                      f"{current.type}")
            return self.assign_value(target, value)
        if not isinstance(target, ast.Subscript):
            raise self.fail(target, "augmented assignment needs a name or an item")
        container = self.expr(target.value)
        where = self.index(target, container)
        current = self.load_item(target, container, where, None)
        value = self.binary(node, node.op, current, self.expr(node.value), None)
        self.store_at(target, container, where, value)
        return None

    # -- control flow ------------------------------------------------------------------------
    def stmt_If(self, node: ast.If):
        where = self.at(node)
        then, done = self.out.new_label("then"), self.out.new_label("endif")
        otherwise = self.out.new_label("else") if node.orelse else done
        self.jump_if(node.test, then, otherwise)
        self.out.release_temps()
        self.out.place(then, where)
        self.block(node.body)
        if node.orelse:
            self.out.jump(done, where) if not self.out.terminated else None
            self.out.place(otherwise, where)
            self.block(node.orelse)
        self.out.place(done, where)

    def stmt_While(self, node: ast.While):
        if node.orelse:
            raise refuse(node.orelse[0], self.filename, "else on loops is",
                         "a flag variable set before break")
        where = self.at(node)
        body, again, done = (self.out.new_label(n) for n in ("loop", "again", "endloop"))
        # The test is compiled at the top (entry) and at the bottom (each further
        # round), so a round runs one branch, as iree-compile lays loops out.
        self.jump_if(node.test, body, done)
        self.out.release_temps()
        self.loop_body(node.body, body, again, done)
        self.out.place(again, where, forward=True)
        self.jump_if(node.test, body, done)
        self.out.release_temps()
        self.out.place(done, where)

    def loop_body(self, statements, body: str, again: str, done: str) -> None:
        self.out.place(body, self.at(statements[0]))
        self.loops.append((again, done))
        self.block(statements)
        self.loops.pop()

    def stmt_Break(self, node):
        if not self.loops:
            raise self.fail(node, "break outside a loop")
        self.out.jump(self.loops[-1][1], self.at(node))

    def stmt_Continue(self, node):
        if not self.loops:
            raise self.fail(node, "continue outside a loop")
        self.out.jump(self.loops[-1][0], self.at(node))

    def stmt_Return(self, node: ast.Return):
        if node.value is None:
            values = []
        elif isinstance(node.value, ast.Tuple):
            values = [self.expr(e) for e in node.value.elts]
        else:
            value = self.expr(node.value)
            values = value.values if isinstance(value, Tuple) else [value]
        if len(values) != len(self.results):
            raise self.fail(node, f"'{self.node.name}' returns {len(self.results)} "
                                  f"value{'s' if len(self.results) != 1 else ''} (from its "
                                  f"annotation), this returns {len(values)}")
        registers = [self.narrow(node, self.convert(node, v, inner(t)), t)
                     for v, t in zip(values, self.results)]
        text = "vm.return" + (" " + ", ".join(registers) if registers else "")
        self.out.emit(text, self.at(node), terminator=True)

    def stmt_Assert(self, node: ast.Assert):
        message = "AssertionError"
        if node.msg is not None:
            if not (isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str)):
                raise self.fail(node.msg, "an assert message must be a string literal")
            message += ": " + node.msg.value
        ok = self.out.new_label("ok")
        self.jump_if(node.test, ok, self.out.trap(StatusCode.FAILED_PRECONDITION, message,
                                                  self.at(node)))
        self.out.place(ok, self.at(node))

    def stmt_For(self, node: ast.For):
        """`for NAME in range(...)`: the bounds are evaluated once, as range's are;
        a step of 1 or -1 (written as a literal) loops on a comparison, any other
        step on a trip count computed first (no overflow near the 64-bit ends)."""
        if node.orelse:
            raise refuse(node.orelse[0], self.filename, "else on loops is",
                         "a flag variable set before break")
        call = node.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "range" and 1 <= len(call.args) <= 3
                and not call.keywords):
            raise refuse(node.iter, self.filename, "for loops over anything but range(...) "
                         "are", "for i in range(len(xs)) and index")
        if not isinstance(node.target, ast.Name):
            raise self.fail(node.target, "a for loop needs one name to count with")
        args = list(call.args)
        start = args.pop(0) if len(args) > 1 else ast.copy_location(ast.Constant(0), call)
        stop = args.pop(0)
        step = literal_int(args[0]) if args else 1
        if step == 0:
            raise self.fail(call, "range() step must not be zero")
        bounds = [self.loop_bound(n, node.body) for n in (start, stop)]
        step_value = self.const(call, step) if step is not None else \
            self.loop_bound(args[0], node.body)
        variable = self.loop_variable(node.target)
        counts_itself = not _assigns(node.body, node.target.id)
        counter = variable.reg if counts_itself else self.out.allocate("i64")
        if step in (1, -1):
            self.range_by_one(node, bounds, step_value, counter, variable, counts_itself)
        else:
            self.range_by_count(node, bounds, step_value, counter, variable, counts_itself)

    def loop_bound(self, node: ast.expr, body: list[ast.stmt]) -> Value:
        """A range argument, held where the loop body cannot change it."""
        value = self.convert(node, self.expr(node), INT)
        if value.constant is not None or (isinstance(node, ast.Name) and
                                          value.type == INT and not _assigns(body, node.id)):
            return value
        register = self.out.allocate("i64")
        self.move(node, register, value)
        return Value(INT, register)

    def loop_variable(self, target: ast.Name) -> Value:
        existing = self.names.get(target.id)
        if existing is not None:
            if existing.type != INT:
                raise self.conflict(target, existing.type, INT)
            return existing
        self.check_assignable(target)
        value = Value(INT, self.out.variable("i64"))
        self.names[target.id] = value
        self.first_assigned[target.id] = target.lineno
        return value

    def range_by_one(self, node, bounds, step: Value, counter: str, variable: Value,
                     counts_itself: bool) -> None:
        (start, stop), where = bounds, self.at(node)
        enter, body, again, leave, done = (self.out.new_label(n) for n in
                                           ("enter", "loop", "again", "leave", "endloop"))
        ascending = step.constant == 1

        def more(value: str) -> str:
            test = self.out.temp(BOOL)
            a, b = (value, stop.reg) if ascending else (stop.reg, value)
            self.out.emit(f"{test} = vm.cmp.lt.i64.s {a}, {b}", where)
            return test

        self.out.branch(more(start.reg), enter, done, where)
        self.out.place(enter, where)
        self.move(node, counter, start)
        self.out.release_temps()
        self.counted_body(node, body, again, done, counter, variable, counts_itself)
        self.out.emit(f"{counter} = vm.add.i64 {counter}, {step.reg}", where)
        self.out.branch(more(counter), body, leave, where)
        self.loop_exit(node, leave, done, step, variable, counts_itself)

    def range_by_count(self, node, bounds, step: Value, counter: str, variable: Value,
                       counts_itself: bool) -> None:
        (start, stop), where = bounds, self.at(node)
        if step.constant is None:
            nonzero = self.out.temp(BOOL)
            self.out.emit(f"{nonzero} = vm.cmp.nz.i64 {step.reg}", where)
            self.out.check(nonzero, StatusCode.INVALID_ARGUMENT,
                           "ValueError: range() arg 3 must not be zero", where)
        remaining = self.trip_count(node, start, stop, step)
        enter, body, again, leave, done = (self.out.new_label(n) for n in
                                           ("enter", "loop", "again", "leave", "endloop"))
        self.out.branch(self.truth(node, remaining)[0], enter, done, where)
        self.out.place(enter, where)
        self.move(node, counter, start)
        self.out.release_temps()
        self.counted_body(node, body, again, done, counter, variable, counts_itself)
        self.out.emit(f"{counter} = vm.add.i64 {counter}, {step.reg}", where)
        self.out.emit(f"{remaining.reg} = vm.sub.i64 {remaining.reg}, "
                      f"{self.out.constant('i64', 1)}", where)
        self.out.branch(self.truth(node, remaining)[0], body, leave, where)
        self.loop_exit(node, leave, done, step, variable, counts_itself)

    def trip_count(self, node, start: Value, stop: Value, step: Value) -> Value:
        """len(range(start, stop, step)), as an unsigned 64-bit count."""
        ins = self.ins
        up = self.compare_ints(node, "cmp.lt", self.const(node, 0), step)
        low, high, size = (self.out.temp(INT) for _ in range(3))
        ins(node, f"{low} = vm.select.i64 {up.reg} ? {start.reg} : {stop.reg}")
        ins(node, f"{high} = vm.select.i64 {up.reg} ? {stop.reg} : {start.reg}")
        ins(node, f"{size} = vm.sub.i64 {self.out.constant('i64', 0)}, {step.reg}")
        ins(node, f"{size} = vm.select.i64 {up.reg} ? {step.reg} : {size}")
        some = self.compare_ints(node, "cmp.lt", Value(INT, low), Value(INT, high))
        count = self.out.allocate("i64")
        ins(node, f"{high} = vm.sub.i64 {high}, {low}")
        ins(node, f"{high} = vm.sub.i64 {high}, {self.out.constant('i64', 1)}")
        ins(node, f"{high} = vm.div.i64.u {high}, {size}")
        ins(node, f"{high} = vm.add.i64 {high}, {self.out.constant('i64', 1)}")
        ins(node, f"{count} = vm.select.i64 {some.reg} ? {high} : "
                  f"{self.out.constant('i64', 0)}")
        return Value(INT, count)

    def counted_body(self, node, body: str, again: str, done: str, counter: str,
                     variable: Value, counts_itself: bool) -> None:
        self.out.place(body, self.at(node))
        if not counts_itself:
            self.move(node, variable.reg, Value(INT, counter))
        self.loops.append((again, done))  # break skips loop_exit's step back
        self.block(node.body)
        self.loops.pop()
        self.out.place(again, self.at(node), forward=True)

    def loop_exit(self, node, leave: str, done: str, step: Value, variable: Value,
                  counts_itself: bool) -> None:
        """After the last round the variable keeps the last value range gave (a
        variable counting itself went one step past it)."""
        self.out.place(leave, self.at(node))
        if counts_itself:
            self.out.emit(f"{variable.reg} = vm.sub.i64 {variable.reg}, {step.reg}",
                          self.at(node))
        self.out.place(done, self.at(node))


def _assigns(statements: list[ast.stmt], name: str) -> bool:
    """Whether the statements assign `name` (then a loop keeps its own counter)."""
    for statement in statements:
        for child in ast.walk(statement):
            if isinstance(child, ast.Name) and child.id == name and \
                    isinstance(child.ctx, ast.Store):
                return True
    return False
