"""Stream programs lowered to VM modules and run on the HAL: every favor computes
exactly what a plain numpy evaluation computes (the training-step example, a
hand-written program covering every op shape, random programs), the module has
the promised structure (one transient alloca, one command buffer with a barrier
between waves, one io_parameters call per scope), local-task really runs a wave's
dispatches side by side, and bad input fails with status-carrying errors."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.mlp_kernels import make_kernels
from vmrt.errors import StatusCode, VmrtError
from vmrt.io import IndexProvider, ParameterIndex, ProviderSet
from vmrt.stream import FAVORS, Favor, ProgramBuilder, load_program, parse_program, plan
from vmrt.stream.evaluate import evaluate, pattern_bytes
from vmrt.stream.ir import Pattern, StreamError
from vmrt.stream.lower import compile_program, lower, lower_program, parameter_tables
from vmrt.stream.runtime import StreamRunner
from vmrt.tools.cli import main
from vmrt.vm.module import load_module
from tests.stream.test_stream_example import EXAMPLE

DEVICES = ("local-sync", "local-task")

# Every op shape the lowering distinguishes: splat (reducible and 8-byte patterns),
# fills aligned and not, copies between resources and overlapping within one,
# dispatches with new, tied and argument-tied results, results tied to arguments.
SHAPES = """
program @shapes {
  func @step(%x: external<256>, %w: parameter<128>, %k: constant<64>)
      -> (external<256>, parameter<128>, external<96>) {
    %t = splat 0.0 : f32 -> transient<256>
    %u = splat 3 : i64 -> transient<128>
    %t1 = fill 1.5 : f32 -> %t[16 for 64]
    %t2 = fill 7 : i8 -> %t1[3 for 5]
    %t3 = fill -2 : i16 -> %t2[101 for 6]
    %t4 = fill 0.25 : bf16 -> %t3[200 for 8]
    %y = dispatch @ex::@mix(%x, %k, %t4[0 for 128]) -> external<256>
    %u1 = copy %u[0 for 40] -> %u[24 for 40]
    %t5 = copy %u1[64 for 64] -> %t4[128 for 64]
    %y1, %w1 = dispatch @ex::@both(%y[32 for 64], %t5, %w) -> (%y, %w)
    %r = splat 1.0 : f64 -> external<96>
    %r1 = fill 0.5 : f16 -> %r[2 for 10]
    %r2 = copy %w1[8 for 32] -> %r1[40 for 32]
    return %y1, %w1, %r2
  }
}
"""


def mix(*arrays):
    """A deterministic kernel for any binding list: the last binding becomes a
    function of every other byte."""
    *inputs, out = arrays
    seed = sum(int(a.astype(np.uint64).sum()) * (i + 3) for i, a in enumerate(inputs))
    positions = np.arange(out.size, dtype=np.uint64)
    out[:] = ((positions * 131 + seed) % 251).astype(np.uint8)


def kernel_for(tied: tuple[int, ...], new_results: int):
    def kernel(*arrays):
        operands = arrays[:len(arrays) - new_results]
        seed = sum(int(a.astype(np.uint64).sum()) * (i + 3) for i, a in enumerate(operands))
        # Tied results also depend on their old bytes; new ones must not (uninitialized).
        outputs = [(arrays[i], 7) for i in tied] + [(a, 0) for a in arrays[len(operands):]]
        for number, (out, keep) in enumerate(outputs):
            positions = np.arange(out.size, dtype=np.uint64)
            out[:] = ((out.astype(np.uint64) * keep + positions * 131 + seed + number * 17)
                      % 253).astype(np.uint8)
    return kernel


def kernels_for(program) -> dict:
    """A kernel per callee, told which operands its results tie (one per callee)."""
    kernels = {}
    for func in program.funcs:
        for op in func.ops:
            if op.is_dispatch:
                tied = tuple(t for t in op.ties if t is not None)
                kernels["::".join(op.callee)] = kernel_for(
                    tied, sum(1 for t in op.ties if t is None))
    return kernels


def random_bytes(rng, size):
    return rng.integers(0, 256, size, dtype=np.uint8)


def run_all(module_by_favor, function, inputs, kernels, devices=DEVICES, parameters=None):
    out = {}
    for favor, module in module_by_favor.items():
        for device in devices:
            with StreamRunner(module, kernels, device=device, parameters=parameters) as runner:
                out[favor, device] = runner.call(function, inputs)
    return out


def assert_all_equal(results: dict, expected: list) -> None:
    for key, got in results.items():
        assert len(got) == len(expected), key
        for index, (a, b) in enumerate(zip(got, expected)):
            assert a.dtype == np.uint8 and np.array_equal(a, b), (key, index)


# -- the three favors against numpy ---------------------------------------------------------------
def test_every_op_shape_matches_numpy_under_every_favor_and_device():
    program = parse_program(SHAPES)
    kernels = {"ex::mix": mix, "ex::both": kernel_for((0, 2), 0)}
    rng = np.random.default_rng(1)
    inputs = [random_bytes(rng, n) for n in (256, 128, 64)]
    originals = [a.copy() for a in inputs]
    expected = evaluate(program, "step", inputs, kernels)
    modules = {f: compile_program(program, f, force=True) for f in FAVORS}
    assert_all_equal(run_all(modules, "step", inputs, kernels), expected)
    # Arguments are copied in: in-place updates never reach the caller's arrays.
    assert all(np.array_equal(a, b) for a, b in zip(inputs, originals))
    assert not np.array_equal(expected[1], inputs[1])


def test_pattern_encodings():
    assert pattern_bytes(Pattern(-2, "i16")) == b"\xfe\xff"
    assert pattern_bytes(Pattern(0xFFFFFFFF, "i32")) == b"\xff\xff\xff\xff"
    assert pattern_bytes(Pattern(1.0, "bf16")) == b"\x80\x3f"
    assert pattern_bytes(Pattern(1.0, "f16")) == np.float16(1).tobytes()
    assert pattern_bytes(Pattern(0.1, "f64")) == np.float64(0.1).tobytes()
    # bf16 rounds to nearest even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
    assert pattern_bytes(Pattern(1 + 2 ** -8, "bf16")) == b"\x80\x3f"
    assert pattern_bytes(Pattern(1 + 3 * 2 ** -8, "bf16")) == b"\x82\x3f"


@pytest.fixture(scope="module")
def example():
    return load_program(EXAMPLE)


@pytest.fixture(scope="module")
def example_parameters(tmp_path_factory):
    rng = np.random.default_rng(2)
    layers = (784, 1024, 1024, 512, 10)
    index = ParameterIndex()
    arrays = {}
    for l in range(4):
        arrays[f"layer{l + 1}.weight"] = (rng.standard_normal((layers[l], layers[l + 1]))
                                          * np.sqrt(2 / layers[l])).astype(np.float32)
        arrays[f"layer{l + 1}.bias"] = (rng.standard_normal(layers[l + 1]) * 0.01).astype(
            np.float32)
    for key, array in arrays.items():
        index.add_buffer(key, array.tobytes())
    path = tmp_path_factory.mktemp("params") / "model.irpa"
    index.save(path)
    return path, {"model": arrays}


def test_training_step_is_bit_identical_to_numpy_under_every_favor(example,
                                                                   example_parameters):
    path, arrays = example_parameters
    kernels = make_kernels(10, 256)
    state = evaluate(example, "initialize", [], kernels, arrays)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 784)).astype(np.float32)
    labels = rng.integers(0, 10, 256).astype(np.int32)
    inputs = [x, labels, *state]
    expected = evaluate(example, "train_step", inputs, kernels)
    modules = {f: compile_program(example, f, force=True) for f in FAVORS}
    results = run_all(modules, "train_step", inputs, kernels, devices=("local-task",))
    assert_all_equal(results, expected)
    assert expected[0].view(np.float32)[0] > 0          # a real loss came out
    assert not np.array_equal(expected[1], state[0])    # the weights moved


def test_initialize_loads_and_gathers_through_io_parameters(example, example_parameters):
    path, arrays = example_parameters
    provider = ProviderSet([IndexProvider("model", ParameterIndex.load(path))])
    kernels = make_kernels()
    expected = evaluate(example, "initialize", [], kernels, arrays)
    assert np.array_equal(expected[0].view(np.float32), arrays["model"]["layer1.weight"].ravel())
    modules = {f: compile_program(example, f, force=True) for f in FAVORS}
    assert_all_equal(run_all(modules, "initialize", [], kernels, parameters=provider), expected)


# -- random programs -------------------------------------------------------------------------------
SIZES = (16, 24, 32, 64, 96, 128)
NEW_LIFETIMES = ("transient", "transient", "transient", "external", "parameter", "constant")
PATTERNS = ((0, "i32"), (1, "i8"), (-3, "i16"), (0.5, "f32"), (-1.25, "f64"), (2.0, "bf16"),
            (0x0102030405060708, "i64"))


@st.composite
def programs(draw, with_parameters: bool):
    pb = ProgramBuilder("random")
    args = [(f"a{i}", draw(st.sampled_from(("external", "parameter", "constant"))),
             draw(st.sampled_from(SIZES))) for i in range(draw(st.integers(0, 3)))]
    f = pb.func("f", args)
    live = list(f.args)

    def pick(writable=False):
        pool = [v for v in live if not writable or v.type.lifetime.value != "constant"]
        return draw(st.sampled_from(pool)) if pool else None

    def retire(old, new):
        live.remove(old)
        live.append(new)

    kinds = ["splat", "fill", "copy", "dispatch", "dispatch", "dispatch"]
    if with_parameters:
        kinds += ["param.load", "param.gather"]
    for _ in range(draw(st.integers(1, 16))):
        kind = draw(st.sampled_from(kinds))
        if kind == "splat" or not live:
            pattern = draw(st.sampled_from(PATTERNS))
            size = draw(st.sampled_from(SIZES))
            live.append(f.splat(pattern, draw(st.sampled_from(NEW_LIFETIMES)), size))
        elif kind == "fill":
            target = pick(writable=True)
            if target is None:
                continue
            pattern = draw(st.sampled_from(PATTERNS))
            width = len(pattern_bytes(Pattern(*pattern)))
            length = draw(st.integers(1, target.type.size // width)) * width
            offset = draw(st.integers(0, target.type.size - length))
            retire(target, f.fill(pattern, target, offset, length))
        elif kind == "copy":
            source, target = pick(), pick(writable=True)
            if target is None:
                continue
            length = draw(st.integers(1, min(source.type.size, target.type.size)))
            s_off = draw(st.integers(0, source.type.size - length))
            t_off = draw(st.integers(0, target.type.size - length))
            retire(target, f.copy(source, target, source_offset=s_off, target_offset=t_off,
                                  length=length))
        elif kind == "dispatch":
            count = draw(st.integers(0, min(3, len(live))))
            operands = draw(st.lists(st.sampled_from(live), min_size=count, max_size=count,
                                     unique_by=id))
            uses = []
            for value in operands:
                offset = draw(st.integers(0, value.type.size - 1))
                uses.append((value, offset, draw(st.integers(1, value.type.size - offset))))
            results, tied = [], []
            for _ in range(draw(st.integers(0, 2))):
                pool = [v for v in operands if v.type.lifetime.value != "constant"
                        and v not in tied]
                if pool and draw(st.booleans()):
                    tied.append(draw(st.sampled_from(pool)))
                    results.append(tied[-1])
                else:
                    results.append((draw(st.sampled_from(NEW_LIFETIMES)),
                                    draw(st.sampled_from(SIZES))))
            outs = f.dispatch(f"ex::k{len(f.func.ops)}", uses, results)
            for spec, out in zip(results, outs):
                if spec in tied:
                    retire(spec, out)
                else:
                    live.append(out)
        elif kind == "param.load":
            live.append(f.param_load("scope", f"p{draw(st.integers(0, 2))}",
                                     draw(st.sampled_from(NEW_LIFETIMES)),
                                     draw(st.sampled_from(SIZES))))
        else:
            target = pick(writable=True)
            if target is None:
                continue
            half = target.type.size // 2
            entries = [("p0", target, 0, half)]
            if draw(st.booleans()):
                entries.append(("p1", target, half, target.type.size - half))
            retire(target, f.param_gather("scope", entries))
    # The results are whatever non-transient values are live at the end.
    returned = [v for v in live if v.type.lifetime.value != "transient"]
    f.func.result_types = [v.type for v in returned]
    f.ret(*returned)
    return pb.build()


def _check_random(program, parameters=None, evaluate_with=None):
    kernels = kernels_for(program)
    rng = np.random.default_rng(4)
    inputs = [random_bytes(rng, v.type.size) for v in program.func("f").args]
    expected = evaluate(program, "f", inputs, kernels, evaluate_with)
    modules = {f: compile_program(program, f, force=True) for f in FAVORS}
    assert_all_equal(run_all(modules, "f", inputs, kernels, devices=("local-task",),
                             parameters=parameters), expected)


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(with_parameters=False))
def test_random_programs_match_numpy_under_every_favor(program):
    _check_random(program)


@pytest.fixture(scope="module")
def random_parameters():
    rng = np.random.default_rng(5)
    arrays = {f"p{i}": random_bytes(rng, 128) for i in range(3)}
    index = ParameterIndex()
    for key, data in arrays.items():
        index.add_buffer(key, data.tobytes())
    return ProviderSet([IndexProvider("scope", index)]), {"scope": arrays}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(with_parameters=True))
def test_random_programs_with_parameters_match_numpy(random_parameters, program):
    provider, arrays = random_parameters
    _check_random(program, provider, arrays)


# -- what the module looks like --------------------------------------------------------------------
def _calls(text: str, function: str, name: str) -> int:
    body = text[text.index(f"vm.func @{function}("):]
    body = body[:body.index("\n}\n")]
    return len(re.findall(rf"vm\.call(?:\.variadic)? @{re.escape(name)}\b", body))


@pytest.mark.parametrize("favor", list(FAVORS))
def test_training_step_is_one_alloca_and_one_command_buffer(example, favor):
    text = lower_program(example, favor, force=True)
    schedule = plan(example.func("train_step"), favor)
    # The transient slab plus %loss0, the one new external resource.
    assert _calls(text, "train_step", "hal.device.queue.alloca") == 2
    assert f"vm.const.i64 {schedule.layout.size}" in text
    assert _calls(text, "train_step", "hal.command_buffer.create") == 1
    assert _calls(text, "train_step", "hal.command_buffer.execution_barrier") == \
        len(schedule.schedule.waves) - 1
    assert _calls(text, "train_step", "hal.command_buffer.dispatch") == 75
    assert _calls(text, "train_step", "hal.device.queue.execute") == 1
    # @initialize: four weights in one load, four biases in one gather (scope "model").
    assert _calls(text, "initialize", "io_parameters.load") == 1
    assert _calls(text, "initialize", "io_parameters.gather") == 1


def test_parameter_tables_are_laid_out_as_io_parameters_reads_them():
    table, data, spans = parameter_tables([("ab", 0, 64, 8), ("xyz", 4, 0, 16)])
    assert table == bytes([0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0])
    assert data == b"abxyz"
    assert np.frombuffer(spans, "<u8").tolist() == [0, 64, 8, 4, 0, 16]


def test_kernel_table_has_one_function_per_callee_and_binding_count():
    program = parse_program(SHAPES)
    lowering = lower(program)
    names = sorted(name for name, *_ in lowering.kernels.functions)
    assert names == ["ex::both/3", "ex::mix/4", "vmrt.copy/2", "vmrt.fill/1"]


# -- concurrency -----------------------------------------------------------------------------------
def test_local_task_runs_a_waves_dispatches_side_by_side():
    # Each kernel waits for the other: only concurrent execution gets both through.
    pb = ProgramBuilder("pair")
    f = pb.func("f", [("x", "external", 64)], [("external", 64), ("external", 64)])
    a, = f.dispatch("ex::left", [f.args[0]], [("external", 64)])
    b, = f.dispatch("ex::right", [f.args[0]], [("external", 64)])
    f.ret(a, b)
    program = pb.build()
    assert plan(program.func("f"), Favor.MAX_CONCURRENCY).schedule.waves == [[0, 1]]
    meeting = threading.Barrier(2, timeout=30)
    seen = []

    def meet(x, out):
        meeting.wait()
        seen.append(threading.current_thread().name)
        out[:] = x

    module = compile_program(program, Favor.MAX_CONCURRENCY, force=True)
    with StreamRunner(module, {"ex::left": meet, "ex::right": meet}, device="local-task",
                      worker_count=2) as runner:
        out = runner.call("f", [bytes(range(64))])
    assert [o.tobytes() for o in out] == [bytes(range(64))] * 2
    assert len(set(seen)) == 2


# -- errors ----------------------------------------------------------------------------------------
def test_wrong_argument_size_is_invalid_argument():
    program = parse_program(SHAPES)
    module = compile_program(program)
    with StreamRunner(module, {"ex::mix": mix, "ex::both": mix}) as runner:
        with pytest.raises(VmrtError) as info:
            runner.call("step", [bytes(255), bytes(128), bytes(64)])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "argument 0 (%x) of @step must be a buffer view of exactly 256 bytes" in str(
        info.value)


def test_missing_kernel_fails_when_the_module_is_loaded():
    module = compile_program(parse_program(SHAPES))
    with pytest.raises(VmrtError) as info:
        StreamRunner(module, {"ex::mix": mix})
    assert info.value.code == StatusCode.NOT_FOUND and "ex::both" in str(info.value)


@pytest.mark.parametrize("device", DEVICES)
def test_a_failing_kernel_fails_the_call_with_its_message(device):
    def broken(*arrays):
        raise ValueError("kernel exploded")
    module = compile_program(parse_program(SHAPES))
    with StreamRunner(module, {"ex::mix": mix, "ex::both": broken}, device=device) as runner:
        with pytest.raises(VmrtError) as info:
            runner.call("step", [bytes(256), bytes(128), bytes(64)])
        assert "kernel exploded" in str(info.value) and "ex::both" in str(info.value)
        # The device is still usable afterwards.
        with pytest.raises(VmrtError):
            runner.call("step", [bytes(256), bytes(128), bytes(64)])


def test_unknown_parameter_scope_is_not_found(example):
    module = compile_program(example)
    with StreamRunner(module, make_kernels(), parameters=[]) as runner:
        with pytest.raises(VmrtError) as info:
            runner.call("initialize")
    assert info.value.code == StatusCode.NOT_FOUND and "model" in str(info.value)


def test_reserved_function_names_are_rejected():
    program = parse_program("program @p {\n func @__init() {\n return\n }\n}\n")
    with pytest.raises(StreamError, match="reserved"):
        lower_program(program)


# -- command line ----------------------------------------------------------------------------------
KERNEL_FILE = """
import numpy as np
def double(x, out):
    out.view(np.float32)[:] = x.view(np.float32) * 2
KERNELS = {"ex::double": double}
"""

SMALL = """program @small {
  func @f(%x: external<16>) -> (external<16>, external<8>) {
    %y = dispatch @ex::@double(%x) -> external<16>
    %z = splat 9 : i16 -> external<8>
    return %y, %z
  }
}
"""


def test_cli_compiles_and_runs_with_kernels_and_check(tmp_path, capsys):
    source = tmp_path / "small.stream"
    source.write_text(SMALL)
    kernels = tmp_path / "kernels.py"
    kernels.write_text(KERNEL_FILE)
    data = np.arange(4, dtype=np.float32)
    np.save(tmp_path / "x.npy", data)
    vmfb, vmasm = tmp_path / "small.vmfb", tmp_path / "small.vmasm"
    assert main(["stream", "compile", str(source), "-o", str(vmfb)]) == 0
    assert main(["stream", "compile", str(source), "-o", str(vmasm), "--emit=vmasm"]) == 0
    assert "hal.command_buffer.dispatch" in vmasm.read_text()
    assert load_module(vmfb.read_bytes()).export_names()
    capsys.readouterr()
    assert main(["stream", "run", str(source), "--kernels", str(kernels), "--input",
                 f"@{tmp_path / 'x.npy'}", "--check", "--output", f"@{tmp_path / 'y.bin'}",
                 "--output", ""]) == 0
    out = capsys.readouterr().out
    assert "EXEC @f" in out and "[SUCCESS]" in out
    assert np.array_equal(np.fromfile(tmp_path / "y.bin", np.float32), data * 2)
    assert main(["stream", "run", str(vmfb), "--kernels", str(kernels), "--input",
                 f"@{tmp_path / 'x.npy'}", "--device", "local-sync"]) == 0
    assert "result[1]: 8 bytes" in capsys.readouterr().out


def test_cli_run_reports_a_missing_kernel(tmp_path, capsys):
    source = tmp_path / "small.stream"
    source.write_text(SMALL)
    assert main(["stream", "run", str(source), "--input", "zeros"]) == 1
    err = capsys.readouterr().err
    assert "NOT_FOUND" in err and "ex::double" in err
