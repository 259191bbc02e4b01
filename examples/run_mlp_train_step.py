"""Runs examples/mlp_train_step.stream on vmrt: random weights written to a parameter
archive, @initialize through io_parameters, then a few training steps, for each
favor, each step checked byte for byte against a plain numpy evaluation.

    python examples/run_mlp_train_step.py [--steps 3] [--device local-task]
        [--favor max-concurrency ...] [--workdir DIR] [--trace_json T.json] [--trace_svg T.svg]

`--trace_json` records the runs' calls (not the numpy checks) as a Chrome trace
(ui.perfetto.dev), `--trace_svg` draws it (`make pictures` does, for the README).

The same from the command line (after this script has written DIR/model.irpa and
DIR/x.npy, DIR/labels.npy; the state arguments come from @initialize):

    vmrt stream compile examples/mlp_train_step.stream -o /tmp/mlp_train.vmfb
    vmrt stream run examples/mlp_train_step.stream --function initialize \\
        --kernels examples/mlp_kernels.py --parameters model=DIR/model.irpa --check
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from examples.mlp_kernels import make_kernels  # noqa: E402
from vmrt.io import IndexProvider, ParameterIndex, ProviderSet  # noqa: E402
from vmrt.stream import FAVORS, load_program  # noqa: E402
from vmrt.stream.evaluate import evaluate  # noqa: E402
from vmrt.stream.lower import compile_program  # noqa: E402
from vmrt.stream.runtime import StreamRunner  # noqa: E402
from vmrt.timeline import Timeline  # noqa: E402
from vmrt.tools.trace_json import timeline_picture  # noqa: E402
from vmrt.vm.hooks import TimelineHooks  # noqa: E402

LAYERS = (784, 1024, 1024, 512, 10)
BATCH = 256


def write_parameters(path: Path, rng) -> None:
    index = ParameterIndex()
    for l in range(len(LAYERS) - 1):
        weight = rng.standard_normal((LAYERS[l], LAYERS[l + 1])) * np.sqrt(2 / LAYERS[l])
        index.add_buffer(f"layer{l + 1}.weight", weight.astype(np.float32).tobytes())
        index.add_buffer(f"layer{l + 1}.bias",
                         (rng.standard_normal(LAYERS[l + 1]) * 0.01).astype(np.float32).tobytes())
    index.save(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", choices=("local-sync", "local-task"), default="local-task")
    parser.add_argument("--favor", action="append", choices=[f.value for f in FAVORS])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--trace_json", type=Path, help="write a Chrome trace of the runs")
    parser.add_argument("--trace_svg", type=Path, help="draw the trace as an SVG")
    args = parser.parse_args(argv)
    timeline = Timeline() if args.trace_json or args.trace_svg else None
    hooks = [TimelineHooks(timeline)] if timeline else []
    traced = timeline if timeline else contextlib.nullcontext()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mlp_train_"))
    workdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    write_parameters(workdir / "model.irpa", rng)
    x = rng.standard_normal((BATCH, LAYERS[0])).astype(np.float32)
    labels = rng.integers(0, LAYERS[-1], BATCH).astype(np.int32)
    np.save(workdir / "x.npy", x)
    np.save(workdir / "labels.npy", labels)
    print(f"parameters and inputs in {workdir}")

    program = load_program(HERE / "mlp_train_step.stream")
    kernels = make_kernels(LAYERS[-1], BATCH)
    parameters = ProviderSet([IndexProvider("model", ParameterIndex.load(workdir / "model.irpa"))])
    ok = True
    for favor in args.favor or [f.value for f in FAVORS]:
        module = compile_program(program, favor, force=True)
        with StreamRunner(module, kernels, device=args.device, parameters=parameters,
                          hooks=hooks) as run:
            with traced:
                state = run.call("initialize")
            expected_state = evaluate(program, "initialize", [], kernels, parameters)
            ok &= all(np.array_equal(a, b) for a, b in zip(state, expected_state))
            for step in range(args.steps):
                inputs = [x, labels, *state]
                start = time.perf_counter()
                with traced:
                    loss, *state = run.call("train_step", inputs)
                elapsed = time.perf_counter() - start
                expected = evaluate(program, "train_step", inputs, kernels)
                same = all(np.array_equal(a, b) for a, b in zip([loss, *state], expected))
                ok &= same
                print(f"{favor:>16} {args.device} step {step + 1}: loss "
                      f"{loss.view(np.float32)[0]:.6f}  {elapsed * 1e3:7.1f} ms  "
                      f"{'bit-identical to numpy' if same else 'DIFFERS from numpy'}")
    if args.trace_json:
        timeline.save(args.trace_json)
    if args.trace_svg:
        timeline_picture(timeline.trace_events(), "examples/mlp_train_step.stream on "
                         f"{args.device}: @initialize, then {args.steps} @train_step"
                         ).save(args.trace_svg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
