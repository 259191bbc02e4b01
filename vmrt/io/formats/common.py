"""Shared pieces of the archive readers and writers."""

from __future__ import annotations

import os
import tempfile

from vmrt.errors import StatusCode, VmrtError
from vmrt.io import spans
from vmrt.io.file import DEFAULT_FILE_CACHE, FileAccess, os_error_status


class ArchiveWriter:
    """Writes a new archive file beside its destination, then renames it into place.

    Writing to a temporary file keeps readers of the old file (and their
    mappings) valid and lets an archive be rewritten from itself. The file is
    sized up front (zero-filled) and filled with positioned writes.
    """

    def __init__(self, path, total_size: int):
        self.path = os.fspath(path)
        self.total_size = total_size
        self._fd = -1
        self._temp: str | None = None

    def __enter__(self) -> "ArchiveWriter":
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            self._fd, self._temp = tempfile.mkstemp(
                prefix=".vmrt-", suffix=".tmp", dir=directory)
            os.ftruncate(self._fd, self.total_size)
        except OSError as error:
            self._cleanup()
            raise os_error_status(error, f"failed to create '{self.path}'") from None
        return self

    def write(self, offset: int, data) -> None:
        view = memoryview(data).cast("B")
        if offset + view.nbytes > self.total_size:
            raise VmrtError(f"archive write past its planned size ({offset}+{view.nbytes} "
                            f"> {self.total_size})", StatusCode.INTERNAL)
        spans._pwrite_fully(self._fd, view, offset)

    def copy_entry(self, offset: int, entry) -> None:
        """Writes the bytes of `entry` (file span or splat) at `offset`."""
        if offset + entry.length > self.total_size:
            raise VmrtError(f"archive write past its planned size", StatusCode.INTERNAL)
        spans.copy_to_fd(self._fd, offset, entry)

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
            raise os_error_status(error, f"failed to write '{self.path}'") from None

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

    def reopen(self, cache=None):
        """A read handle on the finished archive."""
        return (cache or DEFAULT_FILE_CACHE).open(self.path, FileAccess.READ)
