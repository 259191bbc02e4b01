"""i32 and i64 integer instructions, differential against iree.runtime: arithmetic
wrapping at the edges, signed/unsigned division and remainder, fma, abs, min/max,
ctlz, bitwise ops, shifts (amount masking), truncations and extensions.

Integer division by zero and INT_MIN / -1 kill the reference process (SIGFPE), so
those inputs are checked against hand-computed expectations in vmrt alone.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from differential import (
    I32_MAX, I32_MIN, I64_MAX, I64_MIN, Pair, module_source, op_function, s32, s64,
)
from vmrt.errors import StatusCode

I32_EDGES = [0, 1, -1, 2, -2, 3, 7, -7, 31, 32, 33, 255, 256, -256, 65535, 65536,
             0x55555555, -0x55555556, 0x12345678, I32_MAX, I32_MAX - 1, I32_MIN, I32_MIN + 1,
             1 << 30, -(1 << 30)]
I64_EDGES = [0, 1, -1, 2, -2, 7, -7, 63, 64, I32_MAX, I32_MIN, 1 << 32, (1 << 32) - 1,
             -(1 << 32), 0x5555555555555555, 0x123456789ABCDEF0 - (1 << 64) + (1 << 63),
             I64_MAX, I64_MAX - 1, I64_MIN, I64_MIN + 1, 1 << 62, -(1 << 62)]
SHIFTS = [0, 1, 2, 15, 31, 32, 33, 47, 63, 64, 65, 95, 127, 128, -1, -31, -32, -33, -63, -64,
          I32_MAX, I32_MIN]

# (export, mnemonic) of the binary ops with no division.
BINARY = {
    "i32": ["add", "sub", "mul", "and", "or", "xor", "min.s", "min.u", "max.s", "max.u"],
    "i64": ["add", "sub", "mul", "and", "or", "xor", "min.s", "min.u", "max.s", "max.u"],
}
DIVISION = ["div.s", "div.u", "rem.s", "rem.u"]
UNARY = {"i32": ["abs", "not", "ctlz"], "i64": ["abs", "not", "ctlz"]}
SHIFT = ["shl", "shr.s", "shr.u"]
CONVERSIONS = [  # (mnemonic, operand type, result type)
    ("vm.trunc.i32.i8", "i32", "i32"), ("vm.trunc.i32.i16", "i32", "i32"),
    ("vm.ext.i8.i32.s", "i32", "i32"), ("vm.ext.i8.i32.u", "i32", "i32"),
    ("vm.ext.i16.i32.s", "i32", "i32"), ("vm.ext.i16.i32.u", "i32", "i32"),
    ("vm.trunc.i64.i32", "i64", "i32"), ("vm.ext.i32.i64.s", "i32", "i64"),
    ("vm.ext.i32.i64.u", "i32", "i64"),
]


def mnemonic(op: str, ty: str) -> str:
    """'min.s', 'i32' -> 'vm.min.i32.s'."""
    base, _, suffix = op.partition(".")
    return f"vm.{base}.{ty}" + (f".{suffix}" if suffix else "")


def export_name(op: str, ty: str) -> str:
    return f"{op.replace('.', '_')}_{ty}"


def conversion_name(m: str) -> str:
    return m[3:].replace(".", "_")


def _source() -> str:
    fns = []
    for ty in ("i32", "i64"):
        for op in BINARY[ty] + DIVISION:
            fns.append(op_function(export_name(op, ty), mnemonic(op, ty), [ty, ty], ty))
        for op in UNARY[ty]:
            fns.append(op_function(export_name(op, ty), mnemonic(op, ty), [ty],
                                   "i32" if op == "ctlz" and ty == "i32" else ty))
        for op in SHIFT:
            fns.append(op_function(export_name(op, ty), mnemonic(op, ty), [ty, "i32"], ty))
        fns.append(op_function(f"fma_{ty}", f"vm.fma.{ty}", [ty, ty, ty], ty))
    for m, a, r in CONVERSIONS:
        fns.append(op_function(conversion_name(m), m, [a], r))
    # Every non-dividing binary op at once, for the randomized comparisons.
    for ty, w in (("i32", 1), ("i64", 2)):
        ops = BINARY[ty] + ["cmp.eq", "cmp.ne", "cmp.lt.s", "cmp.lt.u"]
        a, b = ("%i0", "%i1") if w == 1 else ("%i0:1", "%i2:3")
        base = 2 * w
        lines, results, types = [], [], []
        for k, op in enumerate(ops):
            wide_result = w == 2 and not op.startswith("cmp")
            reg = base + 2 * k
            r = f"%i{reg}:{reg + 1}" if wide_result else f"%i{reg}"
            if op.startswith("cmp"):
                name = op.split(".", 1)[1]
                m = f"vm.cmp.{name.split('.')[0]}.{ty}" + (
                    f".{name.split('.')[1]}" if "." in name else "")
            else:
                m = mnemonic(op, ty)
            lines.append(f"  {r} = {m} {a}, {b}")
            results.append(r)
            types.append(ty if wide_result else "i32" if op.startswith("cmp") else ty)
        fns.append(f"vm.export @all_{ty}\nvm.func @all_{ty}({a}: {ty}, {b}: {ty}) -> "
                   f"({', '.join(types)}) {{\n^bb0:\n" + "\n".join(lines) +
                   f"\n  vm.return {', '.join(results)}\n}}\n")
    return module_source("arith", fns)


@pytest.fixture(scope="module")
def arith(builder):
    return Pair(builder.build(_source()))


def edges(ty):
    return I32_EDGES if ty == "i32" else I64_EDGES


# -- grids over edge values -----------------------------------------------------------------------
@pytest.mark.parametrize("ty", ["i32", "i64"])
@pytest.mark.parametrize("op", BINARY["i32"])
def test_binary_edges(arith, op, ty):
    for a, b in itertools.product(edges(ty), repeat=2):
        arith.check(export_name(op, ty), a, b)


def _division_safe(a, b, ty):
    lo = I32_MIN if ty == "i32" else I64_MIN
    return b != 0 and not (a == lo and b == -1)


@pytest.mark.parametrize("ty", ["i32", "i64"])
@pytest.mark.parametrize("op", DIVISION)
def test_division_edges(arith, op, ty):
    checked = 0
    for a, b in itertools.product(edges(ty), repeat=2):
        if _division_safe(a, b, ty):
            arith.check(export_name(op, ty), a, b)
            checked += 1
    assert checked > 400


@pytest.mark.parametrize("a, b, div, rem", [
    (7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1),
    (1, 3, 0, 1), (-1, 3, 0, -1), (I32_MIN, 2, -(1 << 30), 0), (I32_MIN, 3, -715827882, -2),
    (I32_MAX, -1, -I32_MAX, 0),
])
def test_signed_division_truncates_toward_zero(arith, a, b, div, rem):
    assert arith.check("div_s_i32", a, b).values == (div,)
    assert arith.check("rem_s_i32", a, b).values == (rem,)
    assert arith.check("div_s_i64", a, b).values == (div,)
    assert arith.check("rem_s_i64", a, b).values == (rem,)


def test_unsigned_division_of_negative_operands(arith):
    assert arith.check("div_u_i32", -1, 2).values == (I32_MAX,)
    assert arith.check("rem_u_i32", -1, 2).values == (1,)
    assert arith.check("div_u_i32", 7, -1).values == (0,)
    assert arith.check("rem_u_i32", 7, -1).values == (7,)
    assert arith.check("div_u_i32", I32_MIN, -1).values == (0,)
    assert arith.check("div_u_i64", -1, 2).values == (I64_MAX,)
    assert arith.check("rem_u_i64", -3, 10).values == ((2 ** 64 - 3) % 10,)
    assert arith.check("div_u_i64", I64_MIN, -1).values == (0,)
    assert arith.check("rem_u_i64", I64_MIN, -1).values == (I64_MIN,)


@pytest.mark.parametrize("ty", ["i32", "i64"])
@pytest.mark.parametrize("op", DIVISION)
@pytest.mark.parametrize("a", [0, 1, -1, 12345])
def test_division_by_zero_is_a_vm_error(arith, op, ty, a):
    # The reference process dies of SIGFPE here; vmrt fails the invocation.
    out = arith.ours(export_name(op, ty), a, 0)
    assert not out.ok and out.code == "INVALID_ARGUMENT"
    assert "division by zero" in out.message
    # The context still works afterwards.
    assert arith.check(export_name(op, ty), 10, 3).values in ((3,), (1,))


@pytest.mark.parametrize("ty, lo", [("i32", I32_MIN), ("i64", I64_MIN)])
def test_min_over_minus_one_wraps(arith, ty, lo):
    # C leaves this undefined (x86 traps, the reference dies); vmrt wraps like
    # two's complement hardware that does not trap: the quotient is MIN, remainder 0.
    assert arith.ours(f"div_s_{ty}", lo, -1).values == (lo,)
    assert arith.ours(f"rem_s_{ty}", lo, -1).values == (0,)


@pytest.mark.parametrize("ty", ["i32", "i64"])
@pytest.mark.parametrize("op", ["abs", "not", "ctlz"])
def test_unary_edges(arith, op, ty):
    for a in edges(ty):
        arith.check(export_name(op, ty), a)


def test_abs_of_min_is_min(arith):
    assert arith.check("abs_i32", I32_MIN).values == (I32_MIN,)
    assert arith.check("abs_i64", I64_MIN).values == (I64_MIN,)


def test_ctlz(arith):
    assert arith.check("ctlz_i32", 0).values == (32,)
    assert arith.check("ctlz_i32", -1).values == (0,)
    assert arith.check("ctlz_i32", 1).values == (31,)
    assert arith.check("ctlz_i64", 0).values == (64,)
    assert arith.check("ctlz_i64", 1 << 32).values == (31,)
    assert arith.check("ctlz_i64", -1).values == (0,)
    for k in range(64):
        assert arith.check("ctlz_i64", 1 << k).values == (63 - k,)
        if k < 32:
            assert arith.check("ctlz_i32", 1 << k).values == (31 - k,)


@pytest.mark.parametrize("ty", ["i32", "i64"])
@pytest.mark.parametrize("op", SHIFT)
def test_shift_amounts_are_masked(arith, op, ty):
    for a in edges(ty):
        for n in SHIFTS:
            arith.check(export_name(op, ty), a, n)


def test_shift_examples(arith):
    assert arith.check("shl_i32", 1, 32).values == (1,)
    assert arith.check("shl_i32", 1, 33).values == (2,)
    assert arith.check("shl_i32", 1, -1).values == (I32_MIN,)
    assert arith.check("shr_s_i32", I32_MIN, 31).values == (-1,)
    assert arith.check("shr_u_i32", I32_MIN, 31).values == (1,)
    assert arith.check("shr_u_i32", -1, 63).values == (1,)
    assert arith.check("shl_i64", 1, 63).values == (I64_MIN,)
    assert arith.check("shl_i64", 1, 64).values == (1,)
    assert arith.check("shr_s_i64", I64_MIN, -1).values == (-1,)
    assert arith.check("shr_u_i64", -1, 64).values == (-1,)
    assert arith.check("shr_u_i64", -1, 1).values == (I64_MAX,)


@pytest.mark.parametrize("ty", ["i32", "i64"])
def test_fma_edges(arith, ty):
    values = [0, 1, -1, 3, -5, 0x10001] + ([I32_MAX, I32_MIN] if ty == "i32" else
                                             [I64_MAX, I64_MIN, 1 << 40])
    for a, b, c in itertools.product(values, repeat=3):
        arith.check(f"fma_{ty}", a, b, c)


@pytest.mark.parametrize("m, a, r", CONVERSIONS)
def test_truncations_and_extensions(arith, m, a, r):
    for v in (I32_EDGES if a == "i32" else I64_EDGES) + [0x80, 0x7F, 0xFF, 0x8000, 0x7FFF,
                                                          0xFFFF, 0x1FF80, -0x81]:
        arith.check(conversion_name(m), v)


def test_extension_examples(arith):
    assert arith.check("ext_i8_i32_s", 0x80).values == (-128,)
    assert arith.check("ext_i8_i32_u", -1).values == (255,)
    assert arith.check("ext_i16_i32_s", 0x18000).values == (-32768,)
    assert arith.check("trunc_i32_i8", -1).values == (255,)
    assert arith.check("trunc_i32_i16", -1).values == (65535,)
    assert arith.check("trunc_i64_i32", (1 << 32) + 5).values == (5,)
    assert arith.check("trunc_i64_i32", 0x80000000).values == (I32_MIN,)
    assert arith.check("ext_i32_i64_s", -1).values == (-1,)
    assert arith.check("ext_i32_i64_u", -1).values == (0xFFFFFFFF,)


def test_unsigned_arguments_are_accepted(arith):
    # The Python API takes 0..2**32-1 for i32 (and 2**64-1 for i64) as bit patterns.
    assert arith.ours("add_i32", 0xFFFFFFFF, 1).values == (0,)
    assert arith.ours("add_i64", 0xFFFFFFFFFFFFFFFF, 2).values == (1,)


# -- randomized ------------------------------------------------------------------------------------
i32s = st.one_of(st.integers(I32_MIN, I32_MAX), st.sampled_from(I32_EDGES))
i64s = st.one_of(st.integers(I64_MIN, I64_MAX), st.sampled_from(I64_EDGES),
                 st.integers(I32_MIN, I32_MAX))


@settings(max_examples=400, deadline=None)
@given(i32s, i32s)
def test_random_i32_pairs_all_ops(arith, a, b):
    arith.check("all_i32", a, b)
    if _division_safe(a, b, "i32"):
        for op in DIVISION:
            arith.check(export_name(op, "i32"), a, b)
    arith.check("shl_i32", a, b)
    arith.check("shr_s_i32", a, b)
    arith.check("shr_u_i32", a, b)


@settings(max_examples=400, deadline=None)
@given(i64s, i64s)
def test_random_i64_pairs_all_ops(arith, a, b):
    arith.check("all_i64", a, b)
    if _division_safe(a, b, "i64"):
        for op in DIVISION:
            arith.check(export_name(op, "i64"), a, b)
    arith.check("shl_i64", a, s32(b))
    arith.check("shr_s_i64", a, s32(b))
    arith.check("shr_u_i64", a, s32(b))


@settings(max_examples=150, deadline=None)
@given(i64s, i64s, i64s)
def test_random_fma(arith, a, b, c):
    arith.check("fma_i64", a, b, c)
    arith.check("fma_i32", s32(a), s32(b), s32(c))
    assert arith.ours("fma_i64", a, b, c).values == (s64(a * b + c),)


def test_python_api_accepts_unsigned_only_in_range(arith):
    fn = arith.context.function("arith.add_i32")
    with pytest.raises(Exception) as e:
        fn(1 << 32, 0)
    assert getattr(e.value, "code", None) == StatusCode.INVALID_ARGUMENT
