"""Shared pieces of the archive readers and writers."""

from __future__ import annotations

import os
import re
import secrets
import signal
import threading

from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.io import spans
from vmrt.io.file import DEFAULT_FILE_CACHE, FileAccess


#: Temporary archives are named `.vmrt-<pid>-<random>.tmp` beside their destination.
_TEMP_PREFIX = ".vmrt-"
_TEMP_NAME = re.compile(r"\.vmrt-(\d+)-[^/]*\.tmp\Z")


class ArchiveWriter:
    """Writes a new archive file beside its destination, then renames it into place.

    Writing to a temporary file keeps readers of the old file (and their
    mappings) valid and lets an archive be rewritten from itself. The file is
    sized up front (zero-filled) and filled with positioned writes.

    The temporary file never outlives the write: it is removed when the write
    fails or is interrupted (Ctrl-C; SIGTERM, which raises SystemExit while a
    writer runs on the main thread), and the ones a killed process left (named
    with its pid) are removed by the next writer in that directory.
    """

    def __init__(self, path, total_size: int):
        self.path = os.fspath(path)
        self.total_size = total_size
        self._fd = -1
        self._temp: str | None = None
        self._signals = None

    def __enter__(self) -> "ArchiveWriter":
        directory = os.path.dirname(os.path.abspath(self.path))
        remove_stale_temporaries(directory)
        self._signals = _TerminateRaises()
        try:
            self._create_temporary(directory)
            os.ftruncate(self._fd, self.total_size)
        except (OSError, OverflowError, ValueError) as error:
            self._cleanup()
            if isinstance(error, OSError):
                raise file_error(error, f"failed to create '{self.path}'") from None
            raise VmrtError(f"failed to create '{self.path}': {self.total_size} bytes is more "
                            "than a file can hold", StatusCode.RESOURCE_EXHAUSTED) from None
        except BaseException:
            self._cleanup()
            raise
        return self

    def _create_temporary(self, directory: str) -> None:
        """Creates the temporary file under a name recorded *before* the file exists:
        a Ctrl-C or SIGTERM arriving at any point then finds the name to remove
        (with mkstemp, one arriving between the file's creation and the assignment
        of its name left the file behind)."""
        while True:
            self._temp = os.path.join(
                directory, f"{_TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(8)}.tmp")
            try:
                self._fd = os.open(self._temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                return
            except FileExistsError:  # not ours: never remove it
                self._temp = None

    def write(self, offset: int, data) -> None:
        view = memoryview(data).cast("B")
        self._check_planned(offset, view.nbytes)
        spans.pwrite_fully(self._fd, view, offset)

    def copy_entry(self, offset: int, entry) -> None:
        """Writes the bytes of `entry` (file span or splat) at `offset`."""
        self._check_planned(offset, entry.length)
        spans.copy_to_fd(self._fd, offset, entry)

    def _check_planned(self, offset: int, length: int) -> None:
        """INTERNAL when a write would go past the size planned for the archive (a
        writer's layout bug: the file was created at that size)."""
        if offset + length > self.total_size:
            raise VmrtError(f"archive write past its planned size ({offset}+{length} "
                            f"> {self.total_size})", StatusCode.INTERNAL)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._cleanup()
            return
        try:
            os.fsync(self._fd)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(self._fd, 0o666 & ~umask)
            os.close(self._fd)
            self._fd = -1
            os.replace(self._temp, self.path)
            self._temp = None
        except OSError as error:
            self._cleanup()
            raise file_error(error, f"failed to write '{self.path}'") from None
        except BaseException:
            self._cleanup()
            raise
        self._cleanup()  # (restores the SIGTERM handler)

    def _cleanup(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._temp is not None:
            try:
                os.unlink(self._temp)
            except OSError:
                pass
            self._temp = None
        if self._signals is not None:
            self._signals.restore()
            self._signals = None

    def reopen(self, cache=None):
        """A read handle on the finished archive."""
        return (cache or DEFAULT_FILE_CACHE).open(self.path, FileAccess.READ)


def remove_stale_temporaries(directory: str) -> None:
    """Removes the temporary archives in `directory` that processes of this user no
    longer running left behind (killed by SIGKILL, or the machine went down)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is None or _running(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            if os.lstat(path).st_uid == os.getuid():
                os.unlink(path)
        except OSError:
            pass


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or not ours to judge): keep its file
    return True


class _TerminateRaises:
    """While a temporary archive exists, SIGTERM raises SystemExit (as SIGINT raises
    KeyboardInterrupt) so that the writer removes it; only on the main thread and
    when SIGTERM still has its default action."""

    def __init__(self):
        self._previous = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._previous = signal.signal(signal.SIGTERM, _terminated)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def _terminated(signum, frame):
    raise SystemExit(128 + signum)
