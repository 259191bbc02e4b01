"""Ref counts stay exact: 1,000,000 import calls passing and returning one
buffer, through a Python export and through a C export (retain into the
result), leave the buffer's reference count, the table of references C holds
and the number of live Python objects where they were."""

from __future__ import annotations

import gc
import sys

import pytest

import vmrt
from vmrt.native import cmodule
from vmrt.vm.buffer import VMBuffer

from native_helpers import PyExample, roundtrip_module

CALLS = 1_000_000


@pytest.mark.parametrize("callee", ["pyex", "cexample"])
def test_million_ref_calls_leave_counts_unchanged(callee, workdir):
    if callee == "pyex":
        native = PyExample()
    else:
        if cmodule.lib is None:
            pytest.skip("vmrt._cnative is not built")
        from vmrt.native.example import example_module
        native = example_module()
    ctx = vmrt.Context(vmrt.Instance(), modules=[native, roundtrip_module(callee, workdir)])
    loop = ctx.function(f"rt_{callee}.echo_loop")
    churn = ctx.function(f"rt_{callee}.churn")
    buffer = VMBuffer.from_bytes(b"counted")
    loop(buffer, 10)          # compile and warm up first
    churn(buffer, 10)
    gc.collect()
    refs_before = sys.getrefcount(buffer)
    objects_before = len(gc.get_objects())
    held_before = cmodule.held_ref_count() if cmodule.lib is not None else 0

    loop(buffer, CALLS - 4 * 1000)
    assert churn(buffer, 1000) is buffer   # 4 calls a round: echo, move, swap, span

    gc.collect()
    assert sys.getrefcount(buffer) == refs_before
    if cmodule.lib is not None:
        assert cmodule.held_ref_count() == held_before
    assert len(gc.get_objects()) - objects_before < 50
    ctx.close()
