"""Compile a model (.onnx, or .mlir: StableHLO, linalg, torch) into a .vmfb for this machine.

    vmrt compile MODEL -o OUT.vmfb [--tune] [--target=host|generic|vmvx]
                 [--parameters_out=OUT.irpa]

Flags are chosen for the target (for `host`, this CPU's features, microkernels and
data tiling), and a build with flags beyond iree-compile's defaults is checked
against the default build on random inputs of the model's shapes; one whose
outputs differ is not used (a warning says so). `--tune` builds several flag sets,
times each here, and keeps the fastest correct one. How the module was made (the
flags, each candidate's time) is written beside it as OUT.vmfb.json. Builds are
kept in vmrt's cache (VMRT_CACHE_DIR): compiling the same model again is a copy.
`--parameters_out` puts the large weights in an .irpa (pass it to `vmrt run
--parameters=model=OUT.irpa`). Needs the `vmrt[compile]` extra.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from vmrt.compiler import TARGETS, CompileWarning, build, save
from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.tools.progress import add_no_progress_flag, progress_bar


def add_arguments(parser) -> None:
    parser.add_argument("model", help="an .onnx or .mlir file")
    parser.add_argument("-o", "--output", help="the .vmfb to write (default: MODEL with a "
                                               ".vmfb suffix)")
    parser.add_argument("--target", default="host", choices=TARGETS,
                        help="host: this CPU (the default); generic: any CPU of its "
                             "architecture; vmvx: portable bytecode kernels")
    parser.add_argument("--tune", action="store_true",
                        help="build several flag sets, time them here, keep the fastest "
                             "correct one")
    parser.add_argument("--parameters_out", metavar="OUT.irpa",
                        help="put the large weights in this parameter archive")
    add_no_progress_flag(parser)


def compile_progress(args):
    """A progress callback drawing a bar of the compile's steps (none off a terminal):
    (callback, close)."""
    bar = progress_bar(None, "compiling", "step", args)  # type: ignore[arg-type]
    if not hasattr(bar, "set_description"):
        return (lambda step: None), bar.close

    def step(text: str) -> None:
        bar.set_description(text)
        bar.update(1)
    return step, bar.close


def build_with_progress(source, args, **options):
    """vmrt.compiler.build with the CLI's progress bar and vmrt.load as the checker; a
    build not used is one `vmrt: warning:` line on stderr."""
    import warnings
    from vmrt.api import _checking_load
    step, close = compile_progress(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompileWarning)
        try:
            return build(source, load=_checking_load, progress=step, **options)
        finally:
            close()
            for warning in caught:
                print(f"vmrt: warning: {warning.message}", file=sys.stderr)


def run(args) -> int:
    model = Path(args.model)
    output = Path(args.output) if args.output else model.with_suffix(".vmfb")
    if output.resolve() == model.resolve():
        raise VmrtError(f"-o {output} would overwrite the model", StatusCode.INVALID_ARGUMENT)
    made = build_with_progress(model, args, target=args.target, tune=args.tune,
                               parameters="external" if args.parameters_out else None)
    written = save(made, output)
    if args.parameters_out:
        if made.irpa is None:
            print("vmrt: no constant was large enough to go to the archive; "
                  f"{args.parameters_out} not written", file=sys.stderr)
        else:
            try:
                shutil.move(str(output.with_suffix(".irpa")), args.parameters_out)
            except OSError as error:
                raise file_error(error, f"cannot write '{args.parameters_out}'") from None
            written[1] = args.parameters_out
    print(f"{', '.join(written)}: {made.record['chosen']} "
          f"({' '.join(made.record['flags'])})")
    return 0
