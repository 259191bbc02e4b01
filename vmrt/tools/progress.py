"""Progress bars on long CLI work (writing parameter archives, check suites).

Bars are drawn by tqdm (the optional `vmrt[progress]` extra, imported only when
a bar is drawn) on standard error, and only when standard error is a terminal:
never into pipes, logs or tests. `--no_progress` or VMRT_NO_PROGRESS=1 turns
them off; without tqdm there are none.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

from vmrt.tools.flags import add_flag

NO_PROGRESS_HELP = "draw no progress bar (also: VMRT_NO_PROGRESS=1)"
#: Where Linux counts the bytes a process has written (`wchar`), whatever the system call.
_PROC_IO = "/proc/self/io"
_POLL_SECONDS = 0.1


class NoBar:
    """Stands in for a tqdm bar when none is drawn."""

    n = 0

    def __enter__(self) -> "NoBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, count: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def write(self, text: str, file=None, end: str = "\n") -> None:
        (file or sys.stdout).write(text + end)


def add_no_progress_flag(parser) -> None:
    add_flag(parser, "--no_progress", hidden=("--no-progress",), action="store_true",
             help=NO_PROGRESS_HELP)


def wanted(args=None) -> bool:
    """Whether to draw bars: on a terminal, unless the user turned them off."""
    if args is not None and getattr(args, "no_progress", False):
        return False
    if os.environ.get("VMRT_NO_PROGRESS", "") not in ("", "0"):
        return False
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()


def progress_bar(total: int, description: str, unit: str, args=None):
    """A tqdm bar on standard error counting to `total`, or a NoBar."""
    if not wanted(args):
        return NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return NoBar()
    in_bytes = unit == "B"
    # leave=False: the bar is gone when the work ends; the command's own output stays.
    return tqdm(total=total, desc=description, unit=unit, unit_scale=in_bytes,
                unit_divisor=1024 if in_bytes else 1000, file=sys.stderr, leave=False,
                dynamic_ncols=True)


def _bytes_written() -> int | None:
    try:
        with open(_PROC_IO, "rb") as file:
            for line in file:
                if line.startswith(b"wchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextlib.contextmanager
def bytes_written_bar(total: int, description: str, args=None):
    """A bar of the bytes the process writes while the `with` body runs (up to `total`).

    The archive writers (vmrt.io.formats) report no progress; the kernel counts
    every byte the process writes (pwrite and copy_file_range alike), which a
    thread reads a few times a second. No bar where that count is unavailable.
    """
    start = _bytes_written() if wanted(args) else None
    if start is None:
        yield NoBar()
        return
    with progress_bar(total, description, "B", args) as bar:
        if isinstance(bar, NoBar):  # tqdm is not installed
            yield bar
            return
        done = threading.Event()

        def poll() -> None:
            while not done.wait(_POLL_SECONDS):
                now = _bytes_written()
                if now is not None:
                    bar.update(max(0, min(now - start, total) - bar.n))

        poller = threading.Thread(target=poll, name="vmrt-progress", daemon=True)
        poller.start()
        try:
            yield bar
        finally:
            done.set()
            poller.join()
