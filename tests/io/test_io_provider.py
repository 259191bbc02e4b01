"""Parameter providers: gather, scatter, load, notify, routing by scope, user providers."""

import numpy as np
import pytest

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import (FileCache, IndexProvider, ParameterIndex, ParameterProvider,
                     ParameterSpan, ProviderSet, ProviderSignal)
from vmrt.io.provider import SpanColumns


@pytest.fixture
def archive(tmp_path):
    index = ParameterIndex()
    index.add_buffer("a", bytes(range(64)))
    index.add_buffer("b", b"B" * 16)
    index.add_splat("s", b"\x01\x02\x03\x04", 32)
    index.add_buffer("c", b"C" * 8)
    path = tmp_path / "p.irpa"
    index.save(path)
    return path


def provider_for(path, writable=False, scope="model"):
    return IndexProvider(scope, ParameterIndex.load(path, writable=writable, cache=FileCache()))


def test_query_support_matches_the_scope_exactly(archive):
    provider = provider_for(archive)
    assert provider.query_support("model") and provider.query_support(b"model")
    assert not provider.query_support("") and not provider.query_support("mode")


def test_gather_files_and_splats_into_one_buffer(archive):
    provider = provider_for(archive)
    target = bytearray(64)
    provider.gather("model", target, [
        ("a", 10, 0, 6),
        ParameterSpan("s", 1, 8, 7),     # a splat read from its middle keeps its phase
        ("b", 0, 16, 16),
        ("c", 8, 40, 0),                 # empty spans are fine
    ])
    assert target[0:6] == bytes(range(10, 16))
    assert target[8:15] == b"\x02\x03\x04\x01\x02\x03\x04"
    assert target[16:32] == b"B" * 16
    assert target[32:] == bytes(32)


def test_gather_into_numpy_arrays(archive):
    provider = provider_for(archive)
    target = np.zeros(8, dtype=np.uint32)
    provider.gather("model", target, [("s", 0, 0, 32)])
    assert (target == 0x04030201).all()


@pytest.mark.parametrize("span, code", [
    (("missing", 0, 0, 4), StatusCode.NOT_FOUND),
    (("a", 60, 0, 8), StatusCode.OUT_OF_RANGE),      # past the parameter's end
    (("s", 0, 0, 33), StatusCode.OUT_OF_RANGE),
    (("a", 0, 60, 8), StatusCode.OUT_OF_RANGE),      # past the target buffer
    (("a", -1, 0, 8), StatusCode.INVALID_ARGUMENT),
    (("a", 0, 0), StatusCode.INVALID_ARGUMENT),
])
def test_gather_checks_every_span_before_copying(archive, span, code):
    provider = provider_for(archive)
    target = bytearray(64)
    with pytest.raises(VmrtError) as info:
        provider.gather("model", target, [("b", 0, 0, 16), span])
    assert info.value.code == code
    assert target == bytearray(64)  # nothing was copied


def test_the_first_failing_span_is_reported(archive):
    provider = provider_for(archive)
    with pytest.raises(VmrtError) as info:  # span 1 out of range, span 2 unknown
        provider.plan_load("model", [("b", 0, 0, 16), ("a", 60, 0, 8), ("missing", 0, 0, 4)])
    assert info.value.code == StatusCode.OUT_OF_RANGE and "`a`" in info.value.message


def test_span_columns_plan_as_spans_do(archive):
    provider = provider_for(archive)
    spans = [("a", 4, 0, 8), (b"s", 1, 0, 5), ("c", 0, 0, 8), ("a", 0, 0, 0)]
    columns = SpanColumns.of(spans)
    assert columns.keys == ["a", "s", "c", "a"] and SpanColumns.of(columns) is columns
    assert list(columns) == [ParameterSpan("a", 4, 0, 8), ParameterSpan("s", 1, 0, 5),
                             ParameterSpan("c", 0, 0, 8), ParameterSpan("a", 0, 0, 0)]
    lent, plan = provider.plan_load("model", columns)
    assert [bytes(view) if view is not None else None for view in lent] == \
        [bytes(range(4, 12)), None, b"C" * 8, b""]
    assert [(m.slot, m.length, m.pattern, m.phase) for m in plan.moves] == \
        [(1, 5, b"\x01\x02\x03\x04", 1)]
    assert provider.load("model", spans) == provider.load("model", columns)


def test_gather_refuses_read_only_targets_and_other_scopes(archive):
    provider = provider_for(archive)
    with pytest.raises(VmrtError) as info:
        provider.gather("model", b"immutable", [("b", 0, 0, 4)])
    assert info.value.code == StatusCode.PERMISSION_DENIED
    with pytest.raises(VmrtError) as info:
        provider.gather("other", bytearray(4), [("b", 0, 0, 4)])
    assert info.value.code == StatusCode.NOT_FOUND


def test_scatter_writes_into_the_entry_storage(archive):
    provider = provider_for(archive, writable=True)
    provider.scatter("model", b"xyz-WXYZ", [("a", 5, 0, 3), ("c", 4, 4, 4)])
    for handle in provider.index.file_handles():
        handle.flush()
    index = ParameterIndex.load(archive, cache=FileCache())
    assert index.lookup("a").read() == bytes(range(5)) + b"xyz" + bytes(range(8, 64))
    assert index.lookup("c").read() == b"CCCCWXYZ"
    assert index.lookup("b").read() == b"B" * 16


@pytest.mark.parametrize("span, code", [
    (("a", 60, 0, 8), StatusCode.OUT_OF_RANGE),      # would spill into the next entry
    (("c", 0, 0, 9), StatusCode.OUT_OF_RANGE),       # would spill past the last entry
    (("s", 0, 0, 4), StatusCode.PERMISSION_DENIED),  # splats are read-only
    (("missing", 0, 0, 1), StatusCode.NOT_FOUND),
    (("b", 0, 6, 8), StatusCode.OUT_OF_RANGE),       # past the source buffer
])
def test_scatter_never_touches_the_file_when_any_span_is_invalid(archive, span, code):
    before = archive.read_bytes()
    provider = provider_for(archive, writable=True)
    with pytest.raises(VmrtError) as info:
        provider.scatter("model", b"12345678", [("a", 0, 0, 8), ("b", 0, 0, 8), span])
    assert info.value.code == code
    assert archive.read_bytes() == before


def test_scatter_needs_a_writable_file(archive):
    provider = provider_for(archive, writable=False)
    with pytest.raises(VmrtError) as info:
        provider.scatter("model", b"12", [("a", 0, 0, 2)])
    assert info.value.code == StatusCode.PERMISSION_DENIED


def test_scatter_into_host_memory():
    backing = bytearray(8)
    index = ParameterIndex()
    index.add_buffer("m", backing, writable=True)
    provider = IndexProvider("", index)
    provider.write("", "m", 2, b"abc")
    assert backing == bytearray(b"\0\0abc\0\0\0")
    target = bytearray(3)
    provider.read("", "m", 2, target)
    assert target == b"abc"


def test_load_returns_zero_copy_views_and_splat_buffers(archive):
    provider = provider_for(archive)
    a, s = provider.load("model", [("a", 8, 0, 8), ("s", 2, 0, 6)])
    assert isinstance(a, memoryview) and a.readonly and bytes(a) == bytes(range(8, 16))
    mapping = provider.index.lookup("a").file.contents()
    assert np.shares_memory(np.frombuffer(a, np.uint8), np.frombuffer(mapping, np.uint8))
    assert bytes(s) == b"\x03\x04\x01\x02\x03\x04"
    copies = provider.load("model", [("b", 0, 0, 4)], allocate=lambda n: np.zeros(n, np.uint8))
    assert isinstance(copies[0], np.ndarray) and bytes(copies[0]) == b"BBBB"
    with pytest.raises(VmrtError) as info:
        provider.load("model", [("b", 0, 4, 4)])
    assert info.value.code == StatusCode.INVALID_ARGUMENT


def test_notify_trims_mappings(archive):
    provider = provider_for(archive)
    provider.gather("model", bytearray(4), [("a", 0, 0, 4)])
    handle = provider.index.lookup("a").file
    assert handle.mapped
    provider.notify(ProviderSignal.RESUME)
    assert handle.mapped
    provider.notify(ProviderSignal.LOW_MEMORY)
    assert not handle.mapped
    target = bytearray(4)
    provider.gather("model", target, [("a", 0, 0, 4)])  # still works afterwards
    assert target == bytes(range(4))
    provider.notify(ProviderSignal.SUSPEND)
    assert not handle.mapped


class DictProvider(ParameterProvider):
    """A user provider: parameters from a dict, only gather implemented."""

    def __init__(self, scope, values):
        self.scope = scope
        self.values = values
        self.signals = []

    def query_support(self, scope):
        return scope == self.scope

    def notify(self, signal):
        self.signals.append(signal)

    def gather(self, scope, target, spans):
        view = memoryview(target).cast("B")
        for key, parameter_offset, buffer_offset, length in spans:
            data = self.values[key][parameter_offset:parameter_offset + length]
            view[buffer_offset:buffer_offset + length] = data


def test_provider_set_routes_scopes_to_providers(archive):
    user = DictProvider("user", {"k": b"user-data"})
    providers = ProviderSet([provider_for(archive, scope="model"), user,
                             provider_for(archive, scope="model")])
    target = bytearray(9)
    providers.gather("user", target, [("k", 0, 0, 9)])
    assert target == b"user-data"
    providers.gather("model", target, [("b", 0, 0, 9)])
    assert target == b"B" * 9
    assert providers.resolve("model") is providers.providers[0]  # the first one wins
    with pytest.raises(VmrtError) as info:
        providers.gather("unknown", target, [("k", 0, 0, 1)])
    assert info.value.code == StatusCode.NOT_FOUND
    # load comes for free from gather; scatter was not implemented.
    assert providers.load("user", [("k", 5, 0, 4)]) == [bytearray(b"data")]
    with pytest.raises(VmrtError) as info:
        providers.scatter("user", b"x", [("k", 0, 0, 1)])
    assert info.value.code == StatusCode.UNIMPLEMENTED
    providers.notify(ProviderSignal.SUSPEND)
    assert user.signals == [ProviderSignal.SUSPEND]


def test_scopes_build_one_provider_each(archive):
    from vmrt.io import ParameterScopes
    scopes = ParameterScopes.from_specs([str(archive), f"named={archive}"])
    providers = ProviderSet(scopes.providers())
    assert providers.query_support("") and providers.query_support("named")
    target = bytearray(2)
    providers.gather("named", target, [("c", 0, 0, 2)])
    assert target == b"CC"


def test_null_scope_is_the_global_scope(archive):
    provider = provider_for(archive, scope="")
    assert provider.query_support(None) and provider.query_support("")
    target = bytearray(2)
    ProviderSet([provider]).gather(None, target, [("c", 0, 0, 2)])
    assert target == b"CC"


def test_scatter_keeps_the_cached_handle_shared(archive):
    cache = FileCache()
    writer = IndexProvider("", ParameterIndex.load(archive, writable=True, cache=cache))
    writer.scatter("", b"zz", [("a", 0, 0, 2)])
    again = ParameterIndex.load(archive, cache=cache)
    assert again.lookup("a").file is writer.index.lookup("a").file
    assert again.lookup("a").read(0, 3) == b"zz\x02"
