"""Ctrl-C in code that runs without the GIL: native dispatches and the C tier's loops.

Python runs its SIGINT handler on the main thread, between bytecodes: a loop in C
never gives it the chance, so Ctrl-C would wait for the loop to end. When vmrt loads
code that runs such loops (a C tier build, a native executable) it calls `watch()`,
which puts a counting C handler in front of SIGINT's (csrc/vmrt_ctrl_c.c). It is
chained, not a replacement: Python's handler still runs, and with it whatever Python
handler the program has set; a program that sets SIG_IGN or SIG_DFL takes it out.

The loops note the count when they start and stop once it has moved, where they
already check for failures, cancellation and deadlines: the C tier at the end of
each slice of fuel, native dispatches before each workgroup. Where long work
starts (a native run, the end of a C tier slice) the counting handler goes back in
front if the program has set a new handler since. The host then calls `stopped()`:
on the main thread the SIGINT handler runs at once, so by default the caller gets
KeyboardInterrupt itself; when that handler raises nothing, or on another thread,
the call fails with CANCELLED (the C work cannot go on from where it stopped).
"""

from __future__ import annotations

import threading
from typing import NoReturn

from vmrt.errors import Cancelled
from vmrt.memory import c_extension

_ffi, _lib, _ = c_extension()


def watch() -> bool:
    """Puts the counting handler in front of SIGINT's handler, unless it is there
    already or SIGINT is ignored or left to its default; whether it is in place."""
    return bool(_lib is not None and _lib.vmrt_ctrl_c_watch())


def c_addresses() -> tuple[int, int]:
    """For C code built apart (the C tier's): the addresses of the count (an int64_t)
    and of the C `watch` (int (*)(void)); zeros without the C extension (then
    nothing counts)."""
    if _lib is None:
        return 0, 0
    return tuple(int(_ffi.cast("intptr_t", _ffi.addressof(_lib, name)))
                 for name in ("vmrt_ctrl_c_presses", "vmrt_ctrl_c_watch"))


def stopped() -> NoReturn:
    """Raises for C work that Ctrl-C stopped: what the SIGINT handler raises, run now
    on the main thread (KeyboardInterrupt by default), else CANCELLED."""
    if threading.current_thread() is threading.main_thread():
        import ctypes  # (PyErr_CheckSignals runs the pending handlers, raising theirs)

        ctypes.pythonapi.PyErr_CheckSignals()
    raise Cancelled("the call was interrupted (Ctrl-C)")
