"""The C tier's build cache (vmrt/vm/ctier/build.py): a cached build is native code,
so one that is not the user's alone, or whose bytes changed, is never loaded but
built again; the build environment is part of its key; a failed build is remembered;
a full disk still runs C.

Each case runs in fresh processes (`python -c`), as a user's runs would: a file
dlopen refuses (or, worse, accepts) is the case under test, and a crash there must
fail the test rather than the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.asm import assemble
from vmrt.vm.ctier.build import compiler_identity

from tests.vm.ctier_programs import LOOP_SUM

pytestmark = pytest.mark.skipif(compiler_identity() is None, reason="needs a C compiler")

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = "vm.module @ctier_cache version 0\nvm.type i32\n" + LOOP_SUM

#: Loads the module, calls it, and prints its result, whether it ran in C and the
#: files the process has mapped (path -> inode, from /proc/self/maps): what dlopen
#: loaded.
CHILD = r"""
import json, sys, vmrt
fn = vmrt.load(sys.argv[1]).function("loop_sum")
result = fn(1000)
mapped = {}
for line in open("/proc/self/maps"):
    fields = line.split(None, 5)
    if len(fields) == 6 and fields[5].strip().endswith(".so"):
        mapped[fields[5].strip()] = int(fields[4])
print(json.dumps({"result": result, "in_c": hasattr(fn.entry, "vmrt_c_ordinal"),
                  "mapped": mapped}))
"""
SUM_1000 = 499500


def run(module: Path, cache: Path, tier: str = "c", **env):
    """(returncode, the child's report or None, stderr) of one process."""
    environment = dict(os.environ, VMRT_TIER=tier, VMRT_CACHE_DIR=str(cache),
                       PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                               os.environ.get("PYTHONPATH")])))
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", CHILD, str(module)], env=environment,
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout) if done.returncode == 0 else None
    return done.returncode, report, done.stderr


def builds(cache: Path) -> list[Path]:
    return sorted((cache / "ctier").glob("*.so"))


def mapped_from(report: dict, folder: Path) -> dict[str, int]:
    return {path: inode for path, inode in report["mapped"].items()
            if Path(path).parent == folder}


@pytest.fixture(scope="module")
def module_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ctier-cache") / "loop.vmfb"
    path.write_bytes(assemble(PROGRAM))
    return path


@pytest.fixture(scope="module")
def built_cache(module_file, tmp_path_factory) -> Path:
    """A cache holding the module's C build (copied by each test that spoils it)."""
    cache = tmp_path_factory.mktemp("ctier-built") / "cache"
    code, report, stderr = run(module_file, cache)
    assert code == 0 and report["in_c"], stderr
    assert len(builds(cache)) == 1
    return cache


@pytest.fixture
def cache(built_cache, tmp_path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(built_cache, copy)
    return copy


def spoil_mode(path: Path) -> None:
    path.chmod(0o666)


def spoil_owner(path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(path, 65534, 65534)  # nobody


def spoil_empty(path: Path) -> None:
    path.write_bytes(b"")


def spoil_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # (in the code: dlopen takes it, the calls may crash)
    path.write_bytes(data)


@pytest.mark.parametrize("spoil", [spoil_mode, spoil_owner, spoil_empty, spoil_byte],
                         ids=["mode-0666", "foreign-owner", "empty", "flipped-byte"])
def test_a_spoiled_cached_build_is_never_loaded_but_built_again(module_file, cache, spoil):
    (spoiled,) = builds(cache)
    spoil(spoiled)
    spoiled_inode = spoiled.stat().st_ino
    code, report, stderr = run(module_file, cache)
    assert code == 0, stderr
    assert (report["result"], report["in_c"], stderr) == (SUM_1000, True, "")
    assert spoiled_inode not in report["mapped"].values()
    for path in builds(cache):  # the new build took its place
        st = path.stat()
        assert st.st_ino != spoiled_inode and st.st_uid == os.getuid()
        assert not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    code, report, stderr = run(module_file, cache)  # and is loaded from the cache
    assert code == 0 and report["result"] == SUM_1000, stderr
    assert mapped_from(report, cache / "ctier")


def test_a_ctier_folder_others_can_write_is_never_read(module_file, cache):
    folder = cache / "ctier"
    folder.chmod(0o777)
    code, report, stderr = run(module_file, cache)
    assert code == 0, stderr
    assert (report["result"], report["in_c"], stderr) == (SUM_1000, True, "")
    assert mapped_from(report, folder) == {}  # built and loaded privately


def counting_compiler(folder: Path, body: str) -> tuple[Path, Path]:
    """A CC script that appends a line to a count file, then runs `body`."""
    count = folder / "invocations"
    script = folder / "cc.sh"
    script.write_text(f"#!/bin/sh\necho run >> '{count}'\n{body}\n")
    script.chmod(0o755)
    return script, count


def invocations(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_the_build_environment_is_part_of_the_key(module_file, tmp_path):
    real = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")
    script, count = counting_compiler(tmp_path, f'exec "{real}" "$@"')
    cache = tmp_path / "cache"
    runs = []
    for flags in (None, None, "-O1", None, "-O1"):
        env = {"CC": str(script)} | ({"CFLAGS": flags} if flags is not None else {})
        code, report, stderr = run(module_file, cache, **env)
        assert code == 0 and (report["result"], report["in_c"]) == (SUM_1000, True), stderr
        runs.append(invocations(count))
    built, again, other_flags, back, other_again = runs
    assert built > 0 and again == built  # the first build, then found
    assert other_flags > built  # other CFLAGS: another build
    assert back == other_again == other_flags  # each build found again
    assert len(builds(cache)) == 2


def test_a_failing_compiler_is_tried_once(module_file, tmp_path):
    script, count = counting_compiler(tmp_path, "exit 1")
    cache = tmp_path / "cache"
    code, report, stderr = run(module_file, cache, tier="auto", CC=str(script))
    assert code == 0 and (report["result"], report["in_c"]) == (SUM_1000, False), stderr
    assert stderr.count("\n") == 1 and "C tier build failed" in stderr
    tried = invocations(count)  # (a build runs the compiler on its units at once)
    assert tried >= 1
    code, report, stderr = run(module_file, cache, tier="auto", CC=str(script))
    assert code == 0 and (report["result"], report["in_c"], stderr) == (SUM_1000, False, "")
    assert invocations(count) == tried
    cli = subprocess.run(
        [sys.executable, "-m", "vmrt", "run", f"--module={module_file}", "--function=loop_sum",
         "--input=10"], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, VMRT_TIER="c", VMRT_CACHE_DIR=str(cache), CC=str(script),
                 PYTHONPATH=str(REPO_ROOT)))
    assert cli.returncode == 1 and cli.stderr.count("\n") == 1, cli.stderr
    assert "UNAVAILABLE: C tier build failed" in cli.stderr and "deleted" in cli.stderr
    assert invocations(count) == tried
    script.write_text(script.read_text() + "# changed\n")  # another compiler: tried again
    code, report, stderr = run(module_file, cache, tier="auto", CC=str(script))
    assert code == 0 and report["result"] == SUM_1000 and "C tier build failed" in stderr
    assert invocations(count) > tried


@pytest.fixture
def full_disk(tmp_path):
    """A tiny tmpfs, holding an empty cache folder, filled up."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs",
                           str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        (mount / "cache").mkdir(mode=0o700)
        filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(filler, bytes(4096)):
                pass
        except OSError:  # (no space left)
            pass
        finally:
            os.close(filler)
        yield mount / "cache"
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_still_builds_and_runs_c(module_file, full_disk):
    code, report, stderr = run(module_file, full_disk)
    assert code == 0, stderr
    assert (report["result"], report["in_c"]) == (SUM_1000, True)
