"""Columns that grow batch by batch, stored in large chunks.

A long run keeps every record's values for the summary's bootstrap. Kept as one small array
per batch (and per output), they are thousands of small heap blocks and Python objects living
among the memory each window reads and frees; in chunks of a couple of megabytes they are a few
blocks the allocator maps on their own, and they are contiguous (a view of the first chunk
serves a run that fits in one).
"""

from __future__ import annotations

import numpy as np

# Bytes per chunk: above the allocator's threshold for mapping blocks on their own.
CHUNK_BYTES = 1 << 21


class GrowingColumn:
    """Rows of one dtype and width (a 1-D column when ``width`` is None), appended in batches."""

    def __init__(self, dtype: np.dtype | type, width: int | None = None,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        self.dtype = np.dtype(dtype)
        self.width = width
        row_bytes = self.dtype.itemsize * (width or 1)
        self._chunk_rows = max(1, chunk_bytes // row_bytes)
        self._chunks: list[np.ndarray] = []
        self._used = 0  # rows filled in the last chunk

    def _new_chunk(self) -> np.ndarray:
        shape = (self._chunk_rows,) if self.width is None else (self._chunk_rows, self.width)
        return np.empty(shape, dtype=self.dtype)

    def append(self, rows: np.ndarray) -> None:
        """Copy ``rows`` (their length, then width if any, must match) to the end."""
        rows = np.asarray(rows, dtype=self.dtype)
        start = 0
        while start < len(rows):
            if not self._chunks or self._used == self._chunk_rows:
                self._chunks.append(self._new_chunk())
                self._used = 0
            take = min(len(rows) - start, self._chunk_rows - self._used)
            self._chunks[-1][self._used : self._used + take] = rows[start : start + take]
            self._used += take
            start += take

    def copy(self) -> GrowingColumn:
        """An independent column holding the same rows."""
        twin = GrowingColumn(self.dtype, self.width, self._chunk_rows * self.dtype.itemsize
                             * (self.width or 1))
        twin._chunks = [chunk.copy() for chunk in self._chunks]
        twin._used = self._used
        return twin

    def array(self) -> np.ndarray:
        """Every row, as one array; the column is emptied (a single chunk is handed over as
        it is; several are joined, held twice only while they are)."""
        filled = [*self._chunks[:-1], self._chunks[-1][: self._used]] if self._chunks else []
        self._chunks, self._used = [], 0
        if len(filled) == 1:
            return filled[0]
        if not filled:
            shape = (0,) if self.width is None else (0, self.width)
            return np.empty(shape, dtype=self.dtype)
        return np.concatenate(filled)
