"""trec_eval's ranking order of a run file's lines, kept as a :class:`Layout` of file rows.

Only queries present in the qrels are evaluated, in ``strcmp`` order of their ids
(:func:`query_codes`). Each query's results are ranked by score descending
(:func:`rank_layout`), ties broken by docno descending: where the tie straddles a ``-M`` cut
(:func:`truncate`) and, once the grades are known, where a tie holds a judged document
(:func:`resolve_ties`). The rank column of the file is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from rageval.core.errors import InputError
from rageval.retrieval.ranking.arrays import offsets_from_counts
from rageval.retrieval.trec import Qrels, Run


@dataclass(frozen=True)
class Layout:
    """Where each ranked row (queries in order, rank order within) sits in the run file.

    Either contiguous blocks of file rows (``starts``/``lengths``, one per query, the common
    case of a run written query by query in rank order: no per-row permutation is built), or
    an explicit permutation ``order`` (ranked row -> file row).
    """

    offsets: np.ndarray  # ranked segment offsets [nq + 1]
    starts: np.ndarray | None = None  # file row of each query's first ranked row
    order: np.ndarray | None = None

    def take(self, values: np.ndarray) -> np.ndarray:
        """Values of the file's rows (one per row) in ranked order: a view where the ranked
        rows are the file's first rows, in order."""
        if self.order is not None:
            return values[self.order]
        assert self.starts is not None
        lens = np.diff(self.offsets)
        if self.starts.size and np.array_equal(self.starts, self.offsets[:-1]):
            return values[: int(self.offsets[-1])]
        pairs = zip(self.starts.tolist(), lens.tolist(), strict=True)
        parts = [values[s : s + n] for s, n in pairs if n]
        return np.concatenate(parts) if parts else values[:0].copy()

    def source(self, rows: np.ndarray) -> np.ndarray:
        """File row of each ranked row."""
        if self.order is not None:
            return self.order[rows]
        assert self.starts is not None
        seg = np.searchsorted(self.offsets, rows, side="right") - 1
        return self.starts[seg] + (rows - self.offsets[seg])

    def ranked(self, file_rows: np.ndarray) -> np.ndarray:
        """Ranked row of each file row (-1 when the row is not ranked); blocks layout only."""
        assert self.starts is not None
        lens = np.diff(self.offsets)
        blocks = np.flatnonzero(lens > 0)  # a query without results has no block
        blocks = blocks[np.argsort(self.starts[blocks], kind="stable")]
        if blocks.size == 0:
            return np.full(file_rows.size, -1, dtype=np.int64)
        starts, lens, firsts = self.starts[blocks], lens[blocks], self.offsets[blocks]
        seg = np.maximum(np.searchsorted(starts, file_rows, side="right") - 1, 0)
        delta = file_rows - starts[seg]
        inside = (delta >= 0) & (delta < lens[seg])
        return np.where(inside, firsts[seg] + delta, -1)


@dataclass(frozen=True)
class Segments:
    """The evaluated-query code of the run file's lines: per block of consecutive lines with
    the same qid (``starts``/``lengths``/``codes``), or per line (``line_codes``)."""

    codes: np.ndarray  # evaluated-query index of each block, or of each line (-1: not evaluated)
    starts: np.ndarray | None  # first line of each block; None in per-line form
    lengths: np.ndarray | None
    contiguous: bool  # each qid forms a single block

    def row_codes(self) -> np.ndarray:
        if self.starts is None:
            return self.codes
        assert self.lengths is not None
        return np.repeat(self.codes, self.lengths)

    def codes_of(self, file_rows: np.ndarray) -> np.ndarray:
        if self.starts is None:
            return self.codes[file_rows]
        return self.codes[np.searchsorted(self.starts, file_rows, side="right") - 1]


def query_codes(
    qrels: Qrels, run: Run, all_qrels_queries: bool
) -> tuple[list[str], np.ndarray, Segments]:
    """Evaluated qids (strcmp order), the code (index into them, -1 = not evaluated) of every
    qrels row, and the codes of the run's lines."""
    qrels_qids = qrels.qids()
    layout = run.qid_layout()
    names = layout.names
    if all_qrels_queries:
        qids = qrels_qids
    else:
        present = set(names)
        qids = [q for q in qrels_qids if q in present]
    if not qids:
        raise InputError(
            "no queries with both results and relevance judgments "
            f"(qrels {qrels.path or '?'} and run {run.path or '?'})",
            path=run.path,
        )
    index = {q: i for i, q in enumerate(qids)}
    code_of_name = np.array([index.get(name, -1) for name in names], dtype=np.int32)
    if layout.starts is not None:
        assert layout.block_name is not None
        starts = layout.starts
        lengths = np.diff(np.concatenate((starts, [len(run)]))).astype(np.int64)
        block_codes = code_of_name[layout.block_name] if names else starts * 0
        segs = Segments(block_codes, starts, lengths, len(names) == starts.size)
    else:
        assert layout.row_name is not None
        segs = Segments(code_of_name[layout.row_name], None, None, False)
    # Through the qrels' own codes: polars' replace_strict costs milliseconds per call even
    # for a few rows, which a run read in slices pays once per slice.
    code_of_qrels_qid = np.array([index.get(q, -1) for q in qrels_qids], dtype=np.int64)
    return qids, code_of_qrels_qid[qrels.qid_codes()], segs


def rank_layout(segs: Segments, scores: np.ndarray, nq: int) -> Layout:
    """Ranked order: queries by code, results by score descending.

    Runs are usually written query by query in rank order; that case is detected in O(n) and
    needs no sort (whole blocks are reordered, if anything). Otherwise polars sorts on the two
    numeric keys. Ties in score are left for :func:`resolve_ties` (trec_eval breaks them by
    docno, which only matters when the tied documents differ in relevance).
    """
    if segs.starts is None:
        counts = np.bincount(segs.codes[segs.codes >= 0], minlength=nq)
    else:
        assert segs.lengths is not None
        keep = segs.codes >= 0
        counts = np.bincount(segs.codes[keep], weights=segs.lengths[keep], minlength=nq)
    offsets = offsets_from_counts(counts.astype(np.int64))
    if segs.contiguous:
        assert segs.starts is not None
        rising = np.flatnonzero(scores[1:] > scores[:-1]) + 1
        if rising.size:
            inner = np.isin(rising, segs.starts, invert=True)
            bad = segs.codes[np.searchsorted(segs.starts, rising[inner], side="right") - 1]
            sorted_ok = not np.any(bad >= 0)
        else:
            sorted_ok = True
        if sorted_ok:
            file_start = np.zeros(nq, dtype=np.int64)
            file_start[segs.codes[keep]] = segs.starts[keep]
            return Layout(offsets=offsets, starts=file_start)
    return Layout(offsets=offsets, order=_sort_rows(segs.row_codes(), pl.Series(scores)))


def _sort_rows(codes: np.ndarray, scores: pl.Series) -> np.ndarray:
    """Lines of evaluated queries (code >= 0) ordered by code, then score descending.

    Two passes in polars: a parallel sort by score, then a stable sort by query code (faster
    than a two-key sort, which is very slow on chunked columns).
    """
    by_score = scores.arg_sort(descending=True)
    frame = pl.DataFrame({"i": by_score, "k": pl.Series(codes).gather(by_score)})
    if codes.size and codes.min() < 0:
        frame = frame.filter(pl.col("k") >= 0)
    order = frame.sort("k", maintain_order=True).get_column("i")
    return order.to_numpy().astype(np.int64)


def _same_query_prev(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row i > 0, whether row i - 1 belongs to the same query."""
    at = np.searchsorted(offsets, rows, side="left")
    return offsets[np.minimum(at, offsets.size - 1)] != rows


def _run_bounds(
    offsets: np.ndarray, scores: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the maximal run of tied (same query, same score) rows around each
    given row, one entry per distinct run."""
    n = scores.size
    lo = rows.astype(np.int64, copy=True)
    hi = rows.astype(np.int64, copy=True) + 1
    for _ in range(64):
        can = lo > 0
        i = lo[can]
        can[can] = _same_query_prev(offsets, i) & (scores[i - 1] == scores[i])
        lo[can] -= 1
        can2 = hi < n
        j = hi[can2]
        can2[can2] = _same_query_prev(offsets, j) & (scores[j] == scores[j - 1])
        hi[can2] += 1
        if not (can.any() or can2.any()):
            lo, first = np.unique(lo, return_index=True)
            return lo, hi[first]
    return _run_bounds_scan(offsets, scores, rows)  # a long run of ties: one full pass


def _run_bounds_scan(
    offsets: np.ndarray, scores: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    n = scores.size
    new = np.ones(n, dtype=bool)
    new[1:] = scores[1:] != scores[:-1]
    new[offsets[:-1][offsets[:-1] < n]] = True
    starts = np.flatnonzero(new)
    ends = np.concatenate((starts[1:], [n]))
    idx = np.unique(np.searchsorted(starts, rows, side="right") - 1)
    return starts[idx], ends[idx]


def _runs_rows(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indices covered by the given runs, and the run number of each."""
    lens = ends - starts
    run = np.repeat(np.arange(starts.size), lens)
    rows = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens) + starts[run]
    return rows, run


def _docno_desc_order(docno: pl.Series, run: np.ndarray) -> np.ndarray:
    """Permutation sorting rows by (run asc, docno desc) -- trec_eval's tie-break."""
    frame = pl.DataFrame({"r": run, "d": docno})
    order = frame.select(pl.arg_sort_by(["r", "d"], descending=[False, True])).to_series()
    return order.to_numpy()


def truncate(layout: Layout, scores: np.ndarray, m: int, docno: pl.Series) -> Layout:
    """The layout of the top ``m`` results of every query.

    A tie straddling the cut is first put in trec_eval's docno order, since which of the tied
    documents survive the cut depends on it.
    """
    offsets = layout.offsets
    counts = np.diff(offsets)
    if layout.order is not None:
        order = layout.order.copy()
    else:
        order = layout.source(np.arange(int(offsets[-1]), dtype=np.int64))
    scores_o = scores[order]
    cut = offsets[:-1][counts > m] + m  # first dropped row of each long query
    straddle = cut[scores_o[cut] == scores_o[cut - 1]] if m > 0 else cut[:0]
    if straddle.size:
        sel_rows, sel_run = _runs_rows(*_run_bounds(offsets, scores_o, straddle))
        src = order[sel_rows]
        order[sel_rows] = src[_docno_desc_order(docno[src], sel_run)]
    take = np.minimum(counts, m)
    return Layout(offsets=offsets_from_counts(take), order=order[_kept_rows(offsets, take)])


def _kept_rows(offsets: np.ndarray, take: np.ndarray) -> np.ndarray:
    starts = offsets[:-1]
    total = int(take.sum())
    return np.arange(total) - np.repeat(np.cumsum(take) - take, take) + np.repeat(starts, take)


def resolve_ties(
    offsets: np.ndarray,
    scores: np.ndarray,
    grades: np.ndarray,
    pooled: np.ndarray,
    docno: pl.Series,
    layout: Layout,
) -> None:
    """Order tied results by docno descending (trec_eval's tie-break), in place.

    Only ties that contain a judged document are reordered: among unjudged documents the
    order changes nothing a metric can see (they all carry the same relevance value).
    """
    n = scores.size
    jr = np.flatnonzero(pooled)
    if jr.size == 0 or n < 2:
        return
    tied = np.zeros(jr.size, dtype=bool)
    has_left = jr > 0
    li = jr[has_left]
    tied[has_left] = _same_query_prev(offsets, li) & (scores[li] == scores[li - 1])
    has_right = jr < n - 1
    ri = jr[has_right] + 1
    tied[has_right] |= _same_query_prev(offsets, ri) & (scores[ri] == scores[ri - 1])
    if not tied.any():
        return
    rows, run = _runs_rows(*_run_bounds(offsets, scores, jr[tied]))
    src = rows[_docno_desc_order(docno[layout.source(rows)], run)]
    grades[rows] = grades[src]
    pooled[rows] = pooled[src]
