"""Module files mapped read-only, and private copy-on-write pages of them.

A module read from a path is a `MappedFile` (a read-only shared mapping that
remembers which file it maps). `private_pages(view)` turns a read-only view
into such a mapping into a writable view of the same bytes backed by private
copy-on-write pages of the same file (mmap MAP_PRIVATE): nothing is copied
until a page is written, and writes stay in this process's pages: the file
and every other mapping of it (other contexts' constants) never see them.
"""

from __future__ import annotations

import mmap
import os

_GRANULARITY = mmap.ALLOCATIONGRANULARITY
_PRIVATE = getattr(mmap, "MAP_PRIVATE", None)


class MappedFile(mmap.mmap):
    """A read-only mapping of a whole file that knows the file (path, identity and
    its stat when mapped)."""

    @classmethod
    def open(cls, path: str, fd: int, info: os.stat_result | None = None) -> "MappedFile":
        """Maps the file open as `fd`; `info`: its fstat, when the caller made it."""
        mapped = cls(fd, 0, access=mmap.ACCESS_READ)
        info = info or os.fstat(fd)
        mapped.path = os.path.abspath(path)
        mapped.stat = info
        mapped.identity = file_identity(info)
        return mapped


def file_identity(info: os.stat_result) -> tuple[int, int, int, int]:
    """Which file, and which version of it: device, inode, size and mtime."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _address(buffer) -> int:
    import numpy as np
    return np.frombuffer(buffer, np.uint8).__array_interface__["data"][0]


def private_pages(view: memoryview) -> memoryview | None:
    """A writable view of the bytes of `view` on private copy-on-write pages of the
    file it maps, or None when `view` is no view of a MappedFile (or that file
    has changed or cannot be mapped privately)."""
    mapped = view.obj
    if not isinstance(mapped, MappedFile) or _PRIVATE is None or not len(view):
        return None
    start = _address(view) - _address(mapped)
    if not 0 <= start <= len(mapped) - len(view):
        return None
    base = start - start % _GRANULARITY
    try:
        fd = os.open(mapped.path, os.O_RDONLY)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if file_identity(info) != mapped.identity:
            return None  # replaced or rewritten since it was loaded
        pages = mmap.mmap(fd, start + len(view) - base, flags=_PRIVATE,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=base)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return memoryview(pages)[start - base:start - base + len(view)]
