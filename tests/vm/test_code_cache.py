"""The on-disk cache of generated code (vmrt.vm.code_cache): hits across processes,
damaged and foreign files, the off switch, unusable directories, keys, the size
bound and concurrent writers. Every test points VMRT_CACHE_DIR at its own
temporary directory (never the user's ~/.cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vmrt
from tests.vm.conftest import CACHE_ENV
from vmrt.vm import code_cache
from vmrt.vm.limits import Limits

REPO_ROOT = Path(__file__).resolve().parents[2]
SCALAR = REPO_ROOT / "examples" / "scalar.vmfb"
DEMO_ARGS = (48, 18, 27, 2.0)
EXPORT_ARGS = {"gcd": (1071, 462), "collatz": (27,), "newton_sqrt": (2.0,), "demo": DEMO_ARGS}

#: Runs the exports of scalar.vmfb in a fresh process (argv: variant) and prints
#: the results, how many functions the code generator made and the cache stats.
RUN_SCRIPT = r"""
import json, sys
import vmrt
from vmrt.vm import code_cache, codegen
from vmrt.vm.limits import Limits

generated = []
generate = codegen.FunctionGenerator.generate
def counting_generate(self):
    generated.append(self.plan.ordinal)
    return generate(self)
codegen.FunctionGenerator.generate = counting_generate

variant = sys.argv[1]
options = {"plain": {}, "limits": {"limits": Limits(fuel=10**9)}, "hooks": {"instrumented": True}}
module = vmrt.load_module(sys.argv[2])
context = vmrt.Context(vmrt.Instance(), modules=[module], **options[variant])
args = json.loads(sys.argv[3])
results = {name: context.function(f"module.{name}")(*values) for name, values in args.items()}
stats = code_cache.STATS
print(json.dumps({"results": results, "generated": len(generated), "hits": stats.hits,
                  "misses": stats.misses, "stores": stats.stores, "rejected": stats.rejected}))
"""


@pytest.fixture(autouse=True)
def cache_dir(private_cache_dir):
    return private_cache_dir


def run_process(variant: str = "plain", env: dict | None = None) -> dict:
    full_env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    full_env.update(env or {})
    full_env["VMRT_TIER"] = "python"  # (this file tests the Python tier's cache)
    proc = subprocess.run(
        [sys.executable, "-c", RUN_SCRIPT, variant, str(SCALAR), json.dumps(EXPORT_ARGS)],
        capture_output=True, text=True, env=full_env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def run_in_process(**context_options) -> dict:
    """Results of every export through a freshly loaded module (nothing compiled yet)."""
    module = vmrt.load_module(SCALAR)
    context = vmrt.Context(vmrt.Instance(), modules=[module], **context_options)
    return {name: context.function(f"module.{name}")(*args)
            for name, args in EXPORT_ARGS.items()}


def cache_files(path: Path) -> list[Path]:
    return sorted(path.glob("*" + code_cache.SUFFIX)) if path.is_dir() else []



@pytest.fixture(autouse=True)
def _python_tier(monkeypatch):
    """This file tests the Python tier's code cache (the C tier keeps builds: test_ctier)."""
    monkeypatch.setenv("VMRT_TIER", "python")


# -- hits ----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["plain", "limits", "hooks"])
def test_second_process_hits_without_generating_code(cache_dir, variant):
    env = {"VMRT_CACHE_DIR": str(cache_dir)}
    first = run_process(variant, env)
    assert first["generated"] > 0 and first["stores"] == first["misses"] > 0
    second = run_process(variant, env)
    assert second["generated"] == 0
    assert second["misses"] == 0 and second["hits"] == first["misses"]
    assert second["results"] == first["results"]


@pytest.mark.parametrize("options", [{}, {"limits": Limits(fuel=10**9)}, {"instrumented": True}],
                         ids=["plain", "limits", "hooks"])
def test_results_identical_with_and_without_cache(monkeypatch, options):
    cold = run_in_process(**options)
    warm = run_in_process(**options)
    assert code_cache.STATS.hits > 0
    monkeypatch.setenv("VMRT_CACHE", "0")
    assert run_in_process(**options) == warm == cold


def test_cached_entry_equals_fresh_compile(monkeypatch):
    run_in_process()
    cached = vmrt.load_module(SCALAR)
    entries = [cached.compiled(ordinal) for ordinal in range(cached.function_count)]
    assert code_cache.STATS.hits == cached.function_count
    monkeypatch.setenv("VMRT_CACHE", "0")
    fresh = vmrt.load_module(SCALAR)
    for ordinal, (code, line_pcs, source) in enumerate(entries):
        fresh_code, fresh_pcs, fresh_source = fresh.compiled(ordinal)
        assert (line_pcs, source) == (fresh_pcs, fresh_source)
        assert (code.co_code, code.co_consts, code.co_names, code.co_filename) == (
            fresh_code.co_code, fresh_code.co_consts, fresh_code.co_names,
            fresh_code.co_filename)


# -- damaged and foreign files --------------------------------------------------------------
def _truncate(data: bytes) -> bytes:
    return data[:len(data) // 2]


def _flip_payload_byte(data: bytes) -> bytes:
    at = code_cache.HEADER.size + 10
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def _marshal_garbage(data: bytes) -> bytes:
    return data[:code_cache.HEADER.size] + b"\xff" * (len(data) - code_cache.HEADER.size)


@pytest.mark.parametrize("damage", [_truncate, _flip_payload_byte, _marshal_garbage,
                                    lambda data: b"", lambda data: data[:20]],
                         ids=["truncated", "flipped", "garbage", "empty", "short-header"])
def test_damaged_file_regenerates(cache_dir, damage):
    expected = run_in_process()
    files = cache_files(cache_dir)
    assert files
    for path in files:
        path.write_bytes(damage(path.read_bytes()))
    assert run_in_process() == expected
    assert code_cache.STATS.rejected >= len(files)
    # The regenerated entries replaced the damaged files: the next process hits.
    assert run_process(env={"VMRT_CACHE_DIR": str(cache_dir)})["generated"] == 0


def test_file_of_another_key_is_not_trusted(cache_dir):
    run_in_process()
    files = cache_files(cache_dir)
    assert len(files) >= 2
    # Swap two entries' contents: each file now holds the other key's entry.
    first, second = files[0].read_bytes(), files[1].read_bytes()
    files[0].write_bytes(second)
    files[1].write_bytes(first)
    assert run_in_process() == run_in_process()
    assert code_cache.STATS.rejected >= 2


def test_entry_decodes_under_its_own_key_only():
    key = b"k" * 32
    fresh = code_cache.CompiledFunction(compile("x = 1", "<test>", "exec"), [None, 0], "x = 1\n")
    data = code_cache.encode_entry(key, tuple(fresh))
    assert code_cache.CompiledFunction._make(code_cache.decode_entry(data, key)) == fresh
    assert code_cache.decode_entry(data, b"o" * 32) is None


# -- off switch and unusable directories -------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "off", "false", "NO"])
def test_cache_off_writes_nothing(cache_dir, monkeypatch, value):
    monkeypatch.setenv("VMRT_CACHE", value)
    run_in_process()
    assert not cache_dir.exists()
    stats = code_cache.STATS
    assert (stats.hits, stats.misses, stats.stores) == (0, 0, 0)
    assert run_process(env={"VMRT_CACHE_DIR": str(cache_dir), "VMRT_CACHE": value})[
        "generated"] > 0
    assert not cache_dir.exists()


def test_directory_that_cannot_be_created_runs_without_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("VMRT_CACHE_DIR", str(blocker / "cache"))
    expected = run_in_process()
    assert code_cache.default_cache() is None
    monkeypatch.setenv("VMRT_CACHE", "0")
    assert run_in_process() == expected


def test_read_only_home_runs_without_cache(tmp_path, monkeypatch):
    home = tmp_path / "home-file"
    home.write_text("a home that is a file: nothing can be created under it")
    monkeypatch.delenv("VMRT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(home))
    result = run_process(env={"HOME": str(home)})
    assert result["generated"] > 0 and result["stores"] == 0 and result["hits"] == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_unwritable_directory_is_read_not_written(cache_dir):
    run_in_process()
    stored = {path.name for path in cache_files(cache_dir)}
    cache_dir.chmod(0o500)
    try:
        result = run_process("limits", env={"VMRT_CACHE_DIR": str(cache_dir)})
        assert result["stores"] == 0 and result["generated"] > 0
        assert run_process(env={"VMRT_CACHE_DIR": str(cache_dir)})["generated"] == 0
    finally:
        cache_dir.chmod(0o700)
    assert {path.name for path in cache_files(cache_dir)} == stored


def test_failed_write_stops_writing_but_not_reading(cache_dir, monkeypatch):
    # Works as root too (root writes into read-only directories): the write fails
    # as it would in a directory the user cannot write.
    expected = run_in_process()
    stored = set(cache_files(cache_dir))
    real_open = os.open

    def refuse_create(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(code_cache.os, "open", refuse_create)
    monkeypatch.setattr(code_cache, "STATS", code_cache.CacheStats())
    assert run_in_process(limits=Limits(fuel=10**9)) == expected
    assert code_cache.STATS.stores == 0 and code_cache.default_cache().writable is False
    assert run_in_process() == expected and code_cache.STATS.hits == len(stored)
    assert set(cache_files(cache_dir)) == stored
    assert not list(cache_dir.glob("*" + code_cache.TEMP_SUFFIX))


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="no POSIX ownership")
def test_directory_writable_by_others_is_not_used(cache_dir):
    run_in_process()
    cache_dir.chmod(0o777)
    try:
        result = run_process(env={"VMRT_CACHE_DIR": str(cache_dir)})
        assert result["generated"] > 0 and result["hits"] == 0 and result["stores"] == 0
    finally:
        cache_dir.chmod(0o700)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="no POSIX ownership")
def test_file_writable_by_others_is_not_read(cache_dir):
    run_in_process()
    for path in cache_files(cache_dir):
        path.chmod(0o666)
    result = run_process(env={"VMRT_CACHE_DIR": str(cache_dir)})
    assert result["hits"] == 0 and result["rejected"] > 0 and result["generated"] > 0


def test_new_directory_is_private(cache_dir):
    run_in_process()
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    assert all(path.stat().st_mode & 0o777 == 0o600 for path in cache_files(cache_dir))


# -- keys --------------------------------------------------------------------------------------
@pytest.mark.parametrize("change", ["runtime", "python", "format"])
def test_changed_version_misses(cache_dir, monkeypatch, change):
    run_in_process()
    before = set(cache_files(cache_dir))
    if change == "runtime":
        monkeypatch.setattr(code_cache, "build_id", lambda: b"another vmrt")
    elif change == "python":
        monkeypatch.setattr(code_cache, "MAGIC_NUMBER", b"\x00\x00\r\n")
    else:
        monkeypatch.setattr(code_cache, "FORMAT_VERSION", code_cache.FORMAT_VERSION + 1)
    monkeypatch.setattr(code_cache, "STATS", code_cache.CacheStats())
    run_in_process()
    assert code_cache.STATS.hits == 0 and code_cache.STATS.stores > 0
    assert len(set(cache_files(cache_dir)) - before) == code_cache.STATS.stores


def test_source_checkout_build_id_follows_the_contents(tmp_path):
    """Without an installed build id, the runtime packages' sources are hashed by
    content (subpackages included): a rewrite keeping the size and the modification
    time is still a new build; other files are not hashed."""
    source = tmp_path / "vm" / "ctier" / "a.py"
    source.parent.mkdir(parents=True)
    digests = []
    for text in ("X = 1\n", "X = 2\n", "X = 2\n"):
        source.write_text(text)
        os.utime(source, ns=(10**18, 10**18))
        digests.append(code_cache.source_digest(str(tmp_path)))
    (tmp_path / "vm" / "notes.txt").write_text("not a source")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "b.py").write_text("not a runtime package")
    assert digests[0] != digests[1] == digests[2] == code_cache.source_digest(str(tmp_path))
    assert code_cache.source_digest(str(tmp_path / "missing")) == b""


#: Runs scalar.vmfb in a fresh process as a vmrt installed with build id argv[1] (the
#: file setup.py writes, vmrt/_build_id.py, stood in for) and prints the cache stats.
BUILD_SCRIPT = r"""
import json, sys, types
installed = types.ModuleType("vmrt._build_id")
installed.BUILD_ID = sys.argv[1]
sys.modules["vmrt._build_id"] = installed
import vmrt
from vmrt.vm import code_cache
module = vmrt.load_module(sys.argv[2])
context = vmrt.Context(vmrt.Instance(), modules=[module])
print(json.dumps({"result": context.function("module.demo")(*json.loads(sys.argv[3])),
                  "hits": code_cache.STATS.hits, "stores": code_cache.STATS.stores}))
"""


def test_installed_build_id_keys_the_cache(cache_dir):
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    env.update(VMRT_CACHE_DIR=str(cache_dir), VMRT_TIER="python")

    def run(build: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, build, str(SCALAR),
                               json.dumps(DEMO_ARGS)], capture_output=True, text=True,
                              env=env, cwd=REPO_ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first, again, other = run("build-1"), run("build-1"), run("build-2")
    assert first["hits"] == 0 and first["stores"] > 0
    assert again["hits"] == first["stores"] and again["stores"] == 0
    assert other["hits"] == 0 and other["stores"] == first["stores"]
    assert first["result"] == again["result"] == other["result"]


def test_runtime_without_sources_runs_without_cache(cache_dir, monkeypatch):
    monkeypatch.setattr(code_cache, "build_id", lambda: b"")  # no sources to hash
    assert code_cache.default_cache() is None
    run_in_process()
    assert cache_files(cache_dir) == [] and code_cache.STATS.misses == 0


def test_content_digest_tells_modules_apart():
    scalar = vmrt.load_module(SCALAR)
    assert scalar.content_digest == vmrt.load_module(SCALAR.read_bytes()).content_digest
    renamed = vmrt.load_module(SCALAR)
    renamed.name = "other"
    assert renamed.content_digest != scalar.content_digest



# -- the size bound ----------------------------------------------------------------------------
def _entry(tag: int):
    return (compile(f"x = {tag}", f"<entry {tag}>", "exec"), [None], f"x = {tag}\n")


def test_size_bound_evicts_least_recently_used(cache_dir):
    size = len(code_cache.encode_entry(bytes(32), _entry(0)))
    cache = code_cache.CodeCache(str(cache_dir), max_bytes=4 * size + size // 2)
    keys = [bytes([i]) * 32 for i in range(6)]
    for i, key in enumerate(keys[:4]):
        cache.store(key, _entry(i))
        os.utime(cache.entry_path(key), ns=(10**18 + i, 10**18 + i))  # key 0 oldest
    assert cache.load(keys[0]) is not None  # a hit makes key 0 the most recent
    cache.store(keys[4], _entry(4))
    cache.store(keys[5], _entry(5))
    remaining = {path.name for path in cache_files(cache_dir)}
    assert sum(path.stat().st_size for path in cache_files(cache_dir)) <= cache.max_bytes
    assert Path(cache.entry_path(keys[1])).name not in remaining
    assert {Path(cache.entry_path(k)).name for k in (keys[0], keys[4], keys[5])} <= remaining


def test_hit_refreshes_the_mtime_of_an_entry_not_used_lately(cache_dir):
    cache = code_cache.CodeCache(str(cache_dir), max_bytes=1 << 20)
    old, recent = bytes([1]) * 32, bytes([2]) * 32
    for key in (old, recent):
        cache.store(key, _entry(0))
    now = os.stat(cache.entry_path(recent)).st_mtime_ns
    lately = now - (code_cache.REFRESH_SECONDS // 2) * 10**9
    os.utime(cache.entry_path(old), ns=(10**18, 10**18))
    os.utime(cache.entry_path(recent), ns=(lately, lately))
    assert cache.load(old) is not None and cache.load(recent) is not None
    assert os.stat(cache.entry_path(old)).st_mtime_ns > 10**18
    assert os.stat(cache.entry_path(recent)).st_mtime_ns == lately


def test_environment_bound_is_applied(cache_dir, monkeypatch):
    monkeypatch.setenv("VMRT_CACHE_MAX_BYTES", "1")  # smaller than any entry
    run_in_process()
    assert cache_files(cache_dir) == [] and code_cache.STATS.stores == 0
    monkeypatch.setenv("VMRT_CACHE_MAX_BYTES", "not a number")
    assert code_cache.max_bytes() == code_cache.DEFAULT_MAX_BYTES


def test_stale_temporary_files_are_removed(cache_dir):
    cache = code_cache.CodeCache(str(cache_dir), max_bytes=1)
    stale = cache_dir / ("0" * 64 + code_cache.SUFFIX + ".1.ab" + code_cache.TEMP_SUFFIX)
    stale.write_bytes(b"x" * 100)
    os.utime(stale, (0, 0))
    cache.evict()
    assert not stale.exists()


# -- concurrency -------------------------------------------------------------------------------
def test_processes_filling_the_cache_concurrently_all_succeed(cache_dir):
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    env["VMRT_CACHE_DIR"] = str(cache_dir)
    variants = ["plain", "limits", "hooks", "plain", "limits", "hooks"]
    procs = [subprocess.Popen(
        [sys.executable, "-c", RUN_SCRIPT, variant, str(SCALAR), json.dumps(EXPORT_ARGS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
        for variant in variants]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * len(procs), [err for _, err in outputs]
    results = [json.loads(out)["results"] for out, _ in outputs]
    assert all(result == results[0] for result in results)
    assert not list(cache_dir.glob("*" + code_cache.TEMP_SUFFIX))
    for variant in ("plain", "limits", "hooks"):
        again = run_process(variant, {"VMRT_CACHE_DIR": str(cache_dir)})
        assert again["generated"] == 0 and again["results"] == results[0]
