"""The record ids a stream has seen, kept compactly: 24 bytes per id in numpy arrays (a 128-bit
digest and the line it was first seen on), not a Python string per id.

A long stream keeps every id it has read, to refuse a duplicate; as Python strings those ids sit
scattered among the records they came with and keep the memory of records long gone from being
reused (peak memory then grows with the stream). Digests in a few sorted arrays do not: they are
merged like the levels of a log-structured index (each level at least twice the next), so adding
``n`` ids costs ``O(n log n)`` and a lookup one binary search per level. Two different ids share
a 128-bit BLAKE2b digest with a probability far below any hardware error rate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from rageval.core.errors import InputError


def digests(ids: Sequence[str]) -> np.ndarray:
    """The 128-bit BLAKE2b digest of each id, as an ``(n, 2)`` uint64 array."""
    raw = b"".join(hashlib.blake2b(i.encode("utf-8"), digest_size=16).digest() for i in ids)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).copy()


class SeenIds:
    """The ids seen so far (their digests), with the line each was first seen on."""

    def __init__(self) -> None:
        # Levels of (digests sorted by their first half, lines), largest first.
        self._levels: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self._levels)

    def first_lines(self, keys: np.ndarray) -> np.ndarray:
        """For each digest, the line it was first seen on, or 0 when it is new."""
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

    def add(self, keys: np.ndarray, lines: np.ndarray) -> None:
        """Remember new digests (none of them seen before) and their lines."""
        if not len(keys):
            return
        level = self._sorted(keys, np.asarray(lines, dtype=np.int64))
        while self._levels and len(self._levels[-1][0]) <= 2 * len(level[0]):
            below = self._levels.pop()
            level = self._sorted(np.concatenate([below[0], level[0]]),
                                 np.concatenate([below[1], level[1]]))
        self._levels.append(level)

    @staticmethod
    def _sorted(keys: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(keys[:, 0], kind="stable")
        return keys[order], lines[order]


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
        """Check the chunk's ids against every earlier one, then keep them as digests."""
        if not self.chunk:
            return
        keys = self._keys()
        self._check(keys, None)
        self.seen.add(keys, np.fromiter(self.chunk.values(), dtype=np.int64))
        self.chunk = {}

    def _keys(self) -> np.ndarray:
        return digests(list(self.chunk))

    def _check(self, keys: np.ndarray, clash: tuple[int, str, int] | None) -> None:
        """Raise for the first clash by line: a chunk id seen in an earlier chunk, or
        ``clash`` (line, id, first line), one found within the chunk."""
        earlier = self.seen.first_lines(keys)
        clashes = [(line, record_id, int(first)) for (record_id, line), first
                   in zip(self.chunk.items(), earlier, strict=True) if first]
        if clash is not None:
            before = int(self.seen.first_lines(digests([clash[1]]))[0])
            clashes.append((clash[0], clash[1], before or clash[2]))
        if clashes:
            self._refuse(*min(clashes))

    def _refuse(self, line: int, record_id: str, first: int) -> None:
        raise InputError(
            f"duplicate record id {record_id!r} (first used at {self.unit} {first})",
            path=self.source,
            line=line,
            field="id",
        )
