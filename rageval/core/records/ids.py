"""The record ids a stream has seen, kept compactly: a 128-bit digest of each and the line it
was first seen on, in numpy arrays, then on disk.

A long stream keeps every id it has read, to refuse a duplicate; as Python strings those ids sit
scattered among the records they came with and keep the memory of records long gone from being
reused (peak memory then grows with the stream). The first :data:`MEMORY_IDS` digests are kept
in a few sorted arrays, merged like the levels of a log-structured index (each level at least
twice the next), so adding ``n`` ids costs ``O(n log n)`` and a lookup one binary search per
level; every later id is checked against them at once, and goes to a spill file on disk with its
text. The spilled ids are checked among themselves when the input ends (or before an earlier
problem is told): partitioned by digest into files small enough to sort in memory, each sorted
and scanned for equal neighbours. Memory therefore stays flat however long the stream; a
duplicate among the later ids is told at the end of the input instead of at once. Two different
ids share a 128-bit BLAKE2b digest with a probability far below any hardware error rate.
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
import tempfile
from collections.abc import Sequence
from typing import BinaryIO

import numpy as np

from rageval.core.errors import InputError


def digests(ids: Sequence[str]) -> np.ndarray:
    """The 128-bit BLAKE2b digest of each id, as an ``(n, 2)`` uint64 array."""
    raw = b"".join(hashlib.blake2b(i.encode("utf-8"), digest_size=16).digest() for i in ids)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).copy()


#: Digests kept in memory (24 bytes each); later ones are spilled to disk.
MEMORY_IDS = 1 << 17
#: Spilled ids sorted in memory at once by the final check (32 bytes each).
BUCKET_IDS = 1 << 18
# A spilled id: its digest, its line and where its text is in the names file.
_SPILLED = np.dtype([("high", "<u8"), ("low", "<u8"), ("line", "<i8"), ("name", "<i8")])


class SeenIds:
    """The ids seen so far (their digests), with the line each was first seen on."""

    def __init__(self) -> None:
        # Levels of (digests sorted by their first half, lines), largest first.
        self._levels: list[tuple[np.ndarray, np.ndarray]] = []
        self._kept = 0
        self._spill: SpilledIds | None = None

    def __len__(self) -> int:
        return self._kept + (self._spill.count if self._spill is not None else 0)

    def first_lines(self, keys: np.ndarray) -> np.ndarray:
        """For each digest, the line it was first seen on among the ids kept in memory, or 0
        when none of them has it (the spilled ones are checked by :meth:`spilled_clash`)."""
        found = np.zeros(len(keys), dtype=np.int64)
        for level, lines in self._levels:
            at = np.minimum(np.searchsorted(level[:, 0], keys[:, 0]), len(level) - 1)
            first_half = level[at, 0] == keys[:, 0]
            whole = first_half & (level[at, 1] == keys[:, 1])
            found[whole] = lines[at[whole]]
            # Rarely two ids share a first half: look at every entry with this one.
            for i in np.flatnonzero(first_half & ~whole):
                j = at[i] + 1
                while j < len(level) and level[j, 0] == keys[i, 0]:
                    if level[j, 1] == keys[i, 1]:
                        found[i] = lines[j]
                        break
                    j += 1
        return found

    def add(self, keys: np.ndarray, lines: np.ndarray,
            names: Sequence[str] | None = None) -> None:
        """Remember new digests (none of them seen before) and their lines; past
        :data:`MEMORY_IDS`, on disk with ``names`` (the ids' text, for the message)."""
        if not len(keys):
            return
        lines = np.asarray(lines, dtype=np.int64)
        room = max(0, MEMORY_IDS - self._kept)
        if room < len(keys):
            text = list(names) if names is not None else [""] * len(keys)
            self.spill(keys[room:], lines[room:], text[room:])
            keys, lines = keys[:room], lines[:room]
            if not len(keys):
                return
        self._kept += len(keys)
        level = self._sorted(keys, lines)
        while self._levels and len(self._levels[-1][0]) <= 2 * len(level[0]):
            below = self._levels.pop()
            level = self._sorted(np.concatenate([below[0], level[0]]),
                                 np.concatenate([below[1], level[1]]))
        self._levels.append(level)

    @property
    def spilled(self) -> bool:
        """Whether some ids are on disk."""
        return self._spill is not None

    def spill(self, keys: np.ndarray, lines: np.ndarray, names: Sequence[str]) -> None:
        """Put ids on disk whatever the memory's room (for :meth:`spilled_clash`)."""
        if self._spill is None:
            self._spill = SpilledIds()
        self._spill.add(keys, lines, names)

    def spilled_clash(self) -> tuple[int, str, int] | None:
        """Among the ids on disk, the first used twice by line: (line, id, first line)."""
        return self._spill.first_clash() if self._spill is not None else None

    def close(self) -> None:
        """Remove the spill files."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    @staticmethod
    def _sorted(keys: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(keys[:, 0], kind="stable")
        return keys[order], lines[order]


class SpilledIds:
    """Ids on disk: their digests and lines in one file, their text in another."""

    def __init__(self) -> None:
        # Open for as long as the stream is read; closed by close() (and nameless on disk,
        # so nothing is left behind by a run that dies).
        self._rows: BinaryIO = tempfile.TemporaryFile(prefix="rageval-ids-")  # noqa: SIM115
        self._names: BinaryIO = tempfile.TemporaryFile(prefix="rageval-ids-")  # noqa: SIM115
        self._names_size = 0
        self.count = 0

    def add(self, keys: np.ndarray, lines: np.ndarray, names: Sequence[str]) -> None:
        rows = np.empty(len(keys), dtype=_SPILLED)
        rows["high"], rows["low"], rows["line"] = keys[:, 0], keys[:, 1], lines
        encoded = [n.encode("utf-8") for n in names]
        sizes = np.array([4 + len(e) for e in encoded], dtype=np.int64)
        rows["name"] = self._names_size + np.cumsum(sizes) - sizes
        self._names.write(b"".join(struct.pack("<I", len(e)) + e for e in encoded))
        self._names_size += int(sizes.sum())
        self._rows.write(rows.tobytes())
        self.count += len(rows)

    def first_clash(self) -> tuple[int, str, int] | None:
        """The first id used twice by line, partitioned by digest into buckets that are
        sorted one at a time."""
        self._rows.flush()
        buckets = max(1, -(-self.count // BUCKET_IDS))
        if buckets == 1:
            self._rows.seek(0)
            found = _first_clash(np.fromfile(self._rows, dtype=_SPILLED, count=self.count))
        else:
            found = self._bucketed_clash(buckets)
        if found is None:
            return None
        line, name, first = found
        return line, self._name(name), first

    def _bucketed_clash(self, buckets: int) -> tuple[int, int, int] | None:
        with contextlib.ExitStack() as stack:
            files = [stack.enter_context(tempfile.TemporaryFile(prefix="rageval-ids-"))
                     for _ in range(buckets)]
            self._rows.seek(0)
            for start in range(0, self.count, BUCKET_IDS):
                rows = np.fromfile(self._rows, dtype=_SPILLED,
                                   count=min(BUCKET_IDS, self.count - start))
                # The top 32 bits of a digest, scaled to a bucket: uniform over buckets.
                which = ((rows["high"] >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)
                order = np.argsort(which, kind="stable")
                ends = np.searchsorted(which[order], np.arange(1, buckets + 1))
                for bucket, part in zip(files, np.split(rows[order], ends[:-1]), strict=True):
                    bucket.write(part.tobytes())
            clashes = []
            for bucket in files:
                bucket.seek(0)
                clash = _first_clash(np.fromfile(bucket, dtype=_SPILLED))
                if clash is not None:
                    clashes.append(clash)
            return min(clashes) if clashes else None

    def _name(self, offset: int) -> str:
        self._names.flush()
        self._names.seek(offset)
        (size,) = struct.unpack("<I", self._names.read(4))
        name = self._names.read(size).decode("utf-8")
        self._names.seek(0, 2)  # back to the end, where the next names are written
        return name

    def close(self) -> None:
        self._rows.close()
        self._names.close()


def _first_clash(rows: np.ndarray) -> tuple[int, int, int] | None:
    """Of spilled rows, the first second use by line: (its line, its name offset, the first
    use's line)."""
    if len(rows) < 2:
        return None
    rows = rows[np.lexsort((rows["line"], rows["low"], rows["high"]))]
    same = (rows["high"][1:] == rows["high"][:-1]) & (rows["low"][1:] == rows["low"][:-1])
    # The second use of a digest follows its first; a third follows the second.
    second = np.flatnonzero(same & ~np.r_[False, same[:-1]]) + 1
    if not len(second):
        return None
    at = second[np.argmin(rows["line"][second])]
    return int(rows["line"][at]), int(rows["name"][at]), int(rows["line"][at - 1])


# How many ids are checked against earlier ones at once (and kept as strings meanwhile).
ID_CHUNK = 4096


class IdCheck:
    """The duplicate-id check of one stream: the current chunk's ids as strings, every
    earlier id as a digest."""

    def __init__(self, source: str, unit: str) -> None:
        self.source, self.unit = source, unit
        self.seen = SeenIds()
        self.chunk: dict[str, int] = {}  # id -> line, in this chunk
        self.count = 0

    def add(self, record_id: str, line: int) -> None:
        first = self.chunk.setdefault(record_id, line)
        if first != line:  # the chunk's earlier ids may clash with older ones first
            self._check(self._keys(), (line, record_id, first))
        self.count += 1
        if len(self.chunk) >= ID_CHUNK:
            self.flush()

    def flush(self) -> None:
        """Check the chunk's ids against every earlier one kept in memory, then keep them
        as digests (past the memory's share, on disk: see :meth:`finish`)."""
        if not self.chunk:
            return
        keys = self._keys()
        self._check(keys, None)
        self.seen.add(keys, np.fromiter(self.chunk.values(), dtype=np.int64), list(self.chunk))
        self.chunk = {}

    def finish(self) -> None:
        """Check every id: the chunk's, then the spilled ones among themselves. Called at the
        end of the stream, and before a problem later in it is told."""
        try:
            self.flush()
            clash = self.seen.spilled_clash()
            if clash is not None:
                self._refuse(*clash)
        finally:
            self.seen.close()

    def _keys(self) -> np.ndarray:
        return digests(list(self.chunk))

    def _check(self, keys: np.ndarray, clash: tuple[int, str, int] | None) -> None:
        """Raise for the first clash by line: a chunk id seen in an earlier chunk, or
        ``clash`` (line, id, first line), one found within the chunk. With ids on disk, an
        earlier clash among them (or of a chunk id with one of them) comes first."""
        earlier = self.seen.first_lines(keys)
        clashes = [(line, record_id, int(first)) for (record_id, line), first
                   in zip(self.chunk.items(), earlier, strict=True) if first]
        if clash is not None:
            before = int(self.seen.first_lines(digests([clash[1]]))[0])
            clashes.append((clash[0], clash[1], before or clash[2]))
        if clashes and self.seen.spilled:
            fresh = earlier == 0
            self.seen.spill(keys[fresh], np.fromiter(self.chunk.values(), dtype=np.int64)[fresh],
                            [i for i, f in zip(self.chunk, fresh, strict=True) if f])
            spilled = self.seen.spilled_clash()
            if spilled is not None:
                clashes.append(spilled)
        if clashes:
            self._refuse(*min(clashes))

    def _refuse(self, line: int, record_id: str, first: int) -> None:
        raise InputError(
            f"duplicate record id {record_id!r} (first used at {self.unit} {first})",
            path=self.source,
            line=line,
            field="id",
        )
