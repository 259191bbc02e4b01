"""Pins the corpus itself: every module builds, and every recorded invocation
(.runs for MLIR, .expect for vmasm) reproduces its output with the reference
iree-run-module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.corpus.build import CorpusModule, discover, run_function

# Parsed at collection time only for the parameter ids; the fixture builds.
_MODULES = discover(Path(__file__).resolve().parents[2] / "build" / "corpus")
_NAMES = [m.name for m in _MODULES]


def _cases():
    for m in _MODULES:
        for r in m.runs:
            yield pytest.param(m.name, r.line, id=f"{m.name}:{r.line}:{r.function}")
        for e in m.expectations:
            yield pytest.param(m.name, e.line, id=f"{m.name}:{e.line}:{e.function}")


def _by_name(corpus) -> dict[str, CorpusModule]:
    return {m.name: m for m in corpus}


def test_every_module_built(corpus):
    assert sorted(m.name for m in corpus) == sorted(_NAMES)
    for m in corpus:
        assert m.vmfb.is_file() and m.vmfb.stat().st_size > 0, m.name
        for scope, path in m.parameters.items():
            assert path.is_file(), f"{m.name}: parameter archive for scope {scope!r}"


def test_every_sidecar_has_recorded_values(corpus):
    for m in corpus:
        for e in m.expectations:
            assert e.results is not None, f"{m.sidecar}:{e.line}: '-> ?' not recorded yet"
        for r in m.runs:
            assert r.expected_output or r.expected_error, f"{m.sidecar}:{r.line}: no expected output"


@pytest.mark.parametrize("name,line", list(_cases()))
def test_recorded_invocation(corpus, name, line):
    if shutil.which("iree-run-module") is None:
        pytest.skip("iree-run-module is not installed")
    modules = _by_name(corpus)
    module = modules[name]
    run = next((r for r in module.runs if r.line == line), None)
    if run is not None:
        function, flags, output, error = run.function, run.flags, run.expected_output, run.expected_error
    else:
        e = next(e for e in module.expectations if e.line == line)
        function, flags, output, error = e.function, e.input_flags(), e.expected_output(), e.error
    result = run_function(module, function, flags, modules)
    where = f"{module.sidecar}:{line}"
    if error is not None:
        assert result.returncode != 0, f"{where}: expected {error}, got success: {result.output}"
        assert result.status == error, f"{where}: expected {error}, got:\n{result.stderr}"
    else:
        assert result.returncode == 0, f"{where}: failed:\n{result.stderr}"
        assert result.output == output, f"{where}: output differs"
