"""The verifier on real modules: everything the IREE tools produce verifies, and
mutated modules only ever raise vmrt errors (never a Python exception or a hang)."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from vmrt.errors import VmrtError
from vmrt.format import read_module
from vmrt.vm.verifier import verify_module


@pytest.fixture(scope="module")
def corpus_bytes(corpus):
    return [m.vmfb.read_bytes() for m in corpus]


def test_every_corpus_module_verifies(corpus):
    for module in corpus:
        functions = verify_module(read_module(module.vmfb))
        assert functions, module.name
        for f in functions:
            assert f.block_pcs[0] == 0


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_bytecode_raises_only_vmrt_errors(corpus_bytes, data):
    raw = data.draw(st.sampled_from(corpus_bytes))
    module = read_module(raw)
    code = bytearray(module.bytecode_data)
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(code) - 1))
        code[where] = data.draw(st.integers(0, 255))
    module.bytecode_data = bytes(code)
    try:
        verify_module(module)
    except VmrtError:
        pass


@settings(max_examples=2500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_files_raise_only_vmrt_errors(corpus_bytes, data):
    raw = bytearray(data.draw(st.sampled_from(corpus_bytes)))
    kind = data.draw(st.sampled_from(["flip", "truncate", "splice"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            where = data.draw(st.integers(0, len(raw) - 1))
            raw[where] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    else:
        where = data.draw(st.integers(0, len(raw) - 1))
        raw[where:where] = data.draw(st.binary(min_size=1, max_size=16))
    try:
        verify_module(read_module(bytes(raw)))
    except VmrtError:
        pass
