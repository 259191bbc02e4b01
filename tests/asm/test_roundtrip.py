"""disasm -> asm round trips: the bytecode comes back byte for byte, and the
reassembled modules run as the originals do, in the reference runtime and in vmrt."""

from __future__ import annotations

import contextlib
import dataclasses
import io

import pytest

from asm_helpers import (
    expect_value, function_table, load, module_tables, parallel, require_tools, same_result,
)
from bytecode_gen import random_module
from tests.corpus.build import run_function
from vmrt.asm import assemble, disassemble
from vmrt.vm.module import load_module
from vmrt.format import write_module


def _round_trip(module_path_or_def) -> bytes:
    return assemble(disassemble(module_path_or_def), "<disasm>")


def _same_code(original, reassembled, name: str, counts: bool = True) -> None:
    a, b = function_table(original), function_table(reassembled)
    assert len(a) == len(b), name
    for i, (x, y) in enumerate(zip(a, b)):
        assert x[0] == y[0], f"{name}: function {i} bytecode differs"
        assert x[1] == y[1], f"{name}: function {i} block count differs"
        if counts:  # register counts are those the bytecode uses
            assert (x[2], x[3]) == (y[2], y[3]), f"{name}: function {i} register counts"
        # Features not spelled in vmasm (YIELD, UNWIND) are not kept.
        assert (x[4] & 3) == (y[4] & 3), f"{name}: function {i} float features differ"
    tables_a, tables_b = module_tables(original), module_tables(reassembled)
    for tables in (tables_a, tables_b):
        tables["requirements"] &= 3
        # The text lists exports function by function, not in table order.
        tables["exports"] = sorted(tables["exports"])
        if not counts:
            # Global storage is sized from the .rwdata[N]/.refs[N] the code
            # names: the text does not say how much the module declared.
            del tables["state"]
    assert tables_a == tables_b, name


def test_corpus_bytecode_round_trips(corpus):
    for module in corpus:
        original = load(module.vmfb)
        _same_code(original, load(_round_trip(original)), module.name)


def test_text_with_bytecode_offsets_assembles_the_same(corpus):
    for module in corpus:
        original = load(module.vmfb)
        text = disassemble(original, bytecode_offsets=True)
        _same_code(original, load(assemble(text)), module.name)


@pytest.mark.parametrize("seed", range(4))
def test_random_bytecode_of_every_instruction_round_trips(seed):
    module = random_module(seed)  # every instruction, vm.switch.ref and cast.ui64.f32 included
    original = load(write_module(module))
    _same_code(original, load(_round_trip(original)), f"seed {seed}", counts=False)


def _vmrt_run(argv: list[str]) -> tuple[int, str]:
    from vmrt.tools.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["run", *argv])
        except SystemExit as e:  # argparse
            code = int(e.code or 0)
    return code, out.getvalue()


def _has_reflection_model(path) -> bool:
    """Whether an export carries `iree.abi.model` (async-external): vmasm has no syntax
    for reflection attributes, so a round trip drops it and callers stop appending
    fences (iree-dump-module prints none either)."""
    module = load_module(path)
    return any("iree.abi.model" in module.export_attrs(name) for name in module.export_names())


def test_round_trip_drops_only_reflection_attributes(corpus):
    module = next(m for m in corpus if m.name == "tensor_async")
    again = load_module(_round_trip(module.vmfb))
    original = load_module(module.vmfb)
    assert original.export_attrs("scale_add")["iree.abi.model"] == "coarse-fences"
    assert again.export_attrs("scale_add") == {}
    assert again.export_cconv("scale_add") == original.export_cconv("scale_add")


def test_compiled_corpus_round_trip_runs_identically(corpus, tmp_path):
    """Every recorded iree-run-module invocation of the iree-compile corpus, on
    the disassembled and reassembled module: the reference prints what it
    printed for the original; vmrt behaves as it does on the original."""
    require_tools("iree-run-module")
    modules = {m.name: m for m in corpus}
    jobs = []
    for module in corpus:
        if module.kind != "mlir" or _has_reflection_model(module.vmfb):
            continue
        path = tmp_path / f"{module.name}.vmfb"
        path.write_bytes(_round_trip(module.vmfb))
        again = dataclasses.replace(module, vmfb=path)
        for run in module.runs:
            jobs.append((module, again, run))
    assert len(jobs) >= 50

    def reference(job):
        module, again, run = job
        return run_function(again, run.function, run.flags, modules)

    for (module, again, run), result in zip(jobs, parallel(reference, jobs)):
        where = f"{module.sidecar}:{run.line}"
        if run.expected_error:
            assert result.status == run.expected_error, where
        else:
            assert result.returncode == 0, f"{where}: {result.stderr}"
            assert result.output == run.expected_output, where
        # vmrt: the same answer (or the same refusal) for both modules.
        flags = [f"--parameters={s}={p}" for s, p in sorted(module.parameters.items())]
        flags += [f"--function={run.function}", *run.flags]
        code_a, out_a = _vmrt_run([f"--module={module.vmfb}", *flags])
        code_b, out_b = _vmrt_run([f"--module={again.vmfb}", *flags])
        assert (code_a, out_a) == (code_b, out_b), where
        if code_a == 0 and not run.expected_error:
            assert out_a.splitlines()[1:] == run.expected_output, where


def test_vmasm_corpus_round_trip_runs_in_vmrt(corpus, tmp_path):
    """The iree-as-module corpus reassembled from its disassembly: every
    recorded call gives the recorded answer in vmrt."""
    import vmrt
    by_name = {m.name: m for m in corpus}
    reassembled = {}
    for module in corpus:
        if module.kind == "vmasm":
            reassembled[module.name] = vmrt.load_module(_round_trip(module.vmfb))
    checked = 0
    for name, module in reassembled.items():
        source = by_name[name]
        for e in source.expectations:
            deps = [reassembled[d] for d in source.requires]
            with vmrt.Context(vmrt.Instance(), modules=deps + [module]) as context:
                fn = context.function(f"{module.name}.{e.function}")
                args = [expect_value(a)[1] for a in e.args]
                if e.error:
                    with pytest.raises(vmrt.VMError) as info:
                        fn(*args)
                    assert info.value.code.name == e.error, (name, e)
                else:
                    got = fn(*args)
                    got = () if got is None else got if isinstance(got, tuple) else (got,)
                    want = [expect_value(r) for r in e.results]
                    assert len(got) == len(want), (name, e)
                    for g, (kind, w) in zip(got, want):
                        assert same_result(kind, g, w), (name, e, got)
            checked += 1
    assert checked > 100
