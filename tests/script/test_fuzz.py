"""Generated arithmetic programs (hypothesis, derandomized, bounded) give
CPython's results, or trap where CPython raises. Ints stay below 2**53 on the
way (a filter), so CPython's exact int/float mixing and the module's agree."""

from __future__ import annotations

import ast

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

import vmrt  # noqa: E402
import vmrt.script  # noqa: E402

LIMIT = 1 << 53
INT_OPS = ["+", "-", "*", "//", "%", "&", "|", "^"]
FLOAT_OPS = ["+", "-", "*", "/", "//", "%"]
COMPARISONS = ["<", "<=", "==", "!=", ">", ">="]


@st.composite
def expressions(draw, depth=3):
    """(python text, type) of a random expression over a, b (int) and x (float)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["a", "b", "x", "int", "float"]))
        if kind == "int":
            return str(draw(st.integers(-20, 20))), "int"
        if kind == "float":
            return repr(draw(st.sampled_from([0.5, -2.25, 3.0, 0.0, 1e-3]))), "float"
        return kind, "float" if kind == "x" else "int"
    left, left_type = draw(expressions(depth - 1))
    right, right_type = draw(expressions(depth - 1))
    form = draw(st.sampled_from(["binary", "binary", "compare", "ifexp", "shift", "unary",
                                 "boolop"]))
    if form == "compare":
        return f"({left} {draw(st.sampled_from(COMPARISONS))} {right})", "bool"
    if form == "ifexp" and left_type == right_type:
        condition, _ = draw(expressions(depth - 1))
        return f"({left} if {condition} else {right})", left_type
    if form == "boolop" and left_type == right_type:
        return f"({left} {draw(st.sampled_from(['and', 'or']))} {right})", left_type
    if form == "shift" and left_type != "float":
        direction = draw(st.sampled_from(["<<", ">>"]))
        return f"({left} {direction} {draw(st.integers(0, 70))})", "int"
    if form == "unary":
        op = draw(st.sampled_from(["-", "not ", "~"] if left_type != "float" else ["-", "not "]))
        return f"({op}{left})", "bool" if op == "not " else \
            ("int" if left_type == "bool" else left_type)
    floats = "float" in (left_type, right_type)
    op = draw(st.sampled_from(FLOAT_OPS if floats else INT_OPS + ["/"]))
    result = "float" if floats or op == "/" else "int"
    if op in "&|^" and left_type == right_type == "bool":
        result = "bool"
    return f"({left} {op} {right})", result


def small_ints(tree: ast.AST, values: dict) -> bool:
    """Whether every int CPython computes on the way stays below 2**53."""
    for node in ast.walk(tree):
        if isinstance(node, ast.expr):
            try:
                value = eval(compile(ast.Expression(node), "<e>", "eval"), {}, dict(values))
            except (ZeroDivisionError, ValueError, OverflowError):
                continue
            if isinstance(value, int) and not -LIMIT < value < LIMIT:
                return False
    return True


@settings(max_examples=100, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(expression=expressions(), a=st.integers(-1000, 1000), b=st.integers(-1000, 1000),
       x=st.sampled_from([0.0, -0.0, 1.5, -7.25, 1e10, float("inf")]))
def test_generated_expressions_give_cpython_results(expression, a, b, x):
    text, type_ = expression
    values = {"a": a, "b": b, "x": x}
    assume(small_ints(ast.parse(text, mode="eval"), values))
    source = f"def f(a: int, b: int, x: float) -> {type_}:\n    return {text}\n"
    module = vmrt.load(vmrt.script.compile(source), tier="python")
    try:
        expected = eval(text, {}, dict(values))
    except (ZeroDivisionError, ValueError, OverflowError) as error:
        with pytest.raises(vmrt.VMError, match=type(error).__name__ + "|OverflowError"):
            module.f(a, b, x)
        return
    got = module.f(a, b, x)
    if isinstance(expected, float) and expected != expected:
        assert got != got
    else:
        assert got == expected and type(got) is type(int(expected) if type_ == "bool"
                                                      else expected)


NAMES = ["v0", "v1", "v2", "v3"]


@st.composite
def small_expressions(draw, depth=2):
    """Int expressions over v0..v3 whose values stay far below 2**63 (the
    variables are kept below 10**6 and multiplied by constants up to 100 only)."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(NAMES))
        return str(draw(st.integers(-50, 50)))
    left = draw(small_expressions(depth - 1))
    right = draw(small_expressions(depth - 1))
    op = draw(st.sampled_from(["+", "-", "//", "%", "&", "|", "^", "*"]))
    if op == "*":
        right = str(draw(st.integers(-100, 100)))
    return f"({left} {op} {right})"


@st.composite
def statements(draw, depth=2, indent="    ", loop=False):
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "assign", "aug", "if", "for", "while", "jump"]
                                    if depth else ["assign", "aug"]))
        name = draw(st.sampled_from(NAMES))
        if kind == "assign":
            lines.append(f"{indent}{name} = {draw(small_expressions())} % 1000003")
        elif kind == "aug":
            op = draw(st.sampled_from(["+=", "-=", "^=", "|=", "//=", "%="]))
            lines.append(f"{indent}{name} {op} {draw(small_expressions(1))}")
            lines.append(f"{indent}{name} %= 1000003")
        elif kind == "if":
            cmp = draw(st.sampled_from(["<", "<=", "==", "!=", ">", ">="]))
            lines.append(f"{indent}if {draw(small_expressions(1))} {cmp} "
                         f"{draw(small_expressions(1))}:")
            lines.append(draw(statements(depth - 1, indent + "    ", loop)))
            if draw(st.booleans()):
                lines.append(f"{indent}else:")
                lines.append(draw(statements(depth - 1, indent + "    ", loop)))
        elif kind == "for":
            start, stop = draw(st.integers(-5, 5)), draw(st.integers(-5, 8))
            step = draw(st.sampled_from([1, 1, 2, -1, -3]))
            counter = f"i{depth}"
            lines.append(f"{indent}for {counter} in range({start}, {stop}, {step}):")
            lines.append(f"{indent}    {name} = ({name} + {counter}) % 1000003")
            lines.append(draw(statements(depth - 1, indent + "    ", True)))
        elif kind == "while":
            counter = f"w{depth}"
            lines.append(f"{indent}{counter} = {draw(st.integers(0, 6))}")
            lines.append(f"{indent}while {counter} > 0:")
            lines.append(f"{indent}    {counter} -= 1")
            lines.append(draw(statements(depth - 1, indent + "    ", True)))
        elif loop:
            lines.append(f"{indent}if {name} % 3 == 0:")
            lines.append(f"{indent}    {draw(st.sampled_from(['break', 'continue']))}")
    return "\n".join(lines or [f"{indent}pass"])


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(body=statements(), args=st.lists(st.integers(-1000, 1000), min_size=4, max_size=4))
def test_generated_programs_give_cpython_results(body, args):
    source = (f"def f(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:\n"
              f"{body}\n    return v0, v1, v2, v3\n")
    namespace: dict = {}
    exec(source, namespace)
    try:
        expected = namespace["f"](*args)
    except ZeroDivisionError:
        expected = None
    module = vmrt.load(vmrt.script.compile(source), tier="python")
    if expected is None:
        with pytest.raises(vmrt.VMError, match="ZeroDivisionError"):
            module.f(*args)
    else:
        assert module.f(*args) == expected, source
