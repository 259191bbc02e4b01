"""Verified modules kept across processes (vmrt.vm.module_cache): a later process
loading the same bytes neither verifies them (FlatBuffer or bytecode) nor imports
numpy for them, and gets the same module (its summary; the definition when asked
for); what changes the key, damaged entries,
invalid modules (never stored, failing alike), the off switch and concurrent
processes. Every test points VMRT_CACHE_DIR at its own temporary directory."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vmrt
from tests.vm.conftest import CACHE_ENV
from vmrt.errors import ModuleFormatError, VerificationError
from vmrt.format import module_to_json, read_module, write_module
from vmrt.format.module_def import RodataSegmentDef
from vmrt.vm import code_cache, module_cache
from vmrt.vm.module_summary import summarize
from vmrt.vm.verifier import verify_module

REPO_ROOT = Path(__file__).resolve().parents[2]
SCALAR = REPO_ROOT / "examples" / "scalar.vmfb"
MLP = REPO_ROOT / "examples" / "mlp.vmfb"
DEMO_ARGS = (48, 18, 27, 2.0)

#: Loads a module in a fresh process (argv: path) and runs scalar.vmfb's demo; prints
#: whether it was read and verified, whether numpy was imported, and the stats.
RUN_SCRIPT = r"""
import json, sys
from vmrt.vm import module_cache
calls = []
for name in ("read_module", "verify_module"):
    def spy(*args, _real=getattr(module_cache, name), _name=name, **kwargs):
        calls.append(_name)
        return _real(*args, **kwargs)
    setattr(module_cache, name, spy)
import vmrt
module = vmrt.load_module(sys.argv[1])
context = vmrt.Context(vmrt.Instance(), modules=[module])
stats = module_cache.STATS
print(json.dumps({"results": context.function("module.demo")(48, 18, 27, 2.0),
                  "calls": calls, "numpy": "numpy" in sys.modules, "hits": stats.hits,
                  "stores": stats.stores, "rejected": stats.rejected}))
"""


@pytest.fixture(autouse=True)
def cache_dir(private_cache_dir, monkeypatch):
    """The test's own cache directory, and fresh module cache stats."""
    monkeypatch.setenv("VMRT_TIER", "python")
    monkeypatch.setattr(module_cache, "STATS", code_cache.CacheStats())
    return private_cache_dir


def run_process(cache_dir: Path, path: Path = SCALAR, tier: str = "python", **env) -> dict:
    full_env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    full_env.update(VMRT_CACHE_DIR=str(cache_dir), VMRT_TIER=tier, **env)
    proc = subprocess.run([sys.executable, "-c", RUN_SCRIPT, str(path)], capture_output=True,
                          text=True, env=full_env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def module_files(path: Path) -> list[Path]:
    return sorted(path.glob("*" + code_cache.MODULE_SUFFIX)) if path.is_dir() else []


def load_error(source) -> tuple:
    with pytest.raises(vmrt.VmrtError) as caught:
        vmrt.load_module(source)
    return type(caught.value), str(caught.value)


# -- hits --------------------------------------------------------------------------------------
@pytest.mark.parametrize("tier", ["python", "auto"])
def test_second_process_neither_verifies_nor_imports_numpy(cache_dir, tier):
    """Nor reads its definition: the summary locates its functions' bytecode (the C
    tier's check of what it compiles decodes them too)."""
    first = run_process(cache_dir, tier=tier)
    assert first["calls"] == ["read_module", "verify_module"]
    assert first["stores"] == 1 and len(module_files(cache_dir)) == 1
    second = run_process(cache_dir, tier=tier)
    assert second["calls"] == [] and second["hits"] == 1
    assert not second["numpy"]
    assert second["results"] == first["results"]


@pytest.mark.parametrize("path", [SCALAR, MLP], ids=["scalar", "mlp"])
def test_module_from_the_cache_is_the_module_read(path):
    read = vmrt.load_module(path)
    cached = vmrt.load_module(path)
    assert module_cache.STATS.hits == 1
    assert module_to_json(cached.definition) == module_to_json(read.definition)
    assert cached.verified == read.verified
    assert [cached.instructions(i) for i in range(cached.function_count)] == \
        [read.instructions(i) for i in range(read.function_count)]
    assert cached.content_digest == read.content_digest
    assert [bytes(r.view) for r in cached.rodata] == [bytes(r.view) for r in read.rodata]
    assert cached.source == str(path)


def test_module_found_in_the_cache_makes_its_definition_only_when_asked():
    read = vmrt.load_module(SCALAR)
    expected = vmrt.Context(vmrt.Instance(), modules=[read]).function("module.demo")(*DEMO_ARGS)
    cached = vmrt.load_module(SCALAR)  # (its code is cached too now)
    context = vmrt.Context(vmrt.Instance(), modules=[cached])
    assert context.function("module.demo")(*DEMO_ARGS) == expected
    assert module_cache.STATS.hits == 1 and "definition" not in cached.__dict__
    assert (cached.summary, cached.export_names(), cached.imports()) == \
        (read.summary, read.export_names(), read.imports())
    assert [(cached.export_cconv(n), cached.export_attrs(n)) for n in cached.export_names()] \
        == [(read.export_cconv(n), read.export_attrs(n)) for n in read.export_names()]
    assert module_to_json(cached.definition) == module_to_json(read.definition)


def test_stored_summary_is_the_definitions():
    data = MLP.read_bytes()
    definition = read_module(data)
    expected = summarize(definition, verify_module(definition))
    vmrt.load_module(data)
    assert vmrt.load_module(data).summary == expected
    assert expected.rodata == tuple(
        (s.data_offset, len(s.data)) for s in definition.rodata_segments)
    assert [bytes(data[o:o + n]) for o, n in expected.rodata] == \
        [bytes(s.data) for s in definition.rodata_segments]


def test_module_made_in_memory_has_a_summary_without_rodata_ranges():
    read = read_module(MLP)
    segments = [RodataSegmentDef(embedded_data=bytes(s.data)) for s in read.rodata_segments]
    module = vmrt.load_module(dataclasses.replace(read, rodata_segments=segments))
    assert segments and module.summary.rodata is None
    assert [bytes(r.view) for r in module.rodata] == [bytes(s.data) for s in segments]
    assert module.summary._replace(rodata=None) == vmrt.load_module(MLP).summary._replace(
        rodata=None)


def test_bytes_and_paths_share_entries():
    vmrt.load_module(SCALAR)
    vmrt.load_module(SCALAR.read_bytes())
    assert module_cache.STATS.hits == 1


# -- keys --------------------------------------------------------------------------------------
def test_every_flatbuffer_byte_and_the_size_are_in_the_key():
    data = MLP.read_bytes()
    key = module_cache.module_key(memoryview(data))
    info = read_module(data).archive
    for offset in (0, info.flatbuffer_offset + 10, info.flatbuffer_offset +
                   info.flatbuffer_length - 1):
        changed = bytearray(data)
        changed[offset] ^= 0x01
        assert module_cache.module_key(memoryview(changed)) != key, offset
    assert module_cache.module_key(memoryview(data + bytes(64))) != key


def test_external_rodata_is_read_from_the_new_bytes():
    """External rodata is only located by the key's bytes: other contents of the same
    size hit the entry, and the module reads them."""
    data = MLP.read_bytes()
    info = read_module(data).archive
    changed = bytearray(data)
    changed[info.rodata_offset:] = bytes(b ^ 0xFF for b in changed[info.rodata_offset:])
    vmrt.load_module(data)
    cached = vmrt.load_module(bytes(changed))
    assert module_cache.STATS.hits == 1
    fresh = read_module(bytes(changed))
    assert [bytes(r.view) for r in cached.rodata] == \
        [bytes(s.data) for s in fresh.rodata_segments]
    assert [bytes(s.data) for s in cached.definition.rodata_segments] == \
        [bytes(s.data) for s in fresh.rodata_segments]


@pytest.mark.parametrize("change", ["runtime", "entry layout"])
def test_changed_runtime_misses(monkeypatch, change):
    vmrt.load_module(SCALAR)
    if change == "runtime":
        monkeypatch.setattr(code_cache, "build_id", lambda: b"another vmrt")
    else:
        monkeypatch.setattr(module_cache, "ENTRY_VERSION", module_cache.ENTRY_VERSION + 1)
    vmrt.load_module(SCALAR)
    assert module_cache.STATS.hits == 0 and module_cache.STATS.stores == 2


def test_large_flatbuffers_are_not_kept(cache_dir, monkeypatch):
    monkeypatch.setattr(module_cache, "MAX_HASHED_BYTES", 0)
    vmrt.load_module(SCALAR)
    assert module_files(cache_dir) == [] and module_cache.STATS.misses == 0


# -- files changed in place ---------------------------------------------------------------------
def test_file_rewritten_in_place_is_not_served_stale(tmp_path):
    """Same inode, size and (restored) mtime: the module is still the new bytes'."""
    data = MLP.read_bytes()
    info = read_module(data).archive
    path = tmp_path / "m.vmfb"
    path.write_bytes(data)
    before = os.stat(path)
    first = vmrt.load_module(path)
    changed = bytearray(data)
    changed[info.flatbuffer_offset + info.flatbuffer_length - 1] ^= 0x01  # (padding)
    with open(path, "r+b") as f:
        f.write(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
        (before.st_ino, before.st_size, before.st_mtime_ns)
    second = vmrt.load_module(path)
    assert second.content_digest != first.content_digest
    assert second.content_digest == vmrt.load_module(bytes(changed)).content_digest
    assert module_cache.STATS.hits == 1 and module_cache.STATS.stores == 2


# -- invalid modules ---------------------------------------------------------------------------
def _unknown_feature_module() -> bytes:
    """Reads as a module but fails verify_module (a feature no runtime has)."""
    return write_module(dataclasses.replace(read_module(SCALAR), requirements=1 << 20))


def _bad_identifier_module() -> bytes:
    data = bytearray(SCALAR.read_bytes())
    info = read_module(SCALAR).archive
    data[info.flatbuffer_offset + 4] ^= 0xFF  # the file identifier: the reader fails
    return bytes(data)


@pytest.mark.parametrize("make, error", [(_unknown_feature_module, VerificationError),
                                         (_bad_identifier_module, ModuleFormatError)],
                         ids=["verifier", "reader"])
def test_invalid_module_is_never_stored_and_fails_alike(cache_dir, monkeypatch, make, error):
    data = make()
    first = load_error(data)
    assert first[0] is error
    assert load_error(data) == first
    assert module_files(cache_dir) == [] and module_cache.STATS.stores == 0
    monkeypatch.setenv("VMRT_CACHE", "0")
    assert load_error(data) == first


def test_unreadable_paths_fail_alike(tmp_path, monkeypatch):
    missing = tmp_path / "missing.vmfb"
    first = load_error(missing)
    assert issubclass(first[0], FileNotFoundError)
    monkeypatch.setenv("VMRT_CACHE", "0")
    assert load_error(missing) == first


# -- damaged entries, the off switch, concurrency --------------------------------------------
@pytest.mark.parametrize("damage", [lambda data: data[:len(data) // 2],
                                    lambda data: data[:-1] + bytes([data[-1] ^ 0xFF])],
                         ids=["truncated", "flipped"])
def test_damaged_entry_is_read_and_verified_again(cache_dir, damage):
    expected = run_process(cache_dir)["results"]
    for path in module_files(cache_dir):
        path.write_bytes(damage(path.read_bytes()))
    again = run_process(cache_dir)
    assert again["rejected"] == 1 and again["stores"] == 1
    assert again["calls"] == ["read_module", "verify_module"]
    assert again["results"] == expected
    assert run_process(cache_dir)["calls"] == []


def test_entry_of_another_module_is_not_used(cache_dir):
    """A file holding another key's entry (a file renamed, or copied in) is foreign."""
    vmrt.load_module(MLP)
    (entry,) = module_files(cache_dir)
    key = module_cache.module_key(memoryview(SCALAR.read_bytes()))
    entry.rename(cache_dir / (key.hex() + code_cache.MODULE_SUFFIX))
    vmrt.load_module(SCALAR)
    assert module_cache.STATS.rejected == 1 and module_cache.STATS.stores == 2


def test_cache_off_keeps_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("VMRT_CACHE", "0")
    vmrt.load_module(SCALAR)
    vmrt.load_module(SCALAR)
    assert not cache_dir.exists()
    assert (module_cache.STATS.hits, module_cache.STATS.stores) == (0, 0)


def test_processes_loading_a_module_concurrently_all_succeed(cache_dir):
    full_env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    full_env.update(VMRT_CACHE_DIR=str(cache_dir), VMRT_TIER="python")
    procs = [subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, str(SCALAR)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=full_env, cwd=REPO_ROOT) for _ in range(6)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outputs]
    results = {json.dumps(json.loads(out)["results"]) for out, _ in outputs}
    assert len(results) == 1
    assert not list(cache_dir.glob("*" + code_cache.TEMP_SUFFIX))
    assert run_process(cache_dir)["calls"] == []
