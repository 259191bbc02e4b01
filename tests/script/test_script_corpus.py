"""The corpus (tests/script/corpus): each function's results under vmrt, in both
tiers and in IREE's runtime, are CPython's (ints within the 64-bit wrap)."""

from __future__ import annotations

import functools

import pytest

import vmrt
import vmrt.script

from script_helpers import corpus_source, cpython_namespace, normalized

CASES = [
    ("numeric", "xorshift32", (2463534242, 1000)),
    ("numeric", "gcd", (1071, 462)),
    ("numeric", "gcd", (-48, 18)),
    ("numeric", "collatz_steps", (27,)),
    ("numeric", "count_primes", (500,)),
    ("numeric", "isqrt", (10**15 + 7,)),
    ("numeric", "countdown", (10, -10, -3)),
    ("numeric", "countdown", (-5, 20, 4)),
    ("numeric", "countdown", (3, 3, 1)),
    ("numeric", "countdown", (10, 0, -1)),
    ("numeric", "float_series", (1000,)),
    ("numeric", "mandelbrot", (24, 50)),
    ("numeric", "chained", (1, 2, 3)),
    ("numeric", "chained", (2, 2, 0)),
    ("numeric", "chained", (0, 5, 7)),
    ("numeric", "mixed", (3, 0.25, True)),
    ("numeric", "mixed", (-7, 1.5, False)),
    ("numeric", "truthiness", (0, 2.5)),
    ("numeric", "truthiness", (-3, 0.0)),
    ("recursion", "fib", (20,)),
    ("recursion", "ackermann", (2, 3)),
    ("recursion", "is_even", (31,)),
    ("recursion", "power", (1.5, 13)),
    ("recursion", "sum_of_divmods", (-47, 5)),
    ("floors", "int_floor", (-7, 2)),
    ("floors", "int_floor", (7, -2)),
    ("floors", "int_floor", (-7, -2)),
    ("floors", "int_floor", (-(1 << 63), -1)),
    ("floors", "int_floor", (-(1 << 63), 3)),
    ("floors", "float_floor", (-7.5, 2.0)),
    ("floors", "float_floor", (7.5, -2.0)),
    ("floors", "float_floor", (-0.0, 3.0)),
    ("floors", "float_floor", (1e300, 1e-300)),
    ("floors", "mixed_floor", (-7, 0.5)),
    ("floors", "true_div", (-7, 2)),
    ("floors", "int_pow", (3, 40)),
    ("floors", "int_pow", (-2, 63)),
    ("floors", "int_pow", (7, 0)),
    ("floors", "shifts", (-12345, 3)),
    ("floors", "shifts", (12345, 64)),
    ("floors", "shifts", (-12345, 200)),
    ("floors", "bits", (0x0F0F, -256)),
    ("floors", "to_int", (-2.75,)),
    ("floors", "to_int", (1e18,)),
    ("floors", "extremes", (-3, -2.5)),
    ("wrap", "factorial", (25,)),
    ("wrap", "lcg", (42, 100)),
    ("wrap", "shift_out", (1 << 30,)),
    ("wrap", "big_range", (-(1 << 63), (1 << 63) - 1, 1 << 61)),
    ("wrap", "big_range", ((1 << 63) - 1, -(1 << 63), -(3 << 60))),
    ("buffers", "sieve", (2000,)),
    ("buffers", "fill_and_sum", (300,)),
    ("buffers", "last_byte", (9,)),
    ("lists", "insertion_sort_checksum", (200, 7)),
    ("lists", "prefix_sums", (100,)),
    ("lists", "literal", (2,)),
    ("lists", "use_fill", (10,)),
    ("lists", "make", (4,)),
]


@functools.lru_cache(maxsize=None)
def module_bytes(name: str) -> bytes:
    return vmrt.script.compile(corpus_source(name), module=name, filename=f"{name}.py")


@functools.lru_cache(maxsize=None)
def loaded(name: str, tier: str):
    return vmrt.load(module_bytes(name), tier=tier)


def expected(name: str, function: str, args):
    return normalized(cpython_namespace(corpus_source(name))[function](*args))


@pytest.mark.parametrize("name,function,args", CASES,
                         ids=[f"{n}.{f}{a}" for n, f, a in CASES])
def test_vmrt_gives_cpython_results(name, function, args, tier):
    assert normalized(getattr(loaded(name, tier), function)(*args)) == \
        expected(name, function, args)


@pytest.mark.parametrize("name,function,args", [c for c in CASES if c[1] != "make"],
                         ids=[f"{n}.{f}{a}" for n, f, a in CASES if f != "make"])
def test_iree_runtime_gives_cpython_results(name, function, args):
    rt = pytest.importorskip("iree.runtime")
    module = rt.load_vm_flatbuffer(module_bytes(name), driver="local-sync")
    plain = [int(a) if isinstance(a, bool) else a for a in args]  # iree.runtime takes no bool
    assert normalized(getattr(module, function)(*plain)) == expected(name, function, args)


def test_iree_run_module_gives_cpython_results(tmp_path):
    import shutil
    import subprocess

    if shutil.which("iree-run-module") is None:
        pytest.skip("needs iree-run-module")
    for name, function, args in [("recursion", "fib", (20,)), ("floors", "int_floor", (-7, 2)),
                                 ("floors", "float_floor", (-7.5, 2.0)),
                                 ("buffers", "sieve", (2000,)), ("wrap", "factorial", (25,))]:
        path = tmp_path / f"{name}.vmfb"
        path.write_bytes(module_bytes(name))
        done = subprocess.run(["iree-run-module", f"--module={path}", f"--function={function}",
                               *[f"--input={a!r}" for a in args]],
                              capture_output=True, text=True, timeout=60, check=True)
        printed = [line.split("=", 1)[1] for line in done.stdout.splitlines()
                   if line.startswith("result[")]
        want = expected(name, function, args)
        want = want if isinstance(want, tuple) else (want,)
        assert [type(w)(p) for w, p in zip(want, printed)] == list(want)
