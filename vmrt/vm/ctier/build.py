"""Compiles a module's generated C (cffi's wrappers, API mode, and the system
compiler: vmrt.vm.ctier.toolchain) and caches the result.

A build is named by two hashes. Its key covers all the code depends on: the module's
content digest, the runtime header, vmrt's compile flags, the Python ABI, cffi's
version and vmrt's build id (code_cache.build_id: it covers the generator). Its
toolchain covers how it was made: the compiler's identity (its path, size and mtime) and the
environment the build reads (BUILD_ENVIRONMENT: CC, CFLAGS, LDFLAGS...). So a build
made under other settings is never reused; without a compiler, a build of the key
made by any toolchain is (a later process loads it without a compiler).

Builds are kept in the code cache's directory (vmrt.vm.code_cache: VMRT_CACHE_DIR),
under `ctier/`, a file each, named by the build's name and a CRC of its bytes.
dlopen runs a file's code, so before it a cached build passes the code cache's
checks (the folder and the file are the user's own and writable by no one else, the
file is a regular one) and its bytes must match the CRC in its name (a truncated or
corrupted file). A build failing either is a cache miss: built again, the new
file replacing it. A build is compiled in a private temporary folder of the process
(which lives as long as the process) and copied into `ctier/` through a temporary
file renamed over, so processes building the same module at once each see a whole
file; the copy is what the process loads. When the cache is off (VMRT_CACHE=0),
`ctier/` is not the user's alone, or it cannot be written (read-only, full disk),
the process loads its private build.

A failed build is remembered in `ctier/` for a day (a .vmf entry keyed by the
build's name: its key and toolchain), and later processes do not run the compiler
for it again: auto runs the Python tier and says nothing (the failing process said
so, naming the entry's file); VMRT_TIER=c fails with the remembered message. It is
tried again after the day, once the compiler, the build environment or vmrt change,
or once that file (or `ctier/`) is deleted.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import sys
import threading
import time
import zlib
from pathlib import Path

from vmrt.errors import StatusCode, VmrtError
from vmrt.vm import code_cache

HEADER = Path(__file__).with_name("runtime.h")
#: This Python's extension module suffix (`.cpython-311-x86_64-linux-gnu.so`).
EXTENSION_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
#: No contraction into fused multiply-adds, no fast-math: each operation rounds as
#: the VM's does; -fsignaling-nans keeps conversions that quiet a signalling NaN
#: (float -> double -> float is not folded away). -fwrapv is belt and braces (the
#: code already wraps unsigned).
CFLAGS = ["-O2", "-fno-fast-math", "-ffp-contract=off", "-fsignaling-nans", "-fwrapv",
          "-fno-strict-aliasing", "-fno-math-errno", "-w"]
#: What the host reads and writes of the runtime's structures (runtime.h).
CDEF = """
typedef struct vmrt_ref {
  int32_t kind; int32_t is_mutable; int64_t refcount; uint8_t *data; uint64_t length;
  struct vmrt_ref **items; uint64_t count; int64_t host_id; void *charged; ...;
} vmrt_ref;
typedef struct vmrt_inst {
  uint8_t *rw; uint64_t rw_size; vmrt_ref **rodata; uint64_t rodata_count; ...;
} vmrt_inst;
typedef struct vmrt_ctx {
  vmrt_inst *inst; int32_t max_depth; int32_t err_kind; int64_t err_a, err_b, err_c;
  vmrt_ref *err_ref; int32_t frame_count; int32_t frames[128];
  int64_t fuel; void *host; int32_t meter_memory; int64_t results[16];
  const int64_t *ctrl_c; int64_t ctrl_c_seen; int (*ctrl_c_watch)(void); ...;
} vmrt_ctx;
extern "Python+C" int32_t vmrt_refill_cb(vmrt_ctx *, int64_t);
extern "Python+C" int32_t vmrt_charge_cb(void *, int64_t);
extern "Python+C" void vmrt_uncharge_cb(void *, int64_t);
"""

#: Seconds a build may take (a module of thousands of functions takes tens).
BUILD_TIMEOUT = 600
_lock = threading.Lock()
_loaded: dict[str, object] = {}
_build_locks: dict[str, threading.Lock] = {}
#: What of the environment reaches a build: the compiler setup, read as setuptools
#: reads it (CC, CFLAGS, CPPFLAGS, LDFLAGS, LDSHARED: vmrt.vm.ctier.toolchain; the C++
#: and archiver settings play no part in a C extension), and the search paths of the
#: compiler driver.
BUILD_ENVIRONMENT = ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED", "CPATH",
                     "C_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX")
#: What the C tier's cache did in this process: builds loaded (hits), built (misses,
#: stores) and files refused (rejected).
STATS = code_cache.CacheStats()
#: A failed build's message and time (time.time()), remembered in `ctier/` under its
#: name (see above) for RETRY_SECONDS: a failure can pass (a full disk, a timeout).
FAILED_SUFFIX = ".vmf"
RETRY_SECONDS = 24 * 3600
#: The bound on a build's size read from the cache (its files are not counted in the
#: cache's bound, VMRT_CACHE_MAX_BYTES, which would otherwise refuse large ones).
MAX_BUILD_BYTES = 1 << 30
#: The `ctier/` folder of each cache directory (code_cache.CodeCache: its checks).
_folders: dict[str, code_cache.CodeCache] = {}
#: Failed builds' messages by name, in this process (with or without a cache).
_failures: dict[str, str] = {}


class BuildError(VmrtError):
    """The system compiler is missing or failed (the Python tier runs instead)."""

    def __init__(self, message: str):
        super().__init__(message, StatusCode.UNAVAILABLE)


class RememberedFailure(BuildError):
    """A build that failed before (in this process or an earlier one), not tried again."""


@functools.lru_cache(maxsize=None)
def compiler_identity() -> str | None:
    """The C compiler (CC, else Python's) as its resolved path, size and mtime, or None
    without one: a changed compiler gets new builds, and finding a build needs no
    compiler process."""
    command = compiler_command()
    if command is None:
        return None
    try:
        real = os.path.realpath(command[0])
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


@functools.lru_cache(maxsize=None)
def compiler_command() -> list[str] | None:
    """The command running the C compiler (CC, else `cc`, else Python's), its program
    found on PATH; None without one."""
    words = shlex.split(os.environ.get("CC") or "cc")
    found = shutil.which(words[0]) if words else None
    if found is None and "CC" not in os.environ:
        import sysconfig  # (Python's own compiler; sysconfig costs ~5 ms to import)

        words = shlex.split(sysconfig.get_config_var("CC") or "cc")
        found = shutil.which(words[0]) if words else None
    return None if found is None else [found, *words[1:]]


def build_key(module_digest: bytes) -> str:
    """The hash of all a build depends on but the toolchain (which names a build as
    well: build_name): the module's content, the generator and runtime, the flags,
    the Python ABI and cffi (whose generated wrappers check its version). So finding
    a build needs neither its source nor a compiler."""
    import _cffi_backend  # (loaded already: the C extension and every build use it)

    digest = hashlib.sha256(module_digest)
    for part in (HEADER.read_text(), " ".join(CFLAGS), sys.implementation.cache_tag,
                 EXTENSION_SUFFIX, _cffi_backend.__version__,
                 code_cache.build_id().hex()):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:32]


def toolchain() -> str:
    """The hash of how builds are made here: the compiler's identity and the build
    environment (an unset variable differs from an empty one, as setuptools reads it)."""
    parts = [compiler_identity() or ""]
    parts += [f"{name}={os.environ.get(name)!r}" for name in BUILD_ENVIRONMENT]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:12]


def build_name(key: str) -> str:
    """The extension module's name (its PyInit_ symbol's): `_vmrt_c_<key>_<toolchain>`."""
    return f"_vmrt_c_{key}_{toolchain()}"


def _crc(data: bytes) -> str:
    """A build's CRC-32, in its file's name: it detects accidents (a truncated or
    corrupted file), as the code cache's does; the checks of owner and modes keep
    others out. (A cryptographic hash would cost a large build milliseconds a load.)"""
    return f"{zlib.crc32(data):08x}"


def _cache_folder() -> code_cache.CodeCache | None:
    """The cache's `ctier/` folder (made 0o700 when missing), or None when the cache is
    off or the folder is not the user's alone (code_cache's test of its directory)."""
    cache = code_cache.default_cache()
    if cache is None:
        return None
    folder = _folders.get(cache.path)
    if folder is None:
        folder = code_cache.CodeCache(os.path.join(cache.path, "ctier"), MAX_BUILD_BYTES)
        _folders[cache.path] = folder
    return folder if folder.usable else None


@functools.lru_cache(maxsize=None)
def _private_temp() -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="vmrt-ctier-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def load_or_build(module_digest: bytes, generate, may_build: bool = True):
    """The compiled module (`ffi`, `lib`) of a bytecode module's C: loaded when this
    process has it, else from the cache (built by this toolchain, or by any when there
    is no compiler), else built now from `generate()` -> (head, parts, declarations:
    cgen.generate_module); None when it is not built yet and `may_build` is false
    (nor waiting for a build)."""
    key = build_key(module_digest)
    with _lock:
        module = _loaded.get(key)
    if module is not None:
        return module
    building = _building(key)  # (one load or build per module at a time; others go on)
    if not building.acquire(blocking=may_build):
        return None
    try:
        with _lock:
            module = _loaded.get(key)
        if module is None:
            folder = _cache_folder()
            module = _load_cached(folder, key)
            if module is None:
                if not may_build:
                    return None
                module = _build(folder, key, generate)
            with _lock:
                _loaded[key] = module
        return module
    finally:
        building.release()


def _building(key: str) -> threading.Lock:
    with _lock:
        return _build_locks.setdefault(key, threading.Lock())


def _load_cached(folder: code_cache.CodeCache | None, key: str):
    """The module of the first cached build of `key` that passes its checks, or None."""
    for name, path in _cached_builds(folder, key):
        data, _ = folder.read_private(path, STATS)  # (None: not a regular file of ours alone)
        if data is not None and path.endswith(f".{_crc(data)}{EXTENSION_SUFFIX}"):
            try:
                module = _import(name, path)
            except BuildError:
                pass
            else:
                STATS.hits += 1
                return module
        if data is not None:
            STATS.rejected += 1  # (read_private counted those it refused)
    STATS.misses += 1
    return None


def _cached_builds(folder: code_cache.CodeCache | None, key: str) -> list[tuple[str, str]]:
    """(module name, path) of the files in `folder` holding builds of `key`: this
    toolchain's, or any toolchain's when there is no compiler."""
    if folder is None:
        return []
    prefix = f"{build_name(key)}." if compiler_identity() is not None else f"_vmrt_c_{key}_"
    try:
        files = sorted(os.listdir(folder.path))
    except OSError:
        return []
    return [(file.partition(".")[0], os.path.join(folder.path, file)) for file in files
            if file.startswith(prefix) and file.endswith(EXTENSION_SUFFIX)]


def _build(folder: code_cache.CodeCache | None, key: str, generate):
    """Builds the module of `key` in the process's private folder, copies the build
    into the cache and loads the copy (the private folder may be on a file system
    that maps no code: a noexec /tmp), else the private build; a failure is
    remembered, and raised."""
    name = build_name(key)
    failure = _failures.get(name) or _remembered_failure(folder, name)
    if failure is not None:
        raise RememberedFailure(failure)
    built = _private_temp() / f"{name}{EXTENSION_SUFFIX}"
    try:
        _compile(name, *generate(), built)
        return _import(name, _publish(folder, key, built) or str(built))
    except BuildError as error:
        if compiler_identity() is None:  # (nothing to remember it by)
            raise
        raise BuildError(_remember_failure(folder, name, error.message)) from None


def _failure_key(name: str) -> bytes:
    return hashlib.blake2b(f"failed\0{name}".encode(), digest_size=32).digest()


def _remembered_failure(folder: code_cache.CodeCache | None, name: str) -> str | None:
    """The message of a build of `name` that failed less than RETRY_SECONDS ago."""
    entry = folder.load(_failure_key(name), FAILED_SUFFIX, STATS) if folder is not None else None
    if entry is None or not 0 <= time.time() - entry[1] < RETRY_SECONDS:
        return None
    return entry[0]


def _remember_failure(folder: code_cache.CodeCache | None, name: str, message: str) -> str:
    """Records a failed build (in the cache when it can be written) and returns its
    message, saying how to try again."""
    if folder is not None:
        key = _failure_key(name)
        remembered = (f"{message} (remembered: tried again after a day, when the compiler, "
                      f"CC/CFLAGS or vmrt change, or once "
                      f"{folder.entry_path(key, FAILED_SUFFIX)} is deleted)")
        folder.store(key, (remembered, time.time()), FAILED_SUFFIX, STATS)
        if folder.writable:
            message = remembered
    _failures[name] = message
    return message


def _publish(folder: code_cache.CodeCache | None, key: str, built: Path) -> str | None:
    """Copies a new build into the cache, named by its CRC, and removes the other
    files of its name (ones the checks refused, which this build replaces); returns
    the copy's path, or None when the cache cannot be written."""
    if folder is None:
        return None
    try:
        data = built.read_bytes()
    except OSError:
        return None
    path = os.path.join(folder.path, f"{build_name(key)}.{_crc(data)}{EXTENSION_SUFFIX}")
    if not folder.write_private(path, data):
        return None
    STATS.stores += 1
    for _, old in _cached_builds(folder, key):
        if old != path:
            try:
                os.remove(old)
            except OSError:
                pass
    return path


def _compile(name: str, head: str, parts: list[str], declarations: list[str],
             path: Path) -> None:
    """Builds the extension module `name` of a module's C (cgen.generate_module) at
    `path` (vmrt.vm.ctier.toolchain: no Python code but cffi's writing of its wrappers
    runs in this process)."""
    command = compiler_command()
    if command is None:
        raise BuildError("no C compiler found (set CC, or VMRT_TIER=python)")
    import tempfile
    import cffi
    from cffi.recompiler import make_c_source  # (FFI.emit_c_code, without its message)
    from vmrt.vm.ctier import toolchain

    head = f'#include "{HEADER.name}"\n{head}'

    def wrapper(source_path: str) -> None:
        ffi = cffi.FFI()
        ffi.cdef(CDEF + "\n".join(declarations))
        make_c_source(ffi, name, head, source_path, verbose=False)

    work = Path(tempfile.mkdtemp(prefix=name + ".", dir=path.parent))
    try:
        built = toolchain.build_extension(command, name, head, parts, wrapper, CFLAGS,
                                          HEADER.parent, work, BUILD_TIMEOUT)
        os.replace(built, path)
    except toolchain.CompileError as error:
        raise BuildError(f"C tier build failed: {error}") from None
    except (OSError, cffi.CDefError, cffi.FFIError, cffi.VerificationError) as exc:
        raise BuildError(f"C tier build failed: {type(exc).__name__}: {exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _import(name: str, path: str):
    """Loads a build (dlopen: its code runs); BuildError when it cannot be loaded."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError) as exc:
        raise BuildError(f"C tier build cannot be loaded: {exc}") from None
    return module
