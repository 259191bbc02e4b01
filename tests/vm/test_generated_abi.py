"""Every name generated code reads is declared in vmrt.vm.generated_abi, and a
provider injecting a name it does not declare (or leaving one out) fails at once."""

from __future__ import annotations

import builtins
import types
from pathlib import Path

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.vm import generated_abi, numerics
from vmrt.vm.limits import Limits

VMASM = Path(__file__).resolve().parent / "vmasm"
#: The test programs that need no other module.
SOURCES = sorted(p for p in VMASM.glob("*.vmasm") if "vm.import" not in p.read_text())


def global_names(code: types.CodeType) -> set[str]:
    """The global names a code object and those nested in it read."""
    names = set(code.co_names) - set(code.co_varnames)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_names(const)
    return names


@pytest.mark.parametrize("options", [{}, {"limits": Limits(fuel=10**9)},
                                     {"instrumented": True}], ids=["plain", "limits", "hooks"])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_names_generated_code_reads_are_declared(source, options):
    module = vmrt.load_module(assemble(source.read_text()))
    context = vmrt.Context(modules=[module], tier="python", **options)
    instance = context.module(module.name)
    declared = {name.name for name in generated_abi.NAMES}
    for ordinal in range(module.function_count):
        code = module.compiled(ordinal, context.codegen_options).code
        for name in global_names(code):
            if name[0].isupper() and not hasattr(numerics, name) and \
                    not hasattr(builtins, name):
                numbered = name.rstrip("0123456789") + "{n}"
                assert name in declared or numbered in declared, (source.stem, name)
                assert name in instance.namespace, (source.stem, name)


def test_a_provider_must_inject_exactly_what_its_group_declares():
    cells = {name: types.CellType(0) for name in generated_abi.CELLS}
    assert generated_abi.namespace("cells", **cells) == cells
    with pytest.raises(AssertionError, match="undeclared.*WATCH"):
        generated_abi.namespace("cells", WATCH=types.CellType(False), **cells)
    with pytest.raises(AssertionError, match="missing.*REFILL"):
        generated_abi.namespace("limits", MAXD=1, DEPTH_EXCEEDED=print)
