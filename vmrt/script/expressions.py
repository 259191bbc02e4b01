"""Expressions of scripts: values in registers, Python's numeric rules (promotion
to float, floor division, wrap-around at 64 bits) and short-circuit conditions."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from vmrt.errors import StatusCode
from vmrt.script.refusals import constant_refusal, error, refuse
from vmrt.script.types import BOOL, FLOAT, INT, Type

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
DIVISION_BY_ZERO = "ZeroDivisionError: integer division or modulo by zero"
FLOAT_DIVISION_BY_ZERO = "ZeroDivisionError: float division by zero"
_INT_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.BitAnd: "and",
               ast.BitOr: "or", ast.BitXor: "xor"}
_FLOAT_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}
_BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)
#: comparison -> (integer instruction, swap operands, negate result)
_INT_COMPARE = {ast.Eq: ("cmp.eq", False, False), ast.NotEq: ("cmp.ne", False, False),
                ast.Lt: ("cmp.lt", False, False), ast.Gt: ("cmp.lt", True, False),
                ast.LtE: ("cmp.lt", True, True), ast.GtE: ("cmp.lt", False, True)}
_FLOAT_COMPARE = {ast.Eq: ("cmp.eq", False, "o"), ast.NotEq: ("cmp.ne", False, "u"),
                  ast.Lt: ("cmp.lt", False, "o"), ast.Gt: ("cmp.lt", True, "o"),
                  ast.LtE: ("cmp.lte", False, "o"), ast.GtE: ("cmp.lte", True, "o")}


@dataclass(frozen=True)
class Value:
    """A value of the script held in register `reg` (`constant`: its Python value
    when it is a literal, for operations that fold or pick a shorter lowering)."""

    type: Type
    reg: str
    constant: object = None


class ExpressionCompiler:
    """Compiles expressions into the FunctionEmitter `self.out`; the statement
    compiler (vmrt.script.statements) subclasses it and supplies `self.names`
    (local Values), `self.module` (the module's functions, imports, constants)."""

    filename: str

    def at(self, node: ast.AST) -> tuple[int, int]:
        return (node.lineno, node.col_offset + 1)

    def fail(self, node: ast.AST, message: str):
        return error(node, self.filename, message)

    def ins(self, node: ast.AST, text: str) -> None:
        self.out.emit(text, self.at(node))

    def result(self, type_: Type, dest: Value | None) -> str:
        """Where an instruction producing a `type_` writes: `dest` when it has that
        type (the register of the variable being assigned), else a temporary."""
        if dest is not None and dest.type == type_:
            return dest.reg
        return self.out.temp(type_)

    def value_holding(self, node: ast.AST, type_: Type, dest: Value | None,
                      instruction: str) -> Value:
        """The `type_` value `instruction` (the text right of ` = `) computes, written
        where `result` says."""
        out = self.result(type_, dest)
        self.ins(node, f"{out} = {instruction}")
        return Value(type_, out)

    def temp_holding(self, node: ast.AST, type_: Type, instruction: str) -> str:
        """The register of a new temporary set by `instruction`."""
        return self.value_holding(node, type_, None, instruction).reg

    # -- entry points ------------------------------------------------------------------
    def expr(self, node: ast.expr, dest: Value | None = None) -> Value:
        """The value of `node`. With `dest` (the variable being assigned) the last
        instruction, and only it, may write the value there: callers still move the
        result when its register is another. Operands are all read before."""
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise refuse(node, self.filename)
        return method(node, dest)

    def expr_into(self, node: ast.expr, dest: str, type_: Type) -> None:
        """Evaluates `node` into register `dest` of type `type_` (promoting)."""
        value = self.convert(node, self.expr(node, Value(type_, dest)), type_)
        self.move(node, dest, value)

    def move(self, node: ast.AST, dest: str, value: Value) -> None:
        if value.reg == dest:
            return
        bank = value.type.bank
        if bank == "i64":
            self.ins(node, f"{dest} = vm.or.i64 {value.reg}, {value.reg}")
        elif bank in ("i32", "f32") and value.type.cconv == "i":
            self.ins(node, f"{dest} = vm.or.i32 {value.reg}, {value.reg}")
        elif bank == "ref":
            self.ins(node, f"{dest} = vm.assign.ref {value.reg}")
        else:  # floats: a select of one value is a move that keeps every bit
            always = self.out.constant("i32", 1)
            self.ins(node, f"{dest} = vm.select.{bank} {always} ? {value.reg} : {value.reg}")

    def convert(self, node: ast.AST, value: Value, to: Type) -> Value:
        """`value` as `to` where Python's implicit promotions allow (bool -> int ->
        float); a ScriptError otherwise."""
        if value.type == to:
            return value
        if value.type == BOOL and to in (INT, FLOAT):
            value = self.to_int(node, value)
            return value if to == INT else self.to_float(node, value)
        if value.type == INT and to == FLOAT:
            return self.to_float(node, value)
        raise self.fail(node, f"expected {to}, got {value.type}")

    def to_int(self, node: ast.AST, value: Value, dest: Value | None = None) -> Value:
        if value.type == INT:
            return value
        if value.constant is not None:
            return self.const(node, int(value.constant))
        return self.value_holding(node, INT, dest, f"vm.ext.i32.i64.u {value.reg}")

    def to_float(self, node: ast.AST, value: Value, dest: Value | None = None) -> Value:
        if value.type == FLOAT:
            return value
        if value.constant is not None:
            return self.const(node, float(value.constant))
        value = self.to_int(node, value)
        return self.value_holding(node, FLOAT, dest, f"vm.cast.si64.f64 {value.reg}")

    def const(self, node: ast.AST, value) -> Value:
        if isinstance(value, bool):
            return Value(BOOL, self.out.constant("i32", int(value)), value)
        if isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise self.fail(node, f"integer {value} does not fit in 64 bits")
            return Value(INT, self.out.constant("i64", value), value)
        return Value(FLOAT, self.out.constant("f64", float(value)), float(value))

    # -- leaves --------------------------------------------------------------------------
    def expr_Constant(self, node: ast.Constant, dest):
        refusal = constant_refusal(node.value)
        if refusal is not None:
            raise refuse(node, self.filename, *refusal)
        return self.const(node, node.value)

    def expr_Name(self, node: ast.Name, dest):
        found = self.names.get(node.id)
        if found is not None:
            return found
        if node.id in self.module.constants:
            return self.const(node, self.module.constants[node.id])
        raise self.fail(node, f"name '{node.id}' is not defined here (assign it before "
                              "this line, or define it at module level)")

    # -- operators -----------------------------------------------------------------------
    def expr_UnaryOp(self, node: ast.UnaryOp, dest):
        if isinstance(node.op, ast.Not):
            return self.bool_value(node, dest)
        value = self.expr(node.operand)
        if not value.type.is_number:
            raise self.fail(node, f"unary {type(node.op).__name__} needs a number, "
                                  f"got {value.type}")
        if isinstance(node.op, ast.UAdd):
            return self.to_int(node, value, dest) if value.type == BOOL else value
        if value.type == FLOAT:
            out = self.result(FLOAT, dest)
            if isinstance(node.op, ast.Invert):
                raise self.fail(node, "~ needs an int, got float")
            self.ins(node, f"{out} = vm.neg.f64 {value.reg}")
            return Value(FLOAT, out)
        value = self.to_int(node, value)
        out = self.result(INT, dest)
        if isinstance(node.op, ast.Invert):
            self.ins(node, f"{out} = vm.xor.i64 {value.reg}, {self.out.constant('i64', -1)}")
        else:
            self.ins(node, f"{out} = vm.sub.i64 {self.out.constant('i64', 0)}, {value.reg}")
        return Value(INT, out)

    def expr_BinOp(self, node: ast.BinOp, dest):
        if isinstance(node.left, ast.List) or isinstance(node.right, ast.List):
            return self.list_repeat(node, dest)
        left, right = self.expr(node.left), self.expr(node.right)
        for side in (left, right):
            if not side.type.is_number:
                raise self.fail(node, f"'{_op_text(node.op)}' needs numbers, got {side.type}")
        return self.binary(node, node.op, left, right, dest)

    def binary(self, node: ast.AST, op: ast.operator, left: Value, right: Value,
               dest: Value | None) -> Value:
        """left OP right with Python's types: bools count as ints, an int beside a
        float as a float, `/` always gives a float."""
        if isinstance(op, _BITWISE):
            if FLOAT in (left.type, right.type):
                raise self.fail(node, f"'{_op_text(op)}' needs ints, got float")
            if left.type == right.type == BOOL and not isinstance(op, (ast.LShift,
                                                                         ast.RShift)):
                return self.value_holding(
                    node, BOOL, dest, f"vm.{_INT_BINARY[type(op)]}.i32 {left.reg}, {right.reg}")
        if isinstance(op, ast.MatMult):
            raise refuse(node, self.filename, "'@' is", "a loop")
        if isinstance(op, ast.Div) or FLOAT in (left.type, right.type):
            return self.float_binary(node, op, self.to_float(node, left),
                                     self.to_float(node, right), dest)
        return self.int_binary(node, op, self.to_int(node, left), self.to_int(node, right),
                               dest)

    def int_binary(self, node, op, left: Value, right: Value, dest) -> Value:
        name = _INT_BINARY.get(type(op))
        if name is not None:
            return self.value_holding(node, INT, dest, f"vm.{name}.i64 {left.reg}, {right.reg}")
        if isinstance(op, (ast.FloorDiv, ast.Mod)):
            return self.int_floor_division(node, op, left, right, dest)
        if isinstance(op, (ast.LShift, ast.RShift)):
            return self.shift(node, op, left, right, dest)
        if isinstance(op, ast.Pow):
            if right.constant is None or right.constant < 0:
                negative = self.compare_ints(node, "cmp.lt", right, self.const(node, 0))
                self.check_not(node, negative, StatusCode.INVALID_ARGUMENT,
                               "ValueError: negative exponent of an int (use a float base)")
            return self.call_helper(node, "__vmrt_int_pow", [left, right], 0, dest)
        raise self.fail(node, f"'{_op_text(op)}' is not an int operation")

    def int_floor_division(self, node, op, left: Value, right: Value, dest) -> Value:
        """Python's // and %: the quotient rounds toward negative infinity and the
        remainder takes the divisor's sign. vm.div.i64.s truncates (and is undefined
        for INT64_MIN / -1 in IREE's C), so -1 divides as 1 and the sign is fixed."""
        divisor = right.reg
        known_positive = right.constant is not None and right.constant > 0
        if not known_positive:
            nonzero = self.temp_holding(node, BOOL, f"vm.cmp.nz.i64 {right.reg}")
            self.out.check(nonzero, StatusCode.INVALID_ARGUMENT, DIVISION_BY_ZERO,
                           self.at(node))
            minus_one = self.compare_ints(node, "cmp.eq", right, self.const(node, -1))
            divisor = self.temp_holding(
                node, INT, f"vm.select.i64 {minus_one.reg} ? {self.out.constant('i64', 1)} : "
                           f"{right.reg}")
        remainder = self.temp_holding(node, INT, f"vm.rem.i64.s {left.reg}, {divisor}")
        # The remainder needs fixing when nonzero and of the other sign than the divisor.
        signs = self.temp_holding(node, INT, f"vm.xor.i64 {remainder}, {right.reg}")
        fix = self.temp_holding(node, BOOL,
                                f"vm.cmp.lt.i64.s {signs}, {self.out.constant('i64', 0)}")
        nonzero_remainder = self.temp_holding(node, BOOL, f"vm.cmp.nz.i64 {remainder}")
        self.ins(node, f"{fix} = vm.and.i32 {fix}, {nonzero_remainder}")
        out = self.result(INT, dest)
        if isinstance(op, ast.Mod):
            step = self.temp_holding(node, INT, f"vm.select.i64 {fix} ? {right.reg} : "
                                                f"{self.out.constant('i64', 0)}")
            self.ins(node, f"{out} = vm.add.i64 {remainder}, {step}")
            return Value(INT, out)
        quotient = self.temp_holding(node, INT, f"vm.div.i64.s {left.reg}, {divisor}")
        if divisor != right.reg:  # x // -1 == -x (wrapping for INT64_MIN)
            negated = self.temp_holding(node, INT,
                                        f"vm.sub.i64 {self.out.constant('i64', 0)}, {left.reg}")
            self.ins(node, f"{quotient} = vm.select.i64 {minus_one.reg} ? {negated} : "
                           f"{quotient}")
        step = self.temp_holding(node, INT, f"vm.ext.i32.i64.u {fix}")
        self.ins(node, f"{out} = vm.sub.i64 {quotient}, {step}")
        return Value(INT, out)

    def shift(self, node, op, left: Value, right: Value, dest) -> Value:
        """<< and >> as CPython within 64 bits: a negative count fails (ValueError);
        a count of 64 or more shifts every bit out (<< gives 0, >> the sign)."""
        left_shift = isinstance(op, ast.LShift)
        out = self.result(INT, dest)
        instruction = "vm.shl.i64" if left_shift else "vm.shr.i64.s"
        if right.constant is not None and 0 <= right.constant <= 63:
            amount = self.out.constant("i32", right.constant)
            self.ins(node, f"{out} = {instruction} {left.reg}, {amount}")
            return Value(INT, out)
        if right.constant is None or right.constant < 0:
            negative = self.compare_ints(node, "cmp.lt", right, self.const(node, 0))
            self.check_not(node, negative, StatusCode.INVALID_ARGUMENT,
                           "ValueError: negative shift count")
        too_far = self.compare_ints(node, "cmp.lt", self.const(node, 63), right)
        count = self.temp_holding(node, INT, f"vm.select.i64 {too_far.reg} ? "
                                             f"{self.out.constant('i64', 63)} : {right.reg}")
        amount = self.temp_holding(node, BOOL, f"vm.trunc.i64.i32 {count}")
        shifted = self.temp_holding(node, INT, f"{instruction} {left.reg}, {amount}")
        if left_shift:
            self.ins(node, f"{out} = vm.select.i64 {too_far.reg} ? "
                           f"{self.out.constant('i64', 0)} : {shifted}")
        else:
            self.move(node, out, Value(INT, shifted))
        return Value(INT, out)

    def float_binary(self, node, op, left: Value, right: Value, dest) -> Value:
        name = _FLOAT_BINARY.get(type(op))
        out = self.result(FLOAT, dest) if name or isinstance(op, (ast.Div, ast.Pow)) \
            else None
        if name is not None:
            self.ins(node, f"{out} = vm.{name}.f64 {left.reg}, {right.reg}")
            return Value(FLOAT, out)
        if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)):
            if right.constant is None or right.constant == 0:
                nonzero = self.temp_holding(node, BOOL, f"vm.cmp.ne.f64.u {right.reg}, "
                                                        f"{self.out.constant('f64', 0.0)}")
                message = FLOAT_DIVISION_BY_ZERO if isinstance(op, ast.Div) else \
                    "ZeroDivisionError: float floor division or modulo by zero"
                self.out.check(nonzero, StatusCode.INVALID_ARGUMENT, message, self.at(node))
            if isinstance(op, ast.Div):
                self.ins(node, f"{out} = vm.div.f64 {left.reg}, {right.reg}")
                return Value(FLOAT, out)
            index = 0 if isinstance(op, ast.FloorDiv) else 1
            return self.call_helper(node, "__vmrt_float_divmod", [left, right], index, dest)
        if isinstance(op, ast.Pow):
            self.ins(node, f"{out} = vm.pow.f64 {left.reg}, {right.reg}")
            return Value(FLOAT, out)
        raise self.fail(node, f"'{_op_text(op)}' is not a float operation")

    def check_not(self, node, condition: Value, code: StatusCode, message: str) -> None:
        """Traps with `message` when the bool `condition` holds."""
        ok = self.out.new_label("ok")
        self.out.branch(condition.reg, self.out.trap(code, message, self.at(node)), ok,
                        self.at(node))
        self.out.place(ok, self.at(node))

    def compare_ints(self, node, name: str, left: Value, right: Value) -> Value:
        out = self.out.temp(BOOL)
        suffix = ".s" if name == "cmp.lt" else ""
        self.ins(node, f"{out} = vm.{name}.i64{suffix} {left.reg}, {right.reg}")
        return Value(BOOL, out)

    # -- comparisons and truth -----------------------------------------------------------
    def compare(self, node: ast.AST, op: ast.cmpop, left: Value, right: Value
                ) -> tuple[str, bool]:
        """(i32 register, negated): left OP right is the register's truth, or its
        negation when `negated` (so branches swap targets instead of computing it)."""
        if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
            raise refuse(node, self.filename, f"'{_cmp_text(op)}' is",
                         "==, !=, <, <=, >, >= on numbers")
        for side in (left, right):
            if not side.type.is_number:
                raise self.fail(node, f"comparisons need numbers, got {side.type}")
        out = self.out.temp(BOOL)
        if FLOAT in (left.type, right.type):
            left, right = self.to_float(node, left), self.to_float(node, right)
            name, swap, order = _FLOAT_COMPARE[type(op)]
            a, b = (right, left) if swap else (left, right)
            self.ins(node, f"{out} = vm.{name}.f64.{order} {a.reg}, {b.reg}")
            return out, False
        if left.type == right.type == BOOL:
            bank = "i32"
        else:
            bank, left, right = "i64", self.to_int(node, left), self.to_int(node, right)
        name, swap, negate = _INT_COMPARE[type(op)]
        a, b = (right, left) if swap else (left, right)
        suffix = ".s" if name == "cmp.lt" else ""
        self.ins(node, f"{out} = vm.{name}.{bank}{suffix} {a.reg}, {b.reg}")
        return out, negate

    def truth(self, node: ast.AST, value: Value) -> tuple[str, bool]:
        """(register, negated) of Python's truth of `value` (NaN is true)."""
        if value.type == BOOL:
            return value.reg, False
        out = self.out.temp(BOOL)
        if value.type == INT:
            self.ins(node, f"{out} = vm.cmp.nz.i64 {value.reg}")
        elif value.type == FLOAT:
            self.ins(node, f"{out} = vm.cmp.ne.f64.u {value.reg}, "
                           f"{self.out.constant('f64', 0.0)}")
        else:  # a bytearray or list is true when not empty
            length = self.length(node, value)
            self.ins(node, f"{out} = vm.cmp.nz.i64 {length.reg}")
        return out, False

    def jump_if(self, node: ast.expr, if_true: str, if_false: str) -> None:
        """Branches on the truth of `node`, short-circuiting and/or/not/chains."""
        where = self.at(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
            self.out.jump(if_true if node.value else if_false, where)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.jump_if(node.operand, if_false, if_true)
        elif isinstance(node, ast.BoolOp):
            for operand in node.values[:-1]:
                next_operand = self.out.new_label("next")
                if isinstance(node.op, ast.And):
                    self.jump_if(operand, next_operand, if_false)
                else:
                    self.jump_if(operand, if_true, next_operand)
                self.out.place(next_operand, where)
            self.jump_if(node.values[-1], if_true, if_false)
        elif isinstance(node, ast.Compare):
            left = self.expr(node.left)
            for index, (op, right_node) in enumerate(zip(node.ops, node.comparators)):
                right = self.expr(right_node)
                register, negated = self.compare(node, op, left, right)
                last = index == len(node.ops) - 1
                go_on = if_true if last else self.out.new_label("chain")
                targets = (if_false, go_on) if negated else (go_on, if_false)
                self.out.branch(register, *targets, where)
                if not last:
                    self.out.place(go_on, where)
                left = right
        else:
            register, negated = self.truth(node, self.expr(node))
            targets = (if_false, if_true) if negated else (if_true, if_false)
            self.out.branch(register, *targets, where)

    def bool_value(self, node: ast.expr, dest) -> Value:
        """A condition as a bool value (comparisons, not): one instruction when it
        is one comparison, else through branches."""
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            register, negated = self.compare(node, node.ops[0], self.expr(node.left),
                                             self.expr(node.comparators[0]))
            if not negated:
                return Value(BOOL, register)
            return self.value_holding(
                node, BOOL, dest, f"vm.xor.i32 {register}, {self.out.constant('i32', 1)}")
        out = self.result(BOOL, dest)
        if_true, if_false, done = (self.out.new_label(n) for n in ("true", "false", "done"))
        self.jump_if(node, if_true, if_false)
        for label, value in ((if_true, 1), (if_false, 0)):
            self.out.place(label, self.at(node))
            self.move(node, out, Value(BOOL, self.out.constant("i32", value)))
            self.out.jump(done, self.at(node))
        self.out.place(done, self.at(node))
        return Value(BOOL, out)

    def expr_Compare(self, node: ast.Compare, dest):
        return self.bool_value(node, dest)

    def expr_BoolOp(self, node: ast.BoolOp, dest):
        """`a or b` is a if a is true, else b (and the converse for and): a value of
        the operands' type, the right operand evaluated only when needed."""
        values_type = None
        out = None
        done = self.out.new_label("done")
        for index, operand in enumerate(node.values):
            value = self.expr(operand)
            if values_type is None:
                values_type = value.type
                out = self.out.temp(values_type)  # not dest: later operands may read it
            elif value.type != values_type:
                raise self.fail(operand, f"the operands of and/or must have one type "
                                         f"(got {values_type} and {value.type})")
            self.move(operand, out, value)
            if index < len(node.values) - 1:
                register, negated = self.truth(operand, Value(values_type, out))
                next_operand = self.out.new_label("next")
                stop_on_true = isinstance(node.op, ast.Or) != negated
                targets = (done, next_operand) if stop_on_true else (next_operand, done)
                self.out.branch(register, *targets, self.at(operand))
                self.out.place(next_operand, self.at(operand))
        self.out.place(done, self.at(node))
        return Value(values_type, out)

    def expr_IfExp(self, node: ast.IfExp, dest):
        if_true, if_false, done = (self.out.new_label(n) for n in ("then", "else", "done"))
        self.jump_if(node.test, if_true, if_false)
        self.out.place(if_true, self.at(node))
        first = self.expr(node.body)
        out = self.out.temp(first.type)  # not dest: the other branch may read it
        self.move(node, out, first)
        self.out.jump(done, self.at(node))
        self.out.place(if_false, self.at(node))
        second = self.expr(node.orelse)
        if second.type != first.type:
            raise self.fail(node.orelse, f"both branches of an if expression must have one "
                                         f"type (got {first.type} and {second.type})")
        self.move(node, out, second)
        self.out.place(done, self.at(node))
        return Value(first.type, out)


def _op_text(op: ast.AST) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
            ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
            ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.MatMult: "@"
            }.get(type(op), type(op).__name__)


def _cmp_text(op: ast.AST) -> str:
    return {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"
            }.get(type(op), type(op).__name__)


def literal_int(node: ast.expr) -> int | None:
    """The value of an int literal (-1 included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner_value = literal_int(node.operand)
        return None if inner_value is None else -inner_value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None
