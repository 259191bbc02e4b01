"""Running IREE's compiler (iree-base-compiler's `iree.compiler.tools`) for the stream
importer: the stream IR of a model just before IREE partitions it, and the IR it
ends the stream phase with under each partitioning favor.

iree.compiler is imported only when one of these functions runs.
"""

from __future__ import annotations

import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from vmrt.errors import StatusCode, StreamError

#: the device iree-compile targets unless told otherwise (extra compile arguments win).
DEFAULT_TARGET = ("--iree-hal-target-device=local",
                  "--iree-hal-local-target-device-backends=vmvx")
#: the pass that partitions execution into waves; the importer reads the IR before it.
SCHEDULE_PASS = "iree-stream-schedule-execution"
INSTALL_HINT = "python3 -m pip install iree-base-compiler==3.13.0"


@dataclass
class StreamIR:
    """What one model compiles to: the IR before partitioning (one module text per
    function-like op, each printed just before that op was partitioned) and, per
    favor asked for, the module at the end of the stream phase."""

    model: str
    before_partitioning: list[str]
    partitioned: dict[str, str] = field(default_factory=dict)
    compile_args: tuple[str, ...] = ()


def _compiler_tools():
    try:
        from iree.compiler import tools
    except ImportError:
        raise StreamError(f"IREE's compiler is not installed ({INSTALL_HINT})",
                          code=StatusCode.UNAVAILABLE) from None
    return tools


def first_error_line(diagnostics: str) -> str:
    """The first `error:` diagnostic iree-compile printed (else its first line)."""
    lines = [line.strip() for line in diagnostics.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line
    return lines[0] if lines else "no diagnostics"


def _diagnostics(error: Exception) -> str:
    text = str(error)
    match = re.search(r"Diagnostics:\n(.*?)\n\nInvoked with:", text, re.S)
    return match.group(1) if match else text


def _compile(model: Path, args: list[str]) -> str:
    tools = _compiler_tools()
    try:
        output = tools.compile_file(str(model), extra_args=args)
    except tools.CompilerToolError as error:
        raise StreamError(f"iree-compile rejected {model}: "
                          f"{first_error_line(_diagnostics(error))}",
                          code=StatusCode.INVALID_ARGUMENT) from None
    return output.decode("utf-8", "replace")


def _stream_phase_args(compile_args, favor: str | None) -> list[str]:
    args = [*DEFAULT_TARGET, *compile_args, "--compile-to=stream"]
    if favor is not None:
        args.append(f"--iree-stream-partitioning-favor={favor}")
    return args


def _dump_args(folder: Path) -> list[str]:
    """Print the whole module (with source locations) into `folder` right before the
    partitioning pass runs on each function; one thread, so each print shows its
    function untouched."""
    return [f"--mlir-print-ir-before={SCHEDULE_PASS}", "--mlir-print-ir-module-scope",
            "--mlir-disable-threading", "--mlir-print-debuginfo",
            f"--mlir-print-ir-tree-dir={folder}"]


def compile_stream_ir(model: str | Path, favors=(), compile_args=()) -> StreamIR:
    """Compiles `model` (anything iree-compile takes) up to the end of the stream phase,
    once per favor (at least once), in parallel; the first run also prints the IR
    before partitioning."""
    model = Path(model)
    if not model.is_file():
        raise StreamError(f"cannot read '{model}': no such file", code=StatusCode.NOT_FOUND)
    favors = list(favors) or [None]
    compile_args = tuple(compile_args)
    with tempfile.TemporaryDirectory(prefix="vmrt-stream-import-") as folder:
        runs = [_stream_phase_args(compile_args, favor) for favor in favors]
        runs[0] += _dump_args(Path(folder))
        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            outputs = list(pool.map(lambda args: _compile(model, args), runs))
        dumps = [path.read_text() for path in top_level_dumps(Path(folder))]
    if not dumps:
        raise StreamError(f"iree-compile never ran {SCHEDULE_PASS} on {model} (no stream "
                          "functions to partition?)", code=StatusCode.FAILED_PRECONDITION)
    partitioned = {favor: text for favor, text in zip(favors, outputs) if favor is not None}
    return StreamIR(str(model), dumps, partitioned, compile_args)


def top_level_dumps(folder: Path) -> list[Path]:
    """The prints of the model's own module, in name order. The tree dir holds one
    folder per module and op (`builtin_module_NAME/util_func_F/N_pass.mlir`); prints of
    modules nested deeper come from IREE's constant evaluation (`jit_eval` programs it
    compiles and runs on the side), which print the outer module in an earlier state."""
    return sorted(path for path in folder.rglob("*.mlir")
                  if len(path.relative_to(folder).parts) == 3)


def parse_modules(texts):
    """(context, modules): MLIR modules parsed by IREE's bindings, in one context."""
    try:
        from iree.compiler import ir
    except ImportError:
        raise StreamError(f"IREE's compiler is not installed ({INSTALL_HINT})",
                          code=StatusCode.UNAVAILABLE) from None
    context = ir.Context()
    modules = []
    for text in texts:
        try:
            modules.append(ir.Module.parse(text, context))
        except ir.MLIRError as error:
            message = str(error).splitlines()
            raise StreamError("not MLIR that IREE's stream dialect parses: "
                              + " ".join(line.strip() for line in message[:3]),
                              code=StatusCode.INVALID_ARGUMENT) from None
    return context, modules


def function_ops(module) -> list[tuple[str, object]]:
    """(name, op) of the module's function-like ops with bodies: `util.func`s by their
    symbol, `util.initializer`s as `initializer`, `initializer_1`, ..."""
    found = []
    initializers = 0
    for op in module.body.operations:
        op = op.operation
        if op.name == "util.initializer":
            found.append(("initializer" + (f"_{initializers}" if initializers else ""), op))
            initializers += 1
        elif op.name == "util.func" and op.regions[0].blocks:
            found.append((op.attributes["sym_name"].value, op))
    return found


def walk(op):
    """Every op nested in `op`'s regions, in order (not `op` itself)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield child
                yield from walk(child)


def constant_int(value) -> int | None:
    """The integer an `arith.constant` defines, else None."""
    owner = value.owner
    if not hasattr(owner, "name") or owner.name != "arith.constant":
        return None
    from iree.compiler import ir
    attr = owner.attributes["value"]
    return attr.value if isinstance(attr, ir.IntegerAttr) else None


_LOCATION_RE = re.compile(r'"([^"]*)":(\d+):(\d+)')


def source_location(op) -> str:
    """`file:line:col` of the innermost source position of the op's location (the
    bindings expose no structured accessors), or `unknown location`."""
    match = _LOCATION_RE.search(str(op.location))
    if not match:
        return "unknown location"
    return f"{match.group(1)}:{match.group(2)}:{match.group(3)}"
