"""Print where the bundled examples are: every file, or the path of one.

    vmrt example              # one path a line: the models, their MLIR, the scripts
    vmrt example mlp.vmfb     # the path of one, e.g.
    vmrt run --module="$(vmrt example mlp.vmfb)" --function=predict --input="1x4xf32=1 0.5 -0.5 2"

A wheel carries them as vmrt/examples; a source checkout (and its editable
install) has them in examples/ beside the package.
"""

from __future__ import annotations

from pathlib import Path

from vmrt.errors import StatusCode, VmrtError

PACKAGE = Path(__file__).resolve().parent.parent


def examples_dir() -> Path:
    """The folder of the bundled examples: the wheel's, else the checkout's."""
    for folder in (PACKAGE / "examples", PACKAGE.parent / "examples"):
        if (folder / "mlp.vmfb").is_file():
            return folder
    raise VmrtError(f"no bundled examples beside {PACKAGE} (this vmrt was installed "
                    "without them)", StatusCode.NOT_FOUND)


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="an example's file name (mlp.vmfb, "
                                                "scalar.mlir, run_native_mlp.py, ...)")


def run(args) -> int:
    folder = examples_dir()
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".pyc")
    if args.name is None:
        for name in names:
            print(folder / name)
        return 0
    if args.name not in names:
        raise VmrtError(f"no example named '{args.name}'; there are: {', '.join(names)}",
                        StatusCode.NOT_FOUND)
    print(folder / args.name)
    return 0
