"""Transfer plans: the one scheduling path of parameter loads, gathers and scatters.

A provider resolves and checks every span of an operation first and then
describes the work as a `TransferPlan`: byte moves between parameter storage
(file ranges, splat patterns) and host buffers called slots (the gather
target, the scatter source, or one buffer per loaded span). The plan sorts its
moves by file offset, merges moves adjacent in both file and buffer, and
splits them into at most N batches of about equal size whose bytes do not
overlap, which `run` executes concurrently (io_parameters runs a plan as one
queue operation ordered by its fences). Bytes move in C (vmrt.memory.copy_spans)
from a file's mapping or a host allocation, or with os.preadv/os.pwritev for
files opened in FILE mode; every one of those releases the GIL.
"""

from __future__ import annotations

import concurrent.futures
import functools
import mmap
import operator
import threading
from array import array
from typing import Callable, NamedTuple, Sequence

from vmrt import memory, timeline
from vmrt.errors import StatusCode, VmrtError, run_with
from vmrt.io import spans as span_io
from vmrt.io.file import FileHandle

#: Upstream's IREE_IO_PARAMETER_OP_BATCH_MAX_CONCURRENCY: the most timelines one operation uses.
MAX_CONCURRENCY = 8
#: A batch carries at least this many bytes: below it a second timeline costs more than it saves.
MIN_BATCH_BYTES = 4 << 20
#: Host buffers at least this large are anonymous mappings on huge pages (see host_memory).
POPULATED_ALLOCATION_BYTES = 2 << 20

READ = "read"     # storage -> slots (load, gather)
WRITE = "write"   # slots -> storage (scatter)


class Move(NamedTuple):
    """`length` bytes between `handle` at `file_offset` and slot `slot` at `buffer_offset`.

    A splat move has no handle: it fills the slot with `pattern`, starting
    `phase` bytes into the pattern.
    """

    handle: FileHandle | None
    file_offset: int
    slot: int
    buffer_offset: int
    length: int
    pattern: bytes | None = None
    phase: int = 0


#: Move(*fields) from a tuple of all seven fields, made in C: a NamedTuple's own
#: constructor is a Python function, and a model's parameter load makes hundreds.
make_move = functools.partial(tuple.__new__, Move)


class HostCall(NamedTuple):
    """Work a provider does itself: `run(views)` moves `nbytes` bytes."""

    run: Callable[[Sequence], None]
    nbytes: int


class TransferBatch:
    """Moves that run together, in file order, on one timeline."""

    __slots__ = ("direction", "moves", "calls", "nbytes")

    def __init__(self, direction: str, moves: list[Move], calls: list[HostCall]):
        self.direction = direction
        self.moves = moves
        self.calls = calls
        self.nbytes = sum(m.length for m in moves) + sum(c.nbytes for c in calls)

    def __repr__(self) -> str:
        return f"<TransferBatch {self.direction} {len(self.moves)} moves {self.nbytes} bytes>"

    def run(self, views: Sequence) -> None:
        """Moves this batch's bytes between storage and `views` (memoryviews by slot)."""
        tracer = timeline.active
        if tracer is not None:  # a span on the thread moving the bytes (vmrt.timeline)
            tracer.call(f"io.{self.direction}", "io", self._move, views,
                        args={"bytes": self.nbytes, "moves": len(self.moves)})
            return
        self._move(views)

    def _move(self, views: Sequence) -> None:
        for call in self.calls:
            call.run(views)
        if self.direction == READ:
            _run_reads(self.moves, views)
        else:
            _run_writes(self.moves, views)


class TransferPlan:
    """Checked, sorted and coalesced moves of one parameter operation.

    `flush` (scatters) syncs every written file to disk after the last batch.
    """

    __slots__ = ("direction", "moves", "calls", "flush")

    def __init__(self, direction: str, moves: Sequence[Move] = (),
                 calls: Sequence[HostCall] = (), *, flush: bool = False):
        self.direction = direction
        self.moves = coalesce(moves)
        self.calls = list(calls)
        self.flush = flush

    @classmethod
    def host_call(cls, direction: str, run: Callable[[Sequence], None],
                  nbytes: int) -> "TransferPlan":
        """A plan of one opaque piece of work (for providers that move bytes themselves)."""
        return cls(direction, calls=[HostCall(run, nbytes)])

    @property
    def nbytes(self) -> int:
        return sum(m.length for m in self.moves) + sum(c.nbytes for c in self.calls)

    def __repr__(self) -> str:
        return (f"<TransferPlan {self.direction} {len(self.moves)} moves "
                f"{len(self.calls)} calls {self.nbytes} bytes>")

    def batches(self, max_concurrency: int = MAX_CONCURRENCY) -> list[TransferBatch]:
        """At most `max_concurrency` batches of about equal bytes (none empty).

        Each batch takes a contiguous run of the file-ordered moves, so every
        timeline reads or writes sequentially; a move larger than a batch's
        share is split. Host calls go to the first batch.
        """
        concurrency = max(1, min(int(max_concurrency), MAX_CONCURRENCY))
        total = sum(m.length for m in self.moves)
        count = max(1, min(concurrency, -(-total // MIN_BATCH_BYTES)))
        if not self.moves:
            return [TransferBatch(self.direction, [], self.calls)] if self.calls else []
        share = -(-total // count)
        groups: list[list[Move]] = [[]]
        filled = 0
        for move in self.moves:
            while filled + move.length > share and len(groups) < count:
                room = share - filled
                if room > 0:
                    groups[-1].append(_slice(move, 0, room))
                    move = _slice(move, room, move.length - room)
                groups.append([])
                filled = 0
            groups[-1].append(move)
            filled += move.length
        batches = [TransferBatch(self.direction, group, []) for group in groups if group]
        if self.calls:
            batches[0] = TransferBatch(self.direction, batches[0].moves, self.calls)
        return batches

    def run(self, views: Sequence, max_concurrency: int = 1) -> None:
        """Runs every batch, up to `max_concurrency` at once (this thread runs the
        first, a shared pool the others), then `finish`; raises the first failure."""
        batches = self.batches(max_concurrency)
        if batches:
            run_with(lambda: batches[0].run(views),
                     [_batch_pool().submit(batch.run, views) for batch in batches[1:]])
        self.finish()

    def finish(self) -> None:
        """After the last batch: flushes written files when asked to."""
        if self.direction == WRITE:
            for handle in _handles(self.moves):
                if self.flush:
                    handle.flush()
                handle._refresh_stat()  # our own writes do not make a cached handle stale


_POOL = None
_POOL_LOCK = threading.Lock()


def _batch_pool():
    """Threads for batches beyond the first (bytes move with the GIL released)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(MAX_CONCURRENCY - 1,
                                                          thread_name_prefix="vmrt-io")
        return _POOL


def _slice(move: Move, start: int, length: int) -> Move:
    phase = move.phase + start if move.pattern is not None else 0
    return move._replace(file_offset=move.file_offset + start,
                         buffer_offset=move.buffer_offset + start, length=length, phase=phase)


def _handles(moves) -> list[FileHandle]:
    seen: dict[int, FileHandle] = {}
    for move in moves:
        if move.handle is not None:
            seen.setdefault(id(move.handle), move.handle)
    return list(seen.values())


_FILE_ORDER = operator.itemgetter(1, 2, 3)  # file_offset, slot, buffer_offset


def coalesce(moves: Sequence[Move]) -> list[Move]:
    """Moves in file order, with neighbours adjacent in both file and buffer merged.

    Splats keep their given order after the file moves; empty moves are dropped.
    """
    files = [m for m in moves if m.handle is not None and m.length]
    if len({id(m.handle) for m in files}) > 1:
        files.sort(key=lambda m: (id(m.handle), m.file_offset, m.slot, m.buffer_offset))
    else:  # one file (the usual case): a C key function
        files.sort(key=_FILE_ORDER)
    merged: list[Move] = []
    first, length = None, 0  # the run being merged: its first move and total length
    for move in files:
        if (first is not None and move.handle is first.handle and move.slot == first.slot
                and first.file_offset + length == move.file_offset
                and first.buffer_offset + length == move.buffer_offset):
            length += move.length
            continue
        if first is not None:
            merged.append(first if length == first.length else first._replace(length=length))
        first, length = move, move.length
    if first is not None:
        merged.append(first if length == first.length else first._replace(length=length))
    merged.extend(m for m in moves if m.handle is None and m.length)
    return merged


def check_disjoint_writes(moves: Sequence[Move]) -> None:
    """INVALID_ARGUMENT when two writes target overlapping bytes of one file."""
    ordered = sorted((m for m in moves if m.handle is not None and m.length),
                     key=lambda m: (id(m.handle), m.file_offset))
    for before, after in zip(ordered, ordered[1:]):
        if before.handle is after.handle and \
                before.file_offset + before.length > after.file_offset:
            raise VmrtError(
                f"scatter targets overlap in '{after.handle.path or 'host allocation'}': "
                f"[{before.file_offset}, {before.file_offset + before.length}) and "
                f"[{after.file_offset}, {after.file_offset + after.length})",
                StatusCode.INVALID_ARGUMENT)


# -- moving bytes ------------------------------------------------------------------------------
def _check_file_still_covers(handle: FileHandle, moves: list[Move]) -> None:
    """DATA_LOSS (not SIGBUS) when a file shrank under its mapping since it was indexed."""
    if handle.kind == "host_allocation":
        return
    end = max(m.file_offset + m.length for m in moves)
    size = handle.size
    if end > size:
        raise VmrtError(f"parameter file '{handle.path}' is {size} bytes but parameters "
                        f"reach byte {end} (file truncated?)", StatusCode.DATA_LOSS)


def _by_handle_and_slot(moves: list[Move]) -> dict:
    groups: dict = {}
    for move in moves:
        groups.setdefault((id(move.handle), move.slot), []).append(move)
    return groups


def _run_reads(moves: list[Move], views: Sequence) -> None:
    fills = [(views[m.slot], m.buffer_offset, m.length, m.pattern, m.phase)
             for m in moves if m.handle is None]
    if fills:
        span_io.fill_spans(fills)
    for group in _by_handle_and_slot([m for m in moves if m.handle is not None]).values():
        handle = group[0].handle
        target = views[group[0].slot]
        _check_file_still_covers(handle, group)
        if handle.reads_from_memory:
            spans = array("q")
            for move in group:
                spans.extend((move.buffer_offset, move.file_offset, move.length))
            memory.copy_spans(target, handle.contents(), spans)
            continue
        for move in group:
            span_io.pread_fully(handle.fd, target[move.buffer_offset:
                                                  move.buffer_offset + move.length],
                                move.file_offset, handle.path)


def _run_writes(moves: list[Move], views: Sequence) -> None:
    for group in _by_handle_and_slot(moves).values():
        handle = group[0].handle
        source = views[group[0].slot]
        if handle.kind == "host_allocation":
            spans = array("q")
            for move in group:
                spans.extend((move.file_offset, move.buffer_offset, move.length))
            memory.copy_spans(handle.contents(), source, spans)
            continue
        _check_file_still_covers(handle, group)
        for move in group:
            span_io.pwrite_fully(handle.fd, source[move.buffer_offset:
                                                    move.buffer_offset + move.length],
                                  move.file_offset)


def host_memory(size: int):
    """Zeroed, writable host memory of `size` bytes for a loaded parameter.

    Large blocks are anonymous mappings on transparent huge pages: faulting in
    4 KiB pages one by one while copying costs more than the copy itself
    (huge pages beat pre-populated 4 KiB pages several times over, and those beat
    a bytearray; benchmarks/params_bench.py's copying loads allocate here).
    """
    if size >= POPULATED_ALLOCATION_BYTES and hasattr(mmap, "MAP_ANONYMOUS"):
        try:
            memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except OSError:
            memory = None
        if memory is not None:
            try:
                memory.madvise(mmap.MADV_HUGEPAGE)
            except (AttributeError, OSError, ValueError):
                pass  # no THP here: 4 KiB pages fault in on first write
            return memory
    try:
        return bytearray(size)
    except (MemoryError, OverflowError):
        raise VmrtError(f"cannot allocate {size} bytes for a parameter",
                        StatusCode.RESOURCE_EXHAUSTED) from None


__all__ = ["MAX_CONCURRENCY", "MIN_BATCH_BYTES", "READ", "WRITE", "Move", "HostCall",
           "TransferBatch", "TransferPlan", "coalesce", "check_disjoint_writes", "host_memory"]
