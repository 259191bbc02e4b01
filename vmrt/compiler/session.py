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
            raise VmrtError(f"iree-compile rejected the flags: {error}",
                            StatusCode.INVALID_ARGUMENT) from None
        invocation = session.invocation()
        invocation.enable_console_diagnostics()
        # (bytes with a NUL at the end: the C API then reads text in place)
        buffer = mlir if mlir.startswith(b"ML\xefR") else mlir + b"\0"
        source = Source.wrap_buffer(session, buffer)
        with _captured_stderr() as diagnostics:
            parsed = invocation.parse_source(source)
            built = parsed and invocation.execute()
        if not built:
            raise VmrtError(_failure(diagnostics.text, parsed), StatusCode.INVALID_ARGUMENT)
        output = Output.open_membuffer()
        invocation.output_vm_bytecode(output)
        data = bytes(output.map_memory())
        output.close()
        invocation.close()
        return data
    finally:
        session.close()


def _failure(diagnostics: str, parsed: bool) -> str:
    """One line for a failed compile: the compiler's first error, else what failed."""
    errors = [match.group(1).strip() for match in map(_ERROR_LINE.search,
                                                      diagnostics.splitlines()) if match]
    what = "iree-compile failed" if parsed else "iree-compile could not parse the MLIR"
    return f"{what}: {errors[0]}" if errors else what


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
