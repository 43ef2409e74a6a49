"""A run file read a slice at a time, each slice holding whole topics.

trec_eval's per-topic values are independent of each other, so a run written topic by topic
(as trec_eval's users and most systems write them) can be evaluated a few topics at a time and
never be resident as a whole: memory stays bounded whatever the file's size. Slices of about
``chunk_bytes`` are cut at line ends and parsed as the columnar fast path parses a file
(:func:`~rageval.retrieval.trec.fast_read.run_slice`); the rows of a slice's last topic wait for
the next slice, where that topic may go on. A slice is parsed in a worker thread while the
caller evaluates the previous one (polars parses without holding the GIL).

Whatever the fast path would leave to the exact parser (odd whitespace, comment lines, missing
fields, unreadable numbers), and a topic met again after other topics, raise
:class:`NotStreamable`: the caller then reads the whole file with the usual readers, which
decide it exactly (and report its errors).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO, TypeVar

import numpy as np
import polars as pl

from rageval.retrieval.trec.fast_read import (
    SliceFacts,
    guess_separator,
    run_slice,
    slice_byte_facts,
)
from rageval.retrieval.trec.frames import QidLayout, Run, qid_layout_of

__all__ = ["DEFAULT_CHUNK_BYTES", "NotStreamable", "RunSlices"]

# Big enough that per-slice overheads vanish, small enough to keep memory low.
DEFAULT_CHUNK_BYTES = 1 << 24
# The first slice's size, at most: the sooner it is read, the sooner parsing begins.
_FIRST_BYTES = 1 << 22
# Slices read and checked, and slices parsed, ahead of the one in use (each a slice's memory).
_READ_AHEAD = 1
_PARSE_AHEAD = 3

# A slice read, and what slice_byte_facts says of it; a slice parsed, and its last runid.
_Checked = tuple[bytes, SliceFacts]
_Parsed = tuple[pl.DataFrame, str]
_T = TypeVar("_T")


class NotStreamable(Exception):
    """The run cannot be read slice by slice: read the whole file instead."""


class RunSlices:
    """The slices of a run file: iterate for :class:`Run` objects of whole topics (file order,
    no topic in two of them); afterwards :attr:`names` holds every distinct qid of the file and
    :attr:`runid` the runid of its last line."""

    def __init__(self, path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be positive")
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.names: set[str] = set()
        self.runid = ""

        # A pipeline of two worker threads: one reads slices and checks their bytes, the other
        # parses them; the caller cuts them into topics and ranks them meanwhile (it would
        # wait for the parser otherwise).
        self._reader: ThreadPoolExecutor | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._cutter: _TopicCutter | None = None

    def start(self) -> None:
        """Begin reading the first slice in a worker thread, so that the caller can read the
        qrels meanwhile; iterating starts it otherwise. Iterate, or :meth:`close`."""
        if self._pool is not None:
            return
        sep = guess_separator(self.path)
        if sep is None:
            raise NotStreamable("no single-character separator")
        self._reader = ThreadPoolExecutor(max_workers=1)
        slices = _byte_slices(self.path, self.chunk_bytes)

        def read_next() -> _Checked | None:
            data = next(slices, None)
            return None if data is None else (data, slice_byte_facts(data, sep))

        checked = _prefetched(self._reader, read_next, _READ_AHEAD)

        def parse_next() -> _Parsed | None:
            item = next(checked, None)
            return None if item is None else _parsed(*item, sep)

        self._pool = ThreadPoolExecutor(max_workers=1)
        # Parsing starts at once too: the caller has modules to load and the qrels to read
        # first, a few slices' parsing time.
        self._cutter = _TopicCutter(self, _prefetched(self._pool, parse_next, _PARSE_AHEAD))

    def close(self) -> None:
        """Stop reading (after the slices under way) and end the worker threads."""
        for pool in (self._pool, self._reader):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._reader = self._pool = self._cutter = None  # iterating again starts afresh

    def __iter__(self) -> Iterator[Run]:
        self.start()
        assert self._cutter is not None
        try:
            while (run := self._cutter.next_run()) is not None:
                yield run
        finally:
            self.close()


def _parsed(data: bytes, byte_facts: SliceFacts, sep: str) -> _Parsed:
    """A slice parsed (see run_slice)."""
    parsed = run_slice(data, sep, byte_facts)
    if parsed is None:
        raise NotStreamable("the fast path refuses a slice")
    return parsed


class _TopicCutter:
    """Turns the parsed slices into Runs of whole topics, one call at a time."""

    def __init__(self, owner: RunSlices, slices: Iterator[_Parsed]) -> None:
        self.owner = owner
        self.slices = slices
        self.done: set[str] = set()  # topics already handed out: they must not come back
        self.carry: pl.DataFrame | None = None  # the last topic read, which may go on

    def next_run(self) -> Run | None:
        """The next Run of whole topics, or None at the end of the file."""
        for frame, runid in self.slices:
            if frame.height == 0:
                continue
            self.owner.runid = runid
            if self.carry is not None:
                frame = pl.concat([self.carry, frame], rechunk=False)
            ready = self._split(frame)
            if ready is not None:
                return ready
        if self.carry is None:
            return None
        last, self.carry = self.carry, None
        return Run(last, "", self.owner.path)

    def _split(self, frame: pl.DataFrame) -> Run | None:
        """The whole topics of ``frame`` as a Run (None if it has one topic only); the rows
        of its last topic are held back: the next slice may go on with that topic."""
        layout = qid_layout_of(frame.get_column("qid"))
        if any(n.startswith("#") for n in layout.names):
            raise NotStreamable("a comment line")  # the whole-file readers skip it
        if not self.done.isdisjoint(layout.names):
            raise NotStreamable("a topic met again after other topics")
        self.owner.names.update(layout.names)
        if len(layout.names) == 1:
            self.carry = frame
            return None
        tail = _last_block_start(layout)
        path = self.owner.path
        if tail is None:  # the last topic also has rows before other topics' rows
            is_last = frame.get_column("qid") == frame.get_column("qid")[-1]
            ready = Run(frame.filter(~is_last), "", path)
            self.carry = frame.filter(is_last)
        else:  # the blocks before the last: their layout is known already
            ready = Run(frame.slice(0, tail), "", path,
                        _cache={"qids": _without_last_block(layout)})
            self.carry = frame.slice(tail)
        self.done.update(ready.qid_layout().names)
        return ready


def _last_block_start(layout: QidLayout) -> int | None:
    """First row of the final block of equal qids, when that qid has no other block."""
    if layout.starts is None:
        return None
    assert layout.block_name is not None
    if np.count_nonzero(layout.block_name == layout.block_name[-1]) != 1:
        return None
    return int(layout.starts[-1])


def _without_last_block(layout: QidLayout) -> QidLayout:
    """The layout of the rows before the last block, whose qid has no other block."""
    assert layout.starts is not None and layout.block_name is not None
    last = int(layout.block_name[-1])
    block_name = layout.block_name[:-1]
    return QidLayout(layout.names[:last] + layout.names[last + 1:], starts=layout.starts[:-1],
                     block_name=block_name - (block_name > last))


def _prefetched(pool: ThreadPoolExecutor, produce: Callable[[], _T | None],
                ahead: int) -> Iterator[_T]:
    """What ``produce`` returns until None, called in ``pool`` (one worker: the calls run in
    order) from now on, up to ``ahead`` calls beyond the item in use."""
    pending = deque(pool.submit(produce) for _ in range(ahead + 1))
    return _in_turn(pool, produce, pending)


def _in_turn(pool: ThreadPoolExecutor, produce: Callable[[], _T | None],
             pending: deque[Future[_T | None]]) -> Iterator[_T]:
    while True:
        item = pending.popleft().result()
        if item is None:
            return
        yield item
        pending.append(pool.submit(produce))


def _byte_slices(path: str, chunk_bytes: int) -> Iterator[bytes]:
    """The file in slices of whole lines (the last may lack its line end), each about
    ``chunk_bytes`` long, the first shorter; a line longer than that makes a longer slice."""
    with open(path, "rb") as fh:
        offset = 0
        size = min(chunk_bytes, _FIRST_BYTES)  # parsing begins once it is read and checked
        while True:
            end = _slice_end(fh, offset, size)
            if end is None:  # no line end in the last bytes: read the slice to find one
                fh.seek(offset)
                data = _whole_lines(fh, size)
            else:  # the slice itself, read once (slicing a read copies it again)
                data = os.pread(fh.fileno(), end - offset, offset)
            if not data:
                return
            offset += len(data)
            size = chunk_bytes
            yield data


# How far back from a slice's end its last line end is looked for, before reading it all.
_TAIL_BYTES = 1 << 16


def _slice_end(fh: BinaryIO, offset: int, chunk_bytes: int) -> int | None:
    """Where the slice starting at ``offset`` ends: after the last line end among its last
    bytes, or at the end of the file; None when those bytes hold no line end."""
    size = os.fstat(fh.fileno()).st_size
    end = offset + chunk_bytes
    if end >= size:
        return size
    tail = min(_TAIL_BYTES, chunk_bytes)
    last = os.pread(fh.fileno(), tail, end - tail).rfind(b"\n")
    return None if last < 0 else end - tail + last + 1


def _whole_lines(fh: BinaryIO, chunk_bytes: int) -> bytes:
    """From the file's position: ``chunk_bytes`` cut after their last line end, or, without
    one, read on to the next line end (or the end of the file)."""
    data = fh.read(chunk_bytes)
    cut = data.rfind(b"\n") + 1
    while cut == 0 and (more := fh.read(chunk_bytes)):  # a long line: read on
        data += more
        cut = data.rfind(b"\n") + 1
    return data[:cut] if 0 < cut < len(data) else data
