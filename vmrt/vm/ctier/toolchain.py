"""Runs the system C compiler on a module's generated C (vmrt/vm/ctier/cgen.py): the
functions in a few translation units and cffi's wrappers in one more, compiled at
once on the processors this process may use, then linked into one extension module.

Why not cffi's own build (setuptools, in a child Python): the compiler makes one
process per unit, so one unit of a whole module used one processor however many
there were; cffi's wrappers (each entry's argument conversion, under Python's
headers) took as long to optimise as the functions themselves; and setuptools
added a Python start and its imports to every build. The wrappers are glue run
once a call, so they are compiled at WRAPPER_OPTIMIZATION; the functions' code is
compiled with build.CFLAGS, as before (so the same code runs whichever way it was
built: the split moves no instruction's meaning, only where the compiler may inline).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sysconfig
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

#: The wrappers' optimisation level (after build.CFLAGS, which it overrides for them):
#: they convert a call's arguments by calling into cffi's backend, as fast unoptimised.
WRAPPER_OPTIMIZATION = "-O0"
#: Units of the functions' code per processor: a few, so that the processors finish
#: together (a unit costs the compiler a start and runtime.h's parsing, ~2% of a
#: large module's build).
UNITS_PER_JOB = 2
#: Compilers run at once at most (each takes ~100 MB for a large unit).
MAX_JOBS = 8


class CompileError(Exception):
    """A compiler or linker run failed: its last line of output (build.py says more)."""


def processors() -> int:
    """How many compilers a build runs at once: the processors this process may run
    on, up to MAX_JOBS."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, min(count, MAX_JOBS))


def split_units(parts: list[str], count: int) -> list[list[str]]:
    """`parts` (each function's C) in at most `count` groups of about equal size,
    each kept in the order given."""
    bins: list[list[int]] = [[] for _ in range(max(1, min(count, len(parts))))]
    sizes = [0] * len(bins)
    for index in sorted(range(len(parts)), key=lambda i: -len(parts[i])):
        smallest = sizes.index(min(sizes))
        bins[smallest].append(index)
        sizes[smallest] += len(parts[index])
    return [[parts[i] for i in sorted(b)] for b in bins if b]


def build_extension(compiler: list[str], name: str, head: str, parts: list[str],
                    wrapper, flags: list[str], include: Path, work: Path, timeout: float,
                    jobs: int | None = None) -> Path:
    """The extension module `name` built in `work`: `wrapper(path)` (cffi writing its
    wrapper source) as one unit, and `parts` in UNITS_PER_JOB * `jobs` units more,
    each starting with `head`, compiled `jobs` at a time (default: processors()),
    then linked. Returns the path of the shared library."""
    jobs = jobs or processors()
    base = [*compiler, *_environment("CFLAGS"), *_environment("CPPFLAGS"),
            *shlex.split(sysconfig.get_config_var("CCSHARED") or ""), *flags, f"-I{include}"]
    wrapper_source = work / f"{name}.c"
    python_include = {sysconfig.get_paths()[k] for k in ("include", "platinclude")}
    wrapper_command = [*base, WRAPPER_OPTIMIZATION, "-DNDEBUG",
                       *(f"-I{p}" for p in sorted(python_include)),
                       "-c", str(wrapper_source), "-o", str(wrapper_source.with_suffix(".o"))]
    commands = []
    for index, unit in enumerate(split_units(parts, UNITS_PER_JOB * jobs)):
        source = work / f"unit{index}.c"
        source.write_text(head + "\n".join(unit))
        commands.append([*base, "-c", str(source), "-o", str(source.with_suffix(".o"))])
    processes = _Processes()
    with ThreadPoolExecutor(jobs) as pool:
        # (the first units compile while cffi writes the wrappers, in this process)
        running = [pool.submit(lambda: (wrapper(str(wrapper_source)),
                                        processes.run(wrapper_command, timeout)))]
        running += [pool.submit(processes.run, command, timeout) for command in commands]
        try:
            pending = set(running)
            while pending:  # (in slices: Ctrl-C received by another thread is seen here)
                finished, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
                for done in finished:
                    done.result()
        except BaseException:  # (a unit failed, or Ctrl-C): the others stop too
            pool.shutdown(wait=False, cancel_futures=True)
            processes.stop()
            raise
    library = work / (name + ".so")
    objects = [command[-1] for command in [wrapper_command, *commands]]
    processes.run([*_linker(compiler), *objects, "-lm", "-o", str(library)], timeout)
    return library


def _linker(compiler: list[str]) -> list[str]:
    """The command linking an extension module, as setuptools makes it: LDSHARED from
    the environment, else Python's with `compiler` in its compiler's place; then
    CFLAGS and LDFLAGS from the environment."""
    if "LDSHARED" in os.environ:
        command = shlex.split(os.environ["LDSHARED"])
    else:
        words = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
        command = [*compiler, *(words[1:] or ["-shared"])]
    return [*command, *_environment("CFLAGS"), *_environment("LDFLAGS")]


def _environment(name: str) -> list[str]:
    """The words of a compiler setting in the environment (build.BUILD_ENVIRONMENT), which
    come before vmrt's own flags, so that these hold."""
    return shlex.split(os.environ.get(name, ""))


class _Processes:
    """The compiler runs of a build: each run, until stop() stops them all, those
    running and any a thread was about to start."""

    def __init__(self):
        self._lock = threading.Lock()
        self._started: list[subprocess.Popen] = []
        self._stopped = False

    def run(self, command: list[str], timeout: float) -> None:
        """Runs a compiler or linker command; CompileError (its first error line) when
        it fails."""
        with self._lock:
            if self._stopped:
                raise CompileError("stopped")
            try:  # (a session of its own: stopping it stops what the driver started too)
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True, errors="replace", start_new_session=True)
            except OSError as error:
                raise CompileError(f"{type(error).__name__}: {error}") from None
            self._started.append(process)
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            process.communicate()
            raise CompileError(f"{command[0]} took more than {timeout} s") from None
        if process.returncode != 0:
            lines = output.strip().splitlines()
            raise CompileError(next((line for line in lines if "error" in line), None)
                               or (lines[-1] if lines else
                                   f"{command[0]} exited with {process.returncode}"))

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for process in self._started:
                _kill(process)


def _kill(process: subprocess.Popen) -> None:
    """Stops a command still running, and what it started (the compiler proper, the
    assembler: its session, where there are sessions)."""
    if process.returncode is not None:  # (waited for: its id may be another's now)
        return
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:  # (gone already)
        pass
