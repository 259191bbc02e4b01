"""File handles for parameter storage, and the cache that shares them.

A `FileHandle` is what index entries point into (iree_io_file_handle_t): either
an open file (`kind == "fd"`) or a block of host memory (`kind ==
"host_allocation"`, as a preloaded file or a wrapped Python buffer). A file
handle maps its file at most once, on first use of `view()`, and every view of
it shares that one mapping: entries of mapped files hand out memoryviews over
the mapping without copying.

`FileCache` keeps one handle per path while anyone holds it (weakly), so
several indices loaded from the same file share one open file and one
mapping. A cached handle is reused only while the file on disk is still the
one it opened (same device, inode, size and modification time).
"""

from __future__ import annotations

import enum
import errno
import mmap
import os
import stat as stat_module
import threading
import weakref

from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.io import spans


class FileAccess(enum.IntFlag):
    """What a handle allows (iree_io_file_access_t)."""

    NONE = 0
    READ = 1
    WRITE = 2


class FileMode(str, enum.Enum):
    """How a parameter file is opened (upstream's --parameter_mode, plus mmap).

    MMAP: open the file and map it on first use (the default; zero-copy views).
    FILE: open the file and read/write it with pread/pwrite; views still map on
          demand, but gathers do not need the mapping.
    PRELOAD: read the whole file into host memory once (a host allocation).
    """

    MMAP = "mmap"
    FILE = "file"
    PRELOAD = "preload"


def byte_view(buffer, *, writable: bool = False, what: str = "buffer") -> memoryview:
    """A flat unsigned-byte memoryview over any C-contiguous buffer object."""
    try:
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    except TypeError:
        raise VmrtError(f"{what} of type {type(buffer).__name__} does not support "
                        "the buffer protocol", StatusCode.INVALID_ARGUMENT) from None
    if writable and view.readonly:
        raise VmrtError(f"{what} is read-only", StatusCode.PERMISSION_DENIED)
    if view.format != "B" or view.ndim != 1:
        if not view.c_contiguous:
            raise VmrtError(f"{what} is not contiguous", StatusCode.INVALID_ARGUMENT)
        view = view.cast("B")
    return view


class FileHandle:
    """An open file or a host allocation that index entries reference.

    Create with `FileHandle.open(path)` (or through a `FileCache`) or
    `FileHandle.wrap(buffer)`. Thread-safe for concurrent reads and for
    writes to distinct ranges.
    """

    def __init__(self, *, kind: str, access: FileAccess, path: str | None = None,
                 fd: int = -1, buffer: memoryview | None = None, stat=None,
                 mode: FileMode = FileMode.MMAP):
        self.kind = kind
        self.path = path
        self.mode = mode
        self._access = FileAccess(access)
        self._fd = fd
        self._buffer = buffer
        self._stat = stat
        self._mapping: mmap.mmap | None = None
        self._mapping_view: memoryview | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def open(cls, path, access: FileAccess = FileAccess.READ,
             mode: FileMode | str = FileMode.MMAP) -> "FileHandle":
        """Opens `path` for `access` (READ, or READ|WRITE)."""
        mode = FileMode(mode)
        path = os.fspath(path)
        access = FileAccess(access) or FileAccess.READ
        flags = os.O_RDWR if access & FileAccess.WRITE else os.O_RDONLY
        flags |= getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except OSError as error:
            raise file_error(error, f"failed to open parameter file '{path}'") from None
        try:
            stat = os.fstat(fd)
            if stat_module.S_ISDIR(stat.st_mode):  # (opening a directory read-only works)
                raise file_error(IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path),
                                 f"failed to open parameter file '{path}'")
            if not stat_module.S_ISREG(stat.st_mode):
                raise VmrtError(f"parameter file '{path}' is not a regular file",
                                StatusCode.INVALID_ARGUMENT)
            if mode is not FileMode.PRELOAD:
                return cls(kind="fd", access=access, path=path, fd=fd, stat=stat, mode=mode)
            data = _preload(fd, stat.st_size, path)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # a preloaded file is host memory: its descriptor is not kept
        view = memoryview(data) if access & FileAccess.WRITE else memoryview(data).toreadonly()
        return cls(kind="host_allocation", access=access, path=path, buffer=view, stat=stat,
                   mode=mode)

    @classmethod
    def wrap(cls, buffer, access: FileAccess | None = None, *,
             name: str | None = None) -> "FileHandle":
        """Wraps host memory (bytes, bytearray, numpy array, mmap, ...) as a file.

        Access defaults to READ, plus WRITE when the buffer is writable.
        """
        view = byte_view(buffer, what="host allocation")
        if access is None:
            access = FileAccess.READ if view.readonly else FileAccess.READ | FileAccess.WRITE
        access = FileAccess(access)
        if access & FileAccess.WRITE and view.readonly:
            raise VmrtError("cannot wrap a read-only buffer with write access",
                            StatusCode.PERMISSION_DENIED)
        if not access & FileAccess.WRITE and not view.readonly:
            view = view.toreadonly()
        return cls(kind="host_allocation", access=access, path=name, buffer=view,
                   mode=FileMode.PRELOAD)

    # -- properties ------------------------------------------------------------------------
    @property
    def access(self) -> FileAccess:
        return self._access

    @property
    def readable(self) -> bool:
        return bool(self._access & FileAccess.READ)

    @property
    def writable(self) -> bool:
        return bool(self._access & FileAccess.WRITE)

    @property
    def size(self) -> int:
        """Current size in bytes."""
        if self._buffer is not None:
            return self._buffer.nbytes
        self._check_open()
        return os.fstat(self._fd).st_size

    @property
    def mapped(self) -> bool:
        """True when reads are served from memory (a mapping or host allocation)."""
        return self._buffer is not None or self._mapping_view is not None

    @property
    def reads_from_memory(self) -> bool:
        """True when reads copy from memory: mapped already, or opened to be (MMAP)."""
        return self.mapped or self.mode is FileMode.MMAP

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def stat(self):
        return self._stat

    def __repr__(self) -> str:
        where = self.path if self.path is not None else f"<{self.size} bytes>"
        return f"FileHandle({self.kind}, {where!r}, {self._access!r})"

    # -- access -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise VmrtError(f"file handle for '{self.path}' is closed",
                            StatusCode.FAILED_PRECONDITION)

    def _check_range(self, offset: int, length: int, size: int | None = None) -> None:
        size = self.size if size is None else size
        if offset < 0 or length < 0 or offset + length > size:
            raise VmrtError(
                f"file range [{offset}, {offset + length}) out of bounds of "
                f"'{self.path or 'host allocation'}' ({size} bytes)", StatusCode.OUT_OF_RANGE)

    def contents(self) -> memoryview:
        """The whole file as one memoryview (mapping it on first use)."""
        if self._buffer is not None:
            return self._buffer
        with self._lock:
            self._check_open()
            if self._mapping_view is None:
                size = os.fstat(self._fd).st_size
                if size == 0:
                    return memoryview(b"")
                prot = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
                try:
                    self._mapping = mmap.mmap(self._fd, size, access=prot)
                except (OSError, ValueError) as error:
                    raise VmrtError(f"failed to map '{self.path}': {error}",
                                    StatusCode.UNAVAILABLE) from None
                if hasattr(self._mapping, "madvise") and hasattr(mmap, "MADV_DONTDUMP"):
                    try:
                        self._mapping.madvise(mmap.MADV_DONTDUMP)
                    except OSError:
                        pass
                self._mapping_view = memoryview(self._mapping)
            return self._mapping_view

    def view(self, offset: int = 0, length: int | None = None) -> memoryview:
        """A zero-copy view of [offset, offset+length); read-only unless writable."""
        contents = self.contents()
        if length is None:
            length = contents.nbytes - offset
        self._check_range(offset, length, contents.nbytes)
        return contents[offset:offset + length]

    def read_into(self, offset: int, target) -> int:
        """Fills `target` (a writable buffer) from the file at `offset`."""
        view = byte_view(target, writable=True, what="read target")
        spans.read_file_spans([(self, offset, view, 0, view.nbytes)])
        return view.nbytes

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """Copies [offset, offset+length) out of the file."""
        if length is None:
            length = self.size - offset
        data = bytearray(length)
        self.read_into(offset, data)
        return bytes(data)

    def write(self, offset: int, source) -> int:
        """Writes `source` at `offset`; never past the current end of file."""
        view = byte_view(source, what="write source")
        spans.write_file_spans([(self, offset, view, 0, view.nbytes)])
        return view.nbytes

    def _refresh_stat(self) -> None:
        if self._fd >= 0:
            self._stat = os.fstat(self._fd)

    def flush(self) -> None:
        if self._mapping is not None and self.writable:
            self._mapping.flush()
        if self._fd >= 0 and self.writable:
            os.fsync(self._fd)

    def trim(self) -> bool:
        """Drops the mapping if nobody holds a view of it; True if dropped.

        Views already handed out keep working (they keep the mapping alive);
        the next `view()` maps again.
        """
        with self._lock:
            if self._mapping is None:
                return False
            mapping, view = self._mapping, self._mapping_view
            self._mapping = None
            self._mapping_view = None
            if view is not None:
                try:
                    view.release()
                except BufferError:  # sub-views exported: leave them the mapping
                    return True
            try:
                mapping.close()
            except BufferError:
                pass
            return True

    def upgrade(self, access: FileAccess) -> None:
        """Reopens the file with more access (as the cache does for writers)."""
        access = FileAccess(access)
        if (self._access & access) == access:
            return
        if self.kind != "fd":
            raise VmrtError("cannot add access to a host allocation",
                            StatusCode.PERMISSION_DENIED)
        wanted = self._access | access
        flags = os.O_RDWR if wanted & FileAccess.WRITE else os.O_RDONLY
        try:
            fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            raise file_error(error, f"failed to reopen '{self.path}' for writing") from None
        with self._lock:
            old_fd, self._fd = self._fd, fd
            self._access = wanted
            # A read-only mapping cannot serve writable views; map afresh on demand.
            self._mapping = None
            self._mapping_view = None
        os.close(old_fd)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            mapping, self._mapping, self._mapping_view = self._mapping, None, None
            if mapping is not None:
                try:
                    mapping.close()
                except BufferError:
                    pass
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __del__(self):
        try:
            if not self._closed and self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        except Exception:  # interpreter teardown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _preload(fd: int, size: int, path: str) -> bytearray:
    try:
        data = bytearray(size)
    except MemoryError:
        raise VmrtError(f"cannot preload '{path}': {size} bytes do not fit in memory",
                        StatusCode.RESOURCE_EXHAUSTED) from None
    spans.pread_fully(fd, memoryview(data), 0, path)
    return data


class FileCache:
    """One shared handle per file path, kept while anyone references it."""

    def __init__(self):
        self._handles: "weakref.WeakValueDictionary[tuple, FileHandle]" = \
            weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def open(self, path, access: FileAccess = FileAccess.READ,
             mode: FileMode | str = FileMode.MMAP) -> FileHandle:
        mode = FileMode(mode)
        path = os.fspath(path)
        real = os.path.realpath(path)
        try:
            stat = os.stat(real)
        except OSError as error:
            raise file_error(error, f"failed to open parameter file '{path}'") from None
        key = (real, mode is FileMode.PRELOAD)
        with self._lock:
            handle = self._handles.get(key)
            if handle is not None and not handle._closed and _same_file(handle.stat, stat):
                if (handle.access & access) != access:
                    if handle.kind != "fd":
                        handle = None  # a preloaded copy cannot gain write access
                    else:
                        handle.upgrade(access)
                if handle is not None:
                    return handle
            handle = FileHandle.open(real, access, mode)
            handle.path = path
            self._handles[key] = handle
            return handle

    def handles(self) -> list[FileHandle]:
        return list(self._handles.values())

    def trim(self) -> None:
        for handle in self.handles():
            handle.trim()


def _same_file(a, b) -> bool:
    return (a is not None and a.st_dev == b.st_dev and a.st_ino == b.st_ino
            and a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns)


#: The process-wide cache used when none is given.
DEFAULT_FILE_CACHE = FileCache()
