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
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
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
    with ThreadPoolExecutor(jobs) as pool:
        # (the first units compile while cffi writes the wrappers, in this process)
        running = [pool.submit(lambda: (wrapper(str(wrapper_source)),
                                        _run(wrapper_command, timeout)))]
        running += [pool.submit(_run, command, timeout) for command in commands]
        try:
            for done in running:
                done.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)  # (the units not started yet)
            raise
    library = work / (name + ".so")
    objects = [command[-1] for command in [wrapper_command, *commands]]
    _run([*_linker(compiler), *objects, "-lm", "-o", str(library)], timeout)
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


def _run(command: list[str], timeout: float) -> None:
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as error:
        raise CompileError(f"{type(error).__name__}: {error}") from None
    if done.returncode != 0:
        output = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise CompileError(output[-1] if output else f"{command[0]} exited with "
                           f"{done.returncode}")
