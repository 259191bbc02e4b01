"""Ctrl-C (vmrt/ctrl_c.py) stops a running call in every tier, on both devices: a VM
loop in the Python tier or in C, and a long native (llvm-cpu) dispatch. From the
command line the run ends with exit status 130 and no traceback; from Python the
caller gets KeyboardInterrupt itself, and the same context then runs another call.

Each case runs in a child process whose call first calls the import
`ctrlc_test.ready`, which prints "ready": the SIGINT is sent after that line (and a
moment for the call to get into its loop or dispatch; a signal that came earlier
would have to be handled all the same). The only time limit catches a call that
never stops."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vmrt.asm import assemble
from vmrt.hal.native_loader import native_unavailable_reason

REPO = Path(__file__).resolve().parent.parent
HANG = 120  # seconds: a call Ctrl-C did not stop
SETTLE = 0.5  # seconds from "ready" to the signal: the call gets into its loop

#: `spin` says it is ready, then loops for ever in `loop` (a function the C tier
#: compiles: no imports); `count(n)` counts to n.
LOOPS = """vm.module @ctl version 1
vm.import @ctrlc_test.ready cconv "0v_v"
vm.global.i32 private mutable @steps
vm.export @spin
vm.func @spin() -> () {
^bb0:
  vm.call @ctrlc_test.ready()
  vm.call @loop()
  vm.return
}
vm.func @loop() -> () {
^bb0:
  %i0 = vm.const.i32 0
  %i1 = vm.const.i32 1
  vm.br ^bb1
^bb1:
  %i0 = vm.add.i32 %i0, %i1
  vm.global.store.i32 %i0, @steps
  vm.br ^bb1
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
"""

#: `spin` says it is ready, then one matmul of ~58 GFLOP (seconds on this kind of
#: machine, many workgroups); `count` a small dispatch.
MATMUL = 3072
NATIVE = f"""
func.func private @ctrlc_test.ready()
func.func @spin(%a: tensor<{MATMUL}x{MATMUL}xf32>, %b: tensor<{MATMUL}x{MATMUL}xf32>)
    -> tensor<{MATMUL}x{MATMUL}xf32> {{
  call @ctrlc_test.ready() : () -> ()
  %e = tensor.empty() : tensor<{MATMUL}x{MATMUL}xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{MATMUL}x{MATMUL}xf32>)
      -> tensor<{MATMUL}x{MATMUL}xf32>
  %m = linalg.matmul ins(%a, %b : tensor<{MATMUL}x{MATMUL}xf32>, tensor<{MATMUL}x{MATMUL}xf32>)
      outs(%f : tensor<{MATMUL}x{MATMUL}xf32>) -> tensor<{MATMUL}x{MATMUL}xf32>
  return %m : tensor<{MATMUL}x{MATMUL}xf32>
}}
func.func @count(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %r = arith.addf %a, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}}
"""

#: The child: registers `ctrlc_test` (its `ready` prints "ready"), then runs `spin`
#: through the command line or vmrt.load, and from Python calls `count` after it.
CHILD = textwrap.dedent("""
    import sys
    from vmrt.modules.natives import NATIVE_MODULES
    from vmrt.native import NativeModule, export

    class Ready(NativeModule, name="ctrlc_test", version=0):
        @export("0v_v")
        def ready(self):
            print("ready", flush=True)

    NATIVE_MODULES["ctrlc_test"] = ("__main__", "Ready")
    how, path, device, native = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    size = {matmul}
    if how == "cli":
        from vmrt.tools.cli import main
        inputs = [f"--input={{size}}x{{size}}xf32=0.001"] * 2 if native else []
        sys.exit(main(["run", f"--module={{path}}", "--function=spin", f"--device={{device}}",
                       *inputs]))
    import signal
    import numpy as np
    import vmrt

    def handler(signum, frame):  # the program's own SIGINT handler, which raises nothing
        print("handler", flush=True)
    if how == "handler":
        signal.signal(signal.SIGINT, handler)
    loaded = vmrt.load(path, device=device)
    if how == "late handler":  # set once vmrt has loaded the code (and watched SIGINT)
        loaded.count(np.arange(4, dtype=np.float32) if native else 3)
        signal.signal(signal.SIGINT, handler)
    if how == "warm":  # (builds the C tier's code into the cache)
        sys.exit(loaded.count(3) != 3)
    try:
        if native:
            matrix = np.full((size, size), 0.001, np.float32)
            loaded.spin(matrix, matrix)
        else:
            loaded.spin()
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    except vmrt.VmrtError as error:
        print(error.code.name, flush=True)
    if how.endswith("handler"):
        print("kept" if signal.getsignal(signal.SIGINT) is handler else "replaced", flush=True)
    if native:
        print("then", loaded.count(np.arange(4, dtype=np.float32)).tolist(), flush=True)
    else:
        print("then", loaded.count(1000), flush=True)
""").format(matmul=MATMUL)


@pytest.fixture(scope="module")
def loops(tmp_path_factory):
    path = tmp_path_factory.mktemp("ctrl_c") / "loops.vmfb"
    path.write_bytes(assemble(LOOPS))
    return path


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    if shutil.which("iree-compile") is None:
        pytest.skip("needs iree-compile")
    if native_unavailable_reason() is not None:
        pytest.skip(native_unavailable_reason())
    folder = tmp_path_factory.mktemp("ctrl_c_native")
    (folder / "matmul.mlir").write_text(NATIVE)
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", str(folder / "matmul.mlir"),
                    "-o", str(folder / "matmul.vmfb")], check=True, timeout=300)
    return folder / "matmul.vmfb"


def _interrupted(how: str, path: Path, device: str, tier: str, native: bool):
    """(exit status, stdout, stderr) of a child sent SIGINT once its call is ready."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, how, str(path), device,
                              "1" if native else "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_child_environment(tier),
                             cwd=path.parent)
    try:
        line = child.stdout.readline()
        while line and line != "ready\n":  # (the command line prints EXEC @spin first)
            line = child.stdout.readline()
        assert line == "ready\n", child.communicate(timeout=HANG)
        time.sleep(SETTLE)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=HANG)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, out, err


def _child_environment(tier: str) -> dict:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, VMRT_TIER=tier, PYTHONPATH=path)


def _warm_c_tier(path: Path, tier: str) -> None:
    """Builds the module's C once (not a child's seconds between ready and its loop)."""
    if tier != "python":
        subprocess.run([sys.executable, "-c", CHILD, "warm", str(path), "local-sync", "0"],
                       env=_child_environment(tier), check=True, timeout=HANG)


DEVICES = ["local-sync", "local-task"]
TIERS = ["python", "c", "auto"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tier", TIERS)
def test_ctrl_c_stops_a_vm_loop_from_python(loops, tier, device):
    _warm_c_tier(loops, tier)
    status, out, err = _interrupted("python", loops, device, tier, native=False)
    assert status == 0, err
    assert out.splitlines()[-2:] == ["KeyboardInterrupt", "then 1000"], (out, err)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tier", TIERS)
def test_ctrl_c_stops_a_vm_loop_from_the_command_line(loops, tier, device):
    _warm_c_tier(loops, tier)
    status, out, err = _interrupted("cli", loops, device, tier, native=False)
    assert status == 130 and "Traceback" not in err and err.count("\n") <= 1, err


@pytest.mark.parametrize("device", DEVICES)
def test_ctrl_c_stops_a_native_dispatch_from_python(native, device):
    status, out, err = _interrupted("python", native, device, "auto", native=True)
    assert status == 0, err
    assert out.splitlines()[-2:] == ["KeyboardInterrupt", "then [0.0, 2.0, 4.0, 6.0]"], (out, err)


@pytest.mark.parametrize("device", DEVICES)
def test_ctrl_c_stops_a_native_dispatch_from_the_command_line(native, device):
    status, out, err = _interrupted("cli", native, device, "auto", native=True)
    assert status == 130 and "Traceback" not in err and err.count("\n") <= 1, err


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("when", ["handler", "late handler"])
@pytest.mark.parametrize("kind", ["C tier loop", "native dispatch"])
def test_ctrl_c_keeps_the_programs_own_handler(request, loops, kind, when, device):
    """The program's handler, set before vmrt loads the code or after, still runs
    (and stays set); as it raises nothing, the call in C, which cannot go on from
    where it stopped, fails with CANCELLED."""
    native = kind == "native dispatch"
    if native:
        path = request.getfixturevalue("native")
    else:
        path = loops
        _warm_c_tier(loops, "c")
    status, out, err = _interrupted(when, path, device, "auto" if native else "c", native)
    assert status == 0, err
    then = "then [0.0, 2.0, 4.0, 6.0]" if native else "then 1000"
    assert out.splitlines()[-4:] == ["handler", "CANCELLED", "kept", then], (out, err)
