"""vmrt.ray on a Ray started by the tests (a two-node cluster on this machine, made
with ray.cluster_utils): ModulePool results equal a local context's, in order; a
lost node and a killed actor lose no result and duplicate none; call errors stay
with their input; Ray Data, the Serve example and `vmrt ray map`. Skipped without Ray."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import vmrt  # noqa: E402
from vmrt.ray import ModuleBatchFunction, ModulePool  # noqa: E402
from vmrt.tools.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MLP = REPO / "examples" / "mlp.vmfb"
#: work(x, n): x * x after a loop of n steps: calls that are still running when a
#: node or an actor dies.
SLOW = """
vm.module @slow version 1
vm.export @work
vm.func @work(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.const.i32 0
  %i3 = vm.const.i32 1
  vm.br ^bb1
^bb1:
  %i2 = vm.add.i32 %i2, %i3
  %i4 = vm.cmp.lt.i32.s %i2, %i1
  vm.cond_br %i4, ^bb1, ^bb2
^bb2:
  %i5 = vm.mul.i32 %i0, %i0
  vm.return %i5
}
"""
SLOW_STEPS = 600_000  # (in the Python tier: the C tier would run the loop in no time)
#: A node lost without notice is declared dead after ~1 s rather than Ray's 15 s.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 250,
                      "health_check_failure_threshold": 4}
NODE = {"num_cpus": 2, "object_store_memory": 100 << 20}


@pytest.fixture(scope="module")
def cluster():
    """A head node of 2 CPUs; tests add and remove a second node themselves."""
    from ray.cluster_utils import Cluster
    if ray.is_initialized():
        ray.shutdown()
    head = Cluster(initialize_head=True, head_node_args={
        **NODE, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS})
    ray.init(address=head.address, log_to_driver=False, logging_level="ERROR")
    yield head
    ray.shutdown()
    head.shutdown()


def mlp_inputs(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(19)
    return [rng.standard_normal((1, 4), dtype=np.float32) for _ in range(count)]


def local_results(module, function: str, inputs, device: str = "local-task") -> list:
    with vmrt.load(module, device=device) as loaded:
        call = loaded.function(function)
        return [call(*item) if isinstance(item, tuple) else call(item) for item in inputs]


def slow_inputs(count: int) -> list[tuple[int, int]]:
    return [(i, SLOW_STEPS) for i in range(count)]


@pytest.mark.parametrize("num_actors", [1, 2])
def test_pool_results_equal_a_local_context_in_input_order(cluster, num_actors):
    inputs = mlp_inputs(40)
    expected = local_results(MLP, "predict", inputs)
    with ModulePool(MLP, num_actors=num_actors, num_cpus=0.5) as pool:
        results = list(pool.map("predict", inputs))
        assert pool.stats == (40, 0, 0)
        assert len({info.pid for info in pool.workers()}) == num_actors
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_map_keeps_at_most_max_in_flight_calls_out(cluster):
    sent = []

    def inputs():
        for i, item in enumerate(slow_inputs(12)):
            sent.append(i)
            yield item

    with ModulePool(SLOW, num_actors=2, num_cpus=0.5, max_in_flight=3, tier="python") as pool:
        results = pool.map("work", inputs())
        assert next(results) == 0
        assert len(sent) <= 4  # three out, and the one sent when the first came back
        assert list(results) == [i * i for i in range(1, 12)]


def test_a_node_lost_mid_run_loses_no_result_and_duplicates_none(cluster):
    worker = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    count = 60
    with ModulePool(SLOW, num_actors=2, num_cpus=1, max_in_flight=6, tier="python") as pool:
        nodes = {info.node_id for info in pool.workers()}
        assert nodes == {worker.node_id, cluster.head_node.node_id}  # one actor on each
        results = pool.map("work", slow_inputs(count))
        first = [next(results) for _ in range(8)]
        cluster.remove_node(worker, allow_graceful=False)  # as a machine that goes away
        results = first + list(results)
        assert results == [i * i for i in range(count)]
        assert pool.stats.replaced_actors == 1 and pool.stats.reruns >= 1
        assert pool.stats.calls == count
        assert {info.node_id for info in pool.workers()} == {cluster.head_node.node_id}


def test_an_actor_killed_mid_run_loses_no_result_and_duplicates_none(cluster):
    count = 60
    with ModulePool(SLOW, num_actors=2, num_cpus=0.5, max_in_flight=6, tier="python") as pool:
        victim = pool.workers()[0].pid
        results = pool.map("work", slow_inputs(count))
        first = [next(results) for _ in range(8)]
        os.kill(victim, signal.SIGKILL)
        results = first + list(results)
        assert results == [i * i for i in range(count)]
        assert pool.stats.replaced_actors == 1 and pool.stats.reruns >= 1
        assert pool.stats.calls == count
        assert victim not in {info.pid for info in pool.workers()}


def test_a_failing_call_is_that_input_s_answer_and_the_pool_lives_on(cluster):
    good, bad = np.ones((1, 4), np.float32), np.ones((1, 3), np.float32)
    with ModulePool(MLP, num_actors=1, num_cpus=0.5) as pool:
        results = list(pool.map("predict", [good, bad, good]))
        assert isinstance(results[1], vmrt.VmrtError)
        assert results[1].code == vmrt.StatusCode.INVALID_ARGUMENT
        assert np.array_equal(results[0], results[2])
        with pytest.raises(vmrt.VmrtError, match="shape"):
            list(pool.map("predict", [good, bad], errors="raise"))
        assert isinstance(pool.submit("predict", bad).result(), vmrt.VmrtError)
        assert np.array_equal(pool.submit("predict", good).result(timeout=60), results[0])
        assert pool.stats.replaced_actors == 0
        with pytest.raises(vmrt.VmrtError, match="no export 'nope'"):
            pool.submit("nope", good)


def test_a_module_that_does_not_load_fails_the_pool_with_its_error(cluster, tmp_path):
    with pytest.raises(vmrt.VmrtError, match="cannot read module") as info:
        ModulePool(tmp_path / "missing.vmfb", num_actors=1, num_cpus=0.5)
    assert info.value.code == vmrt.StatusCode.NOT_FOUND




@pytest.mark.parametrize("source", ["archive", "object store"])
def test_parameters_from_an_archive_or_the_object_store(cluster, parameter_model, source):
    vmfb, irpa, weights = parameter_model
    parameters = {"model": irpa} if source == "archive" else {"model": {"w": weights}}
    inputs = [np.full(4, i, np.float32) for i in range(6)]
    # The module as bytes: put in the object store once, loaded by each actor.
    with ModulePool(vmfb.read_bytes(), parameters=parameters, num_actors=2,
                    num_cpus=0.5) as pool:
        results = list(pool.map("scale", inputs))
    for x, y in zip(inputs, results):
        assert np.array_equal(y, x * weights)


def test_ray_data_maps_batches_through_a_module_function(cluster):
    inputs = np.concatenate(mlp_inputs(20))
    expected = np.concatenate(local_results(MLP, "predict", mlp_inputs(20)))
    dataset = ray.data.from_numpy(inputs).map_batches(
        ModuleBatchFunction, batch_size=8, batch_format="numpy",
        fn_constructor_kwargs={"module": str(MLP), "function": "predict",
                               "inputs": ["data"], "outputs": ["y"], "rows_per_call": 1},
        compute=ray.data.ActorPoolStrategy(size=1), num_cpus=0.5)
    rows = dataset.take_all()
    assert np.array_equal(np.stack([row["y"] for row in rows]), expected)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_serve_example_answers_over_http_on_localhost(cluster):
    pytest.importorskip("ray.serve")
    spec = importlib.util.spec_from_file_location("ray_serve_mlp",
                                                  REPO / "examples" / "ray_serve_mlp.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    inputs = mlp_inputs(3)
    answers = example.serve_and_query(inputs, port=free_port())
    for answer, want in zip(answers, local_results(MLP, "predict", inputs)):
        assert np.allclose(answer, want, rtol=0, atol=1e-7)


def test_vmrt_ray_map_writes_one_result_per_input(cluster, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    inputs = mlp_inputs(5)
    for i, x in enumerate(inputs):
        np.save(folder / f"x{i}.npy", x)
    np.savez(folder / "z_bad.npz", np.ones((1, 3), np.float32))
    argv = ["ray", "map", f"--module={MLP}", "--function=predict", f"--inputs={folder}",
            f"--output={tmp_path / 'out'}", "--num_cpus=0.5", "--device=local-sync"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "5 of 6 results written" in captured.out
    assert captured.err.startswith("vmrt: z_bad.npz: INVALID_ARGUMENT")
    assert captured.err.strip().splitlines()[-1] == "vmrt: error: ABORTED: 1 of 6 calls failed"
    for i, want in enumerate(local_results(MLP, "predict", inputs)):
        assert np.array_equal(np.load(tmp_path / "out" / f"x{i}.npy"), want)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"x{i}.npy"
                                                                   for i in range(5)]


def test_vmrt_ray_map_bad_input_is_one_line(tmp_path, capsys):
    argv = ["ray", "map", f"--module={tmp_path / 'missing.vmfb'}", "--function=f",
            f"--inputs={REPO / 'examples'}", f"--output={tmp_path}"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vmrt: error: NOT_FOUND"), err


def test_import_vmrt_does_not_import_ray():
    probe = ("import sys, vmrt\nwith vmrt.load('examples/scalar.vmfb') as m: m.gcd(4, 6)\n"
             "import vmrt.tools.cli, vmrt.tools.ray\nprint('ray' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert ran.stdout.strip() == "False", ran.stderr
