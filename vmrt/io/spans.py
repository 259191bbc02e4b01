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


def read_file_spans(ops) -> None:
    """Copies file ranges into caller buffers."""
    ops = list(ops)
    for handle, file_offset, target, target_offset, length in ops:
        _bounds("read target", target.nbytes, target_offset, length)
    for handle, file_offset, target, target_offset, length in ops:
        if not length:
            continue
        dst = target[target_offset:target_offset + length]
        if handle.reads_from_memory:
            dst[:] = handle.view(file_offset, length)
            continue
        handle._check_range(file_offset, length)
        done = 0
        while done < length:
            n = _preadv(handle, dst[done:done + _MAX_IO], file_offset + done)
            if n <= 0:
                raise VmrtError(
                    f"unexpected end of file reading '{handle.path}' at offset "
                    f"{file_offset + done} (file truncated?)", StatusCode.DATA_LOSS)
            done += n


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
        _pwrite_fully(handle.fd, src, file_offset)
        touched[id(handle)] = handle
    for handle in touched.values():
        handle._refresh_stat()  # our own writes do not make the cached handle stale


def fill_spans(ops) -> None:
    """Fills buffer ranges with a repeating pattern.

    `phase` is the offset into the pattern of the first byte written (the
    parameter offset of the span, for a splat parameter read from its middle).
    """
    ops = list(ops)
    for target, target_offset, length, pattern, phase in ops:
        _bounds("fill target", target.nbytes, target_offset, length)
    for target, target_offset, length, pattern, phase in ops:
        if not length:
            continue
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
            _pwrite_fully(fd, memoryview(chunk)[:n], fd_offset + done)
            done += n
        return
    handle = entry.file
    handle._check_range(entry.offset, length)
    if handle.reads_from_memory:
        source = handle.view(entry.offset, length)
        for start in range(0, length, _MAX_IO):
            _pwrite_fully(fd, source[start:start + _MAX_IO], fd_offset + start)
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
        _pwrite_fully(fd, view, fd_offset + done)
        done += n


def _preadv(handle, target: memoryview, offset: int) -> int:
    try:
        return os.preadv(handle.fd, [target], offset)
    except OSError as error:
        raise file_error(error, f"failed to read '{handle.path}' at offset {offset}") \
            from None


def _pwrite_fully(fd: int, data: memoryview, offset: int) -> None:
    """Writes all of `data` at `offset`; a full disk is RESOURCE_EXHAUSTED and any
    other failure a VmrtError too (vmrt.errors.file_error)."""
    done = 0
    total = data.nbytes
    while done < total:
        try:
            n = os.pwritev(fd, [data[done:]], offset + done)
        except OSError as error:
                raise file_error(error, f"failed to write {total - done} bytes at offset "
                                         f"{offset + done}") from None
        if n <= 0:
            raise VmrtError(f"short write at offset {offset + done}", StatusCode.DATA_LOSS)
        done += n
