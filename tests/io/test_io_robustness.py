"""Parameter files on the paths a careless user takes (issue 15, items 7-11): an
extraction onto the archive being read, descriptors of preloaded files, a full
disk under a scatter, impossible sizes, and interrupted or killed writers."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import FileCache, IndexProvider, ParameterIndex
from vmrt.tools.cli import main


@pytest.fixture
def archive(tmp_path):
    index = ParameterIndex()
    index.add_buffer("a", bytes(range(64)))
    index.add_buffer("b", b"B" * 40)
    path = tmp_path / "w.irpa"
    index.save(path)
    return path


# -- item 7 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["mmap", "file", "preload"])
def test_extract_refuses_to_write_over_an_archive_being_read(archive, tmp_path, mode, capsys):
    before = archive.read_bytes()
    link = tmp_path / "link.irpa"
    link.symlink_to(archive)
    for target in (archive, link):
        assert main(["params", "dump", str(archive), f"--parameter-mode={mode}",
                     f"--extract=a={target}"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "INVALID_ARGUMENT" in err and "being read" in err
        assert archive.read_bytes() == before
    assert main(["params", "dump", str(archive), f"--extract=a={tmp_path / 'a.bin'}"]) == 0
    assert (tmp_path / "a.bin").read_bytes() == bytes(range(64))


# -- item 8 ---------------------------------------------------------------------------------------
def open_descriptors() -> int:
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_preloading_keeps_no_descriptor(archive):
    before = open_descriptors()
    indices = [ParameterIndex.load(archive, mode="preload", cache=FileCache())
               for _ in range(50)]
    assert open_descriptors() == before
    assert all(index.lookup("b").read() == b"B" * 40 for index in indices)


# -- item 9 ---------------------------------------------------------------------------------------
def _full_disk(monkeypatch):
    def pwritev(fd, buffers, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "pwritev", pwritev)


def test_scatter_on_a_full_disk_is_resource_exhausted(archive, monkeypatch):
    before = archive.read_bytes()
    index = ParameterIndex.load(archive, writable=True, mode="file", cache=FileCache())
    provider = IndexProvider("m", index)
    _full_disk(monkeypatch)
    with pytest.raises(VmrtError) as info:
        provider.scatter("m", bytearray(b"xyzw"), [("b", 8, 0, 4)])
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert "No space left" in info.value.message
    monkeypatch.undo()
    assert archive.read_bytes() == before  # the other entries (all of them) intact
    provider.scatter("m", bytearray(b"xyzw"), [("b", 8, 0, 4)])  # still usable
    assert index.lookup("b").read()[8:12] == b"xyzw" and index.lookup("a").read() == \
        bytes(range(64))


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    import shutil

    from tests.io.test_io_parameters_module import DRIVER_MLIR
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile is not installed")
    out = tmp_path_factory.mktemp("driver")
    (out / "driver.mlir").write_text(DRIVER_MLIR)
    subprocess.run(["iree-compile", "--compile-from=vm", "--output-format=vm-bytecode",
                    str(out / "driver.mlir"), "-o", str(out / "driver.vmfb")],
                   check=True, capture_output=True, timeout=120)
    return out / "driver.vmfb"


def test_scatter_on_a_full_disk_through_the_vm(archive, driver, monkeypatch):
    from tests.io.test_io_parameters_module import run_vmrt
    index = ParameterIndex.load(archive, writable=True, mode="file", cache=FileCache())
    before = archive.read_bytes()
    _full_disk(monkeypatch)
    with pytest.raises(VmrtError) as info:
        run_vmrt(driver, index, "scatter", [("a", 0, 0, 4)], bytes(8))
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED, info.value
    assert "internal" not in str(info.value).lower()
    monkeypatch.undo()
    assert archive.read_bytes() == before


# -- items 10 and 11 -------------------------------------------------------------------------------
def temporaries(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith(".vmrt-"))


def test_an_impossible_size_is_one_line_and_leaves_no_file(tmp_path, capsys):
    for decl in ("w=99999999999999999999xf32", "w=4611686018427387904xf32",
                 "w=922337203685477580xf32"):
        assert main(["params", "create", "-o", str(tmp_path / "w.irpa"), f"--data={decl}"]) == 1
        assert capsys.readouterr().err.count("\n") == 1
        assert temporaries(tmp_path) == [] and not (tmp_path / "w.irpa").exists()


def test_temporaries_of_dead_writers_are_removed(tmp_path, archive):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / f".vmrt-{dead}-abc.tmp").write_bytes(b"stale")
    (tmp_path / f".vmrt-{os.getppid()}-def.tmp").write_bytes(b"a live process's")
    (tmp_path / ".vmrt-other.tmp").write_bytes(b"not named by vmrt's rule")
    assert main(["params", "convert", str(archive), "-o", str(tmp_path / "out.irpa"),
                 "-q"]) == 0
    assert temporaries(tmp_path) == [f".vmrt-{os.getppid()}-def.tmp", ".vmrt-other.tmp"]
    from vmrt.io.formats.common import remove_stale_temporaries
    remove_stale_temporaries(str(tmp_path / "missing"))  # no such directory: nothing to do


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_convert_removes_its_temporary_at_once(tmp_path, sig):
    big = tmp_path / "big.irpa"
    index = ParameterIndex()
    index.add_splat("w", b"\x01", 1 << 30)
    index.save(big)  # a splat: a small file that converts into 1 GiB of data
    process = subprocess.Popen([sys.executable, "-m", "vmrt.tools.cli", "params", "convert",
                                str(big), "-o", str(tmp_path / "out.safetensors"), "-q"],
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not temporaries(tmp_path) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode in (130, 128 + signal.SIGTERM), (process.returncode, err)
    assert "Traceback" not in err
    assert temporaries(tmp_path) == [] and not (tmp_path / "out.safetensors").exists()
