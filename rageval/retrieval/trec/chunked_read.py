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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from rageval.retrieval.trec.fast_read import guess_separator, run_slice
from rageval.retrieval.trec.frames import QidLayout, Run, qid_layout_of

__all__ = ["DEFAULT_CHUNK_BYTES", "NotStreamable", "RunSlices"]

# Big enough that per-slice overheads vanish, small enough to keep memory low.
DEFAULT_CHUNK_BYTES = 1 << 24


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

    def __iter__(self) -> Iterator[Run]:
        sep = guess_separator(self.path)
        if sep is None:
            raise NotStreamable("no single-character separator")
        done: set[str] = set()  # topics already handed out: they must not come back
        carry: pl.DataFrame | None = None
        with ThreadPoolExecutor(max_workers=1) as pool:
            for parsed in _prefetched(pool, _byte_slices(self.path, self.chunk_bytes), sep):
                frame, runid = _result(parsed)
                if frame.height == 0:
                    continue
                self.runid = runid
                if carry is not None:
                    frame = pl.concat([carry, frame], rechunk=False)
                ready, carry = self._split(frame, done)
                if ready is not None:
                    yield ready
        if carry is not None:
            yield Run(carry, "", self.path)

    def _split(self, frame: pl.DataFrame,
               done: set[str]) -> tuple[Run | None, pl.DataFrame]:
        """The whole topics of ``frame`` as a Run (None if it has one topic only), and the rows
        of its last topic, held back: the next slice may go on with that topic."""
        layout = qid_layout_of(frame.get_column("qid"))
        if any(n.startswith("#") for n in layout.names):
            raise NotStreamable("a comment line")  # the whole-file readers skip it
        if not done.isdisjoint(layout.names):
            raise NotStreamable("a topic met again after other topics")
        self.names.update(layout.names)
        if len(layout.names) == 1:
            return None, frame
        tail = _last_block_start(layout)
        if tail is None:  # the last topic also has rows before other topics' rows
            is_last = frame.get_column("qid") == frame.get_column("qid")[-1]
            ready_run = Run(frame.filter(~is_last), "", self.path)
            carry = frame.filter(is_last)
        else:  # the blocks before the last: their layout is known already
            ready_run = Run(frame.slice(0, tail), "", self.path,
                            _cache={"qids": _without_last_block(layout)})
            carry = frame.slice(tail)
        done.update(ready_run.qid_layout().names)
        return ready_run, carry


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


def _result(parsed: tuple[pl.DataFrame, str] | None) -> tuple[pl.DataFrame, str]:
    if parsed is None:
        raise NotStreamable("the fast path refuses a slice")
    return parsed


class _End:
    """What the worker returns once the file is read."""


_END = _End()


def _parse_next(slices: Iterator[bytes], sep: str) -> tuple[pl.DataFrame, str] | _End | None:
    """The next slice read and parsed (in the worker thread: reading, too, is work the caller
    need not wait for), or _END."""
    data = next(slices, None)
    return _END if data is None else run_slice(data, sep)


def _prefetched(pool: ThreadPoolExecutor, slices: Iterator[bytes],
                sep: str) -> Iterator[tuple[pl.DataFrame, str] | None]:
    """Each slice parsed, the next one already read and parsed in ``pool`` (one worker: the
    slices are taken in order) while this one is used."""
    pending = pool.submit(_parse_next, slices, sep)
    while True:
        ahead = pool.submit(_parse_next, slices, sep)
        parsed = pending.result()
        if isinstance(parsed, _End):
            return
        yield parsed
        pending = ahead


def _byte_slices(path: str, chunk_bytes: int) -> Iterator[bytes]:
    """The file in slices of whole lines (the last may lack its line end), each about
    ``chunk_bytes`` long; a line longer than that makes a longer slice."""
    with open(path, "rb") as fh:
        while data := fh.read(chunk_bytes):
            cut = data.rfind(b"\n") + 1
            while cut == 0 and (more := fh.read(chunk_bytes)):  # a long line: read on
                data += more
                cut = data.rfind(b"\n") + 1
            if 0 < cut < len(data):
                fh.seek(cut - len(data), os.SEEK_CUR)  # the partial line starts the next slice
                data = data[:cut]
            yield data
