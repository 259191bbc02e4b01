"""One iree-compile run in this process, through the compiler's C API (iree.compiler.api):
MLIR and flags in, a .vmfb's bytes out, or a VmrtError carrying the compiler's
first error.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading

from vmrt.errors import StatusCode, VmrtError
from vmrt.compiler.sources import require

__all__ = ["COUNTS", "compile_mlir"]


class CompileCounts:
    """How many compiles this process ran (tests tell a cache hit by it)."""

    def __init__(self) -> None:
        self.compiles = 0


COUNTS = CompileCounts()
#: The compiler's diagnostics go to file descriptor 2; one compile at a time captures them.
_CAPTURE_LOCK = threading.Lock()
_ERROR_LINE = re.compile(r"error: (.*)")
#: What the compiler says of an ONNX node it has no lowering for.
_UNSUPPORTED_OPERATOR = re.compile(r"failed to legalize operation 'torch\.operator'.*"
                                   r"name = \"onnx\.([\w.]+)\"")


def compile_mlir(mlir: bytes, flags: list[str]) -> bytes:
    """The .vmfb iree-compile makes of `mlir` (text or bytecode) with `flags`."""
    require("iree.compiler", "compiling a model")
    from iree.compiler.api import Output, Session, Source
    COUNTS.compiles += 1
    session = Session()
    try:
        try:
            session.set_flags(*flags)
        except ValueError as error:
            if "option not found" not in str(error):
                raise VmrtError(f"iree-compile rejected the flags: {_first(error)}",
                                StatusCode.INVALID_ARGUMENT) from None
            # Some flags (the experimental data-tiling op families among them) are
            # process-wide command-line options, not a session's: setting them here
            # would change every later compile of this process, so such a build runs
            # the compiler's own executable instead.
            return compile_with_tool(mlir, flags)
        invocation = session.invocation()
        invocation.enable_console_diagnostics()
        # (bytes with a NUL at the end: the C API then reads text in place)
        buffer = mlir if mlir.startswith(b"ML\xefR") else mlir + b"\0"
        source = Source.wrap_buffer(session, buffer)
        with _captured_stderr() as diagnostics:
            parsed = invocation.parse_source(source)
            built = parsed and invocation.execute()
        if not built:
            raise _failure(diagnostics.text, parsed)
        output = Output.open_membuffer()
        invocation.output_vm_bytecode(output)
        data = bytes(output.map_memory())
        output.close()
        invocation.close()
        return data
    finally:
        session.close()


def compile_with_tool(mlir: bytes, flags: list[str]) -> bytes:
    """compile_mlir through the installed iree-compile executable (a child process)."""
    import subprocess
    from iree.compiler.tools.binaries import find_tool
    with tempfile.TemporaryDirectory(prefix="vmrt-compile-") as folder:
        source = os.path.join(folder, "source.mlirbc" if mlir.startswith(b"ML\xefR")
                              else "source.mlir")
        output = os.path.join(folder, "module.vmfb")
        with open(source, "wb") as file:
            file.write(mlir)
        try:
            done = subprocess.run([find_tool("iree-compile"), *flags, source, "-o", output],
                                  capture_output=True, text=True, errors="replace")
        except OSError as error:
            raise VmrtError(f"cannot run iree-compile: {error}", StatusCode.UNAVAILABLE) from None
        if done.returncode != 0:
            raise _failure(done.stderr, True)
        with open(output, "rb") as file:
            return file.read()


def _first(error: BaseException) -> str:
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


def _failure(diagnostics: str, parsed: bool) -> VmrtError:
    """The error of a failed compile: an ONNX operator the compiler cannot lower, by
    name; else the compiler's first error, else what failed."""
    errors = [match.group(1).strip() for match in map(_ERROR_LINE.search,
                                                      diagnostics.splitlines()) if match]
    unsupported = _UNSUPPORTED_OPERATOR.search(errors[0]) if errors else None
    if unsupported is not None:
        return VmrtError(f"iree-compile does not support the ONNX operator "
                         f"{unsupported.group(1)}", StatusCode.UNIMPLEMENTED)
    what = "iree-compile failed" if parsed else "iree-compile could not parse the MLIR"
    said = errors or [line.strip() for line in diagnostics.splitlines() if line.strip()]
    return VmrtError(f"{what}: {said[0]}" if said else what, StatusCode.INVALID_ARGUMENT)


class _Captured:
    text = ""


@contextlib.contextmanager
def _captured_stderr():
    """What the compiler writes to file descriptor 2 meanwhile (to a temporary file,
    so a long log cannot fill a pipe), written on to the real stderr afterwards only
    when VMRT_COMPILER_LOG=1."""
    captured = _Captured()
    with _CAPTURE_LOCK, tempfile.TemporaryFile() as log:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(log.fileno(), 2)
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            captured.text = log.read().decode("utf-8", "replace")
    if captured.text and os.environ.get("VMRT_COMPILER_LOG", "") not in ("", "0"):
        sys.stderr.write(captured.text)
