"""Byte movement between parameter storage and caller buffers: the one place it happens.

Providers, file handles and archive writers resolve and validate their spans
first and then hand the whole batch here, so the copies can later move to a
batched C routine without touching any caller. Every function takes a list of
plain tuples and performs no validation beyond a final bounds check.

- read_file_spans:  (handle, file_offset, target_view, target_offset, length)
- write_file_spans: (handle, file_offset, source_view, source_offset, length)
- fill_spans:       (target_view, target_offset, length, pattern, phase)

Reads come from the file's mapping when it is (or may be) mapped, else from
os.preadv; writes to files always use os.pwritev (coherent with shared
mappings), writes to host allocations are memoryview copies.
"""

from __future__ import annotations

import os

from vmrt import memory
from vmrt.errors import StatusCode, VmrtError, file_error

#: Largest single pread/pwrite issued (Linux caps one call at ~2 GiB anyway).
_MAX_IO = 1 << 30


def _bounds(what: str, size: int, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset + length > size:
        raise VmrtError(f"{what} range [{offset}, {offset + length}) out of bounds of "
                        f"{size} bytes", StatusCode.OUT_OF_RANGE)


def _in_bounds(ops, what: str, view: int) -> list:
    """The ops that move bytes, once every op's range of its buffer (op[view], from
    offset op[view + 1], op[view + 2] bytes) is checked."""
    ops = list(ops)
    for op in ops:
        _bounds(what, op[view].nbytes, op[view + 1], op[view + 2])
    return [op for op in ops if op[view + 2]]


def read_file_spans(ops) -> None:
    """Copies file ranges into caller buffers."""
    for handle, file_offset, target, target_offset, length in _in_bounds(ops, "read target", 2):
        dst = target[target_offset:target_offset + length]
        if handle.reads_from_memory:
            dst[:] = handle.view(file_offset, length)
            continue
        handle._check_range(file_offset, length)
        pread_fully(handle.fd, dst, file_offset, handle.path)


def write_file_spans(ops) -> None:
    """Copies caller buffers into file ranges; checks every op before writing any."""
    ops = list(ops)
    for handle, file_offset, source, source_offset, length in ops:
        if not handle.writable:
            raise VmrtError(f"'{handle.path or 'host allocation'}' is not writable",
                            StatusCode.PERMISSION_DENIED)
        _bounds("write source", source.nbytes, source_offset, length)
        handle._check_range(file_offset, length)
    touched = {}
    for handle, file_offset, source, source_offset, length in ops:
        if not length:
            continue
        src = source[source_offset:source_offset + length]
        if handle.kind == "host_allocation":
            handle.contents()[file_offset:file_offset + length] = src
            continue
        pwrite_fully(handle.fd, src, file_offset)
        touched[id(handle)] = handle
    for handle in touched.values():
        handle._refresh_stat()  # our own writes do not make the cached handle stale


def fill_spans(ops) -> None:
    """Fills buffer ranges with a repeating pattern.

    `phase` is the offset into the pattern of the first byte written (the
    parameter offset of the span, for a splat parameter read from its middle).
    """
    for target, target_offset, length, pattern, phase in _in_bounds(ops, "fill target", 0):
        phase %= len(pattern)
        rotated = bytes(pattern[phase:]) + bytes(pattern[:phase])
        whole = length - length % len(rotated)
        if whole:
            memory.fill_pattern(target, target_offset, whole, rotated)
        if whole != length:
            target[target_offset + whole:target_offset + length] = rotated[:length - whole]


def copy_to_fd(fd: int, fd_offset: int, entry, chunk_size: int = 16 << 20) -> None:
    """Writes all of `entry` (a file span or a splat) to `fd` at `fd_offset`.

    Mapped sources are written straight from the mapping; open files use
    os.copy_file_range where the kernel allows it, else a bounce buffer.
    """
    length = entry.length
    if not length:
        return
    if entry.pattern is not None:
        # A chunk that is a whole number of patterns, reused for every write.
        unit = len(entry.pattern)
        chunk_len = max(unit, min(chunk_size, length) // unit * unit)
        chunk = bytearray(chunk_len)
        fill_spans([(memoryview(chunk), 0, chunk_len, entry.pattern, 0)])
        done = 0
        while done < length:
            n = min(chunk_len, length - done)
            pwrite_fully(fd, memoryview(chunk)[:n], fd_offset + done)
            done += n
        return
    handle = entry.file
    handle._check_range(entry.offset, length)
    if handle.reads_from_memory:
        source = handle.view(entry.offset, length)
        for start in range(0, length, _MAX_IO):
            pwrite_fully(fd, source[start:start + _MAX_IO], fd_offset + start)
        return
    done = 0
    copy_range = getattr(os, "copy_file_range", None)
    while copy_range is not None and done < length:
        try:
            n = copy_range(handle.fd, fd, min(length - done, _MAX_IO),
                           entry.offset + done, fd_offset + done)
        except OSError:
            break
        if n <= 0:
            break
        done += n
    bounce = bytearray(min(chunk_size, length - done)) if done < length else None
    while done < length:
        n = min(len(bounce), length - done)
        view = memoryview(bounce)[:n]
        read_file_spans([(handle, entry.offset + done, view, 0, n)])
        pwrite_fully(fd, view, fd_offset + done)
        done += n


# (failure of the call, end of file or short count) messages, by direction.
_READ_FAILURES = ("failed to read '{path}' at offset {offset}",
                  "unexpected end of file reading '{path}' at offset {offset} (file truncated?)")
_WRITE_FAILURES = ("failed to write {remaining} bytes at offset {offset}",
                   "short write at offset {offset}")


def _move_fully(call, fd: int, view: memoryview, offset: int, failures, path=None) -> None:
    """All of `view` moved by call(fd, [chunk], file offset) (os.preadv or os.pwritev)
    in chunks of at most _MAX_IO; a failed call is a VmrtError (vmrt.errors.file_error:
    a full disk is RESOURCE_EXHAUSTED), a call that moves nothing DATA_LOSS."""
    done = 0
    total = view.nbytes
    while done < total:
        where = {"path": path, "offset": offset + done, "remaining": total - done}
        try:
            n = call(fd, [view[done:done + _MAX_IO]], offset + done)
        except OSError as error:
            raise file_error(error, failures[0].format(**where)) from None
        if n <= 0:
            raise VmrtError(failures[1].format(**where), StatusCode.DATA_LOSS)
        done += n


def pread_fully(fd: int, target: memoryview, offset: int, path: str | None) -> None:
    """Fills all of `target` from file `fd` (named `path` in errors) at `offset`."""
    _move_fully(os.preadv, fd, target, offset, _READ_FAILURES, path)


def pwrite_fully(fd: int, data: memoryview, offset: int) -> None:
    """Writes all of `data` to file `fd` at `offset`."""
    _move_fully(os.pwritev, fd, data, offset, _WRITE_FAILURES)
