"""The one error hierarchy of vmrt: every failure carries an IREE status code.

Errors are annotated as they travel up (as IREE's iree_status_annotate does), and
VM failures carry the VM stack at the point of failure. A call stopped by its
context's limits or cancelled raises a subclass of VMError naming why (FuelExhausted,
DepthExceeded, MemoryLimitExceeded, DeadlineExceeded, Cancelled); a file vmrt cannot
open is also the OSError the system reported (`except FileNotFoundError` works).

Every error class of vmrt is defined here (other modules re-export the ones their
users import from them), so the whole tree is one picture:

    VmrtError
    ├── ModuleFormatError ── VerificationError   module files, bytecode verification
    ├── DecodeError                               bytecode that does not decode (isa)
    ├── AssemblyError, DisassemblyError           vmasm text (asm)
    ├── CConvError                                calling-convention strings (vm, native)
    ├── ArchiveError                              parameter archives (io)
    ├── HalError ── ElementError                  the host HAL; element types, shapes, values
    ├── StreamError                               stream programs (stream)
    ├── UsageError, UnsupportedError              command lines; what the tools cannot do yet
    └── VMError                                   running VM code, with its stack
        ├── LimitExceeded ── FuelExhausted, DepthExceeded, MemoryLimitExceeded,
        │                    DeadlineExceeded
        └── Cancelled
"""

from __future__ import annotations

import builtins
import enum
import errno
from collections.abc import Callable


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
    #: What stopped the call, when a control of its context did: a field of
    #: vmrt.vm.limits.Limits ("fuel", "max_depth", "max_memory", "timeout") or
    #: "cancel". Errors wrapping such an error (HAL work failing on its behalf) keep
    #: it as their __cause__ or copy this tag, so the VMError reaching the host is
    #: still the matching subclass (see VMError, limit_of).
    limit: str | None = None

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


class DecodeError(VmrtError):
    """Bytecode that cannot be decoded; `pc` is the offset of the bad instruction."""

    default_code = StatusCode.INVALID_ARGUMENT

    def __init__(self, message: str, pc: int, code: StatusCode | int | None = None):
        super().__init__(message, code)
        self.pc = pc


class AssemblyError(VmrtError):
    """vmasm text that cannot be assembled. Made from a message, or from the list of
    every diagnostic the assembler found (vmrt.asm.Diagnostic: filename, line,
    column, message and format()), the first one giving the message."""

    default_code = StatusCode.INVALID_ARGUMENT

    def __init__(self, diagnostics: "str | list", code: StatusCode | int | None = None):
        if isinstance(diagnostics, str):
            message, diagnostics = diagnostics, []
        else:
            first = diagnostics[0]
            more = f" (and {len(diagnostics) - 1} more)" if len(diagnostics) > 1 else ""
            message = f"{first.filename}:{first.line}:{first.column}: {first.message}{more}"
        super().__init__(message, code)
        self.diagnostics = list(diagnostics)

    def format(self) -> str:
        """Every diagnostic as a compiler prints it (file:line:col, source, caret)."""
        if not self.diagnostics:
            return self.one_line()
        return "\n".join(d.format() for d in self.diagnostics)


class ScriptError(VmrtError):
    """A script (vmrt.script) outside the compiled Python subset: the message starts
    with `file:line:col:` and says what to write instead."""

    default_code = StatusCode.INVALID_ARGUMENT

    def __init__(self, message: str, filename: str = "<script>", line: int = 0,
                 column: int = 0, code: StatusCode | int | None = None):
        super().__init__(f"{filename}:{line}:{column}: {message}", code)
        self.filename, self.line, self.column = filename, line, column


class DisassemblyError(VmrtError):
    """A module the disassembler cannot print (undefined block targets, cconvs it
    does not know)."""

    default_code = StatusCode.INVALID_ARGUMENT


class CConvError(VmrtError):
    """A calling-convention string (`0iI_f`) that is malformed or unsupported."""

    default_code = StatusCode.INVALID_ARGUMENT


class HalError(VmrtError):
    """A failure reported by the host HAL (buffers, queues, executables)."""

    default_code = StatusCode.INTERNAL


class ElementError(HalError):
    """Text that is not an element type, shape or element value (`2x3xf32=1 2`).
    Element types are IREE's HAL element types (iree/hal/string_util.c parses
    them, for iree-run-module and iree-create-parameters alike), so it is a HalError."""

    default_code = StatusCode.INVALID_ARGUMENT


class StreamError(VmrtError):
    """A stream program that cannot be read or is not well formed.

    Carries the source location (file:line:col, anything printable) when the
    program came from text; `bare_message` is the message without it.
    """

    default_code = StatusCode.INVALID_ARGUMENT

    def __init__(self, message: str, loc: object | None = None,
                 code: StatusCode | int | None = None):
        self.loc = loc
        self.bare_message = message
        super().__init__(f"{loc}: {message}" if loc is not None else message, code)


class UsageError(VmrtError):
    """A command line the CLI rejects (printed as its bare message, exit status 1,
    as IREE's tools do)."""

    default_code = StatusCode.INVALID_ARGUMENT


class UnsupportedError(VmrtError):
    """Something IREE's tools do that vmrt's cannot (variadic inputs, ...)."""

    default_code = StatusCode.UNIMPLEMENTED


class ArchiveError(VmrtError):
    """A parameter archive that cannot be read or written."""

    default_code = StatusCode.INVALID_ARGUMENT


#: errno values that mean the disk (or the file size limit, or a quota) is full.
_DISK_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
#: The IREE status of an OSError, by its class.
_OS_ERROR_STATUS = {
    FileNotFoundError: StatusCode.NOT_FOUND,
    PermissionError: StatusCode.PERMISSION_DENIED,
    IsADirectoryError: StatusCode.INVALID_ARGUMENT,
    FileExistsError: StatusCode.ALREADY_EXISTS,
}


def status_of_os_error(error: OSError) -> StatusCode:
    """The status code IREE would report for `error` (a full disk is
    RESOURCE_EXHAUSTED, what has no better code UNAVAILABLE)."""
    for cls in type(error).__mro__:
        if cls in _OS_ERROR_STATUS:
            return _OS_ERROR_STATUS[cls]
    return StatusCode.RESOURCE_EXHAUSTED if error.errno in _DISK_FULL else StatusCode.UNAVAILABLE


def file_error(error: OSError, what: str, code: StatusCode | int | None = None, *,
               base: type[VmrtError] = VmrtError) -> VmrtError:
    """`error`, an OSError from opening, reading or writing a file, as a vmrt error
    (`what: reason`, the status of status_of_os_error unless `code`): an instance of
    `base` that is also the OSError subclass the system raised, with its errno,
    strerror and filename, so `except FileNotFoundError` (or PermissionError,
    IsADirectoryError, ...) catches what vmrt raises about files too."""
    cls = _file_error_class(base, _builtin_os_error_class(type(error)))
    made = cls(f"{what}: {error.strerror or error}",
               code if code is not None else status_of_os_error(error))
    assert isinstance(made, OSError)
    made.errno, made.strerror = error.errno, error.strerror
    made.filename, made.filename2 = error.filename, error.filename2
    return made


#: (vmrt error class, OSError class) -> the class inheriting both, made once.
_FILE_ERROR_CLASSES: dict[tuple[type, type], type] = {}


def _file_error_class(base: type[VmrtError], os_class: type[OSError]) -> type[VmrtError]:
    cls = _FILE_ERROR_CLASSES.get((base, os_class))
    if cls is None:
        name = base.__name__.removesuffix("Error") + os_class.__name__  # VmrtFileNotFoundError
        cls = type(name, (base, os_class), {"__module__": __name__, "__doc__": (
            f"A {base.__name__} that is also {os_class.__name__} (see file_error).")})
        _FILE_ERROR_CLASSES[(base, os_class)] = cls
    return cls


def _builtin_os_error_class(cls: type[OSError]) -> type[OSError]:
    """The builtin OSError class `cls` is or derives from (FileNotFoundError, ...)."""
    return next(c for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c)


class VMError(VmrtError):
    """A failure while running VM code; carries the VM stack (innermost first).

    `VMError(message, code, limit=...)` makes the subclass naming what stopped the
    call: the one for `limit` (see VmrtError.limit), else the one for a status only
    a stopped call reports (CANCELLED, DEADLINE_EXCEEDED). So every place turning an
    error into a VMError (native exports, HAL work, generated code) keeps
    `except vmrt.FuelExhausted` and friends working by passing `limit=limit_of(e)`.
    """

    default_code = StatusCode.INTERNAL

    def __new__(cls, message: str, code: StatusCode | int | None = None,
                stack: list[str] | None = None, *, limit: str | None = None) -> "VMError":
        if cls is VMError:
            cls = _STOPPED_BY.get(limit or "") or _STOPPED_WITH.get(_status(code)) or VMError
        return super().__new__(cls)

    def __init__(self, message: str, code: StatusCode | int | None = None,
                 stack: list[str] | None = None, *, limit: str | None = None):
        # (`limit` chose the class in __new__, which carries it)
        super().__init__(message, code)
        self.stack: list[str] = list(stack or [])

    def one_line(self) -> str:
        line = super().one_line()
        if self.stack:
            line += " [" + " <- ".join(collapse_frames(self.stack)) + "]"
        return line

    def format_stack(self) -> str:
        return "\n".join(frame if frame.startswith("...") else f"  at {frame}"
                         for frame in collapse_frames(self.stack))


class LimitExceeded(VMError):
    """A call stopped by a limit of its context (vmrt.vm.limits.Limits): `limit`
    names which. The context stays usable (refuel, a later call, ...)."""


class FuelExhausted(LimitExceeded):
    """The call ran out of fuel (Limits.fuel; Context.refuel adds more)."""

    default_code = StatusCode.RESOURCE_EXHAUSTED
    limit = "fuel"


class DepthExceeded(LimitExceeded):
    """The VM call stack grew past its limit (Limits.max_depth, Instance.max_depth):
    unbounded recursion, usually."""

    default_code = StatusCode.RESOURCE_EXHAUSTED
    limit = "max_depth"


class MemoryLimitExceeded(LimitExceeded):
    """An allocation would hold more than Limits.max_memory bytes (refused before
    allocating)."""

    default_code = StatusCode.RESOURCE_EXHAUSTED
    limit = "max_memory"


class DeadlineExceeded(LimitExceeded):
    """The call ran past its deadline (Limits.timeout, Context.set_deadline) or a
    wait timed out."""

    default_code = StatusCode.DEADLINE_EXCEEDED
    limit = "timeout"


class Cancelled(VMError):
    """The context was cancelled (Context.cancel) before or while the call ran."""

    default_code = StatusCode.CANCELLED
    limit = "cancel"


class InvalidLimit(VMError, ValueError):
    """A limit that cannot be one (`Limits(fuel=-1)`, `refuel("10")`): a ValueError,
    as Python code expects of a bad argument, and a VMError (INVALID_ARGUMENT), as
    vmrt raised before."""

    default_code = StatusCode.INVALID_ARGUMENT


#: The error class of each `limit` tag.
_STOPPED_BY: dict[str, type[VMError]] = {
    cls.limit: cls for cls in (FuelExhausted, DepthExceeded, MemoryLimitExceeded,
                               DeadlineExceeded, Cancelled) if cls.limit}
#: The error class of statuses only a stopped call reports, for errors that lost
#: their tag on the way (a copy made by the HAL, a status code from C).
_STOPPED_WITH: dict[StatusCode | None, type[VMError]] = {
    StatusCode.CANCELLED: Cancelled, StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded}


def _status(code: StatusCode | int | None) -> StatusCode | None:
    try:
        return None if code is None else StatusCode(code)
    except ValueError:  # (VmrtError.__init__ reports it)
        return None


def limit_of(error: BaseException) -> str | None:
    """The `limit` tag of `error` or of the errors it was raised from (__cause__)."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 64:  # (a cause cycle ends the walk)
        tag = getattr(current, "limit", None)
        if tag is not None:
            return tag
        current, seen = current.__cause__, seen + 1
    return None


#: Frames of a repeated run shown before it is summed up (CPython shows 3 lines).
REPEATS_SHOWN = 3
#: Longest cycle of frames recognized as repeating (mutual recursion of this many).
MAX_CYCLE = 4
#: Frames shown at most at each end of a stack still long after collapsing.
FRAMES_SHOWN_AT_ENDS = 20


def collapse_frames(stack: list[str]) -> list[str]:
    """The frames of a VM stack to show (innermost first): a frame, or a cycle of up
    to MAX_CYCLE frames, repeated more than REPEATS_SHOWN times is shown that many
    times then summed up as `... N more frames of F` (as CPython's "[Previous line
    repeated N more times]"), so an unbounded recursion's error stays short; a stack
    still longer than twice FRAMES_SHOWN_AT_ENDS shows only its two ends."""
    shown: list[tuple[str, int]] = []  # (text, frames it stands for)
    start = 0
    while start < len(stack):
        period, repeats = _repetition_at(stack, start)
        if repeats <= REPEATS_SHOWN:
            shown.append((stack[start], 1))
            start += 1
            continue
        shown += [(frame, 1) for frame in stack[start:start + period * REPEATS_SHOWN]]
        cycle = " <- ".join(stack[start:start + period])
        hidden = period * (repeats - REPEATS_SHOWN)
        shown.append((f"... {hidden:,} more frames of "
                      f"{cycle if period == 1 else f'({cycle})'}", hidden))
        start += period * repeats
    if len(shown) > 2 * FRAMES_SHOWN_AT_ENDS + 1:
        middle = shown[FRAMES_SHOWN_AT_ENDS:-FRAMES_SHOWN_AT_ENDS]
        hidden = sum(count for _, count in middle)
        shown[FRAMES_SHOWN_AT_ENDS:-FRAMES_SHOWN_AT_ENDS] = [(f"... {hidden:,} more frames", 0)]
    return [text for text, _ in shown]


def _repetition_at(stack: list[str], start: int) -> tuple[int, int]:
    """(period, repeats) of the longest run of a repeated cycle of frames beginning
    at `start` (the shortest cycle among equally long runs); (1, 1) for none."""
    best_period, best_repeats = 1, 1
    for period in range(1, MAX_CYCLE + 1):
        cycle = stack[start:start + period]
        if len(cycle) < period:
            break
        repeats = 1
        while stack[start + period * repeats:start + period * (repeats + 1)] == cycle:
            repeats += 1
        if period * repeats > best_period * best_repeats:
            best_period, best_repeats = period, repeats
    return best_period, best_repeats


def release_frames(error: BaseException, keep_traceback: bool = True) -> None:
    """Lets go of what the frames an error left hold (locals, arguments): each
    frame of its traceback and of the errors it chains is cleared (frames still
    running are skipped), and the chained errors' tracebacks are dropped (a cleared
    frame still holds the function it ran, closures included); `keep_traceback=False`
    drops the error's own too. A kept error, or a reference cycle through one (an
    error in a local of a frame it passed), then holds nothing of the failed work."""
    import traceback

    pending: list[BaseException | None] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        if current is not error or not keep_traceback:
            current.__traceback__ = None
        pending += (current.__cause__, current.__context__)


def run_with(first: Callable[[], object], futures: list) -> None:
    """Runs first() on this thread while `futures` (the rest of the same work, given
    to a pool) run, waits for all, and raises the first failure; later ones are
    released (release_frames): only the first error travels on."""
    failure = None
    try:
        first()
    except BaseException as error:
        failure = error
    for future in futures:
        try:
            future.result()
        except BaseException as error:
            if failure is None:
                failure = error
            else:
                release_frames(error)
    if failure is not None:
        try:
            raise failure
        finally:  # no cycle (error -> traceback -> this frame -> error) keeps the work
            del failure, futures
