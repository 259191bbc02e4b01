"""Compiles a module's generated C through cffi (API mode) and caches the result.

The extension module of a bytecode module is named by a hash of everything it
depends on (the module's content digest, the runtime header, the compile flags, the
Python ABI, cffi's version and the vmrt runtime fingerprint, which covers the
generator), then a hash of its toolchain: the compiler's identity (its path, size
and mtime) and the environment the build reads (BUILD_ENVIRONMENT: CC, CFLAGS,
LDFLAGS...), so a build made under other settings is never reused. It is kept in
the code cache's directory (vmrt.vm.code_cache: VMRT_CACHE_DIR, private to its
user), under `ctier/`. It is built in a temporary directory of its own and renamed into place,
so processes building the same module at once each get a whole file, and a later
process loads it without a compiler. With the cache off (VMRT_CACHE=0) builds go
to a temporary directory that lives as long as the process.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import threading
from pathlib import Path

from vmrt.errors import StatusCode, VmrtError

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
  int64_t fuel; void *host; int32_t meter_memory; int64_t results[16]; ...;
} vmrt_ctx;
extern "Python" int32_t vmrt_refill_cb(vmrt_ctx *, int64_t);
extern "Python" int32_t vmrt_charge_cb(void *, int64_t);
extern "Python" void vmrt_uncharge_cb(void *, int64_t);
"""

#: Seconds a build may take (a module of thousands of functions takes tens).
BUILD_TIMEOUT = 600
_lock = threading.Lock()
_loaded: dict[str, object] = {}
_build_locks: dict[str, threading.Lock] = {}
#: What of the environment reaches a build: setuptools' compiler setup (CC, CFLAGS,
#: CPPFLAGS, LDFLAGS, LDSHARED; the C++ and archiver settings play no part in a C
#: extension) and the search paths of the compiler driver.
BUILD_ENVIRONMENT = ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED", "CPATH",
                     "C_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX")


class BuildError(VmrtError):
    """The system compiler is missing or failed (the Python tier runs instead)."""

    def __init__(self, message: str):
        super().__init__(message, StatusCode.UNAVAILABLE)


@functools.lru_cache(maxsize=None)
def compiler_identity() -> str | None:
    """The C compiler (CC, else Python's) as its resolved path, size and mtime, or None
    without one: a changed compiler gets new builds, and finding a build needs no
    compiler process."""
    compiler = os.environ.get("CC") or "cc"
    found = shutil.which(compiler.split()[0])
    if found is None and "CC" not in os.environ:
        import sysconfig  # (Python's own compiler; sysconfig costs ~5 ms to import)

        found = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0])
    if found is None:
        return None
    try:
        real = os.path.realpath(found)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def build_key(module_digest: bytes) -> str:
    """The hash of all a build depends on but the toolchain (which names a build as
    well: build_name): the module's content, the generator and runtime, the flags,
    the Python ABI and cffi (whose generated wrappers check its version). So finding
    a build needs neither its source nor a compiler."""
    import _cffi_backend  # (loaded already: the C extension and every build use it)
    from vmrt.vm import code_cache

    digest = hashlib.sha256(module_digest)
    for part in (HEADER.read_text(), " ".join(CFLAGS), sys.implementation.cache_tag,
                 EXTENSION_SUFFIX, _cffi_backend.__version__,
                 (code_cache.runtime_fingerprint() or b"").hex()):
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


def _build_directory() -> Path:
    from vmrt.vm import code_cache

    cache = code_cache.default_cache()
    if cache is not None:
        path = Path(cache.path) / "ctier"
        try:
            path.mkdir(mode=0o700, exist_ok=True)
            if os.access(path, os.W_OK) or any(path.iterdir()):
                return path
        except OSError:
            pass
    return _private_temp()


@functools.lru_cache(maxsize=None)
def _private_temp() -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="vmrt-ctier-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def load_or_build(module_digest: bytes, generate, may_build: bool = True):
    """The compiled module (`ffi`, `lib`) of a bytecode module's C: loaded when this
    process has it, else from the cache (built by this compiler, or by any when there
    is none), else built now from `generate()` -> (source, declarations); None when
    it is not built yet and `may_build` is false."""
    key = build_key(module_digest)
    with _lock:
        module = _loaded.get(key)
    if module is not None:
        return module
    suffix = EXTENSION_SUFFIX
    directory = _build_directory()
    name = build_name(key)
    path = directory / (name + suffix)
    if not path.exists() and compiler_identity() is None:
        found = sorted(directory.glob(f"_vmrt_c_{key}_*{suffix}"))
        path, name = (found[-1], found[-1].name[:-len(suffix)]) if found else (path, name)
    if not path.exists():
        if not may_build:
            return None
        with _building(key):  # (one build per module at a time; other modules go on)
            if not path.exists():
                _compile(name, *generate(), path)
    with _lock:
        module = _loaded.get(key)
        if module is None:
            module = _loaded[key] = _import(name, path)
    return module


def _building(key: str) -> threading.Lock:
    with _lock:
        return _build_locks.setdefault(key, threading.Lock())


#: The build, in a process of its own: cffi's build runs setuptools, Python code that
#: would hold this process's GIL for its duration (other threads' calls and
#: deadlines would wait); a child process leaves this one free.
_BUILDER = """
import json, os, sys
import cffi
job = json.load(open(sys.argv[1]))
ffi = cffi.FFI()
ffi.cdef(job["cdef"])
ffi.set_source(job["name"], job["source"], include_dirs=[job["include"]],
               extra_compile_args=job["cflags"], libraries=["m"])
print(ffi.compile(tmpdir=job["tmpdir"], verbose=False))
"""


def _compile(name: str, source: str, declarations: list[str], path: Path) -> None:
    if compiler_identity() is None:
        raise BuildError("no C compiler found (set CC, or VMRT_TIER=python)")
    import json
    import subprocess
    import tempfile

    work = Path(tempfile.mkdtemp(prefix=name + ".", dir=path.parent))
    try:
        job = work / "job.json"
        job.write_text(json.dumps({
            "name": name, "cdef": CDEF + "\n".join(declarations),
            "source": f'#include "{HEADER.name}"\n{source}', "include": str(HEADER.parent),
            "cflags": CFLAGS, "tmpdir": str(work)}))
        done = subprocess.run([sys.executable, "-c", _BUILDER, str(job)], capture_output=True,
                              text=True, timeout=BUILD_TIMEOUT)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BuildError(f"C tier build failed: {last}")
        os.replace(done.stdout.strip().splitlines()[-1], path)
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        raise BuildError(f"C tier build failed: {type(exc).__name__}: {exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _import(name: str, path: Path):
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
