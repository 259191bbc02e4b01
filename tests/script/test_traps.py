"""Where CPython raises, the module traps with CPython's exception name and
message, and the VM stack shows the script's file:line:col (its debug database)."""

from __future__ import annotations

import functools

import pytest

import vmrt
import vmrt.script

from script_helpers import corpus_source, cpython_namespace

# (script, function, args, CPython's exception, status, message, file:line:col)
TRAPS = [
    ("floors", "int_floor", (1, 0), ZeroDivisionError, "INVALID_ARGUMENT",
     "ZeroDivisionError: integer division or modulo by zero", "floors.py:5:12"),
    ("floors", "float_floor", (1.0, 0.0), ZeroDivisionError, "INVALID_ARGUMENT",
     "ZeroDivisionError: float floor division or modulo by zero", "floors.py:9:12"),
    ("floors", "true_div", (1, 0), ZeroDivisionError, "INVALID_ARGUMENT",
     "ZeroDivisionError: float division by zero", "floors.py:17:12"),
    ("floors", "int_pow", (2, -1), None, "INVALID_ARGUMENT",
     "ValueError: negative exponent of an int", "floors.py:21:12"),
    ("floors", "shifts", (1, -1), ValueError, "INVALID_ARGUMENT",
     "ValueError: negative shift count", "floors.py:25:12"),
    ("floors", "to_int", (float("nan"),), ValueError, "OUT_OF_RANGE",
     "OverflowError: int() of a float", "floors.py:33:12"),
    ("floors", "to_int", (1e19,), None, "OUT_OF_RANGE",
     "OverflowError: int() of a float", "floors.py:33:12"),
    ("buffers", "get", (4, 4), IndexError, "OUT_OF_RANGE",
     "IndexError: index out of range", "buffers.py:36:12"),
    ("buffers", "get", (4, -5), IndexError, "OUT_OF_RANGE",
     "IndexError: index out of range", "buffers.py:36:12"),
    ("buffers", "get", (-1, 0), ValueError, "INVALID_ARGUMENT",
     "ValueError: negative count", "buffers.py:35:12"),
    ("buffers", "put", (1, 256), ValueError, "INVALID_ARGUMENT",
     "ValueError: byte must be in range(0, 256)", "buffers.py:41:5"),
    ("buffers", "put", (1, -1), ValueError, "INVALID_ARGUMENT",
     "ValueError: byte must be in range(0, 256)", "buffers.py:41:5"),
    ("lists", "at", (3, 3), IndexError, "OUT_OF_RANGE",
     "IndexError: index out of range", "lists.py:56:12"),
    ("lists", "at", (3, -4), IndexError, "OUT_OF_RANGE",
     "IndexError: index out of range", "lists.py:56:12"),
]


@functools.lru_cache(maxsize=None)
def module_bytes(name: str) -> bytes:
    return vmrt.script.compile(corpus_source(name), module=name, filename=f"{name}.py")


@pytest.mark.parametrize("name,function,args,raised,code,message,where", TRAPS,
                         ids=[f"{t[1]}{t[2]}" for t in TRAPS])
def test_trap_names_the_error_and_the_script_line(name, function, args, raised, code,
                                                  message, where, tier):
    module = vmrt.load(module_bytes(name), tier=tier)
    with pytest.raises(vmrt.VMError) as info:
        getattr(module, function)(*args)
    assert info.value.code.name == code
    assert message in str(info.value)
    assert f"{name}.{function}+" in info.value.stack[0]
    assert info.value.stack[0].endswith(f"({where})")
    if raised is not None:  # CPython raises too (elsewhere it gives a big int or float)
        with pytest.raises(raised):
            cpython_namespace(corpus_source(name))[function](*args)


def test_stack_shows_each_calls_line():
    module = vmrt.load(module_bytes("recursion"))
    with pytest.raises(vmrt.VMError) as info:
        module.sum_of_divmods(1, 0)
    assert [frame.rsplit(" ", 1)[1] for frame in info.value.stack] == \
        ["(recursion.py:40:12)", "(recursion.py:44:12)"]


def test_assert_and_missing_return_trap():
    source = ("def check(a: int) -> int:\n    assert a > 0, 'a must be positive'\n"
              "    return a\n\ndef sign(a: int) -> int:\n    if a > 0:\n        return 1\n")
    module = vmrt.load(vmrt.script.compile(source, filename="a.py"))
    with pytest.raises(vmrt.VMError, match="AssertionError: a must be positive") as info:
        module.check(0)
    assert info.value.stack[0].endswith("(a.py:2:5)")
    assert module.sign(3) == 1
    with pytest.raises(vmrt.VMError, match="function 'sign' ended without returning"):
        module.sign(-3)


def test_iree_runtime_sees_the_trap():
    rt = pytest.importorskip("iree.runtime")
    module = rt.load_vm_flatbuffer(module_bytes("floors"), driver="local-sync")
    with pytest.raises(ValueError, match="ZeroDivisionError"):
        module.int_floor(1, 0)


def test_variable_read_before_its_assignment_reads_zero(tier):
    """CPython raises UnboundLocalError; the module reads 0 (an empty list traps on use)."""
    source = ("def f(c: bool) -> int:\n    if c:\n        x = 5\n    return x\n\n"
              "def g(c: bool) -> int:\n    if c:\n        xs = [1, 2]\n    return len(xs)\n")
    module = vmrt.load(vmrt.script.compile(source, filename="u.py"), tier=tier)
    assert (module.f(True), module.f(False), module.g(True)) == (5, 0, 2)
    with pytest.raises(vmrt.VMError):
        module.g(False)
