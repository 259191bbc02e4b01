"""The names generated Python code reads and who provides them: the functions
vmrt.vm.codegen writes, and the C tier's entries (vmrt.vm.ctier.runtime). Each
provider builds what it injects with `namespace`, which checks it against the
declarations below, so a name cannot be used undeclared or declared unused."""

from __future__ import annotations

from typing import NamedTuple


class Name(NamedTuple):
    name: str      # as written in generated code ({n}: a number)
    type: str
    group: str     # which namespace holds it (see namespace)
    provider: str  # what makes its value
    meaning: str


NAMES = (
    # -- a module instance's globals (vmrt.vm.module, BytecodeModuleInstance._namespace) --
    Name("F{n}", "callable", "module", "vmrt.vm.module",
         "internal function n (Python or C tier; with limits its depth last)"),
    Name("I{n}", "callable", "module", "vmrt.vm.module",
         "import n at a plain call site (always completes)"),
    Name("IY{n}", "callable", "module", "vmrt.vm.module",
         "import n at a vm.call.yieldable site (may return a generator)"),
    Name("RESOLVED", "list[int]", "module", "vmrt.vm.module", "1 per import resolved"),
    Name("RW_I32", "memoryview", "module", "vmrt.vm.module", "the globals as i32 slots"),
    Name("RW_F32", "memoryview", "module", "vmrt.vm.module", "the globals as f32 slots"),
    Name("RW_I64", "memoryview", "module", "vmrt.vm.module", "the globals as i64 slots"),
    Name("RW_F64", "memoryview", "module", "vmrt.vm.module", "the globals as f64 slots"),
    Name("GLOBAL_LOAD_I32", "callable", "module", "vmrt.vm.module",
         "an i32 global at a byte offset, range-checked (unaligned or indirect)"),
    Name("GLOBAL_LOAD_I64", "callable", "module", "vmrt.vm.module", "the same for i64"),
    Name("GLOBAL_LOAD_F32", "callable", "module", "vmrt.vm.module", "the same for f32"),
    Name("GLOBAL_LOAD_F64", "callable", "module", "vmrt.vm.module", "the same for f64"),
    Name("GLOBAL_STORE_I32", "callable", "module", "vmrt.vm.module",
         "stores an i32 global at a byte offset, range-checked"),
    Name("GLOBAL_STORE_I64", "callable", "module", "vmrt.vm.module", "the same for i64"),
    Name("GLOBAL_STORE_F32", "callable", "module", "vmrt.vm.module", "the same for f32"),
    Name("GLOBAL_STORE_F64", "callable", "module", "vmrt.vm.module", "the same for f64"),
    Name("REFS", "list", "module", "vmrt.vm.module", "the ref globals"),
    Name("CHECK_GLOBAL_REF", "callable", "module", "vmrt.vm.module",
         "range check of an indirect ref global ordinal"),
    Name("RODATA", "list[VMBuffer]", "module", "vmrt.vm.module", "the rodata segments"),
    Name("CAST", "callable", "module", "vmrt.vm.module",
         "a ref checked against a type ordinal (INVALID_ARGUMENT if not null or of it)"),
    Name("REF_OR_NULL", "callable", "module", "vmrt.vm.module",
         "a ref of a type ordinal, or null for any other"),
    Name("FAIL", "callable", "module", "vmrt.vm.module", "raises vm.fail's status"),
    Name("GENERATOR", "type", "module", "vmrt.vm.module",
         "types.GeneratorType: a native import that suspends returns one"),
    Name("RUN_TO_COMPLETION", "callable", "module", "vmrt.vm.module",
         "runs a yielding callee called from a function that cannot yield"),
    Name("BUFFER_ALLOC", "callable", "module", "vmrt.vm.buffer",
         "vm.buffer.alloc (metered with limits)"),
    Name("BUFFER_CLONE", "callable", "module", "vmrt.vm.buffer",
         "vm.buffer.clone (metered with limits)"),
    Name("BUFFER_COPY", "callable", "module", "vmrt.vm.buffer", "vm.buffer.copy"),
    Name("BUFFER_COMPARE", "callable", "module", "vmrt.vm.buffer", "vm.buffer.compare"),
    Name("LIST_ALLOC", "callable", "module", "vmrt.vm.list",
         "vm.list.alloc of a type ordinal (metered with limits)"),
    Name("TRACE", "callable", "module", "vmrt.vm.context", "vm.trace's hook"),
    Name("PRINT", "callable", "module", "vmrt.vm.context", "vm.print's hook"),
    Name("numerics.*", "module", "module", "vmrt.vm.numerics",
         "every public name of vmrt.vm.numerics: what instruction formulas call"),
    # -- instrumented code (CodegenOptions.instrumented) --
    Name("ENTER", "callable", "hooks", "vmrt.vm.hooks", "a frame starts (returns it)"),
    Name("STEP", "callable", "hooks", "vmrt.vm.hooks", "an instruction is about to run"),
    Name("UNWIND", "callable", "hooks", "vmrt.vm.hooks", "a frame is left by an error"),
    Name("LEAVE", "callable", "hooks", "vmrt.vm.hooks", "a frame ends"),
    # -- code with limits (CodegenOptions.checkpoints) --
    Name("FUEL", "cell: int", "cells", "vmrt.vm.limits",
         "the slice of fuel left; each block subtracts its cost"),
    Name("CUR", "cell: int", "cells", "vmrt.vm.limits",
         "the depth of the innermost import call site (host re-entries continue there)"),
    Name("LIMITS_SCOPE", "function", "codegen", "vmrt.vm.codegen",
         "the scope whose locals FUEL and CUR are (made cells, bound per context)"),
    Name("D", "parameter: int", "codegen", "vmrt.vm.codegen",
         "a function's frame depth, its last parameter (D1: its callees')"),
    Name("MAXD", "int", "limits", "vmrt.vm.limits", "the deepest frame allowed"),
    Name("DEPTH_EXCEEDED", "callable", "limits", "vmrt.vm.limits",
         "raises DepthExceeded for a depth"),
    Name("REFILL", "callable", "limits", "vmrt.vm.limits",
         "the slow path when FUEL < 0: next slice, or stop (fuel, deadline, cancel)"),
    # -- the C tier's entries (vmrt.vm.ctier.runtime, straight_entry) --
    Name("CALL", "cffi function", "c_entry", "vmrt.vm.ctier.runtime",
         "the C entry of the function (vmrt_entry_N, or vmrt_metered_N with limits)"),
    Name("GENERAL", "callable", "c_entry", "vmrt.vm.ctier.runtime",
         "the entry of a function with ref arguments (general_entry)"),
    Name("FAILED", "callable", "c_entry", "vmrt.vm.ctier.runtime",
         "raises the VMError of a failed C call"),
    Name("LOCAL", "threading.local", "c_entry", "vmrt.vm.ctier.runtime",
         "this thread's C context (`c`), once made"),
    Name("NEW", "callable", "c_entry", "vmrt.vm.ctier.runtime",
         "makes this thread's C context"),
    Name("F32_BITS", "callable", "c_entry", "vmrt.vm.ctier.runtime", "an f32's bits"),
    Name("READ_F32", "callable", "c_entry", "vmrt.vm.ctier.runtime", "an f32 from bits"),
    Name("READ_F64", "callable", "c_entry", "vmrt.vm.ctier.runtime", "an f64 from bits"),
)


#: Closure cells of a context with limits, shared by all its generated code and its
#: host entries (generated functions sit in LIMITS_SCOPE, whose locals they are).
CELLS = tuple(n.name for n in NAMES if n.group == "cells")
_FIXED = {group: frozenset(n.name for n in NAMES if n.group == group and "{" not in n.name
                           and not n.name.endswith(".*"))
          for group in {n.group for n in NAMES}}
_NUMBERED = frozenset(n.name for n in NAMES if n.name.endswith("{n}"))


def namespace(group: str, **values) -> dict:
    """`values`, the names of `group` a provider injects, checked: each is declared
    (a {n} name with a number), and every fixed name of the group is there."""
    fixed = _FIXED[group]
    undeclared = [name for name in values if name not in fixed and (
        not name[-1:].isdigit() or name.rstrip("0123456789") + "{n}" not in _NUMBERED)]
    missing = fixed.difference(values)
    if undeclared or missing:
        raise AssertionError(f"generated code's {group} names: undeclared {undeclared}, "
                             f"missing {sorted(missing)} (vmrt.vm.generated_abi)")
    return values
