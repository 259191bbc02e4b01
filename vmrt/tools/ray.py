"""Run a module's function over a folder of inputs on a Ray cluster (vmrt.ray).

    vmrt ray map --module=M.vmfb --function=F --inputs=DIR --output=DIR
                 [--address=ADDRESS] [--num_actors=N] [--num_cpus=C]
                 [--device=local-task|local-sync] [--parameters=[SCOPE=]FILE ...]
                 [--max_in_flight=N] [--no_progress]

Each file of --inputs is one call, in name order: NAME.npy is its one argument,
NAME.npz its arguments in the order they were saved. Each call's result goes to
OUTPUT/NAME.npy (NAME.npz, arr_0, arr_1, ..., for several results). A call that
fails prints one line naming its input and writes nothing; the command then ends
with status 1. The cluster is --address, else RAY_ADDRESS, else a Ray started
on this machine for the run. Module and parameter files must be readable at the
same path on every node. Needs the vmrt[ray] extra.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from vmrt.errors import StatusCode, VmrtError
from vmrt.tools import progress
from vmrt.tools.flags import add_flag

INPUT_SUFFIXES = (".npy", ".npz")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="ray_command", metavar="ACTION")
    sub.required = True
    run_map = sub.add_parser(
        "map", help="run a function over a folder of .npy/.npz inputs on Ray actors",
        description="Run a module's function on every input file of a folder on a pool "
                    "of Ray actors, writing one result file per input.")
    run_map.add_argument("--module", required=True, metavar="FILE",
                         help="the .vmfb (or .vmasm) module; the same path on every node")
    run_map.add_argument("--function", required=True, help="the export to call")
    run_map.add_argument("--inputs", required=True, metavar="DIR",
                         help="a folder of NAME.npy (one argument) or NAME.npz files")
    run_map.add_argument("--output", required=True, metavar="DIR",
                         help="the folder for the results (created if missing)")
    run_map.add_argument("--address", metavar="ADDRESS",
                         help="the Ray cluster (default: RAY_ADDRESS, else a local Ray)")
    add_flag(run_map, "--num_actors", type=int, default=2, metavar="N",
             help="actors in the pool, each holding one context (default 2)")
    add_flag(run_map, "--num_cpus", type=float, default=1, metavar="C",
             help="CPUs each actor reserves (default 1)")
    run_map.add_argument("--device", default="local-task", choices=("local-task", "local-sync"),
                         help="each actor's HAL device (default local-task)")
    run_map.add_argument("--parameters", action="append", default=[], metavar="[SCOPE=]FILE",
                         help="a parameter archive for SCOPE (the global scope without "
                              "`SCOPE=`), mapped by each node; repeatable")
    add_flag(run_map, "--max_in_flight", type=int, metavar="N",
             help="calls sent and not yet written at most (default 2 per actor)")
    progress.add_no_progress_flag(run_map)
    run_map.set_defaults(ray_run=run_map_command)


def run(args) -> int:
    return args.ray_run(args)


def input_files(folder: str) -> list[Path]:
    """The input files of `folder`, in name order; NOT_FOUND without any."""
    path = Path(folder)
    if not path.is_dir():
        raise VmrtError(f"--inputs '{folder}' is not a folder", StatusCode.NOT_FOUND)
    files = sorted(p for p in path.iterdir() if p.suffix in INPUT_SUFFIXES and p.is_file())
    if not files:
        raise VmrtError(f"--inputs '{folder}' holds no .npy or .npz file",
                        StatusCode.NOT_FOUND)
    return files


def read_arguments(path: Path) -> tuple:
    """One call's arguments: an .npy file's array, an .npz file's arrays in order."""
    import numpy as np
    try:
        if path.suffix == ".npy":
            return (np.load(path, allow_pickle=False),)
        with np.load(path, allow_pickle=False) as arrays:
            return tuple(arrays[name] for name in arrays.files)
    except (ValueError, OSError, EOFError) as error:
        raise VmrtError(f"cannot read input '{path}': {error}",
                        StatusCode.INVALID_ARGUMENT) from None


def write_result(folder: Path, name: str, result: Any) -> None:
    import numpy as np
    if isinstance(result, (tuple, list)):
        np.savez(folder / f"{name}.npz", *[np.asarray(value) for value in result])
    else:
        np.save(folder / f"{name}.npy", np.asarray(result))


def parameter_paths(specs: list[str]) -> dict[str, list[str]] | None:
    """`--parameters` values as {scope: [absolute paths]} for the actors to map."""
    if not specs:
        return None
    from vmrt.io import split_scope
    scopes: dict[str, list[str]] = {}
    for spec in specs:
        scope, path = split_scope(spec)
        if not os.path.isfile(path):
            raise VmrtError(f"cannot read parameter archive '{path}'", StatusCode.NOT_FOUND)
        scopes.setdefault(scope, []).append(os.path.abspath(path))
    return scopes


def _connect(address: str | None) -> bool:
    """Connects to the cluster (or starts a local Ray); True when this run started
    the connection (and so ends it)."""
    try:
        import ray
    except ImportError:
        raise VmrtError("`vmrt ray` needs Ray: pip install 'vmrt[ray]'",
                        StatusCode.UNAVAILABLE) from None
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    quiet: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    if address is None:
        quiet["include_dashboard"] = False
    ray.init(address=address, **quiet)
    return True


def run_map_command(args) -> int:
    files = input_files(args.inputs)
    module = os.path.abspath(args.module)
    if not os.path.isfile(module):
        raise VmrtError(f"cannot read module '{args.module}'", StatusCode.NOT_FOUND)
    parameters = parameter_paths(args.parameters)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    started = _connect(args.address)
    try:
        return _map_files(args, module, parameters, files, output)
    finally:
        if started:
            import ray
            ray.shutdown()


def _map_files(args, module: str, parameters, files: list[Path], output: Path) -> int:
    from vmrt.ray import ModulePool
    start = time.perf_counter()
    failed = 0
    with ModulePool(module, parameters=parameters, device=args.device,
                    num_actors=args.num_actors, num_cpus=args.num_cpus,
                    max_in_flight=args.max_in_flight) as pool, \
            progress.progress_bar(len(files), "calls", "call", args) as bar:
        arguments: Iterator[tuple] = (read_arguments(path) for path in files)
        for path, result in zip(files, pool.map(args.function, arguments)):
            if isinstance(result, Exception):
                failed += 1
                bar.write(f"vmrt: {path.name}: {_one_line(result)}", file=sys.stderr)
            else:
                write_result(output, path.stem, result)
            bar.update()
        actors = pool.num_actors
    elapsed = time.perf_counter() - start
    print(f"{len(files) - failed} of {len(files)} results written to {output} "
          f"({actors} actors, {elapsed:.2f} s)")
    if failed:
        raise VmrtError(f"{failed} of {len(files)} calls failed", StatusCode.ABORTED)
    return 0


def _one_line(error: Exception) -> str:
    text = error.one_line() if isinstance(error, VmrtError) else f"{type(error).__name__}: " \
                                                                 f"{error}"
    return text.replace("\n", " ")
