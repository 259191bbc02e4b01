"""local-task runs a dispatch's workgroups and independent dispatches on a worker pool:
results must equal local-sync's, every time."""

import shutil
import subprocess

import numpy as np
import pytest

import vmrt
from vmrt.modules.hal import HalModule

# Two independent matmuls (independent dispatches) and an elementwise op over
# a tensor large enough to need many workgroups.
SOURCE = """
func.func @work(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>, %c: tensor<128x32xf32>)
    -> (tensor<32x32xf32>, tensor<32x32xf32>, tensor<128x32xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<32x32xf32>, tensor<32x32xf32>)
                      outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m2 = linalg.matmul ins(%b, %a : tensor<32x32xf32>, tensor<32x32xf32>)
                      outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  %t = math.tanh %c : tensor<128x32xf32>
  %s = arith.mulf %t, %c : tensor<128x32xf32>
  return %m1, %m2, %s : tensor<32x32xf32>, tensor<32x32xf32>, tensor<128x32xf32>
}
"""


@pytest.fixture(scope="module")
def module_path(tmp_path_factory):
    if shutil.which("iree-compile") is None:
        pytest.skip("iree-compile not installed")
    folder = tmp_path_factory.mktemp("local_task")
    (folder / "work.mlir").write_text(SOURCE)
    out = folder / "work.vmfb"
    subprocess.run(["iree-compile", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=vmvx",
                    str(folder / "work.mlir"), "-o", str(out)], check=True)
    return out


def test_local_task_matches_local_sync_100_times(module_path):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((32, 32), dtype=np.float32)
    b = rng.standard_normal((32, 32), dtype=np.float32)
    c = rng.standard_normal((128, 32), dtype=np.float32)
    with vmrt.Context(modules=[HalModule(device="local-sync"),
                               vmrt.load_module(module_path)]) as ctx:
        expected = ctx.function("module.work")(a, b, c)
    np.testing.assert_allclose(expected[0], a @ b, rtol=1e-4, atol=1e-4)
    with vmrt.Context(modules=[HalModule(device="local-task"),
                               vmrt.load_module(module_path)]) as ctx:
        work = ctx.function("module.work")
        for _ in range(100):
            got = work(a, b, c)
            for g, e in zip(got, expected):
                np.testing.assert_array_equal(g, e)


# -- where queue work runs ---------------------------------------------------------------------
def _host_call_thread(device, wait=None):
    """(the thread a queue host call ran on, its signal fence), the call submitted
    on this thread."""
    import threading
    ran = []
    signal = device.create_fence()
    device.queue_host_call(-1, wait, signal, lambda: ran.append(threading.current_thread()))
    signal.wait()
    return ran[0], signal


def test_ready_work_runs_on_the_submitting_thread_when_nothing_is_in_flight():
    import threading
    from vmrt.hal import create_device
    device = create_device("local-task", worker_count=2)
    try:
        assert _host_call_thread(device)[0] is threading.current_thread()
        # A wait not reached yet: on an issue thread, once it is.
        gate = device.create_fence()
        later = threading.Timer(0.05, gate.signal)
        later.start()
        assert _host_call_thread(device, gate)[0].name.startswith("vmrt-hal-issue")
        later.join()
        # Off (inline_ready=False): always on an issue thread.
        strict = create_device("local-task", worker_count=2, inline_ready=False)
        assert _host_call_thread(strict)[0].name.startswith("vmrt-hal-issue")
        strict.close()
    finally:
        device.close()


def test_work_queued_behind_pending_work_keeps_its_order():
    """Work submitted while earlier work waits goes behind it, not inline ahead."""
    import threading
    from vmrt.hal import create_device
    device = create_device("local-task", worker_count=2)
    try:
        order, gate = [], device.create_fence()
        first, second = device.create_fence(), device.create_fence()
        device.queue_host_call(-1, gate, first, lambda: order.append("first"))
        device.queue_host_call(-1, first, second, lambda: order.append("second"))
        assert order == [] and not first.is_reached()  # both wait for the gate
        threading.Timer(0.02, gate.signal).start()
        second.wait()
        assert order == ["first", "second"]
    finally:
        device.close()


def test_a_failure_of_inline_work_reaches_the_signal_fence_not_the_submitter():
    from vmrt.errors import VmrtError
    from vmrt.hal import HalError, create_device
    from vmrt.errors import StatusCode
    device = create_device("local-task", worker_count=2)
    try:
        signal = device.create_fence()

        def fail():
            raise HalError("disk on fire", StatusCode.DATA_LOSS)
        device.queue_host_call(-1, None, signal, fail)  # (no raise here)
        with pytest.raises(VmrtError) as info:
            signal.wait()
        assert info.value.code == StatusCode.DATA_LOSS and "disk on fire" in str(info.value)
    finally:
        device.close()


def test_default_worker_count_is_the_cpus_the_process_may_use():
    """Not the machine's count: a process confined to one CPU (taskset, a container's
    cpuset) gets one worker, not one per CPU it cannot use."""
    import subprocess
    import sys
    script = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
              "from vmrt.hal import create_device; d = create_device('local-task'); "
              "print(d.worker_count); d.close()")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "1"
