"""The one error hierarchy of vmrt: every failure carries an IREE status code.

Errors are annotated as they travel up (as IREE's iree_status_annotate does), and
VM failures carry the VM stack at the point of failure.
"""

from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    """IREE's status codes (runtime/src/iree/base/status.h)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
    DEFERRED = 17
    INCOMPATIBLE = 18


class VmrtError(Exception):
    """Base of every error vmrt raises on purpose.

    `code` is an IREE StatusCode; `message` the first line; `annotations` are
    context lines added on the way up (outermost last).
    """

    default_code = StatusCode.UNKNOWN

    def __init__(self, message: str, code: StatusCode | int | None = None):
        self.code = StatusCode(code if code is not None else self.default_code)
        self.message = message
        self.annotations: list[str] = []
        super().__init__(message)

    def annotate(self, note: str) -> "VmrtError":
        self.annotations.append(note)
        return self

    def one_line(self) -> str:
        """The error as the CLI prints it: one line, no traceback."""
        parts = [f"{self.code.name}: {self.message}"]
        parts.extend(self.annotations)
        return "; ".join(parts)

    def __str__(self) -> str:
        return self.one_line()


class ModuleFormatError(VmrtError):
    """A module file that cannot be read: bad FlatBuffer, bad tables, bad ranges."""

    default_code = StatusCode.INVALID_ARGUMENT


class VerificationError(ModuleFormatError):
    """Bytecode that fails verification; names the function and bytecode offset."""

    def __init__(self, message: str, code: StatusCode | int | None = None, *,
                 module: str | None = None, function: str | None = None,
                 function_ordinal: int | None = None, offset: int | None = None):
        super().__init__(message, code)
        self.module = module
        self.function = function
        self.function_ordinal = function_ordinal
        self.offset = offset
        if offset is not None:
            where = function if function else f"@{function_ordinal}"
            self.annotate(f"at {module or '?'}.{where}+{offset:08X}")


class AssemblyError(VmrtError):
    """vmasm text that cannot be assembled (file:line:col messages)."""

    default_code = StatusCode.INVALID_ARGUMENT


class ArchiveError(VmrtError):
    """A parameter archive that cannot be read or written."""

    default_code = StatusCode.INVALID_ARGUMENT


class VMError(VmrtError):
    """A failure while running VM code; carries the VM stack (innermost first)."""

    default_code = StatusCode.INTERNAL

    def __init__(self, message: str, code: StatusCode | int | None = None,
                 stack: list[str] | None = None):
        super().__init__(message, code)
        self.stack: list[str] = list(stack or [])

    def one_line(self) -> str:
        line = super().one_line()
        if self.stack:
            line += " [" + " <- ".join(self.stack) + "]"
        return line

    def format_stack(self) -> str:
        return "\n".join(f"  at {frame}" for frame in self.stack)


def release_frames(error: BaseException, keep_traceback: bool = True) -> None:
    """Lets go of what the frames an error left hold (locals, arguments): each
    frame of its traceback and of the errors it chains is cleared (frames still
    running are skipped), and the chained errors' tracebacks are dropped (a cleared
    frame still holds the function it ran, closures included); `keep_traceback=False`
    drops the error's own too. A kept error, or a reference cycle through one (an
    error in a local of a frame it passed), then holds nothing of the failed work."""
    import traceback

    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        if current is not error or not keep_traceback:
            current.__traceback__ = None
        pending += (current.__cause__, current.__context__)
