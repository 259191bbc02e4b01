"""Benchmark: reading a large IRPA archive through vmrt.io vs plain pread.

    python benchmarks/io_bench.py [--size-mib 1024] [--params 16] [--dir /tmp] [--repeat 3]

Writes an archive of PARAMS data parameters totalling SIZE MiB (random
contents, written once), then times, per pass over every parameter:

- pread:        os.preadv of each parameter's file range into one buffer
                (the floor: what the kernel costs)
- gather/mmap:  IndexProvider.gather into the same buffer (mapping copies)
- gather/file:  the same with mode="file" (pread under the hood)
- load/views:   IndexProvider.load returning zero-copy views, touching one
                byte per page so the pages are really read
- index load:   parsing the archive (ParameterIndex.load)

The page cache is warm after the first pass; pass --repeat 1 right after
dropping caches for cold numbers.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from vmrt.io import FileCache, IndexProvider, ParameterIndex


def build(path: str, size: int, count: int) -> None:
    rng = np.random.default_rng(0)
    per = size // count
    index = ParameterIndex()
    for i in range(count):
        index.add_buffer(f"param{i:03d}", rng.integers(0, 255, per, dtype=np.uint8))
    index.save(path)


def timed(label: str, fn, nbytes: int, repeat: int) -> None:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    rate = nbytes / best / (1 << 30) if nbytes else 0
    extra = f"  {rate:7.2f} GiB/s" if nbytes else ""
    print(f"{label:14s} {best * 1e3:9.1f} ms{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--params", type=int, default=16)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the archive")
    args = parser.parse_args()

    size = args.size_mib << 20
    path = os.path.join(args.dir, f"vmrt_io_bench_{args.size_mib}m.irpa")
    if not os.path.exists(path):
        start = time.perf_counter()
        build(path, size, args.params)
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    try:
        index = ParameterIndex.load(path, cache=FileCache())
        entries = list(index)
        total = sum(e.length for e in entries)
        target = bytearray(total)
        spans, position = [], 0
        for entry in entries:
            spans.append((entry.key, 0, position, entry.length))
            position += entry.length
        view = memoryview(target)

        fd = os.open(path, os.O_RDONLY)

        def plain_pread():
            at = 0
            for entry in entries:
                done = 0
                while done < entry.length:
                    done += os.preadv(fd, [view[at + done:at + entry.length]],
                                      entry.offset + done)
                at += entry.length

        mmap_provider = IndexProvider("", index)
        file_provider = IndexProvider("", ParameterIndex.load(path, mode="file",
                                                              cache=FileCache()))

        def load_views():
            for buffer in mmap_provider.load("", [(k, 0, 0, n) for k, _, _, n in spans]):
                np.frombuffer(buffer, np.uint8)[::4096].sum()

        print(f"{len(entries)} parameters, {total / (1 << 20):.0f} MiB")
        timed("pread", plain_pread, total, args.repeat)
        timed("gather/mmap", lambda: mmap_provider.gather("", target, spans), total,
              args.repeat)
        timed("gather/file", lambda: file_provider.gather("", target, spans), total,
              args.repeat)
        timed("load/views", load_views, total, args.repeat)
        timed("index load", lambda: ParameterIndex.load(path, cache=FileCache()), 0,
              args.repeat)
        os.close(fd)
    finally:
        if not args.keep and os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()
