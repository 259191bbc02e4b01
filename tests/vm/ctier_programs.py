"""vmasm the C tier's tests share: the counted loop most of their programs run."""

from __future__ import annotations


def counted_loop(name: str, body: str, flag: str = "%i4", export: bool = True) -> str:
    """`@name(%i0: i32) -> (i32)`: runs `body` (vmasm lines) with %i2 = 0, 1, ...
    while %i2 < %i0 (once at least), %i1 starting at 0 and %i3 holding 1, and
    returns %i1; `flag` is the register the loop test writes."""
    lines = "\n".join("  " + line.strip() for line in body.strip().splitlines())
    return f"""
{f"vm.export @{name}" if export else ""}
vm.func @{name}(%i0: i32) -> (i32) {{
^bb0:
  %i1 = vm.const.i32.zero
  %i2 = vm.const.i32.zero
  %i3 = vm.const.i32 1
  vm.br ^bb1()
^bb1:
{lines}
  %i2 = vm.add.i32 %i2, %i3
  {flag} = vm.cmp.lt.i32.s %i2, %i0
  vm.cond_br {flag}, ^bb1(), ^bb2()
^bb2:
  vm.return %i1
}}
"""


#: Sums 0 .. n-1 (wrapping), the C tier's first test program.
LOOP_SUM = counted_loop("loop_sum", "%i1 = vm.add.i32 %i1, %i2")
