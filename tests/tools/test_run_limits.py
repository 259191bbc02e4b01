"""`vmrt run --fuel/--timeout/--max_memory/--max_depth`: limits from the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vmrt.asm import assemble

PROGRAM = """vm.module @lim version 1
vm.type i32
vm.type i64
vm.export @spin
vm.func @spin() -> () {
^bb0:
  vm.br ^bb0
}
vm.export @count
vm.func @count(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 0
  %i2 = vm.const.i32 1
  vm.br ^bb1
^bb1:
  %i1 = vm.add.i32 %i1, %i2
  %i3 = vm.cmp.lt.i32.s %i1, %i0
  vm.cond_br %i3, ^bb1, ^bb2
^bb2:
  vm.return %i1
}
vm.export @deep
vm.func @deep(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32 1
  %i2 = vm.sub.i32 %i0, %i1
  vm.cond_br %i0, ^bb1, ^bb2
^bb1:
  %i3 = vm.call @deep(%i2)
  vm.return %i3
^bb2:
  vm.return %i0
}
vm.export @grab
vm.func @grab(%i0: i32) -> (i32) {
^bb0:
  %i2:3 = vm.ext.i32.i64.u %i0
  %i4 = vm.const.i32 16
  %r0 = vm.buffer.alloc %i2:3, %i4
  vm.return %i0
}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "lim.vmfb"
    path.write_bytes(assemble(PROGRAM))
    return path


def vmrt_run(module, *flags):
    return subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "run", f"--module={module}",
                           *flags], capture_output=True, text=True, timeout=120)


def test_no_limit_flags_run_as_before(module):
    result = vmrt_run(module, "--function=count", "--input=1000")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "result[0]: i32=1000"


def test_timeout_stops_an_endless_loop(module):
    result = vmrt_run(module, "--function=spin", "--timeout=0.2")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "DEADLINE_EXCEEDED" in result.stderr


@pytest.mark.parametrize("fuel,ok", [(10_000, True), (500, False)])
def test_fuel(module, fuel, ok):
    result = vmrt_run(module, "--function=count", "--input=1000", f"--fuel={fuel}")
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert "RESOURCE_EXHAUSTED" in result.stderr and "fuel" in result.stderr


def test_max_depth(module):
    assert vmrt_run(module, "--function=deep", "--input=50", "--max_depth=100").returncode == 0
    result = vmrt_run(module, "--function=deep", "--input=500", "--max_depth=100")
    assert result.returncode == 1 and "RESOURCE_EXHAUSTED" in result.stderr


def test_max_memory(module):
    assert vmrt_run(module, "--function=grab", "--input=1000",
                    "--max_memory=4096").returncode == 0
    result = vmrt_run(module, "--function=grab", "--input=100000", "--max_memory=4096")
    assert result.returncode == 1 and "RESOURCE_EXHAUSTED" in result.stderr


def test_bad_limit_is_one_line(module):
    result = vmrt_run(module, "--function=spin", "--max_depth=20000")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "INVALID_ARGUMENT" in result.stderr


# -- issue 15: bad limits and bad input are one error line, exit status 1 ----------------------------
@pytest.mark.parametrize("flag", ["--timeout=nan", "--timeout=-1", "--fuel=nan", "--fuel=1.5",
                                  "--max_memory=lots", "--bogus"])
def test_bad_flags_are_one_line_and_exit_1(module, flag):
    result = vmrt_run(module, "--function=spin", flag)  # (spins forever if accepted)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_usage_errors_are_one_line_and_exit_1():
    for argv in (["run", "--bogus"], [], ["params", "dump", "--extract"], ["nope"]):
        result = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", *argv],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and result.stderr.count("\n") == 1, (argv, result.stderr)
        assert "error:" in result.stderr and "usage:" not in result.stderr


MLP = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "mlp.vmfb"


@pytest.mark.parametrize("value, code", [
    ("99999999999x99999999999xf32=1", "OUT_OF_RANGE"),         # the element count overflows
    ("100000x100000x1000xf32=1", "RESOURCE_EXHAUSTED"),        # 40 TB: refused at once
])
def test_impossible_tensor_inputs_are_one_line(value, code):
    result = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "run", f"--module={MLP}",
                             f"--input={value}"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and code in result.stderr


def test_a_nul_in_a_module_path_is_a_vmrt_error():
    import vmrt
    for load in (vmrt.load, vmrt.load_module):
        with pytest.raises(vmrt.VmrtError) as info:
            load("a\0b.vmfb")
        assert info.value.code == vmrt.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("action", [["stats"], ["schedule"], ["compile", "-o", "x.vmfb"],
                                    ["run", "--kernels=k"]])
def test_stream_tools_on_a_file_that_is_not_utf8(tmp_path, action):
    bad = tmp_path / "bad.stream"
    bad.write_bytes(b"// ok\n\xff\xfe")
    result = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "stream", action[0],
                             str(bad), *action[1:]], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert f"{bad}:2:1: not UTF-8 text" in result.stderr


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.3])
def test_ctrl_c_ends_the_command_without_a_traceback(module, delay):
    import signal
    import time
    # The command's main() from its start: loading subcommands and their imports
    # (numpy's may turn a Ctrl-C into an ImportError), parsing flags, running.
    starter = ("import sys; from vmrt.tools.cli import main; print('ready', flush=True); "
               f"sys.exit(main(['run', '--module={module}', '--function=spin']))")
    process = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "Traceback" not in err, err
