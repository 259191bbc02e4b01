"""Errors of calls into a context: any exception escaping generated code becomes a
VMError carrying a VM stack (`module.function+pc (file:line:col)`, innermost
last), and the failed call's frames are let go of under limits.
"""

from __future__ import annotations

import struct
import types

from vmrt.errors import StatusCode, VMError, VmrtError, limit_of, release_frames
from vmrt.vm.error_kinds import ErrorKind, vm_error
from vmrt.vm.ref import type_label

#: Generated code's file names start with this (vmrt.vm.module._compile).
_GENERATED_PREFIX = "<vmrt "


class VMErrorScope:
    """Turns any exception escaping generated code into a VMError with a VM stack."""

    __slots__ = ("context",)

    def __init__(self, context):
        self.context = context

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit,
                                           StopIteration)):
            return False
        stack = vm_stack(self.context.instances, tb)
        if isinstance(exc, VMError):
            if not exc.stack:
                exc.stack = stack
            elif getattr(exc, "c_frames", False):  # the C tier's frames, then ours
                exc.stack = exc.stack + stack
                exc.c_frames = False
            _release_failed_frames(self.context, exc)
            return False
        error = translate_exception(exc, self.context, tb)
        error.stack = stack
        _release_failed_frames(self.context, exc, keep=False)
        try:
            raise error from None
        finally:  # (this frame holding the error it raises would be a reference cycle)
            error = exc = tb = None


def _release_failed_frames(context, exc: BaseException, keep: bool = True) -> None:
    """A failed call of a context with limits lets go of everything it held
    (vmrt.errors.release_frames; `keep`: the error keeps its own traceback), then
    what only cycles of VM values hold is collected (Meter.collect_cycles). So no
    kept error or cycle decides whether the context can run again. Contexts
    without limits keep it all (for post-mortem debugging)."""
    if context.meter is not None:
        release_frames(exc, keep_traceback=keep)
        context.meter.collect_cycles()


def _generated_frames(instances, tb):
    """(instance, frame name, ordinal, pc) of each generated-code frame of a traceback,
    outermost first."""
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith(_GENERATED_PREFIX):
            for instance in instances:
                named = instance.frame_name(code)
                if named is not None:
                    name, ordinal = named
                    yield instance, name, ordinal, instance.pc_for_line(ordinal, tb.tb_lineno,
                                                                        code)
                    break
        tb = tb.tb_next


def vm_stack(instances, tb: types.TracebackType | None) -> list[str]:
    """VM frames (innermost first) of a traceback through generated code."""
    frames = [frame_label(instance, name, ordinal, pc)
              for instance, name, ordinal, pc in _generated_frames(instances, tb)]
    frames.reverse()
    return frames


def frame_label(instance, name: str, ordinal: int, pc) -> str:
    if pc is None:
        return name
    label = f"{name}+{pc:08X}"
    location = instance.module.source_location(ordinal, pc)
    return f"{label} ({location})" if location else label


def _failing_instruction(context, tb) -> str | None:
    """vm mnemonic of the instruction where an exception was raised, if in generated code."""
    last = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_GENERATED_PREFIX):
            last = tb
        tb = tb.tb_next
    if last is None:
        return None
    for instance, _, ordinal, pc in _generated_frames(context.instances, last):
        if pc is None:
            return None
        try:
            return instance.module.instruction_at(ordinal, pc).instruction.vm_name
        except VmrtError:
            return None
    return None


def _is_null_access(exc: AttributeError) -> bool:
    """Was the missing attribute looked up on None (a null ref operand)? Python
    records the name and the object of a failed lookup; generated code and the VM
    objects only read attributes of refs, never store them."""
    return exc.name is not None and exc.obj is None


def translate_exception(exc: BaseException, context, tb) -> VMError:
    where = _failing_instruction(context, tb)
    prefix = f"{where}: " if where else ""
    if isinstance(exc, VmrtError):  # (a limit that stopped HAL work keeps its subclass)
        return VMError(exc.message, exc.code, limit=limit_of(exc))
    if isinstance(exc, ZeroDivisionError):
        return vm_error(ErrorKind.DIV_ZERO, where=prefix)
    if isinstance(exc, RecursionError):
        return vm_error(ErrorKind.DEPTH, where=prefix)
    if isinstance(exc, MemoryError):
        return VMError(f"{prefix}out of memory", StatusCode.RESOURCE_EXHAUSTED)
    if isinstance(exc, AttributeError):
        if _is_null_access(exc):
            return vm_error(ErrorKind.NULL_REF, where=prefix)
        return vm_error(ErrorKind.WRONG_REF, where=prefix, detail=type_label(exc.obj))
    if isinstance(exc, (struct.error, OverflowError, ValueError, TypeError, IndexError)):
        return VMError(f"{prefix}{type(exc).__name__}: {exc}", StatusCode.INVALID_ARGUMENT)
    return VMError(f"{prefix}internal error: {type(exc).__name__}: {exc}", StatusCode.INTERNAL)
