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


def _provided(group: str, provider: str, rows: list[tuple[str, str, str]]) -> tuple[Name, ...]:
    """The names of `group` whose values `provider` makes: rows of (name, type, meaning)."""
    return tuple(Name(name, type_, group, provider, meaning) for name, type_, meaning in rows)


NAMES = (
    # -- a module instance's globals (vmrt.vm.module, BytecodeModuleInstance._namespace) --
    *_provided("module", "vmrt.vm.module", [
        ("F{n}", "callable", "internal function n (Python or C tier; with limits its depth last)"),
        ("I{n}", "callable", "import n at a plain call site (always completes)"),
        ("IY{n}", "callable", "import n at a vm.call.yieldable site (may return a generator)"),
        ("RESOLVED", "list[int]", "1 per import resolved"),
        ("RW_I32", "memoryview", "the globals as i32 slots"),
        ("RW_F32", "memoryview", "the globals as f32 slots"),
        ("RW_I64", "memoryview", "the globals as i64 slots"),
        ("RW_F64", "memoryview", "the globals as f64 slots"),
        # Range-checked global accesses, for the unaligned or indirect ones:
        ("GLOBAL_LOAD_I32", "callable", "loads an i32 global at a byte offset"),
        ("GLOBAL_LOAD_I64", "callable", "the same for i64"),
        ("GLOBAL_LOAD_F32", "callable", "the same for f32"),
        ("GLOBAL_LOAD_F64", "callable", "the same for f64"),
        ("GLOBAL_STORE_I32", "callable", "stores an i32 global at a byte offset"),
        ("GLOBAL_STORE_I64", "callable", "the same for i64"),
        ("GLOBAL_STORE_F32", "callable", "the same for f32"),
        ("GLOBAL_STORE_F64", "callable", "the same for f64"),
        ("REFS", "list", "the ref globals"),
        ("CHECK_GLOBAL_REF", "callable", "range check of an indirect ref global ordinal"),
        ("RODATA", "list[VMBuffer]", "the rodata segments"),
        ("CAST", "callable", "a ref of a type ordinal or null; INVALID_ARGUMENT for any other"),
        ("REF_OR_NULL", "callable", "a ref of a type ordinal, or null for any other"),
        ("FAIL", "callable", "raises vm.fail's status"),
        ("GENERATOR", "type", "types.GeneratorType: a native import that suspends returns one"),
        ("RUN_TO_COMPLETION", "callable", "runs a yielding callee for a caller that cannot yield"),
    ]),
    *_provided("module", "vmrt.vm.buffer", [
        ("BUFFER_ALLOC", "callable", "vm.buffer.alloc (metered with limits)"),
        ("BUFFER_CLONE", "callable", "vm.buffer.clone (metered with limits)"),
        ("BUFFER_COPY", "callable", "vm.buffer.copy"),
        ("BUFFER_COMPARE", "callable", "vm.buffer.compare"),
    ]),
    *_provided("module", "vmrt.vm.list", [
        ("LIST_ALLOC", "callable", "vm.list.alloc of a type ordinal (metered with limits)"),
    ]),
    *_provided("module", "vmrt.vm.context", [
        ("TRACE", "callable", "vm.trace's hook"),
        ("PRINT", "callable", "vm.print's hook"),
    ]),
    *_provided("module", "vmrt.vm.numerics", [
        ("numerics.*", "module", "every public name of vmrt.vm.numerics (what formulas call)"),
    ]),
    # -- instrumented code (CodegenOptions.instrumented) --
    *_provided("hooks", "vmrt.vm.hooks", [
        ("ENTER", "callable", "a frame starts (returns it)"),
        ("STEP", "callable", "an instruction is about to run"),
        ("UNWIND", "callable", "a frame is left by an error"),
        ("LEAVE", "callable", "a frame ends"),
    ]),
    # -- code with limits (CodegenOptions.checkpoints) --
    *_provided("cells", "vmrt.vm.limits", [
        ("FUEL", "cell: int", "the slice of fuel left; each block subtracts its cost"),
        ("CUR", "cell: int", "innermost import call site's depth; host re-entries continue there"),
    ]),
    *_provided("codegen", "vmrt.vm.codegen", [
        ("LIMITS_SCOPE", "function", "the scope of FUEL and CUR, cells bound per context"),
        ("D", "parameter: int", "a function's frame depth, its last parameter (D1: its callees')"),
    ]),
    *_provided("limits", "vmrt.vm.limits", [
        ("MAXD", "int", "the deepest frame allowed"),
        ("DEPTH_EXCEEDED", "callable", "raises DepthExceeded for a depth"),
        ("REFILL", "callable", "when FUEL < 0: the next slice, or a stop (fuel, deadline, cancel)"),
    ]),
    # -- the C tier's entries (vmrt.vm.ctier.runtime, straight_entry) --
    *_provided("c_entry", "vmrt.vm.ctier.runtime", [
        ("CALL", "cffi function", "the C entry: vmrt_entry_N, or vmrt_metered_N with limits"),
        ("GENERAL", "callable", "the entry of a function with ref arguments (general_entry)"),
        ("FAILED", "callable", "raises the VMError of a failed C call"),
        ("LOCAL", "threading.local", "this thread's C context (`c`), once made"),
        ("NEW", "callable", "makes this thread's C context"),
        ("F32_BITS", "callable", "an f32's bits"),
        ("READ_F32", "callable", "an f32 from bits"),
        ("READ_F64", "callable", "an f64 from bits"),
    ]),
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
