"""Packaging: the sdist and wheel that `python -m build` makes, installed and run
the way a user would (the wheel's own examples, through `vmrt example`), and
`pip install` on a machine without a C compiler. The wheel's C is compiled as
`make wheel` compiles it (zig's clang against glibc 2.28), so its manylinux tag is
known exactly.

The test venvs are made with --without-pip plus a .pth file naming the host's
site-packages, not with --system-site-packages: that would also run the host's
.pth files, and the host's editable vmrt install (`make install`) hooks the import
system there, so `vmrt._cnative` would be found in the work tree even when the
installed package has none (vmrt.__file__ alone does not show it). A plain path in
a .pth adds the host's numpy/cffi/construct without running anything, so nothing
is downloaded for them. pip is the host's, pointed at the venv with --python.

The build runs without isolation when the host has the build requirements
(`[build-system] requires`); otherwise it falls back to an isolated build, which
fetches them through pip's index.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import build  # noqa: F401  (test extras, as is ziglang: without them these fail, not skip)
import pytest
import ziglang  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
MLP = REPO / "examples" / "mlp.vmfb"          # VMVX: runs without the C extension
MLP_CPU = REPO / "examples" / "mlp_cpu.vmfb"  # llvm-cpu: needs it
RUN_ARGS = ["run", "--function=predict", "--input=1x4xf32=1 0.5 -0.5 2"]
EXPECTED = "EXEC @predict\nresult[0]: hal.buffer_view\n1x3xf32=[0.170226 0.071629 0.758145]\n"
WARNING = "vmrt: building the C extension failed ("
#: What a vmrt without its C extension says when it runs (pip hides WARNING).
RUNTIME_WARNING = "RuntimeWarning: vmrt's C extension is not available: this vmrt was " \
    "installed without it"
#: Bundled examples a wheel carries (vmrt/examples; `vmrt example NAME`).
EXAMPLES = ["mlp.vmfb", "mlp_cpu.vmfb", "scalar.vmfb", "mlp.mlir", "scalar.mlir",
            "run_native_mlp.py", "mlp_train_step.stream"]
# One platform wheel for every CPython >= 3.10 (the extension uses the stable ABI).
WHEEL_TAG = "cp310-abi3-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
#: The compiler of `make wheel`: zig's clang, linking against glibc 2.28's symbols
#: (the system's compiler on a newer glibc would need that glibc).
ZIG_CC = f"{sys.executable} -m ziglang cc -target {platform.machine()}-linux-gnu.2.28"
#: The tag auditwheel gives that build: memfd_create is the newest symbol (GLIBC_2.27).
MANYLINUX_TAG = f"cp310-abi3-manylinux_2_27_{platform.machine()}"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("VMRT_NO_NATIVE", None)  # the installed package decides, not this run
    env.pop("PYTHONPATH", None)      # nothing from the work tree
    env.update(extra)
    return env


def _run(args, *, cwd, timeout, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)


def _check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (
        f"{' '.join(result.args)} exited {result.returncode}\n"
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}")
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """(sdist, wheel, isolated) from one `python -m build` of the work tree: the
    sdist, then the wheel built from the sdist (so the sdist is proven complete),
    its C compiled as `make wheel` compiles it."""
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "build", "--outdir", out, REPO]
    # VMRT_REQUIRE_NATIVE: a compiler problem here fails the build, not the asserts.
    env = _env(VMRT_REQUIRE_NATIVE="1", CC=ZIG_CC, LDSHARED=f"{ZIG_CC} -shared")
    result = _run([*command, "--no-isolation"], cwd=out, timeout=300, env=env)
    output = result.stdout + result.stderr  # build 1.x says "Unmet"; older, "Missing"
    isolated = result.returncode != 0 and ("Unmet dependencies" in output
                                           or "Missing dependencies" in output)
    if isolated:  # the host lacks [build-system] requires: let build fetch them
        result = _run(command, cwd=out, timeout=300, env=env)
    _check(result)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel, isolated


def _venv(path: Path) -> Path:
    """A venv whose vmrt can only be what is installed into it (see the docstring)."""
    _check(_run([sys.executable, "-m", "venv", "--without-pip", path], cwd=path.parent,
                timeout=60))
    python = path / "bin" / "python"
    purelib = _check(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          cwd=path, timeout=30)).stdout.strip()
    # This process's site dirs (also a venv's system ones); not the work tree that
    # conftest.py or an old-style editable install puts on sys.path.
    host = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    Path(purelib, "_host_site.pth").write_text("".join(f"{p}\n" for p in host))
    return python


def _pip_install(python: Path, *args, cwd, env=None) -> subprocess.CompletedProcess:
    return _check(_run([sys.executable, "-m", "pip", "--python", python, "install",
                        "--no-deps", *args], cwd=cwd, timeout=300, env=env))


def _where(python: Path, cwd: Path) -> tuple[str, str, str]:
    """(vmrt.__file__, vmrt._cnative.__file__ or '', why C is unavailable or '')."""
    code = ("import vmrt, vmrt.memory\n"
            "try:\n    import vmrt._cnative as c; native = c.__file__\n"
            "except ImportError:\n    native = ''\n"
            "print(vmrt.__file__); print(native); print(vmrt.memory.c_extension()[2] or '')")
    lines = _check(_run([python, "-c", code], cwd=cwd, timeout=60)).stdout.splitlines()
    return lines[0], lines[1], lines[2]


def test_sdist_has_sources_and_no_build_junk(dist):
    sdist, _, _ = dist
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    for needed in ["pyproject.toml", "setup.py", "README.md", "PKG-INFO",
                   "csrc/build_native.py", "csrc/vmrt_memory.c", "csrc/vmrt_memory.h",
                   "csrc/vmrt_elf.h", "vmrt/native/include/vmrt_native.h",
                   "vmrt/__init__.py", "examples/mlp.vmfb", "examples/mlp_cpu.vmfb"]:
        assert needed in names, f"{needed} missing from {sdist.name}"
    junk = [name for name in names
            if name.endswith((".so", ".o", ".pyc")) or "__pycache__" in name
            or name.split("/")[0] in ("build", "dist", "tests", ".git")
            # setuptools' own metadata (like PKG-INFO) is vmrt.egg-info/ at the top
            or (".egg-info" in name and name.split("/")[0] != "vmrt.egg-info")]
    assert not junk, f"build junk in {sdist.name}: {junk}"


def test_the_wheel_carries_a_build_id_and_the_sdist_none(dist):
    # The id keys vmrt's caches in an install (vmrt.vm.code_cache.build_id); the sdist
    # has none, so that each build of it writes its own.
    import zipfile
    sdist, wheel, _ = dist
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("vmrt/_build_id.py").decode()
    assert re.search(r'^BUILD_ID = "[0-9a-f]{32}"$', text, re.M), text
    with tarfile.open(sdist) as archive:
        assert not [name for name in archive.getnames() if name.endswith("_build_id.py")]


def test_the_ray_extra_brings_the_progress_bar(dist):
    # `vmrt ray map` promises a progress bar: `pip install 'vmrt[ray]'` must bring tqdm
    import zipfile
    _, wheel, _ = dist
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    ray = [line for line in lines
           if line.startswith("Requires-Dist:") and 'extra == "ray"' in line]
    assert any(line.split()[1].startswith("tqdm") for line in ray), ray


def test_an_editable_install_is_visible_to_mypy(dist, tmp_path):
    # `pip install -e .` as the README's `make install` does it: a plain path entry,
    # which mypy follows (setuptools' import hook for other layouts it cannot see).
    sdist, _, _ = dist
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    python = _venv(tmp_path / "venv")
    # (without a compiler: the pure-Python package is enough for types, and quick)
    _pip_install(python, "--no-build-isolation", "-e", source, cwd=tmp_path,
                 env=_env(CC="/nonexistent"))
    program = tmp_path / "program.py"
    program.write_text("import vmrt\nloaded: int = vmrt.load\n")
    result = _run([sys.executable, "-m", "mypy", "--python-executable", python,
                   "--no-incremental", "--follow-imports=silent", program], cwd=tmp_path,
                  timeout=300)
    assert "import-not-found" not in result.stdout, result.stdout
    assert 'expression has type "def load(' in result.stdout, result.stdout


def _installed_example(venv: Path, name: str) -> Path:
    """The path `vmrt example NAME` of the venv's vmrt prints (checked to be its own)."""
    result = _check(_run([venv / "bin" / "vmrt", "example", name], cwd=venv, timeout=60))
    path = Path(result.stdout.strip())
    assert path.is_file() and path.is_relative_to(venv), path
    return path


def test_wheel_installs_and_runs(dist, tmp_path):
    import zipfile
    _, wheel, _ = dist
    assert wheel.name.endswith(f"-{WHEEL_TAG}.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {f"vmrt/examples/{name}" for name in EXAMPLES} <= names, sorted(names)
    python = _venv(tmp_path / "venv")
    # --force-reinstall: pip sees the host's vmrt of the same version through the .pth
    # and would otherwise keep it (it cannot uninstall it: outside the venv).
    _pip_install(python, "--force-reinstall", wheel, cwd=tmp_path)
    venv = str(tmp_path / "venv")
    module, native, unavailable = _where(python, tmp_path)
    assert module.startswith(venv), module
    assert native.startswith(venv) and native.endswith("_cnative.abi3.so"), native
    assert unavailable == ""
    vmrt = tmp_path / "venv" / "bin" / "vmrt"  # the wheel's console script
    for name in ("mlp.vmfb", "mlp_cpu.vmfb"):  # VMVX, and native llvm-cpu through C
        module_file = _installed_example(tmp_path / "venv", name)  # the wheel's copy
        result = _check(_run([vmrt, *RUN_ARGS, f"--module={module_file}"], cwd=tmp_path,
                             timeout=120))
        assert result.stdout == EXPECTED
        assert "Warning" not in result.stderr, result.stderr


def test_auditwheel_gives_the_wheel_a_manylinux_tag(dist, tmp_path):
    # (as `make wheel` does: the tag an index accepts, not the build's linux_x86_64)
    _, wheel, _ = dist
    _check(_run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", tmp_path / "out",
                 wheel], cwd=tmp_path, timeout=300))
    (repaired,) = (tmp_path / "out").glob("*.whl")
    assert repaired.name.endswith(f"-{MANYLINUX_TAG}.whl"), repaired.name
    python = _venv(tmp_path / "venv")
    _pip_install(python, "--force-reinstall", repaired, cwd=tmp_path)
    result = _check(_run([tmp_path / "venv" / "bin" / "vmrt", *RUN_ARGS,
                          f"--module={MLP_CPU}"], cwd=tmp_path, timeout=120))
    assert result.stdout == EXPECTED


@pytest.mark.parametrize("without_c", [{"CC": "/nonexistent"}, {"VMRT_NO_NATIVE": "1"}],
                         ids=["no-compiler", "VMRT_NO_NATIVE"])
def test_a_wheel_built_without_the_c_extension_is_py3_none_any(dist, tmp_path, without_c):
    import zipfile
    sdist, _, isolated = dist
    flags = [] if isolated else ["--no-build-isolation"]
    _check(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", *flags,
                 "--wheel-dir", tmp_path, sdist], cwd=tmp_path, timeout=300,
                env=_env(**without_c)))
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert not [name for name in names if name.endswith(".so")], names
    assert "vmrt/examples/mlp.vmfb" in names


def test_install_without_compiler_is_pure_python(dist, tmp_path):
    sdist, _, isolated = dist
    with tarfile.open(sdist) as archive:  # the source tree, as shipped
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 / 3.10.12
            archive.extractall(tmp_path, filter="data")
        else:
            archive.extractall(tmp_path)
    source = tmp_path / sdist.name.removesuffix(".tar.gz")
    python = _venv(tmp_path / "venv")
    # pip -v shows the build's output, where the warning is (plain pip hides it).
    # --no-cache-dir: pip would keep this C-less wheel (the path has a hyphen).
    flags = ["-v", "--no-cache-dir"] + ([] if isolated else ["--no-build-isolation"])
    result = _pip_install(python, *flags, source, cwd=tmp_path, env=_env(CC="/nonexistent"))
    output = result.stdout + result.stderr
    warnings = [line.strip() for line in output.splitlines() if WARNING in line]
    assert warnings and "/nonexistent" in warnings[0] and warnings[0].endswith(
        "installing the pure-Python package: native llvm-cpu executables and C native "
        "modules are unavailable (to get them, install a C compiler and reinstall vmrt "
        "with pip --no-cache-dir)"), output[-4000:]

    module, native, unavailable = _where(python, tmp_path)
    assert module.startswith(str(tmp_path / "venv")) and native == "", (module, native)
    assert "installed without it (no C compiler at install time)" in unavailable, unavailable
    vmrt = tmp_path / "venv" / "bin" / "vmrt"
    mlp = _installed_example(tmp_path / "venv", "mlp.vmfb")
    result = _check(_run([vmrt, *RUN_ARGS, f"--module={mlp}"], cwd=tmp_path, timeout=120))
    assert result.stdout == EXPECTED
    # What pip showed only with -v, vmrt says when it runs: once, unless asked not to.
    assert result.stderr.count(RUNTIME_WARNING) == 1, result.stderr
    assert "VMRT_NO_NATIVE=1 hides this warning" in result.stderr
    result = _check(_run([vmrt, *RUN_ARGS, f"--module={mlp}"], cwd=tmp_path, timeout=120,
                         env=_env(VMRT_NO_NATIVE="1")))
    assert result.stdout == EXPECTED and result.stderr == ""
    # A module that needs the C code fails with one line that says so.
    result = _run([vmrt, *RUN_ARGS, f"--module={MLP_CPU}"], cwd=tmp_path, timeout=120)
    assert result.returncode != 0
    assert "C extension is not available" in result.stderr, result.stderr
