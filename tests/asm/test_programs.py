"""Hand-written vmasm programs (tests/asm/vmasm/*.vmasm, never seen by any
other tool of the project) assemble with vmrt asm and run to the answers in
their .expect sidecars, in the reference runtime (iree-run-module) and in vmrt."""

from __future__ import annotations

import pytest

from asm_helpers import expect_value, parallel, own_programs, require_tools, same_result
from tests.corpus.build import CorpusModule, parse_expect, run_function
import vmrt
from vmrt.asm import assemble

PROGRAMS = own_programs()


def _assembled(source, tmp_path):
    path = tmp_path / f"{source.stem}.vmfb"
    path.write_bytes(assemble(source.read_text(), str(source)))
    expectations, requires = parse_expect(source.with_suffix(".expect"))
    assert not requires
    module = CorpusModule(source.stem, "vmasm", source, path, expectations=expectations,
                          sidecar=source.with_suffix(".expect"))
    return module


@pytest.mark.parametrize("source", PROGRAMS, ids=lambda p: p.stem)
def test_runs_in_the_reference(source, tmp_path):
    require_tools("iree-run-module")
    module = _assembled(source, tmp_path)
    assert module.expectations

    def call(e):
        return run_function(module, e.function, e.input_flags(), {})

    for e, result in zip(module.expectations, parallel(call, module.expectations)):
        where = f"{module.sidecar}:{e.line}"
        if e.error:
            assert result.status == e.error, f"{where}: {result.stderr}"
        else:
            assert result.returncode == 0, f"{where}: {result.stderr}"
            assert result.output == e.expected_output(), where


@pytest.mark.parametrize("source", PROGRAMS, ids=lambda p: p.stem)
def test_runs_in_vmrt(source, tmp_path):
    module = _assembled(source, tmp_path)
    loaded = vmrt.load_module(module.vmfb)
    for e in module.expectations:
        with vmrt.Context(vmrt.Instance(), modules=[loaded]) as context:
            fn = context.function(f"{loaded.name}.{e.function}")
            args = [expect_value(a)[1] for a in e.args]
            if e.error:
                with pytest.raises(vmrt.VMError) as info:
                    fn(*args)
                assert info.value.code.name == e.error, e
            else:
                got = fn(*args)
                got = () if got is None else got if isinstance(got, tuple) else (got,)
                want = [expect_value(r) for r in e.results]
                assert len(got) == len(want), e
                for g, (kind, w) in zip(got, want):
                    assert same_result(kind, g, w), (e, got)
