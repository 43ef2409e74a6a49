"""The parsed TREC files, :class:`Qrels` and :class:`Run`, and where a run's queries lie."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

# A file to read or write, as the readers and the writer take it.
PathLike = str | os.PathLike[str]

# Docnos are matched by a 64-bit hash, polars' Series.hash with this seed (the run's and the
# qrels' alike); a Qrels keeps them in its cache under DOCNO_HASHES (uint64, one per row).
DOCNO_HASH_SEED = 0x5EED
DOCNO_HASHES = "docno_hashes"


@dataclass(frozen=True)
class Qrels:
    """Relevance judgments, one row per line of the file (file order).

    ``frame`` has the columns ``qid`` (String), ``docno`` (String) and ``rel`` (Int64).
    """

    frame: pl.DataFrame
    path: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return self.frame.height

    def qids(self) -> list[str]:
        """Distinct query ids in trec_eval's order (byte-wise ``strcmp`` order). Cached: the
        ranking and trec-eval's stop checks all read it; do not modify the list."""
        if "qids" not in self._cache:
            self._cache["qids"] = sorted(self.frame.get_column("qid").unique().to_list())
        out: list[str] = self._cache["qids"]
        return out

    def qid_codes(self) -> np.ndarray:
        """int64 ``[rows]``: the index into :meth:`qids` of each judgment's query. Cached."""
        if "codes" not in self._cache:
            qids = self.frame.get_column("qid").cast(pl.Enum(self.qids()))
            self._cache["codes"] = qids.to_physical().to_numpy().astype(np.int64)
        out: np.ndarray = self._cache["codes"]
        return out

    def docno_hashes(self) -> np.ndarray:
        """uint64 ``[rows]``: each judgment's docno hash (see DOCNO_HASH_SEED). Cached."""
        if DOCNO_HASHES not in self._cache:
            docno = self.frame.get_column("docno")
            self._cache[DOCNO_HASHES] = docno.hash(DOCNO_HASH_SEED).to_numpy()
        out: np.ndarray = self._cache[DOCNO_HASHES]
        return out

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docno: rel}}`` (a later line for the same pair wins)."""
        out: dict[str, dict[str, int]] = {}
        cols = self.frame.select("qid", "docno", "rel")
        for qid, docno, rel in zip(*(c.to_list() for c in cols.get_columns()), strict=True):
            out.setdefault(qid, {})[docno] = rel
        return out


@dataclass(frozen=True)
class Run:
    """A retrieval run, one row per result line (file order).

    ``frame`` has the columns ``qid`` (Categorical), ``docno`` (String) and ``score``
    (Float64). ``runid`` is the run name from the last line, as trec_eval reports it.
    """

    frame: pl.DataFrame
    runid: str
    path: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return self.frame.height

    def docno_hashes(self) -> np.ndarray:
        """uint64 ``[rows]``: each line's docno hash (see DOCNO_HASH_SEED). Not cached: 8 bytes
        a line, and a whole run's are big."""
        out: np.ndarray = self.frame.get_column("docno").hash(DOCNO_HASH_SEED).to_numpy()
        return out

    def qid_layout(self) -> QidLayout:
        """Where each query's lines are (see :class:`QidLayout`). Cached."""
        if "qids" not in self._cache:
            self._cache["qids"] = qid_layout_of(self.frame.get_column("qid"))
        out: QidLayout = self._cache["qids"]
        return out


@dataclass(frozen=True)
class QidLayout:
    """The query ids of a run's lines, in one of two forms.

    ``names`` are the distinct qids. When the lines come in few blocks of equal qids (a run
    written query by query), ``starts`` holds the first line (0-based data row) of each block
    and ``block_name`` its index into ``names``; otherwise ``row_name`` gives each line's
    index into ``names``.
    """

    names: list[str]
    starts: np.ndarray | None = None
    block_name: np.ndarray | None = None
    row_name: np.ndarray | None = None


def qid_layout_of(qids: pl.Series) -> QidLayout:
    if qids.dtype != pl.Categorical:
        qids = qids.cast(pl.Categorical())
    n = qids.len()
    if n == 0:
        return QidLayout([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    phys = qids.to_physical()
    # Block starts, chunk by chunk on zero-copy views of the categorical codes.
    parts: list[np.ndarray] = []
    offset = 0
    previous: int | None = None
    for chunk in phys.get_chunks():
        codes = chunk.to_numpy()
        if codes.size == 0:
            continue
        if previous is None or int(codes[0]) != previous:
            parts.append(np.array([offset], dtype=np.int64))
        parts.append(np.flatnonzero(codes[1:] != codes[:-1]) + (offset + 1))
        previous = int(codes[-1])
        offset += codes.size
        if sum(p.size for p in parts) > max(n // 16, 1024):
            return _qid_rows(qids)  # interleaved queries: per-line form
    starts = np.concatenate(parts).astype(np.int64)
    block_phys = phys.gather(starts).to_numpy()
    _, first, inverse = np.unique(block_phys, return_index=True, return_inverse=True)
    names = qids.gather(starts[first]).cast(pl.String).to_list()
    return QidLayout(names, starts=starts, block_name=inverse.astype(np.int64).reshape(-1))


def _qid_rows(qids: pl.Series) -> QidLayout:
    distinct = qids.unique()
    names = distinct.cast(pl.String).to_list()
    dphys = distinct.to_physical().to_numpy().astype(np.int64)
    lookup = np.full(int(dphys.max()) + 1, -1, dtype=np.int32)
    lookup[dphys] = np.arange(dphys.size, dtype=np.int32)
    return QidLayout(names, row_name=lookup[qids.to_physical().to_numpy()])
