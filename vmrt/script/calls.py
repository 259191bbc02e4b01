"""Calls in scripts: the module's functions, host imports, builtins (int, float,
bool, abs, min, max, len, bytearray), and bytearrays and lists of numbers on
vm.buffer and vm.list, every index checked."""

from __future__ import annotations

import ast

from vmrt.errors import StatusCode
from vmrt.script.expressions import ExpressionCompiler, Value, literal_int
from vmrt.script.types import (
    BOOL, BYTES, ELEMENT, FLOAT, INT, LIST_FLOAT, LIST_INT, LIST_OF, NONE, TUPLE, Type,
    inner,
)

INDEX_ERROR = "IndexError: index out of range"
#: Lists hold at most this many elements (vm.list sizes are i32).
MAX_LIST = (1 << 31) - 1


class CallCompiler(ExpressionCompiler):
    """Calls, buffers and lists (see the module docstring)."""

    def expr_Call(self, node: ast.Call, dest):
        if node.keywords:
            raise self.fail(node.keywords[0].value, "keyword arguments are not supported; "
                                                    "pass arguments by position")
        func = node.func
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id in self.module.host_modules:
                return self.call_import(node, f"{func.value.id}.{func.attr}", dest)
            if func.attr == "append":
                return self.list_append(node)
            raise self.fail(func, f"method or attribute '{func.attr}' is not supported; "
                                  "call module functions, host functions or list.append")
        if not isinstance(func, ast.Name):
            raise self.fail(func, "only named functions can be called")
        name = func.id
        if name in self.module.functions:
            return self.call_function(node, name, dest)
        if name in self.module.host_names:
            return self.call_import(node, self.module.host_names[name], dest)
        builtin = getattr(self, "builtin_" + name, None)
        if name.startswith("__") and not self.in_prelude:
            builtin = None
        if builtin is None:
            raise self.fail(func, f"function '{name}' is not defined (define it in the "
                                  "script, or pass its host module to compile(imports=...))")
        return builtin(node, dest)

    # -- the module's functions and host imports -------------------------------------------
    def arguments(self, node: ast.Call, params: tuple[Type, ...], what: str) -> list[str]:
        if len(node.args) != len(params):
            raise self.fail(node, f"{what} takes {len(params)} argument"
                                  f"{'s' if len(params) != 1 else ''}, got {len(node.args)}")
        registers = []
        for arg, param in zip(node.args, params):
            if isinstance(arg, ast.Starred):
                raise self.fail(arg, "starred arguments are not supported")
            value = self.convert(arg, self.expr(arg), inner(param))
            registers.append(self.narrow(arg, value, param))
        return registers

    def narrow(self, node: ast.AST, value: Value, to: Type) -> str:
        """The register passing `value` as a boundary width (i32, f32), or its own."""
        if to.name == "i32":
            return self.temp_holding(node, to, f"vm.trunc.i64.i32 {value.reg}")
        if to.name == "f32":
            return self.temp_holding(node, to, f"vm.trunc.f64.f32 {value.reg}")
        return value.reg

    def widen(self, node: ast.AST, register: str, type_: Type) -> Value:
        """A boundary width received (i32, f32) as the int or float it stands for."""
        if type_.name == "i32":
            return self.value_holding(node, INT, None, f"vm.ext.i32.i64.s {register}")
        if type_.name == "f32":
            return self.value_holding(node, FLOAT, None, f"vm.ext.f32.f64 {register}")
        return Value(type_, register)

    def emit_call(self, node: ast.AST, callee: str, arguments: list[str],
                  results: tuple[Type, ...], dest) -> list[Value]:
        registers = [self.result(results[0], dest) if len(results) == 1 and
                     not results[0].inner else self.out.temp(t) for t in results]
        head = f"{', '.join(registers)} = " if registers else ""
        self.ins(node, f"{head}vm.call @{callee}({', '.join(arguments)})")
        return [self.widen(node, r, t) for r, t in zip(registers, results)]

    def call_function(self, node: ast.Call, name: str, dest):
        params, results = self.module.functions[name]
        values = self.emit_call(node, name, self.arguments(node, params, f"{name}()"),
                                results, dest)
        return self.single(node, name, values)

    def call_import(self, node: ast.Call, full_name: str, dest):
        params, results = self.module.import_signature(full_name, node)
        values = self.emit_call(node, full_name,
                                self.arguments(node, params, f"{full_name}()"), results, dest)
        return self.single(node, full_name, values)

    def single(self, node: ast.AST, name: str, values: list[Value]) -> Value:
        if len(values) == 1:
            return values[0]
        if not values:
            return Value(NONE, "")
        return Tuple(values)

    def call_helper(self, node: ast.AST, name: str, arguments: list[Value], index: int,
                    dest) -> Value:
        """Result `index` of a helper the compiler adds to the module (vmrt/script/
        prelude.py) when a script needs it."""
        self.module.use_helper(name)
        params, results = self.module.functions[name]
        registers = [self.convert(node, a, p).reg for a, p in zip(arguments, params)]
        return self.emit_call(node, name, registers, results,
                              dest if len(results) == 1 else None)[index]

    # -- builtins ----------------------------------------------------------------------------
    def one_argument(self, node: ast.Call, name: str) -> Value:
        if len(node.args) != 1:
            raise self.fail(node, f"{name}() takes one argument here")
        return self.expr(node.args[0])

    def builtin_int(self, node: ast.Call, dest):
        value = self.one_argument(node, "int")
        if value.type in (INT, BOOL):
            return self.to_int(node, value, dest)
        self.need(node, value, FLOAT, "int")
        # int() of a float truncates toward zero; one outside the 64-bit range (or
        # NaN or infinite) fails, as CPython's would not fit or raises.
        low = self.temp_holding(
            node, BOOL, f"vm.cmp.lte.f64.o {self.out.constant('f64', -2.0 ** 63)}, {value.reg}")
        high = self.temp_holding(
            node, BOOL, f"vm.cmp.lt.f64.o {value.reg}, {self.out.constant('f64', 2.0 ** 63)}")
        self.ins(node, f"{low} = vm.and.i32 {low}, {high}")
        self.out.check(low, StatusCode.OUT_OF_RANGE, "OverflowError: int() of a float that "
                       "is NaN, infinite or beyond 64 bits", self.at(node))
        # vm.cast.f64.si64 rounds to nearest: truncate toward zero first.
        down = self.temp_holding(node, FLOAT, f"vm.floor.f64 {value.reg}")
        up = self.temp_holding(node, FLOAT, f"vm.ceil.f64 {value.reg}")
        negative = self.temp_holding(
            node, BOOL, f"vm.cmp.lt.f64.o {value.reg}, {self.out.constant('f64', 0.0)}")
        self.ins(node, f"{down} = vm.select.f64 {negative} ? {up} : {down}")
        return self.value_holding(node, INT, dest, f"vm.cast.f64.si64 {down}")

    def builtin_float(self, node: ast.Call, dest):
        value = self.one_argument(node, "float")
        if not value.type.is_number:
            raise self.fail(node, f"float() needs a number, got {value.type}")
        return self.to_float(node, value, dest)

    def builtin_bool(self, node: ast.Call, dest):
        if len(node.args) != 1:
            raise self.fail(node, "bool() takes one argument here")
        negated = ast.copy_location(ast.UnaryOp(ast.Not(), node.args[0]), node)
        return self.bool_value(ast.copy_location(ast.UnaryOp(ast.Not(), negated), node), dest)

    def builtin_abs(self, node: ast.Call, dest):
        value = self.one_argument(node, "abs")
        if value.type == BOOL:
            return self.to_int(node, value, dest)
        self.need(node, value, (INT, FLOAT), "abs")
        return self.value_holding(node, value.type, dest, f"vm.abs.{value.type.bank} {value.reg}")

    def builtin_min(self, node: ast.Call, dest):
        return self.extreme(node, dest, "min")

    def builtin_max(self, node: ast.Call, dest):
        return self.extreme(node, dest, "max")

    def extreme(self, node: ast.Call, dest, name: str) -> Value:
        """min/max of numbers as CPython picks: the first of equal values, and a
        later value only when it compares below (above) the one kept."""
        values = [self.expr(arg) for arg in node.args]
        if len(values) < 2:
            raise self.fail(node, f"{name}() takes two or more numbers here")
        for value in values:
            self.need(node, value, (INT, FLOAT, BOOL), name)
        kind = FLOAT if any(v.type == FLOAT for v in values) else INT
        values = [self.convert(node, v, kind) for v in values]
        best = values[0]
        for position, value in enumerate(values[1:], 2):
            op = ast.Lt() if name == "min" else ast.Gt()
            register, negated = self.compare(node, op, value, best)
            out = self.result(kind, dest) if position == len(values) else self.out.temp(kind)
            choice = (best.reg, value.reg) if negated else (value.reg, best.reg)
            self.ins(node, f"{out} = vm.select.{kind.bank} {register} ? {choice[0]} : "
                           f"{choice[1]}")
            best = Value(kind, out)
        return best

    def builtin_len(self, node: ast.Call, dest):
        value = self.one_argument(node, "len")
        self.need(node, value, (BYTES, LIST_INT, LIST_FLOAT), "len")
        return self.length(node, value, dest)

    def length(self, node: ast.AST, value: Value, dest=None) -> Value:
        out = self.result(INT, dest)
        if value.type == BYTES:
            self.ins(node, f"{out} = vm.buffer.length {value.reg}")
        else:
            size = self.temp_holding(node, BOOL, f"vm.list.size {value.reg}")
            self.ins(node, f"{out} = vm.ext.i32.i64.u {size}")
        return Value(INT, out)

    def builtin_bytearray(self, node: ast.Call, dest):
        size = self.convert(node, self.one_argument(node, "bytearray"), INT)
        if size.constant is None or size.constant < 0:
            negative = self.compare_ints(node, "cmp.lt", size, self.const(node, 0))
            self.check_not(node, negative, StatusCode.INVALID_ARGUMENT,
                           "ValueError: negative count")
        return self.value_holding(
            node, BYTES, dest, f"vm.buffer.alloc {size.reg}, {self.out.constant('i32', 16)}")

    # Intrinsics of the prelude (vmrt/script/prelude.py): fmod, floor, copysign.
    def builtin___fmod(self, node: ast.Call, dest):
        a, b = (self.convert(node, self.expr(arg), FLOAT) for arg in node.args)
        return self.value_holding(node, FLOAT, dest, f"vm.rem.f64 {a.reg}, {b.reg}")

    def builtin___floor(self, node: ast.Call, dest):
        value = self.convert(node, self.expr(node.args[0]), FLOAT)
        return self.value_holding(node, FLOAT, dest, f"vm.floor.f64 {value.reg}")

    def builtin___copysign(self, node: ast.Call, dest):
        magnitude, sign = (self.convert(node, self.expr(arg), FLOAT) for arg in node.args)
        bits = self.temp_holding(node, INT, f"vm.bitcast.f64.i64 {magnitude.reg}")
        sign_bits = self.temp_holding(node, INT, f"vm.bitcast.f64.i64 {sign.reg}")
        self.ins(node, f"{bits} = vm.and.i64 {bits}, {self.out.constant('i64', (1 << 63) - 1)}")
        self.ins(node, f"{sign_bits} = vm.and.i64 {sign_bits}, "
                       f"{self.out.constant('i64', -(1 << 63))}")
        self.ins(node, f"{bits} = vm.or.i64 {bits}, {sign_bits}")
        return self.value_holding(node, FLOAT, dest, f"vm.bitcast.i64.f64 {bits}")

    def builtin_print(self, node: ast.Call, dest):
        raise self.fail(node, "print is not supported; return values, or call a host "
                              "function that prints")

    def builtin_range(self, node: ast.Call, dest):
        raise self.fail(node, "range() is only supported in `for ... in range(...)`")

    def need(self, node: ast.AST, value: Value, types, name: str) -> None:
        types = types if isinstance(types, tuple) else (types,)
        if value.type not in types:
            raise self.fail(node, f"{name}() needs {' or '.join(map(str, types))}, "
                                  f"got {value.type}")

    # -- indexing ------------------------------------------------------------------------------
    def index(self, node: ast.Subscript, container: Value) -> str:
        """The checked index register of `container[index]`: Python's meaning of a
        negative index (from the end); out of range fails with IndexError."""
        if container.type not in (BYTES, LIST_INT, LIST_FLOAT):
            raise self.fail(node, f"only bytearrays and lists can be indexed, got "
                                  f"{container.type}")
        if isinstance(node.slice, ast.Slice):
            raise self.fail(node.slice, "slices are not supported; index elements one at "
                                        "a time")
        position = self.convert(node.slice, self.expr(node.slice), INT)
        length = self.length(node, container)
        if position.constant is None or position.constant < 0:
            negative = self.compare_ints(node, "cmp.lt", position, self.const(node, 0))
            offset = self.temp_holding(node, INT, f"vm.select.i64 {negative.reg} ? {length.reg} "
                                                  f": {self.out.constant('i64', 0)}")
            adjusted = self.temp_holding(node, INT, f"vm.add.i64 {position.reg}, {offset}")
            position = Value(INT, adjusted)
        # Unsigned: a negative index is far beyond the end.
        inside = self.temp_holding(node, BOOL, f"vm.cmp.lt.i64.u {position.reg}, {length.reg}")
        self.out.check(inside, StatusCode.OUT_OF_RANGE, INDEX_ERROR, self.at(node))
        if container.type == BYTES:
            return position.reg
        return self.temp_holding(node, BOOL, f"vm.trunc.i64.i32 {position.reg}")

    def expr_Subscript(self, node: ast.Subscript, dest):
        container = self.expr(node.value)
        if isinstance(container, Tuple):  # f()[k]: one of several results
            position = literal_int(node.slice)
            if position is None or not -len(container.values) <= position < \
                    len(container.values):
                raise self.fail(node.slice, f"a call's results are picked with a constant "
                                            f"index below {len(container.values)}")
            return container.values[position]
        return self.load_item(node, container, self.index(node, container), dest)

    def load_item(self, node: ast.AST, container: Value, where: str, dest) -> Value:
        if container.type == BYTES:
            byte = self.temp_holding(node, BOOL, f"vm.buffer.load.i8.u {container.reg}, {where}")
            return self.value_holding(node, INT, dest, f"vm.ext.i32.i64.u {byte}")
        element = ELEMENT[container.type]
        return self.value_holding(node, element, dest,
                                  f"vm.list.get.{element.bank} {container.reg}, {where}")

    def store_item(self, node: ast.Subscript, value_node: ast.expr | None,
                   value: Value | None = None) -> None:
        """container[index] = value (value_node evaluated first, as Python does)."""
        if value is None:
            value = self.expr(value_node)
        container = self.expr(node.value)
        self.store_at(node, container, self.index(node, container), value)

    def store_at(self, node: ast.AST, container: Value, where: str, value: Value) -> None:
        if container.type == BYTES:
            byte = self.convert(node, value, INT)
            fits = self.temp_holding(node, BOOL, f"vm.cmp.lt.i64.u {byte.reg}, "
                                                 f"{self.out.constant('i64', 256)}")
            self.out.check(fits, StatusCode.INVALID_ARGUMENT,
                           "ValueError: byte must be in range(0, 256)", self.at(node))
            low = self.temp_holding(node, BOOL, f"vm.trunc.i64.i32 {byte.reg}")
            self.ins(node, f"vm.buffer.store.i8 {low}, {container.reg}, {where}")
            return
        element = ELEMENT[container.type]
        value = self.convert(node, value, element)
        self.ins(node, f"vm.list.set.{element.bank} {container.reg}, {where}, {value.reg}")

    # -- lists --------------------------------------------------------------------------------
    def new_list(self, node: ast.AST, element: Type, size: Value, dest) -> Value:
        """A list of `size` zeros (vm.list.resize fills with zeros)."""
        fits = self.temp_holding(node, BOOL, f"vm.cmp.lt.i64.u {size.reg}, "
                                             f"{self.out.constant('i64', MAX_LIST + 1)}")
        self.out.check(fits, StatusCode.OUT_OF_RANGE, "MemoryError: a list holds at most "
                       f"{MAX_LIST} elements", self.at(node))
        count = self.temp_holding(node, BOOL, f"vm.trunc.i64.i32 {size.reg}")
        list_type = LIST_OF[element]
        out = self.result(list_type, dest)
        self.ins(node, f"{out} = vm.list.alloc {count} : {list_type.vm}")
        self.ins(node, f"vm.list.resize {out}, {count}")
        return Value(list_type, out)

    def expr_List(self, node: ast.List, dest):
        if not node.elts:
            if dest is None or not dest.type.is_list:
                raise self.fail(node, "an empty list needs a type: annotate the variable "
                                      "(xs: list[int] = [])")
            return self.new_list(node, ELEMENT[dest.type], self.const(node, 0), dest)
        values = [self.expr(e) for e in node.elts]
        kind = FLOAT if any(v.type == FLOAT for v in values) else INT
        if dest is not None and dest.type == LIST_FLOAT:
            kind = FLOAT
        for value in values:
            if not value.type.is_number:
                raise self.fail(node, f"lists hold numbers, got {value.type}")
        made = self.new_list(node, kind, self.const(node, len(values)), None)
        for position, value in enumerate(values):
            value = self.convert(node, value, kind)
            index = self.out.constant("i32", position)
            self.ins(node, f"vm.list.set.{kind.bank} {made.reg}, {index}, {value.reg}")
        return made

    def list_repeat(self, node: ast.BinOp, dest):
        """[v] * n (or n * [v]): n copies of one number (a negative n gives [])."""
        items, count = (node.left, node.right) if isinstance(node.left, ast.List) \
            else (node.right, node.left)
        if not isinstance(node.op, ast.Mult) or len(items.elts) != 1:
            raise self.fail(node, "lists support only [value] * count (and append)")
        value = self.expr(items.elts[0])
        kind = FLOAT if value.type == FLOAT or (dest is not None and dest.type == LIST_FLOAT) \
            else INT
        value = self.convert(node, value, kind)
        size = self.convert(node, self.expr(count), INT)
        clamped = self.value_holding(node, INT, None,
                                     f"vm.max.i64.s {size.reg}, {self.out.constant('i64', 0)}")
        made = self.new_list(node, kind, clamped, dest)
        if value.constant in (0, 0.0) and str(value.constant)[0] != "-":
            return made
        self.fill(node, made, value, clamped.reg)
        return made

    def fill(self, node: ast.AST, made: Value, value: Value, count: str) -> None:
        index = self.out.allocate("i32")
        limit = self.temp_holding(node, BOOL, f"vm.trunc.i64.i32 {count}")
        self.move(node, index, Value(BOOL, self.out.constant("i32", 0)))
        body, done = self.out.new_label("fill"), self.out.new_label("filled")
        where = self.at(node)
        more = self.temp_holding(node, BOOL, f"vm.cmp.lt.i32.s {index}, {limit}")
        self.out.branch(more, body, done, where)
        self.out.place(body, where)
        self.ins(node, f"vm.list.set.{value.type.bank} {made.reg}, {index}, {value.reg}")
        self.ins(node, f"{index} = vm.add.i32 {index}, {self.out.constant('i32', 1)}")
        self.ins(node, f"{more} = vm.cmp.lt.i32.s {index}, {limit}")
        self.out.branch(more, body, done, where)
        self.out.place(done, where)

    def list_append(self, node: ast.Call) -> Value:
        target = self.expr(node.func.value)
        if not target.type.is_list or len(node.args) != 1:
            raise self.fail(node, "append is a method of lists taking one number")
        value = self.convert(node, self.expr(node.args[0]), ELEMENT[target.type])
        size = self.temp_holding(node, BOOL, f"vm.list.size {target.reg}")
        grown = self.temp_holding(node, BOOL, f"vm.add.i32 {size}, {self.out.constant('i32', 1)}")
        # Size + 1 wraps negative only at the i32 limit.
        fits = self.temp_holding(node, BOOL, f"vm.cmp.lt.i32.s {size}, {grown}")
        self.out.check(fits, StatusCode.OUT_OF_RANGE, "MemoryError: a list holds at most "
                       f"{MAX_LIST} elements", self.at(node))
        self.ins(node, f"vm.list.resize {target.reg}, {grown}")
        self.ins(node, f"vm.list.set.{value.type.bank} {target.reg}, {size}, {value.reg}")
        return Value(NONE, "")

    def expr_Attribute(self, node: ast.Attribute, dest):
        raise self.fail(node, f"attribute '{node.attr}' is not supported; call module "
                              "functions, host functions or list.append")


class Tuple(Value):
    """The results of a call returning several values (for unpacking assignments)."""

    def __init__(self, values: list[Value]):
        super().__init__(TUPLE, "")
        object.__setattr__(self, "values", values)
