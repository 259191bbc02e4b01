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
from vmrt import memory
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


def test_decode_entry_checks_the_shape():
    key = b"k" * 32
    code = compile("x = 1", "<test>", "exec")
    good = code_cache.encode_entry(
        key, code_cache.CompiledFunction(code, [None, 0], "x = 1\n").entry())
    assert code_cache.decode_entry(good, key) is not None
    assert code_cache.decode_entry(good, b"o" * 32) is None
    assert code_cache.decode_entry(code_cache.encode_entry(key, ("not", "code", 1)), key) is None
    assert code_cache.decode_entry(
        code_cache.encode_entry(key, (code, [None, 0], "x = 1\n")), key) is None  # (format 2)


def test_compiled_function_decodes_its_map_and_source_when_asked():
    code = compile("x = 1", "<test>", "exec")
    fresh = code_cache.CompiledFunction(code, [None, 0], "x = 1\n")
    entry = code_cache.decode_entry(code_cache.encode_entry(b"k" * 32, fresh.entry()), b"k" * 32)
    cached = code_cache.CompiledFunction.from_entry(entry)
    assert cached.code is entry[0] and cached._line_pcs is None  # nothing decoded yet
    assert tuple(cached) == (entry[0], [None, 0], "x = 1\n")


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
        monkeypatch.setattr(code_cache, "_runtime_fingerprint", b"another vmrt".ljust(32))
    elif change == "python":
        monkeypatch.setattr(code_cache, "MAGIC_NUMBER", b"\x00\x00\r\n")
    else:
        monkeypatch.setattr(code_cache, "FORMAT_VERSION", code_cache.FORMAT_VERSION + 1)
    monkeypatch.setattr(code_cache, "STATS", code_cache.CacheStats())
    run_in_process()
    assert code_cache.STATS.hits == 0 and code_cache.STATS.stores > 0
    assert len(set(cache_files(cache_dir)) - before) == code_cache.STATS.stores


def test_runtime_fingerprint_follows_the_sources(tmp_path):
    """A source counts by its name, size and modification time (as __pycache__ tells
    a changed source): a rewrite at a new time, or to a new size, is a new runtime."""
    package = tmp_path / "pkg"
    package.mkdir()
    source = package / "a.py"
    digests = []
    for text, mtime_ns in (("X = 1\n", 10**18), ("X = 2\n", 10**18 + 1),
                           ("X = 22\n", 10**18 + 1), ("X = 22\n", 10**18 + 1)):
        source.write_text(text)
        os.utime(source, ns=(mtime_ns, mtime_ns))
        digest = code_cache.blake2b(digest_size=32)
        assert code_cache._hash_sources(digest, str(package)) == 1
        digests.append(digest.digest())
    assert len(set(digests[:3])) == 3 and digests[3] == digests[2]


@pytest.mark.skipif(not memory.NATIVE, reason="needs vmrt's C extension")
def test_source_records_from_c_equal_their_python_twin(tmp_path):
    """The fingerprint's records are the same bytes from C (one call) and from Python:
    only *.py and *.pyc entries, in byte order of their names, symlinks followed, an
    unreadable entry or directory giving none."""
    package = tmp_path / "pkg"
    package.mkdir()
    for name, text in (("b.py", "B = 1\n"), ("a.py", "A = 22\n"), ("c.pyc", "x"),
                       ("notes.txt", "no"), ("Z.py", ""), ("\u00e9t\u00e9.py", "E = 3\n")):
        (package / name).write_text(text)
    (package / "sub.py").mkdir()
    (package / "link.py").symlink_to(package / "a.py")
    os.utime(package / "a.py", ns=(-10**9, -10**9))  # (before 1970: a negative time)
    records, count = code_cache.source_records(str(package))
    assert (records, count) == code_cache.python_source_records(str(package))
    assert count == 7 and records.startswith(b"Z.py\0")
    for directory in (package / "missing", package / "b.py"):
        assert code_cache.source_records(str(directory)) == (b"", 0)
    (package / "dangling.py").symlink_to(package / "gone.py")
    assert code_cache.source_records(str(package)) == (b"", 0) \
        == code_cache.python_source_records(str(package))
    many = tmp_path / "many"
    many.mkdir()
    for index in range(1100):  # (over the C call's first capacity: it tells the second)
        (many / f"module_{index:04d}_{'x' * 20}.py").write_text("")
    assert code_cache.source_records(str(many)) == code_cache.python_source_records(str(many))


#: Imports the code cache in a fresh process and prints whether a thread started
#: stating the sources, and whether the fingerprint the lookup takes from it is the
#: one computed without it; with argv[1] == "fork", of a child forked at once.
FINGERPRINT_SCRIPT = r"""
import json, os, sys
from vmrt.vm import code_cache
started = code_cache._fingerprint_job is not None
if sys.argv[1:] == ["small"]:  # (too small a first try: the second has the room)
    code_cache._TAKE_CAPACITY = 16
if sys.argv[1:] == ["fork"]:
    pid = os.fork()
    if pid:
        sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
took = code_cache._started_fingerprint()
code_cache._fingerprint_job = None
fingerprint = code_cache.runtime_fingerprint()
print(json.dumps({"started": started, "took": took is not None,
                  "took_equal": took == fingerprint,
                  "equal": fingerprint == code_cache._fingerprint(
                      *code_cache._runtime_location()),
                  "again": code_cache._started_fingerprint() is None}))
sys.stdout.flush()
os._exit(0)
"""


def fingerprint_process(*args: str, **env) -> dict:
    full_env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    full_env.update(env)
    proc = subprocess.run([sys.executable, "-c", FINGERPRINT_SCRIPT, *args],
                          capture_output=True, text=True, env=full_env, cwd=REPO_ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(not memory.NATIVE, reason="needs vmrt's C extension")
@pytest.mark.parametrize("room", [[], ["small"]], ids=["room", "second try"])
def test_fingerprint_stated_on_a_thread_from_import_is_the_computed_one(room):
    assert fingerprint_process(*room) == {"started": True, "took": True, "took_equal": True,
                                          "equal": True, "again": True}


@pytest.mark.skipif(not memory.NATIVE, reason="needs vmrt's C extension")
def test_forked_child_computes_its_own_fingerprint():
    """The child inherits the job but not the thread: it never waits for it."""
    assert fingerprint_process("fork") == {"started": True, "took": False,
                                           "took_equal": False, "equal": True, "again": True}


@pytest.mark.parametrize("env", [{"VMRT_CACHE": "0"}, {"VMRT_NO_NATIVE": "1"}],
                         ids=["cache off", "pure Python"])
def test_no_fingerprint_thread_without_cache_or_c(env):
    assert fingerprint_process(**env) == {"started": False, "took": False,
                                          "took_equal": False, "equal": True, "again": True}


def test_runtime_without_sources_runs_without_cache(cache_dir, monkeypatch):
    monkeypatch.setattr(code_cache, "_runtime_fingerprint", b"")  # nothing was found to hash
    assert code_cache.default_cache() is None
    run_in_process()
    assert cache_files(cache_dir) == [] and code_cache.STATS.misses == 0


def test_content_digest_tells_modules_apart():
    scalar = vmrt.load_module(SCALAR)
    assert scalar.content_digest == vmrt.load_module(SCALAR.read_bytes()).content_digest
    renamed = vmrt.load_module(SCALAR)
    renamed.name = "other"
    assert renamed.content_digest != scalar.content_digest


# -- snippets ----------------------------------------------------------------------------------
#: Loads a module in a fresh process (argv: path, whether to read its definition) and
#: prints the file names of the snippets it compiled (the reader's binders), the
#: snippet groups it read and the snippet stats.
SNIPPET_SCRIPT = r"""
import json, sys
from vmrt.vm import code_cache
compiled = []
def counting_compile(source, filename, mode):
    compiled.append(filename)
    return compile(source, filename, mode)
code_cache.compile = counting_compile
import vmrt
module = vmrt.load_module(sys.argv[1])
if sys.argv[2] == "definition":
    [(f.full_name, f.signature) for f in module.definition.imported_functions]
stats = code_cache.SNIPPET_STATS
print(json.dumps({"compiled": compiled, "groups": sorted(code_cache._snippets),
                  "hits": stats.hits, "rejected": stats.rejected}))
"""


def run_snippet_process(cache_dir, read: str = "definition") -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    env["VMRT_CACHE_DIR"] = str(cache_dir)
    proc = subprocess.run([sys.executable, "-c", SNIPPET_SCRIPT, str(SCALAR), read],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def snippet_files(path: Path) -> list[Path]:
    return sorted(path.glob("*" + code_cache.SNIPPETS_SUFFIX)) if path.is_dir() else []


def test_second_process_compiles_no_snippet(cache_dir):
    first = run_snippet_process(cache_dir)
    assert any(name.startswith("<vmrt binder ") for name in first["compiled"])
    assert len(snippet_files(cache_dir)) == 1
    second = run_snippet_process(cache_dir)
    assert second["compiled"] == [] and second["hits"] == 1


def test_module_found_in_the_cache_reads_no_binder(cache_dir):
    assert run_snippet_process(cache_dir, "summary")["groups"] == ["binders"]  # (read now)
    again = run_snippet_process(cache_dir, "summary")
    assert again["groups"] == [] and again["compiled"] == []
    assert run_snippet_process(cache_dir)["groups"] == ["binders"]  # (its definition)


def test_keyed_snippets_make_their_source_only_when_not_found(cache_dir, monkeypatch):
    monkeypatch.setattr(code_cache, "_snippets", {})
    monkeypatch.setattr(code_cache, "_new_groups", set())
    monkeypatch.setattr(code_cache, "_snippets_cache", None)
    made = []

    def source(value):
        def make():
            made.append(value)
            return f"x = {value}\n"
        return make
    first = code_cache.compile_snippet(source(1), "<keyed>", key="one", group="test")
    assert code_cache.compile_snippet(source(1), "<keyed>", key="one", group="test") is first
    assert code_cache.compile_snippet(source(2), "<keyed>", key="two", group="test") is not first
    assert code_cache.compile_snippet("x = 1\n", "<keyed>", group="test") is not first
    assert made == [1, 2] and list(code_cache._snippets) == ["test"]
    code_cache.store_snippets()
    stored = code_cache.default_cache().load(code_cache._snippets_key("test"),
                                             code_cache.SNIPPETS)
    assert len(stored) == 3 and code_cache.default_cache().load(
        code_cache._snippets_key(), code_cache.SNIPPETS) is None


ADAPTER_SCRIPT = r"""
import json
import vmrt
from vmrt.native import module as native
from vmrt.vm import code_cache
made = []
make_source = native._adapter_source
native._adapter_source = lambda *shape: made.append(repr(shape)) or make_source(*shape)


class Host(vmrt.NativeModule, name="host", version=0):
    @vmrt.export("0ii_i")
    def add(self, a, b):
        return a + b


context = vmrt.Context(vmrt.Instance(), modules=[Host()])
print(json.dumps({"made": made, "sum": context.function("host.add")(2, 3),
                  "groups": sorted(code_cache._snippets)}))
"""


def test_second_process_makes_no_native_adapter_source(cache_dir):
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    env["VMRT_CACHE_DIR"] = str(cache_dir)
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", ADAPTER_SCRIPT], capture_output=True,
                              text=True, env=env, cwd=REPO_ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    first, second = runs
    assert first["made"] == ["(2, ('i',), False, False)"] and second["made"] == []
    assert first["sum"] == second["sum"] == 5
    assert first["groups"] == second["groups"] == ["adapters"]


def test_runtime_fingerprint_hashes_the_runtime_packages(monkeypatch):
    """Each of RUNTIME_PACKAGES (vmrt.native among them: its adapters are keyed
    snippets) is hashed from its own directory, found without importing it."""
    hashed = []
    monkeypatch.setattr(code_cache, "_hash_sources",
                        lambda digest, directory: hashed.append(directory) or 1)
    monkeypatch.setattr(code_cache, "_runtime_fingerprint", None)
    monkeypatch.setattr(code_cache, "_fingerprint_job", None)  # (the thread's: taken)
    assert code_cache.runtime_fingerprint()
    assert "vmrt.native" in code_cache.RUNTIME_PACKAGES
    expected = [os.path.dirname(__import__(package, fromlist=["_"]).__file__)
                for package in code_cache.RUNTIME_PACKAGES]
    assert [os.path.realpath(d) for d in hashed] == [os.path.realpath(d) for d in expected]


def test_runtime_packages_name_their_subpackages():
    """A directory is hashed without its subdirectories: a subpackage of a runtime
    package (vmrt.vm.ctier, whose generator the C tier's build keys rely on) must be
    named itself, or a change to it would reuse what the old one made."""
    import vmrt

    root = os.path.dirname(vmrt.__file__)
    for package in code_cache.RUNTIME_PACKAGES:
        directory = os.path.join(root, *package.split(".")[1:])
        for entry in os.scandir(directory):
            if entry.is_dir() and os.path.exists(os.path.join(entry.path, "__init__.py")):
                assert f"{package}.{entry.name}" in code_cache.RUNTIME_PACKAGES


def test_damaged_snippets_are_compiled_again(cache_dir):
    expected = run_snippet_process(cache_dir)["compiled"]
    for path in snippet_files(cache_dir):
        path.write_bytes(_flip_payload_byte(path.read_bytes()))
    again = run_snippet_process(cache_dir)
    assert again["rejected"] == 1 and again["compiled"]
    assert set(again["compiled"]) <= set(expected)  # (the module itself is cached now)
    assert run_snippet_process(cache_dir)["compiled"] == []


def test_snippets_are_bounded_and_compile_as_compile_does(cache_dir, monkeypatch):
    monkeypatch.setattr(code_cache, "_snippets", {})
    monkeypatch.setattr(code_cache, "_new_groups", set())
    monkeypatch.setattr(code_cache, "_snippets_cache", None)
    monkeypatch.setattr(code_cache, "MAX_SNIPPETS", 2)
    codes = [code_cache.compile_snippet(f"x = {i}\n", f"<snippet {i}>") for i in range(3)]
    for i, code in enumerate(codes):
        namespace: dict = {}
        exec(code, namespace)
        assert namespace["x"] == i and code.co_filename == f"<snippet {i}>"
    assert code_cache.compile_snippet("x = 0\n", "<snippet 0>") is codes[0]
    code_cache.store_snippets()  # (what a process does at its exit)
    stored = code_cache.default_cache().load(code_cache._snippets_key(), code_cache.SNIPPETS)
    assert len(stored) == 2


# -- the size bound ----------------------------------------------------------------------------
def _entry(tag: int):
    return code_cache.CompiledFunction(compile(f"x = {tag}", f"<entry {tag}>", "exec"), [None],
                                       f"x = {tag}\n").entry()


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
