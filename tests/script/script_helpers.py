"""Helpers of the script tests: compile a corpus script, run a function of it
under CPython and under vmrt in a given tier."""

from __future__ import annotations

from pathlib import Path

import pytest

import vmrt
import vmrt.script

CORPUS = Path(__file__).parent / "corpus"
TIERS = ["python", "c"]


def wrap64(value):
    """CPython's result as the module's 64-bit two's complement int."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def normalized(value):
    if isinstance(value, tuple):
        return tuple(normalized(v) for v in value)
    if isinstance(value, (list, vmrt.VMList)):
        return [normalized(v) for v in value]
    return wrap64(value)


def corpus_source(name: str) -> str:
    return (CORPUS / f"{name}.py").read_text()


def cpython_namespace(source: str, modules=None) -> dict:
    """The script run by CPython (its host modules given as `modules`)."""
    import sys
    saved = {name: sys.modules.get(name) for name in (modules or {})}
    sys.modules.update(modules or {})
    try:
        namespace = {"__name__": "corpus"}
        exec(compile(source, "<corpus>", "exec"), namespace)
        return namespace
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def need_tier(tier: str) -> None:
    if tier == "c":
        from vmrt.vm.ctier.build import compiler_identity
        if compiler_identity() is None:
            pytest.skip("the C tier needs a C compiler")
