"""Builds the project's own test corpus of IREE VM bytecode modules.

Usage::

    python -m tests.corpus.build OUTDIR            # build everything into OUTDIR
    python -m tests.corpus.build OUTDIR --record   # also fill in expected outputs

Sources live next to this file:

* ``mlir/NAME.mlir``   compiled by ``iree-compile`` for the VMVX backend,
  invocations and expected output in ``mlir/NAME.runs``, optional parameter
  archive contents in ``mlir/NAME.params``;
* ``vmasm/NAME.vmasm`` assembled by ``iree-as-module``, expectations in
  ``vmasm/NAME.expect``.

The sidecar formats are documented in README.md beside this file. Outputs are
rebuilt only when a content hash over their inputs changes (stored in
``OUTDIR/NAME.stamp``). ``--record`` runs ``iree-run-module`` and writes what it
printed into the sidecars; review every recorded value by hand before keeping it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent
MLIR_DIR = CORPUS_DIR / "mlir"
VMASM_DIR = CORPUS_DIR / "vmasm"

# Bump to force a rebuild of every output when the build recipe changes.
_RECIPE_VERSION = "1"

MLIR_BASE_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=vmvx",
)
# The MLIR programs compiled for other executable targets (into OUTDIR/TARGET/),
# run against iree-run-module's live output: their float results may differ
# from VMVX's recorded ones in the last digits.
_LLVM_CPU = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
             "--iree-llvmcpu-target-cpu=generic")
TARGET_FLAGS = {
    "vmvx": MLIR_BASE_FLAGS,
    "llvm-cpu": _LLVM_CPU,
    "llvm-cpu-system": (*_LLVM_CPU, "--iree-llvmcpu-link-embedded=false"),
}
# Extra compile flags may be given in an MLIR source line of this form.
_FLAGS_PREFIX = "// CORPUS-FLAGS:"

# Seconds an iree-run-module invocation may take; a VM yield makes 3.13.0 spin.
RUN_TIMEOUT = 60.0
DEFAULT_JOBS = 2

_STATUS_NAMES = (
    "CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS "
    "PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE "
    "UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED"
).split()


class CorpusError(Exception):
    """A corpus source, sidecar or tool invocation failed; the message names the file."""


# --------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    """One ``iree-run-module`` invocation from a ``.runs`` file.

    ``flags`` are passed verbatim after ``--function``; ``expected_output`` is
    the list of stdout lines printed after the ``EXEC @function`` line;
    ``expected_error`` is a status name (e.g. ``INVALID_ARGUMENT``) when the
    invocation must fail instead.
    """

    function: str
    flags: list[str]
    expected_output: list[str]
    expected_error: str | None
    line: int


@dataclasses.dataclass
class Expectation:
    """One ``function(args) -> results`` line from a ``.expect`` file.

    ``args`` and ``results`` are typed values written as ``TYPE=VALUE`` with
    TYPE one of i32, i64, f32, f64 (exactly as iree-run-module prints them).
    ``error`` is a status name when the call must fail. ``results`` is None
    for a line still to be recorded (``-> ?``).
    """

    function: str
    args: list[str]
    results: list[str] | None
    error: str | None
    line: int

    def input_flags(self) -> list[str]:
        return ["--input=" + a.split("=", 1)[1] for a in self.args]

    def expected_output(self) -> list[str]:
        return [f"result[{i}]: {r}" for i, r in enumerate(self.results or [])]


@dataclasses.dataclass
class ParameterEntry:
    scope: str
    key: str
    dtype: str
    shape: tuple[int, ...]
    values: list[str]
    line: int


@dataclasses.dataclass
class CorpusModule:
    name: str
    kind: str  # 'mlir' | 'vmasm'
    source: Path
    vmfb: Path
    runs: list[Run] = dataclasses.field(default_factory=list)
    expectations: list[Expectation] = dataclasses.field(default_factory=list)
    # scope -> archive path (built into the output folder).
    parameters: dict[str, Path] = dataclasses.field(default_factory=dict)
    compile_flags: list[str] = dataclasses.field(default_factory=list)
    target: str = "vmvx"  # a key of TARGET_FLAGS (MLIR modules only)
    # Other corpus modules (by name) registered before this one when running
    # (they provide this module's imports), in order.
    requires: list[str] = dataclasses.field(default_factory=list)
    sidecar: Path | None = None

    def run_command(self, function: str, flags: list[str], modules: dict[str, "CorpusModule"]) -> list[str]:
        """The iree-run-module command line that invokes ``function``."""
        cmd = [tool_path("iree-run-module")]
        if self.kind == "mlir":
            cmd.append("--device=local-sync")
        for scope, path in sorted(self.parameters.items()):
            cmd.append(f"--parameters={scope}={path}")
        for dep in self.requires:
            cmd.append(f"--module={modules[dep].vmfb}")
        cmd += [f"--module={self.vmfb}", f"--function={function}"]
        cmd += flags
        return cmd


# --------------------------------------------------------------------------
# Sidecar parsing
# --------------------------------------------------------------------------


def _sidecar_lines(path: Path):
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        yield number, raw.rstrip()


def parse_runs(path: Path) -> list[Run]:
    """Parses a ``.runs`` file (see README.md)."""
    runs: list[Run] = []
    current: Run | None = None
    for number, line in _sidecar_lines(path):
        where = f"{path}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            current = None if not line.strip() else current
            continue
        if line.startswith("="):
            if current is None or current.expected_error is not None:
                raise CorpusError(f"{where}: output line without an invocation")
            current.expected_output.append(line[2:] if line.startswith("= ") else line[1:])
            continue
        if line.startswith("!"):
            if current is None or current.expected_output:
                raise CorpusError(f"{where}: error line without an invocation")
            status = line[1:].strip()
            if status not in _STATUS_NAMES:
                raise CorpusError(f"{where}: unknown status name {status!r}")
            current.expected_error = status
            continue
        parts = [p.strip() for p in line.split(" | ")]
        function = parts[0]
        if not re.fullmatch(r"[A-Za-z_][\w.$]*", function):
            raise CorpusError(f"{where}: expected 'FUNCTION | FLAG | ...', got {line!r}")
        current = Run(function, [p for p in parts[1:] if p], [], None, number)
        runs.append(current)
    return runs


_VALUE_RE = re.compile(r"(i32|i64|f32|f64)=\S+")


def _parse_values(text: str, where: str) -> list[str]:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if not text:
        return []
    values = [v.strip() for v in text.split(",")]
    for v in values:
        if not _VALUE_RE.fullmatch(v):
            raise CorpusError(f"{where}: expected TYPE=VALUE (i32/i64/f32/f64), got {v!r}")
    return values


def parse_expect(path: Path) -> tuple[list[Expectation], list[str]]:
    """Parses a ``.expect`` file; returns (expectations, required module names)."""
    expectations: list[Expectation] = []
    requires: list[str] = []
    for number, line in _sidecar_lines(path):
        where = f"{path}:{number}"
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if text.startswith("@requires"):
            requires += text.split()[1:]
            continue
        m = re.fullmatch(r"([A-Za-z_][\w.$]*)\s*\((.*)\)\s*->\s*(.*)", text)
        if not m:
            raise CorpusError(f"{where}: expected 'function(args) -> results', got {text!r}")
        function, args_text, results_text = m.groups()
        args = _parse_values(args_text, where)
        results_text = results_text.strip()
        results: list[str] | None
        error = None
        if results_text == "?":
            results = None
        elif results_text.startswith("!"):
            error = results_text[1:].strip()
            if error not in _STATUS_NAMES:
                raise CorpusError(f"{where}: unknown status name {error!r}")
            results = []
        else:
            results = _parse_values(results_text, where)
        expectations.append(Expectation(function, args, results, error, number))
    return expectations, requires


_DTYPES = {"f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64"}


def parse_params(path: Path) -> list[ParameterEntry]:
    """Parses a ``.params`` file: ``SCOPE KEY DTYPE SHAPE VALUES...`` lines."""
    entries = []
    for number, line in _sidecar_lines(path):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        where = f"{path}:{number}"
        if len(fields) < 5:
            raise CorpusError(f"{where}: expected 'SCOPE KEY DTYPE SHAPE VALUES...'")
        scope, key, dtype, shape_text = fields[:4]
        if dtype not in _DTYPES:
            raise CorpusError(f"{where}: unknown dtype {dtype!r}")
        shape = () if shape_text == "scalar" else tuple(int(d) for d in shape_text.split("x"))
        entries.append(ParameterEntry(scope, key, dtype, shape, fields[4:], number))
    return entries


def _parameter_bytes(entry: ParameterEntry, where: str) -> bytes:
    import numpy as np

    count = 1
    for d in entry.shape:
        count *= d
    values = entry.values
    if values == ["iota"]:
        data = np.arange(count)
    elif len(values) == 2 and values[0] == "splat":
        data = np.full(count, float(values[1]) if entry.dtype.startswith("f") else int(values[1]))
    else:
        if len(values) != count:
            raise CorpusError(f"{where}: {len(values)} values for shape {entry.shape}")
        data = np.array([float(v) if entry.dtype.startswith("f") else int(v) for v in values])
    return data.astype(_DTYPES[entry.dtype]).reshape(entry.shape).tobytes()


# --------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------


def discover(outdir: Path, target: str = "vmvx") -> list[CorpusModule]:
    """Lists every corpus module (without building anything); for a target other
    than VMVX, only the MLIR programs, built into OUTDIR/TARGET/."""
    outdir = Path(outdir).resolve()
    if target not in TARGET_FLAGS:
        raise CorpusError(f"unknown corpus target {target!r} (known: {', '.join(TARGET_FLAGS)})")
    if target != "vmvx":
        outdir = outdir / target
    modules: list[CorpusModule] = []
    for source in sorted(MLIR_DIR.glob("*.mlir")):
        name = source.stem
        module = CorpusModule(name, "mlir", source, outdir / f"{name}.vmfb", target=target)
        for line in source.read_text().splitlines():
            if line.startswith(_FLAGS_PREFIX):
                module.compile_flags += shlex.split(line[len(_FLAGS_PREFIX):])
        runs = source.with_suffix(".runs")
        if runs.exists():
            module.sidecar = runs
            module.runs = parse_runs(runs)
        params = source.with_suffix(".params")
        if params.exists():
            for scope in sorted({e.scope for e in parse_params(params)}):
                module.parameters[scope] = outdir / f"{name}.{scope}.irpa"
        modules.append(module)
    for source in sorted(VMASM_DIR.glob("*.vmasm")) if target == "vmvx" else ():
        name = source.stem
        module = CorpusModule(name, "vmasm", source, outdir / f"{name}.vmfb")
        expect = source.with_suffix(".expect")
        if expect.exists():
            module.sidecar = expect
            module.expectations, module.requires = parse_expect(expect)
        modules.append(module)
    names = [m.name for m in modules]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise CorpusError(f"corpus module names must be unique across mlir/ and vmasm/: {sorted(duplicates)}")
    known = set(names)
    for m in modules:
        for dep in m.requires:
            if dep not in known:
                raise CorpusError(f"{m.sidecar}: @requires names unknown corpus module {dep!r}")
    return modules


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------


def tool_path(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise CorpusError(f"required tool {name!r} is not on PATH")
    return path


def _input_hash(module: CorpusModule) -> str:
    h = hashlib.sha256()
    h.update(_RECIPE_VERSION.encode())
    h.update(module.kind.encode())
    h.update("\0".join(module.compile_flags).encode())
    if module.target != "vmvx":  # VMVX stamps written before targets existed stay valid
        h.update("\0".join(TARGET_FLAGS[module.target]).encode())
    h.update(module.source.read_bytes())
    params = module.source.with_suffix(".params")
    if module.parameters and params.exists():
        h.update(params.read_bytes())
    return h.hexdigest()


def _stamp_path(module: CorpusModule) -> Path:
    return module.vmfb.with_suffix(".stamp")


def is_up_to_date(module: CorpusModule) -> bool:
    stamp = _stamp_path(module)
    outputs = [module.vmfb, *module.parameters.values()]
    if not stamp.exists() or not all(p.exists() for p in outputs):
        return False
    return stamp.read_text().strip() == _input_hash(module)


def _run_tool(cmd: list[str], source: Path) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        raise CorpusError(f"{Path(cmd[0]).name} timed out on {source}") from e
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        if len(detail) > 4000:
            detail = detail[:4000] + "\n... (truncated)"
        raise CorpusError(
            f"{Path(cmd[0]).name} failed on {source} (exit {proc.returncode}):\n"
            f"  command: {shlex.join(cmd)}\n{detail}"
        )


def _write_parameters(module: CorpusModule) -> None:
    import iree.runtime as rt

    params_path = module.source.with_suffix(".params")
    by_scope: dict[str, list[ParameterEntry]] = {}
    for entry in parse_params(params_path):
        by_scope.setdefault(entry.scope, []).append(entry)
    for scope, entries in by_scope.items():
        index = rt.ParameterIndex()
        for entry in entries:
            index.add_buffer(entry.key, _parameter_bytes(entry, f"{params_path}:{entry.line}"))
        target = module.parameters[scope]
        tmp = target.with_name(target.name + ".tmp")
        index.create_archive_file(str(tmp))
        os.replace(tmp, target)


def build_module(module: CorpusModule, force: bool = False) -> bool:
    """Builds one module; returns True if anything was (re)built."""
    if not force and is_up_to_date(module):
        return False
    module.vmfb.parent.mkdir(parents=True, exist_ok=True)
    tmp = module.vmfb.with_name(module.vmfb.name + ".tmp")
    if module.kind == "mlir":
        cmd = [tool_path("iree-compile"), *TARGET_FLAGS[module.target], *module.compile_flags,
               str(module.source), "-o", str(tmp)]
    else:
        cmd = [tool_path("iree-as-module"), str(module.source), f"--output={tmp}"]
    _run_tool(cmd, module.source)
    os.replace(tmp, module.vmfb)
    if module.parameters:
        _write_parameters(module)
    _stamp_path(module).write_text(_input_hash(module) + "\n")
    return True


def build_corpus(outdir, jobs: int = DEFAULT_JOBS, force: bool = False,
                 target: str = "vmvx") -> list[CorpusModule]:
    """Builds every corpus module into ``outdir`` and returns their descriptions.

    Up-to-date outputs are skipped. Raises CorpusError naming the failing
    source(s) if any tool fails.
    """
    outdir = Path(outdir).resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    modules = discover(outdir, target)
    errors: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(build_module, m, force): m for m in modules}
        for future in concurrent.futures.as_completed(futures):
            try:
                future.result()
            except CorpusError as e:
                errors.append(str(e))
    if errors:
        raise CorpusError("corpus build failed:\n" + "\n".join(errors))
    return modules


# --------------------------------------------------------------------------
# Running (used by the tests and by --record)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class RunResult:
    returncode: int
    output: list[str]  # stdout lines after "EXEC @function"
    stderr: str
    status: str | None  # first status name found in stderr on failure


def run_function(module: CorpusModule, function: str, flags: list[str], modules: dict[str, CorpusModule]) -> RunResult:
    cmd = module.run_command(function, flags, modules)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise CorpusError(f"{module.name}: iree-run-module timed out: {shlex.join(cmd)}") from e
    lines = proc.stdout.splitlines()
    if lines and lines[0].startswith("EXEC @"):
        lines = lines[1:]
    status = None
    if proc.returncode != 0:
        for name in _STATUS_NAMES:
            if re.search(rf"\b{name}\b", proc.stderr):
                status = name
                break
    return RunResult(proc.returncode, [l.rstrip() for l in lines], proc.stderr, status)


def _record_runs(module: CorpusModule, modules: dict[str, CorpusModule]) -> None:
    """Rewrites the .runs sidecar with the output iree-run-module printed."""
    assert module.sidecar is not None
    old = module.sidecar.read_text().splitlines()
    by_line = {r.line: r for r in module.runs}
    new: list[str] = []
    skipping = False
    for number, line in enumerate(old, start=1):
        if skipping and (line.startswith("=") or line.startswith("!")):
            continue
        skipping = False
        new.append(line)
        run = by_line.get(number)
        if run is None:
            continue
        result = run_function(module, run.function, run.flags, modules)
        if result.returncode == 0:
            new += [f"= {l}" if l else "=" for l in result.output]
        else:
            new.append(f"! {result.status or 'UNKNOWN'}")
        skipping = True
    module.sidecar.write_text("\n".join(new) + "\n")


def _record_expect(module: CorpusModule, modules: dict[str, CorpusModule]) -> None:
    """Fills in ``-> ?`` lines of the .expect sidecar from iree-run-module."""
    assert module.sidecar is not None
    lines = module.sidecar.read_text().splitlines()
    for exp in module.expectations:
        if exp.results is not None:
            continue
        result = run_function(module, exp.function, exp.input_flags(), modules)
        if result.returncode == 0:
            values = [re.sub(r"^result\[\d+\]: ", "", l) for l in result.output]
            rhs = ", ".join(values) if values else "()"
        else:
            rhs = f"!{result.status or 'UNKNOWN'}"
        line = lines[exp.line - 1]
        lines[exp.line - 1] = re.sub(r"->\s*\?", f"-> {rhs}", line, count=1)
    module.sidecar.write_text("\n".join(lines) + "\n")


def record(modules: list[CorpusModule], names: list[str] | None = None) -> None:
    by_name = {m.name: m for m in modules}
    for m in modules:
        if names and m.name not in names:
            continue
        if m.kind == "mlir" and m.runs:
            _record_runs(m, by_name)
        elif m.kind == "vmasm" and m.expectations:
            _record_expect(m, by_name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=DEFAULT_JOBS)
    parser.add_argument("--force", action="store_true", help="rebuild even up-to-date outputs")
    parser.add_argument(
        "--record",
        nargs="*",
        metavar="NAME",
        help="after building, write iree-run-module output into the sidecars of NAME "
        "(all modules if none given): .runs outputs are replaced, .expect '-> ?' filled in",
    )
    args = parser.parse_args(argv)
    try:
        modules = build_corpus(args.outdir, jobs=args.jobs, force=args.force)
        if args.record is not None:
            record(modules, args.record or None)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for m in modules:
        print(f"{m.kind:5s} {m.name:24s} {m.vmfb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
