"""Every construct outside the subset is refused at compile time with
file:line:col, what is not supported and what to use instead."""

from __future__ import annotations

import textwrap

import pytest

import vmrt
import vmrt.script
from vmrt.errors import ScriptError

REFUSED = [
    ("class", "class Point:\n    x = 1\n", "s.py:1:1: classes are not supported; use "
     "module-level functions"),
    ("closure", "def f(a: int) -> int:\n    def g() -> int:\n        return a\n    return g()\n",
     "s.py:2:5: nested functions (closures) are not supported; use a module-level function"),
    ("lambda", "def f(a: int) -> int:\n    g = lambda: a\n    return a\n",
     "s.py:2:9: lambda is not supported; use a module-level def"),
    ("try", "def f() -> int:\n    try:\n        return 1\n    except Exception:\n"
            "        return 2\n", "s.py:2:5: exceptions (try) are not supported; use checks"),
    ("raise", "def f() -> None:\n    raise ValueError\n",
     "s.py:2:5: raise is not supported; use assert CONDITION"),
    ("string", "def f() -> int:\n    s = 'x'\n    return 1\n",
     "s.py:2:9: strings are not supported; use numbers, or bytes in a bytearray"),
    ("f-string", "def f(a: int) -> int:\n    s = f'{a}'\n    return 1\n",
     "s.py:2:9: strings are not supported"),
    ("yield", "def f() -> int:\n    yield 1\n",
     "s.py:2:5: generators (yield) are not supported; use filling a list"),
    ("global", "def f() -> None:\n    global n\n",
     "s.py:2:5: global variables that change are not supported; use arguments"),
    ("nonlocal", "def f() -> None:\n    nonlocal n\n", "s.py:2:5: nonlocal is not supported"),
    ("mutable global", "n = [1, 2]\n", "s.py:1:5: module-level values other than number "
     "literals are not supported; use number constants"),
    ("module assignment", "N = 3\ndef f() -> int:\n    N = 4\n    return N\n",
     "s.py:3:5: 'N' is defined at module level; module-level names cannot be assigned"),
    ("import", "import os\n", "s.py:1:1: importing 'os' is not supported; use only the "
     "host modules passed to compile(imports=...)"),
    ("from import", "from math import sqrt\n", "s.py:1:1: importing 'math' is not supported"),
    ("with", "def f() -> None:\n    with g():\n        pass\n", "s.py:2:5: with is not "
     "supported"),
    ("list comprehension", "def f() -> int:\n    xs = [i for i in range(3)]\n    return 1\n",
     "s.py:2:10: comprehensions are not supported; use a for loop calling append"),
    ("generator expression", "def f() -> int:\n    return max(i for i in range(3))\n",
     "s.py:2:15: generator expressions are not supported"),
    ("dict", "def f() -> int:\n    d = {}\n    return 1\n", "s.py:2:9: dicts are not "
     "supported; use lists of numbers"),
    ("set", "def f() -> int:\n    d = {1}\n    return 1\n", "s.py:2:9: sets are not supported"),
    ("del", "def f(a: int) -> None:\n    del a\n", "s.py:2:5: del is not supported"),
    ("walrus", "def f(a: int) -> int:\n    if (b := a):\n        return b\n    return 0\n",
     "s.py:2:9: assignment expressions (:=) are not supported"),
    ("match", "def f(a: int) -> int:\n    match a:\n        case 1:\n            return 1\n"
              "    return 0\n", "s.py:2:5: match is not supported; use if/elif/else"),
    ("async", "async def f() -> None:\n    pass\n", "s.py:1:1: async functions are not "
     "supported"),
    ("slice", "def f(b: bytearray) -> int:\n    c = b[1:2]\n    return 0\n",
     "s.py:2:11: slices are not supported"),
    ("for over a list", "def f(xs: list[int]) -> int:\n    for x in xs:\n        pass\n"
                        "    return 0\n", "s.py:2:14: for loops over anything but range(...)"
     " are not supported; use for i in range(len(xs))"),
    ("loop else", "def f() -> None:\n    while False:\n        pass\n    else:\n        pass\n",
     "s.py:5:9: else on loops is not supported"),
    ("is", "def f(a: int) -> bool:\n    return a is 1\n", "s.py:2:12: 'is' is not supported"),
    ("in", "def f(a: int, xs: list[int]) -> bool:\n    return a in xs\n",
     "s.py:2:12: 'in' is not supported"),
    ("matmul", "def f(a: int) -> int:\n    return a @ a\n", "s.py:2:12: '@' is not supported"),
    ("complex", "def f() -> float:\n    return 1j\n", "s.py:2:12: complex numbers are not "
     "supported"),
    ("None value", "def f() -> int:\n    x = None\n    return 0\n",
     "s.py:2:9: None as a value is not supported"),
    ("star args", "def f(*a: int) -> None:\n    pass\n", "s.py:1:1: default, keyword-only, "
     "*args and **kwargs parameters are not supported"),
    ("default", "def f(a: int = 1) -> None:\n    pass\n", "s.py:1:1: default, keyword-only"),
    ("decorator", "@staticmethod\ndef f() -> None:\n    pass\n",
     "s.py:1:2: decorators are not supported"),
    ("missing annotation", "def f(a) -> int:\n    return a\n",
     "s.py:1:7: parameter 'a' needs a type annotation"),
    ("string annotation", "def f(a: str) -> int:\n    return 0\n",
     "s.py:1:7: parameter 'a' needs a type annotation"),
    ("keyword argument", "def g(a: int) -> int:\n    return a\ndef f() -> int:\n"
                         "    return g(a=1)\n", "s.py:4:16: keyword arguments are not "
     "supported; pass arguments by position"),
    ("print", "def f() -> None:\n    print(1)\n", "s.py:2:5: print is not supported"),
    ("attribute", "def f(b: bytearray) -> int:\n    return b.count\n",
     "s.py:2:12: attribute 'count' is not supported"),
    ("module statement", "x = 1\nx += 1\n", "s.py:2:1: statements at module level are not "
     "supported; put them in a function"),
    ("huge literal", "def f() -> int:\n    return 1 << 64 if False else 2 ** 70 + "
                     "123456789012345678901234567890\n", "does not fit in 64 bits"),
]


@pytest.mark.parametrize("source,message", [(s, m) for _, s, m in REFUSED],
                         ids=[name for name, _, _ in REFUSED])
def test_refused_with_location_and_advice(source, message):
    with pytest.raises(ScriptError) as info:
        vmrt.script.compile(source, filename="s.py")
    assert message in str(info.value)
    assert info.value.code == vmrt.StatusCode.INVALID_ARGUMENT
    assert isinstance(info.value, vmrt.VmrtError)


def test_type_conflict_names_the_first_assignment():
    source = textwrap.dedent("""\
        def f(a: int) -> int:
            x = 1
            x = 2.5
            return x
        """)
    with pytest.raises(ScriptError, match=r"s\.py:3:5: 'x' is int \(since line 2\) but is "
                                          r"assigned a float here"):
        vmrt.script.compile(source, filename="s.py")


def test_promotions_python_makes_are_allowed():
    source = "def f(a: int, b: bool) -> float:\n    x = 0.5\n    x = a\n    y = 1\n" \
             "    y = b\n    return x + y\n"
    assert vmrt.load(vmrt.script.compile(source)).f(3, True) == 4.0


def test_syntax_error_has_its_location():
    with pytest.raises(ScriptError, match=r"s\.py:1:\d+: invalid syntax"):
        vmrt.script.compile("def f(:\n", filename="s.py")


def test_name_used_before_assignment():
    with pytest.raises(ScriptError, match=r"s\.py:2:12: name 'y' is not defined here"):
        vmrt.script.compile("def f() -> int:\n    return y\n", filename="s.py")


def test_wrong_argument_count_and_result_count():
    source = "def g(a: int) -> int:\n    return a\ndef f() -> int:\n    return g(1, 2)\n"
    with pytest.raises(ScriptError, match=r"s\.py:4:12: g\(\) takes 1 argument, got 2"):
        vmrt.script.compile(source, filename="s.py")
    with pytest.raises(ScriptError, match=r"s\.py:2:5: 'f' returns 1 value \(from its "
                                          r"annotation\), this returns 2"):
        vmrt.script.compile("def f() -> int:\n    return 1, 2\n", filename="s.py")


def test_prelude_intrinsics_are_not_for_scripts():
    with pytest.raises(ScriptError, match="function '__floor' is not defined"):
        vmrt.script.compile("def f(x: float) -> float:\n    return __floor(x)\n")
