"""Scripts in Python syntax: a statically typed subset of Python compiled to VM
bytecode (a .vmfb that vmrt and IREE's runtime run), for hosts whose users write
scripts that run sandboxed under vmrt.Limits.

    compile(source, *, module="script", imports=(), filename="<script>") -> bytes

`imports`: the native modules (vmrt.NativeModule classes or instances) a script
may import (`import host` then `host.f(x)`, or `from host import f`); their exports'
cconvs type the calls. Every def of the script is a function of the module, exported
unless its name starts with `_`. Command line: `vmrt script compile FILE.py -o OUT.vmfb`.

The subset (see README, "Scripts in Python syntax"):

* types: `int` (i64, wrapping at 64 bits), `float` (f64), `bool`, `bytearray`
  (vm.buffer), `list[int]` and `list[float]` (vm.list); `i32` and `f32` (from
  vmrt.script) for parameters and results a host wants narrow. Parameters and results
  are annotated; locals take the type of their first assignment (a later assignment of
  another type is an error, except the promotions Python makes: bool -> int -> float).
* if/elif/else, while, for NAME in range(...), break, continue, pass, return (several
  values too), assert, and/or/not (short-circuit), chained comparisons, if-expressions,
  + - * / // % ** << >> & | ^ ~ with Python's results (// and % floor, / gives a
  float), augmented assignment, calls (recursion too; `f()[k]` picks one of several
  results), int(), float(), bool(), abs(), min(), max(), len(), bytearray(n),
  [v] * n, [a, b, c], xs.append(v), xs[i]; module-level number constants (N = 10);
  `if __name__ == "__main__":` blocks are left to CPython.
* Python's errors become traps with Python's message: division or modulo by zero, a
  negative shift count or int exponent, an index out of range (negative indexes count
  from the end), a byte outside range(256), int() of NaN, an infinity or a float beyond
  64 bits.
* differences from CPython: ints wrap at 64 bits (CPython's grow); shifts by 64 or more
  give 0 (<<) or the sign (>>); an int beside a float converts to the nearest float;
  a variable read before any assignment reads 0 (a list or bytearray: an empty ref,
  trapping on use); float ** follows C's pow (CPython raises for 0.0 ** -1 and gives
  complex numbers for negative bases); the `range` of a for loop is its only iterable.
"""

from __future__ import annotations

#: Annotations for narrow parameters and results (a host's i32/f32 boundary); in
#: CPython they are int and float, so scripts run there unchanged.
i32 = int
f32 = float


def compile(source: str, *, module: str = "script", imports=(),
            filename: str = "<script>") -> bytes:
    """The .vmfb of script `source` (Python text); a ScriptError (a VmrtError whose
    message starts with filename:line:col) when it leaves the subset."""
    from vmrt.script.module import compile_module
    return compile_module(source, module, filename, tuple(imports))


__all__ = ["compile", "f32", "i32"]
