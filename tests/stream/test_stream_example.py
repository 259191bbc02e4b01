"""The MLP training-step example and the `vmrt stream` command line.

On the training step the favors must show the pattern IREE reported for its
mnist_train model: debug has a transient peak of some MB and no concurrency;
min-peak-memory the same peak with some concurrency; max-concurrency more
concurrency and a larger peak.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.stream import Favor, format_program, load_program, plan, program_stats
from vmrt.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp_train_step.stream"
GENERATOR = ROOT / "examples" / "gen_mlp_train_step.py"


@pytest.fixture(scope="module")
def program():
    return load_program(EXAMPLE)


def test_example_is_what_the_generator_writes(tmp_path):
    out = tmp_path / "step.stream"
    subprocess.run([sys.executable, str(GENERATOR), "-o", str(out)], check=True)
    assert out.read_text() == EXAMPLE.read_text()


def test_example_shape(program):
    step = program.func("train_step")
    assert step.dispatch_count >= 48          # forward, backward, update: dozens
    kinds = {op.kind for f in program.funcs for op in f.ops}
    assert kinds >= {"dispatch", "splat", "param.load", "param.gather"}
    assert any(t is not None for op in step.ops for t in op.ties)   # in-place updates
    text = EXAMPLE.read_text()
    assert format_program(program) == text[text.index("program"):]


def test_training_step_shows_the_mnist_train_pattern(program):
    stats = program_stats(program)["train_step"]
    debug = stats[Favor.DEBUG]
    low = stats[Favor.MIN_PEAK_MEMORY]
    high = stats[Favor.MAX_CONCURRENCY]
    # debug: a peak of megabytes, no concurrency at all.
    assert debug.transient_bytes > 8 << 20
    assert debug.concurrent_dispatches == 0 and debug.widest_wave == 1
    assert debug.waves == debug.ops
    # min-peak-memory: exactly debug's peak, some concurrency.
    assert low.transient_bytes == debug.transient_bytes
    assert low.concurrent_dispatches > 0 and low.widest_wave > 1
    assert low.waves < debug.waves
    # max-concurrency: more concurrency, at the cost of a larger peak.
    assert high.concurrent_dispatches > low.concurrent_dispatches
    assert high.widest_wave > low.widest_wave
    assert high.waves < low.waves
    assert high.transient_bytes > low.transient_bytes


def test_hazards_hold_on_the_example(program):
    step = program.func("train_step")
    for favor in Favor:
        result = plan(step, favor)
        analysis = result.analysis
        for i, later in enumerate(analysis.hazards):
            for j in later:
                assert result.schedule.wave_of[i] < result.schedule.wave_of[j]


def test_cli_stats_table(capsys):
    assert main(["stream", "stats", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "@train_step: 76 ops, 75 dispatches" in out
    header = next(line for line in out.splitlines() if "min-peak-memory" in line)
    assert header.split() == ["debug", "min-peak-memory", "max-concurrency*"]
    for label in ("transient bytes", "waves", "concurrent dispatches", "widest wave"):
        assert any(line.startswith(label) for line in out.splitlines()), label


def test_cli_stats_marks_the_effective_favor(capsys, tmp_path):
    path = tmp_path / "p.stream"
    path.write_text('program @p attributes {partitioning = "debug"} {\n'
                    '  func @a() attributes {partitioning = "min-peak-memory"} { return }\n'
                    '  func @b() { return }\n}\n')
    assert main(["stream", "stats", str(path)]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    assert "min-peak-memory*" in blocks[0] and "debug*" in blocks[1]


def test_cli_stats_json(capsys, program):
    assert main(["stream", "stats", "--json", "--partitioning-favor=debug", str(EXAMPLE)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["program"] == "mlp_train"
    step = next(f for f in data["functions"] if f["function"] == "train_step")
    assert step["favor"] == "debug"
    expected = program_stats(program)["train_step"]
    for favor in Favor:
        assert step["stats"][favor.value] == expected[favor].as_dict()


def test_cli_schedule(capsys):
    assert main(["stream", "schedule", str(EXAMPLE), "--function", "train_step",
                 "--partitioning-favor=min-peak-memory"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("@train_step favor=min-peak-memory:")
    assert "  wave 0:" in out and "transient slab:" in out


def test_cli_compile_writes_a_loadable_module(tmp_path):
    out = tmp_path / "x.vmfb"
    assert main(["stream", "compile", str(EXAMPLE), "-o", str(out)]) == 0
    from vmrt.vm.module import load_module
    assert {"initialize", "train_step"} <= set(load_module(out.read_bytes()).export_names())


def test_cli_reports_parse_errors_with_location(capsys, tmp_path):
    path = tmp_path / "bad.stream"
    path.write_text("program @p {\n  func @f() {\n    %a = splat 1 : i8 -> transient<3>\n"
                    "    %b = dispatch @k(%c) -> external<4>\n    return\n  }\n}\n")
    assert main(["stream", "stats", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:4:22: use of undefined value %c" in err
    assert main(["stream", "stats", str(tmp_path / "missing.stream")]) == 1
