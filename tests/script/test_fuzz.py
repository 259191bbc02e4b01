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
