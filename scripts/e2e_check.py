"""IREE's end-to-end op tests under `vmrt check` and under the reference runtime.

    python scripts/e2e_check.py [--backend=vmvx|llvm-cpu] [--suites=a,b] [--jobs=2]
                                [--timeout=SECONDS] [--iree-git-dir=DIR] [--rev=REV]

Reads the test files of tests/e2e/<suite>/ from a bare git checkout of IREE
(`git show` into a temporary folder; nothing is copied into this repository),
compiles each with iree-compile for the backend with the suite's flags (from
the suites' BUILD.bazel), then runs every compiled module twice: under
`vmrt check` and under iree.runtime (the pip wheels ship no iree-check-module,
so `--reference MODULE` runs one module here with a Python `check` module
registered through iree.runtime's PyModuleInterface; its comparisons are
vmrt.modules.check's, fed with the reference's tensors). Files the compiler
rejects are counted and skipped. Prints per suite: files, compiled, reference
passed/total, vmrt passed/total and each side's summed wall time, then every
test that passes on the reference but not under vmrt. Not run by CI.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEFAULT_GIT_DIR = "/work/.mirror/iree-org+iree/repo"
SUITES = ("stablehlo_ops", "tosa_ops", "linalg", "linalg_ext_ops", "tensor_ops",
          "subbyte_types", "regression", "math")
#: Compiler flags per suite and backend, as tests/e2e/*/BUILD.bazel give them.
SUITE_FLAGS = {"stablehlo_ops": ["--iree-input-demote-f64-to-f32"]}
BACKEND_FLAGS = {
    "vmvx": ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx"],
    "llvm-cpu": ["--iree-hal-target-device=local",
                 "--iree-hal-local-target-device-backends=llvm-cpu",
                 "--iree-llvmcpu-target-cpu=generic"],
}
#: math/ holds a generator: its JSON test cases become one .mlir file per function.
MATH_CASES = "math_ops_llvm-cpu.json"
LINE = re.compile(r"^(PASSED|FAILED|ERROR) [^.]+\.(.*?)(?:: (.*))?$")


# -- sources -------------------------------------------------------------------------------------
def git(git_dir: str, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True).stdout


def extract_suite(git_dir: str, rev: str, suite: str, folder: Path) -> list[Path]:
    """The suite's test .mlir files, written under `folder`."""
    prefix = f"tests/e2e/{suite}/"
    names = git(git_dir, "ls-tree", "-r", "--name-only", rev, prefix).decode().split()
    target = folder / suite
    target.mkdir(parents=True, exist_ok=True)
    if suite == "math":
        return _generate_math(git_dir, rev, prefix, names, target)
    files = []
    for name in names:
        if name.endswith(".mlir"):
            path = target / name[len(prefix):].replace("/", "__")
            path.write_bytes(git(git_dir, "show", f"{rev}:{name}"))
            files.append(path)
    return files


def _generate_math(git_dir, rev, prefix, names, target: Path) -> list[Path]:
    if prefix + "generate.py" not in names or prefix + MATH_CASES not in names:
        return []
    for name in ("generate.py", MATH_CASES):
        (target / name).write_bytes(git(git_dir, "show", f"{rev}:{prefix}{name}"))
    text = subprocess.run([sys.executable, "generate.py", f"--testcases={MATH_CASES}"],
                          cwd=target, check=True, capture_output=True, text=True).stdout
    # One file per function: a backend lacking one op (VMVX has no math.acos) loses
    # that test only, not the whole generated file.
    paths = []
    for index, function in enumerate(re.split(r"\n(?=func\.func )", text)):
        name = re.search(r"func\.func @(\w+)", function)
        if name:
            paths.append(target / f"math_{index:02d}_{name.group(1)}.mlir")
            paths[-1].write_text(function)
    return paths


def compile_file(source: Path, suite: str, backend: str, timeout: float) -> Path | None:
    output = source.with_suffix(f".{backend}.vmfb")
    flags = BACKEND_FLAGS[backend] + SUITE_FLAGS.get(suite, [])
    try:
        result = subprocess.run(["iree-compile", *flags, str(source), "-o", str(output)],
                                capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return output if result.returncode == 0 and output.exists() else None


# -- running -------------------------------------------------------------------------------------
def run_side(command: list[str], names: list[str], timeout: float) -> tuple[dict, float]:
    """({test: (outcome, message)}, wall seconds) of one runner on one module; tests
    it never reported (a crash, a timeout) are errors carrying why."""
    start = time.perf_counter()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        stdout, why = result.stdout, f"exit code {result.returncode}: " + \
            (result.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else \
            (expired.stdout or "")
        why = f"timed out after {timeout:g} s"
    elapsed = time.perf_counter() - start
    outcomes = {}
    for line in stdout.splitlines():
        match = LINE.match(line)
        if match:
            outcomes[match.group(2)] = (match.group(1), match.group(3) or "")
    for name in names:
        outcomes.setdefault(name, ("ERROR", why))
    return outcomes, elapsed


def module_tests(vmfb: Path) -> list[str]:
    from vmrt.tools.check import tests_of
    from vmrt.vm.module import load_module
    try:
        return tests_of(load_module(str(vmfb)))
    except Exception:  # noqa: BLE001 - a module vmrt cannot read has no tests here
        return []


def run_module(vmfb: Path, timeout: float) -> dict:
    names = module_tests(vmfb)
    ref, ref_time = run_side([sys.executable, __file__, "--reference", str(vmfb)], names,
                             timeout)
    ours, our_time = run_side([sys.executable, "-m", "vmrt.tools.cli", "check", str(vmfb)],
                              names, timeout)
    return {"names": names, "ref": ref, "vmrt": ours, "ref_time": ref_time,
            "vmrt_time": our_time}


# -- the reference side --------------------------------------------------------------------------
def reference_main(path: str) -> int:
    """Runs one module's tests on iree.runtime, printing `vmrt check`'s lines."""
    import iree.runtime as rt

    from vmrt.modules import check
    from vmrt.vm.module import load_module
    from vmrt.tools.check import tests_of

    failures: list[str] = []
    iface = rt.PyModuleInterface("check", lambda iface: _ReferenceCheck(rt, check, failures))
    for name, cconv in (("expect_true", "0i_v"), ("expect_false", "0i_v"),
                        ("expect_all_true", "0rr_v"), ("expect_eq", "0rrr_v"),
                        ("expect_almost_eq", "0rrrff_v")):
        iface.export(name, cconv, getattr(_ReferenceCheck, name))
    check_module = iface.create()
    instance = rt.VmInstance()
    device = rt.get_device("local-sync")
    module = rt.VmModule.copy_buffer(instance, Path(path).read_bytes())
    for name in tests_of(load_module(path)):
        failures.clear()
        context = rt.VmContext(instance, modules=(rt.create_hal_module(instance, device),
                                                  check_module, module))
        try:
            context.invoke(module.lookup_function(name), rt.VmVariantList(0),
                           rt.VmVariantList(0))
            line = f"FAILED m.{name}: {failures[0]}" if failures else f"PASSED m.{name}"
        except Exception as error:  # noqa: BLE001 - the runtime's error is the result
            line = f"ERROR m.{name}: " + " ".join(str(error).split())
        print(line.splitlines()[0], flush=True)
    os._exit(0)  # skips nanobind's leak report at interpreter exit


class _ReferenceCheck:
    """The check module's exports over iree.runtime buffer views."""

    def __init__(self, rt, check, failures):
        self.rt, self.check, self.failures = rt, check, failures

    def _tensor(self, ref):
        import numpy as np
        from vmrt.elements import element_packed_byte_count
        view = ref.deref(self.rt.HalBufferView)
        element_type = int(view.element_type)
        count = int(np.prod(view.shape, dtype=np.int64))
        size = element_packed_byte_count(element_type, count)
        data = view.map().asarray((size,), np.dtype(np.uint8)).tobytes() if size else b""
        return self.check.Tensor(tuple(view.shape), element_type, data)

    def _record(self, name, message):
        if message is not None:
            self.failures.append(f"check.{name}: {message}")

    def expect_true(self, operand):
        self._record("expect_true", self.check.true_failure(operand))

    def expect_false(self, operand):
        self._record("expect_false", self.check.false_failure(operand))

    def expect_all_true(self, device, operand):
        self._record("expect_all_true", self.check.all_true_failure(self._tensor(operand)))

    def expect_eq(self, device, lhs, rhs):
        self._record("expect_eq", self.check.eq_failure(self._tensor(lhs), self._tensor(rhs)))

    def expect_almost_eq(self, device, lhs, rhs, atol, rtol):
        self._record("expect_almost_eq", self.check.almost_eq_failure(
            self._tensor(lhs), self._tensor(rhs), atol, rtol))


# -- the report ----------------------------------------------------------------------------------
def summarize(suite_files: dict, compiled: dict, results: dict) -> list[str]:
    head = (f"{'suite':<16}{'files':>6}{'compiled':>9}{'reference':>12}{'vmrt':>12}"
            f"{'ref s':>9}{'vmrt s':>9}")
    lines, totals = [head, "-" * len(head)], defaultdict(float)
    for suite, files in suite_files.items():
        row = defaultdict(float)
        for vmfb in compiled[suite]:
            result = results[vmfb]
            row["total"] += len(result["names"])
            row["ref"] += sum(o == "PASSED" for o, _ in result["ref"].values())
            row["vmrt"] += sum(o == "PASSED" for o, _ in result["vmrt"].values())
            row["ref_time"] += result["ref_time"]
            row["vmrt_time"] += result["vmrt_time"]
        row["files"], row["compiled"] = len(files), len(compiled[suite])
        for key, value in row.items():
            totals[key] += value
        lines.append(_row(suite, row))
    lines.append(_row("total", totals))
    return lines


def _row(label: str, row) -> str:
    total = int(row["total"])
    return (f"{label:<16}{int(row['files']):>6}{int(row['compiled']):>9}"
            f"{int(row['ref']):>6}/{total:<5}{int(row['vmrt']):>6}/{total:<5}"
            f"{row['ref_time']:>9.1f}{row['vmrt_time']:>9.1f}")


def regressions(results: dict) -> list[str]:
    """Tests passing on the reference but not under vmrt, with vmrt's message."""
    lines = []
    for vmfb, result in sorted(results.items()):
        for name in result["names"]:
            if result["ref"][name][0] == "PASSED" and result["vmrt"][name][0] != "PASSED":
                outcome, message = result["vmrt"][name]
                lines.append(f"{vmfb.parent.name}/{vmfb.stem}.{name}: {outcome} {message[:300]}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="vmvx", choices=sorted(BACKEND_FLAGS))
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per file and side")
    parser.add_argument("--iree-git-dir", default=os.environ.get("IREE_GIT_DIR", DEFAULT_GIT_DIR))
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--reference", metavar="VMFB", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reference:
        return reference_main(args.reference)
    with tempfile.TemporaryDirectory(prefix="vmrt-e2e-") as folder, \
            ThreadPoolExecutor(args.jobs) as pool:
        suites = [s for s in args.suites.split(",") if s]
        suite_files = {s: extract_suite(args.iree_git_dir, args.rev, s, Path(folder))
                       for s in suites}
        jobs = [(s, f) for s in suites for f in suite_files[s]]
        built = pool.map(lambda job: compile_file(job[1], job[0], args.backend, args.timeout),
                         jobs)
        compiled = {s: [] for s in suites}
        for (suite, _), vmfb in zip(jobs, built):
            if vmfb is not None:
                compiled[suite].append(vmfb)
        modules = [m for s in suites for m in compiled[s]]
        start = time.perf_counter()
        results = dict(zip(modules, pool.map(lambda m: run_module(m, args.timeout), modules)))
        print(f"backend {args.backend}; {args.jobs} processes; wall {time.perf_counter() - start:.0f} s")
        print("\n".join(summarize(suite_files, compiled, results)))
        missing = regressions(results)
        print(f"\n{len(missing)} tests pass on the reference but not under vmrt")
        print("\n".join(missing))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
