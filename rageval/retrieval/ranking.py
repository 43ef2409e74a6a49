"""The columnar ranking structure every retrieval metric in rageval runs on.

A :class:`Ranking` holds, for a list of queries, the relevance grade of every retrieved
document in rank order plus every judgment of each query, as flat numpy arrays cut into
per-query segments by offsets (CSR layout). TREC files (:meth:`Ranking.from_trec`, with
trec_eval's ranking rules) and rageval records (:meth:`Ranking.from_lists`, which keeps the
given order) produce the same structure, so one set of kernels
(:mod:`rageval.retrieval.kernels`) serves both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from rageval.core.errors import InputError
from rageval.retrieval.trec import Qrels, Run, locate_line, read_qrels, read_run

__all__ = ["Ranking"]

# Grade stored for a retrieved document that is not in the query's judgments (trec_eval's
# RELVALUE_NONPOOL). Documents judged with a negative grade keep that grade in ``grades`` and
# are told apart by the private ``_pooled`` mask (trec_eval's RELVALUE_UNJUDGED).
NOT_JUDGED = -1
TE_NONPOOL = -1
TE_UNJUDGED = -2

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_HASH_SEED = 0x5EED


@contextmanager
def fast_allocation() -> Iterator[None]:
    """Turn off numpy's hugepage advice on big arrays for the duration of the block.

    With transparent hugepages in ``madvise`` mode and defrag on ``madvise`` (a common Linux
    default), every fresh large numpy array triggers synchronous memory compaction: first
    touching 80 MB then takes ~0.2 s instead of ~0.03 s. Evaluating a 10M-line run allocates
    several such arrays, so this roughly halves the time spent outside parsing.
    """
    setter = getattr(np._core.multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)


@dataclass(frozen=True)
class Ranking:
    """Ranked retrieval results with their judgments, one segment per query.

    Attributes:
        qids: the evaluated queries; for TREC input in trec_eval's output order (byte-wise
            ``strcmp`` order of the qrels' query ids), for :meth:`from_lists` the given order.
        offsets: int64 ``[nq + 1]``; query ``i``'s retrieved documents are rows
            ``offsets[i]:offsets[i + 1]`` of ``grades``/``scores``, in rank order.
        grades: int64 ``[n]``; judged grade of each retrieved document, ``-1`` when the
            document is not in that query's judgments.
        scores: float64 ``[n]`` retrieval scores in rank order, or None when unknown.
        judged_offsets: int64 ``[nq + 1]``; segments of ``judged_grades``.
        judged_grades: int64 ``[m]``; every judgment of each query (any grade, including 0 and
            negative ones), sorted descending within the query.
        runid: name of the run ("" when unknown).
    """

    qids: tuple[str, ...]
    offsets: np.ndarray
    grades: np.ndarray
    scores: np.ndarray | None
    judged_offsets: np.ndarray
    judged_grades: np.ndarray
    runid: str = ""
    # True where the retrieved document is in the judgments. None means "exactly the documents
    # with grade >= 0", which is the case unless some judgment has a negative grade.
    _pooled: np.ndarray | None = field(default=None, repr=False, compare=False)
    # Derived arrays the kernels reuse. Not an __init__ argument, so dataclasses.replace()
    # (e.g. with clipped grades) starts from an empty cache.
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------------------------
    # Basic counts
    # ------------------------------------------------------------------------------------

    @property
    def num_queries(self) -> int:
        return len(self.qids)

    def num_ret(self) -> np.ndarray:
        """int64 ``[nq]``: number of retrieved documents of each query."""
        return np.diff(self.offsets)

    def num_judged(self) -> np.ndarray:
        """int64 ``[nq]``: number of judgments of each query (any grade)."""
        return np.diff(self.judged_offsets)

    def num_rel(self, rel_level: int = 1) -> np.ndarray:
        """int64 ``[nq]``: judged documents with grade >= ``rel_level``.

        As in trec_eval, negative grades ("in the pool, not judged") never count as relevant,
        even for ``rel_level <= 0``.
        """
        key = ("num_rel", rel_level)
        if key not in self._cache:
            g = self.judged_grades
            hit = (g >= rel_level) & (g >= 0)
            seg = self.judged_segment_ids()
            self._cache[key] = np.bincount(seg[hit], minlength=self.num_queries).astype(np.int64)
        out: np.ndarray = self._cache[key]
        return out

    @property
    def pooled(self) -> np.ndarray:
        """bool ``[n]``: the retrieved document is in its query's judgments."""
        if self._pooled is not None:
            return self._pooled
        return self.grades >= 0

    # ------------------------------------------------------------------------------------
    # Cached layout helpers (used by the kernels)
    # ------------------------------------------------------------------------------------

    def segment_ids(self) -> np.ndarray:
        """intp ``[n]``: query index of each retrieved row."""
        if "seg" not in self._cache:
            self._cache["seg"] = _segment_ids(self.offsets)
        out: np.ndarray = self._cache["seg"]
        return out

    def positions(self) -> np.ndarray:
        """intp ``[n]``: 0-based rank of each retrieved row within its query."""
        if "pos" not in self._cache:
            seg = self.segment_ids()
            self._cache["pos"] = np.arange(self.grades.size, dtype=np.intp) - self.offsets[seg]
        out: np.ndarray = self._cache["pos"]
        return out

    def judged_segment_ids(self) -> np.ndarray:
        """intp ``[m]``: query index of each judgment row."""
        if "jseg" not in self._cache:
            self._cache["jseg"] = _segment_ids(self.judged_offsets)
        out: np.ndarray = self._cache["jseg"]
        return out

    def te_rel(self) -> np.ndarray:
        """int64 ``[n]``: trec_eval's relevance value of each retrieved document.

        The grade when judged with a grade >= 0, -1 when not in the judgments (not pooled),
        -2 when judged with a negative grade (pooled but unjudged, as for infAP).
        """
        if "te_rel" not in self._cache:
            g = self.grades
            if self._pooled is None and (g.size == 0 or int(g.min()) >= TE_NONPOOL):
                rel = g  # already trec_eval's values: no copy
            elif self._pooled is None:
                rel = np.where(g >= 0, g, TE_NONPOOL)
            else:
                rel = np.where(self._pooled, np.where(g >= 0, g, TE_UNJUDGED), TE_NONPOOL)
            self._cache["te_rel"] = rel.astype(np.int64, copy=False)
        out: np.ndarray = self._cache["te_rel"]
        return out

    # ------------------------------------------------------------------------------------
    # Constructors
    # ------------------------------------------------------------------------------------

    @classmethod
    def from_lists(
        cls,
        qids: Sequence[str],
        ranked_doc_ids: Sequence[Sequence[str]],
        judgments: Sequence[Mapping[str, int] | None],
        scores: Sequence[Sequence[float] | None] | None = None,
    ) -> Ranking:
        """Build a ranking from per-query lists, keeping the given order.

        ``ranked_doc_ids[i]`` is query ``i``'s retrieved documents, already in rank order (a
        RAG record's contexts); ``judgments[i]`` maps document id to grade, or is None when the
        query has no judgments (every document then counts as not judged and the query has no
        relevant documents). ``scores[i]``, when given, are the retrieval scores in the same
        order (None for a query without scores: its scores become NaN).

        Raises ValueError when the lists disagree in length or a query lists a document twice.
        """
        nq = len(qids)
        if len(ranked_doc_ids) != nq or len(judgments) != nq:
            raise ValueError("qids, ranked_doc_ids and judgments must have the same length")
        if scores is not None and len(scores) != nq:
            raise ValueError("scores must have one entry per query")
        grades: list[int] = []
        pooled: list[bool] = []
        counts = np.zeros(nq, dtype=np.int64)
        judged: list[int] = []
        jcounts = np.zeros(nq, dtype=np.int64)
        for i, (qid, docs, judg) in enumerate(zip(qids, ranked_doc_ids, judgments, strict=True)):
            docs = list(docs)
            if len(set(docs)) != len(docs):
                dup = next(d for d in docs if docs.count(d) > 1)
                raise ValueError(f"query {qid!r} lists document {dup!r} more than once")
            table = judg or {}
            for d in docs:
                g = table.get(d)
                grades.append(NOT_JUDGED if g is None else int(g))
                pooled.append(g is not None)
            counts[i] = len(docs)
            values = sorted((int(v) for v in table.values()), reverse=True)
            judged.extend(values)
            jcounts[i] = len(values)
        score_arr = _scores_from_lists(scores, counts) if scores is not None else None
        grade_arr = np.asarray(grades, dtype=np.int64)
        pooled_arr = np.asarray(pooled, dtype=bool)
        has_negative = bool(np.any(grade_arr[pooled_arr] < 0)) if grade_arr.size else False
        return cls(
            qids=tuple(str(q) for q in qids),
            offsets=_offsets(counts),
            grades=grade_arr,
            scores=score_arr,
            judged_offsets=_offsets(jcounts),
            judged_grades=np.asarray(judged, dtype=np.int64),
            runid="",
            _pooled=pooled_arr if has_negative else None,
        )

    @classmethod
    def from_trec(
        cls,
        qrels: Qrels | str | os.PathLike[str],
        run: Run | str | os.PathLike[str],
        *,
        max_retrieved: int | None = None,
        all_qrels_queries: bool = False,
    ) -> Ranking:
        """Build a ranking from a TREC qrels and run (paths or parsed objects), as trec_eval.

        trec_eval 10.0's rules: only queries present in the qrels are evaluated, in ``strcmp``
        order of their ids; a query of the qrels without results is left out unless
        ``all_qrels_queries`` (``-c``), when it appears with no retrieved documents. Each
        query's results are ranked by score descending, ties broken by docno descending
        (``strcmp``); the rank column of the file is ignored. ``max_retrieved`` (``-M``) then
        keeps the top results of each query. A document retrieved twice for a query (within
        the kept results) is an error, as is a document judged twice for an evaluated query.
        """
        qrels_obj = qrels if isinstance(qrels, Qrels) else read_qrels(qrels)
        run_obj = run if isinstance(run, Run) else read_run(run)
        if max_retrieved is not None and max_retrieved < 0:
            raise ValueError("max_retrieved must be >= 0")
        with fast_allocation():
            return _build_from_trec(qrels_obj, run_obj, max_retrieved, all_qrels_queries)


# ----------------------------------------------------------------------------------------
# Construction helpers
# ----------------------------------------------------------------------------------------


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _segment_ids(offsets: np.ndarray) -> np.ndarray:
    counts = np.diff(offsets)
    return np.repeat(np.arange(counts.size, dtype=np.intp), counts)


def _scores_from_lists(
    scores: Sequence[Sequence[float] | None], counts: np.ndarray
) -> np.ndarray | None:
    if all(s is None for s in scores):
        return None
    parts: list[np.ndarray] = []
    for s, c in zip(scores, counts, strict=True):
        if s is None:
            parts.append(np.full(int(c), np.nan))
            continue
        arr = np.asarray(list(s), dtype=np.float64)
        if arr.size != c:
            raise ValueError("each query needs one score per retrieved document")
        parts.append(arr)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def _salted_keys(hashes: np.ndarray, codes: np.ndarray, nq: int) -> np.ndarray:
    """64-bit key of (query code, docno hash): the hash XOR a per-query salt."""
    with np.errstate(over="ignore"):
        salt = np.arange(1, nq + 1, dtype=np.uint64) * _GOLDEN
    return hashes ^ salt[codes]


@dataclass(frozen=True)
class _Layout:
    """Where each ranked row (queries in order, rank order within) sits in the run file.

    Either contiguous blocks of file rows (``starts``/``lengths``, one per query, the common
    case of a run written query by query in rank order: no per-row permutation is built), or
    an explicit permutation ``order`` (ranked row -> file row).
    """

    offsets: np.ndarray  # ranked segment offsets [nq + 1]
    starts: np.ndarray | None = None  # file row of each query's first ranked row
    order: np.ndarray | None = None

    def take_series(self, series: pl.Series) -> np.ndarray:
        """A numeric polars column (one value per file row) in ranked order, as numpy: one
        copy, made by polars from zero-copy slices."""
        if self.order is not None:  # (polars' gather is slow on chunked columns)
            return series.to_numpy()[self.order]
        assert self.starts is not None
        lens = np.diff(self.offsets)
        if self.starts.size and np.array_equal(self.starts, self.offsets[:-1]):
            return series.slice(0, int(self.offsets[-1])).to_numpy()
        pairs = zip(self.starts.tolist(), lens.tolist(), strict=True)
        parts = [series.slice(s, n) for s, n in pairs if n]
        if not parts:
            return series.slice(0, 0).to_numpy()
        return pl.concat(parts, rechunk=False).to_numpy()

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


def _build_from_trec(
    qrels: Qrels, run: Run, max_retrieved: int | None, all_qrels_queries: bool
) -> Ranking:
    frame = run.frame
    qids, q_codes_all, segs = _query_codes(qrels, run, all_qrels_queries)
    nq = len(qids)
    docno = frame.get_column("docno")
    scores = frame.get_column("score")
    if scores.is_nan().any():
        raise InputError("a score is NaN", path=run.path)

    layout = _rank_layout(segs, scores, nq)
    if max_retrieved is not None and np.diff(layout.offsets).max(initial=0) > max_retrieved:
        layout = _truncate(layout, scores, max_retrieved, docno)
    offsets = layout.offsets
    scores_o = layout.take_series(scores)
    del scores

    # Judgments of the evaluated queries.
    q_frame = qrels.frame
    q_docno = q_frame.get_column("docno")
    q_rel = q_frame.get_column("rel").to_numpy()
    q_codes = q_codes_all
    if q_codes_all.size and q_codes_all.min() < 0:  # judgments of queries not evaluated
        q_rows = np.flatnonzero(q_codes_all >= 0)
        q_codes, q_docno, q_rel = q_codes_all[q_rows], q_docno.gather(q_rows), q_rel[q_rows]
    q_hash = q_docno.hash(_HASH_SEED).to_numpy()
    _check_qrels_unique(qrels, _salted_keys(q_hash, q_codes, nq), q_codes, q_docno, qids)

    hashes = docno.hash(_HASH_SEED).to_numpy()
    _check_run_unique(hashes, layout, segs, docno, qids, run)
    grades, pooled = _lookup_grades(hashes, layout, segs, docno, q_hash, q_codes, q_docno, q_rel)
    del hashes
    _resolve_ties(offsets, scores_o, grades, pooled, docno, layout)

    j_order = np.lexsort((-q_rel, q_codes))
    judged_counts = np.bincount(q_codes, minlength=nq).astype(np.int64)
    has_negative = bool(np.any(q_rel < 0))
    return Ranking(
        qids=tuple(qids),
        offsets=offsets,
        grades=grades,
        scores=scores_o.astype(np.float64, copy=False),
        judged_offsets=_offsets(judged_counts),
        judged_grades=q_rel[j_order].astype(np.int64, copy=False),
        runid=run.runid,
        _pooled=pooled if has_negative else None,
    )


@dataclass(frozen=True)
class _Segments:
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


def _query_codes(
    qrels: Qrels, run: Run, all_qrels_queries: bool
) -> tuple[list[str], np.ndarray, _Segments]:
    """Evaluated qids (strcmp order), the code (index into them, -1 = not evaluated) of every
    qrels row, and the codes of the run's lines."""
    q_series = qrels.frame.get_column("qid")
    qrels_qids = sorted(q_series.unique().to_list())
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
        segs = _Segments(block_codes, starts, lengths, len(names) == starts.size)
    else:
        assert layout.row_name is not None
        segs = _Segments(code_of_name[layout.row_name], None, None, False)
    q_codes = q_series.replace_strict(index, default=-1, return_dtype=pl.Int64).to_numpy()
    return qids, q_codes.astype(np.int64, copy=False), segs


def _rank_layout(segs: _Segments, scores: pl.Series, nq: int) -> _Layout:
    """Ranked order: queries by code, results by score descending.

    Runs are usually written query by query in rank order; that case is detected in O(n) and
    needs no sort (whole blocks are reordered, if anything). Otherwise polars sorts on the two
    numeric keys. Ties in score are left for :func:`_resolve_ties` (trec_eval breaks them by
    docno, which only matters when the tied documents differ in relevance).
    """
    if segs.starts is None:
        counts = np.bincount(segs.codes[segs.codes >= 0], minlength=nq)
    else:
        assert segs.lengths is not None
        keep = segs.codes >= 0
        counts = np.bincount(segs.codes[keep], weights=segs.lengths[keep], minlength=nq)
    offsets = _offsets(counts.astype(np.int64))
    if segs.contiguous:
        assert segs.starts is not None
        score = pl.col("s")
        rising = (
            scores.to_frame("s").select(pl.arg_where(score > score.shift(1))).to_series().to_numpy()
        )
        if rising.size:
            inner = np.isin(rising, segs.starts, invert=True)
            bad = segs.codes[np.searchsorted(segs.starts, rising[inner], side="right") - 1]
            sorted_ok = not np.any(bad >= 0)
        else:
            sorted_ok = True
        if sorted_ok:
            file_start = np.zeros(nq, dtype=np.int64)
            file_start[segs.codes[keep]] = segs.starts[keep]
            return _Layout(offsets=offsets, starts=file_start)
    return _Layout(offsets=offsets, order=_sort_rows(segs.row_codes(), scores))


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


def _truncate(layout: _Layout, scores: pl.Series, m: int, docno: pl.Series) -> _Layout:
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
    scores_o = scores.to_numpy()[order]
    cut = offsets[:-1][counts > m] + m  # first dropped row of each long query
    straddle = cut[scores_o[cut] == scores_o[cut - 1]] if m > 0 else cut[:0]
    if straddle.size:
        sel_rows, sel_run = _runs_rows(*_run_bounds(offsets, scores_o, straddle))
        src = order[sel_rows]
        order[sel_rows] = src[_docno_desc_order(docno.gather(src), sel_run)]
    take = np.minimum(counts, m)
    return _Layout(offsets=_offsets(take), order=order[_kept_rows(offsets, take)])


def _kept_rows(offsets: np.ndarray, take: np.ndarray) -> np.ndarray:
    starts = offsets[:-1]
    total = int(take.sum())
    return np.arange(total) - np.repeat(np.cumsum(take) - take, take) + np.repeat(starts, take)


def _lookup_grades(
    hashes: np.ndarray,
    layout: _Layout,
    segs: _Segments,
    docno: pl.Series,
    q_hash: np.ndarray,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    q_rel: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Grade of every ranked row (-1 when not judged) and whether it is judged.

    A hash join: a bitmap indexed by the top bits of the judged documents' hashes keeps the
    few candidate file rows; those are matched exactly by (query, hash) key and then checked
    on the docno strings.
    """
    n = int(layout.offsets[-1])
    grades = np.empty(n, dtype=np.int64)
    pooled = np.zeros(n, dtype=bool)
    if n == 0 or q_hash.size == 0:
        grades.fill(NOT_JUDGED)
        return grades, pooled
    nq = layout.offsets.size - 1
    # Two bitmaps on independent bits of the hash: few rows survive both.
    bits = max(16, min(24, int(q_hash.size * 16).bit_length()))
    shift = np.uint64(64 - bits)
    mask = np.uint64((1 << bits) - 1)
    table = np.zeros(1 << bits, dtype=bool)
    table[(q_hash >> shift).view(np.int64)] = True
    second = np.zeros(1 << bits, dtype=bool)
    second[(q_hash & mask).view(np.int64)] = True
    # The grades buffer doubles as scratch for the bitmap index (fresh memory is slow).
    top = grades.view(np.uint64) if hashes.size == n else np.empty(hashes.size, np.uint64)
    np.right_shift(hashes, shift, out=top)
    cand = np.flatnonzero(table[top.view(np.int64)])
    del top
    grades.fill(NOT_JUDGED)
    cand = cand[second[(hashes[cand] & mask).view(np.int64)]]
    if cand.size == 0:
        return grades, pooled
    if layout.order is None:
        where = layout.ranked(cand)
    else:  # invert the permutation for the candidates only (a full inverse is 8 bytes a row)
        flag = np.zeros(hashes.size, dtype=bool)
        flag[cand] = True
        ranked_rows = np.flatnonzero(flag[layout.order])
        del flag
        file_rows = layout.order[ranked_rows]
        where = np.full(cand.size, -1, dtype=np.int64)
        where[np.searchsorted(cand, file_rows)] = ranked_rows
    ranked = where >= 0
    cand, where = cand[ranked], where[ranked]
    codes = segs.codes_of(cand)
    keys = _salted_keys(hashes[cand], codes, nq)
    q_keys = _salted_keys(q_hash, q_codes, nq)
    sort_q = np.argsort(q_keys, kind="stable")
    sorted_keys = q_keys[sort_q]
    by_key = np.argsort(keys)  # sorted needles make the binary searches cache-friendly
    at = np.empty(keys.size, dtype=np.int64)
    at[by_key] = np.searchsorted(sorted_keys, keys[by_key])
    np.minimum(at, sorted_keys.size - 1, out=at)
    hit = sorted_keys[at] == keys
    found, where = cand[hit], where[hit]
    judg = sort_q[at[hit]]
    same = (q_codes[judg] == codes[hit]) & (docno.gather(found) == q_docno.gather(judg)).to_numpy()
    if not same.all():  # a 64-bit hash collision: join on the strings instead
        return _exact_lookup(layout, segs, docno, q_codes, q_docno, q_rel)
    grades[where] = q_rel[judg]
    pooled[where] = True
    return grades, pooled


def _exact_lookup(
    layout: _Layout,
    segs: _Segments,
    docno: pl.Series,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    q_rel: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    n = int(layout.offsets[-1])
    src = layout.source(np.arange(n, dtype=np.int64))
    left = pl.DataFrame({"c": segs.codes_of(src), "d": docno.gather(src)}).with_row_index("i")
    right = pl.DataFrame({"c": q_codes, "d": q_docno, "g": q_rel})
    joined = left.join(right, on=["c", "d"], how="inner")
    rows = joined.get_column("i").to_numpy()
    grades = np.full(n, NOT_JUDGED, dtype=np.int64)
    pooled = np.zeros(n, dtype=bool)
    grades[rows] = joined.get_column("g").to_numpy()
    pooled[rows] = True
    return grades, pooled


def _resolve_ties(
    offsets: np.ndarray,
    scores: np.ndarray,
    grades: np.ndarray,
    pooled: np.ndarray,
    docno: pl.Series,
    layout: _Layout,
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
    src = rows[_docno_desc_order(docno.gather(layout.source(rows)), run)]
    grades[rows] = grades[src]
    pooled[rows] = pooled[src]


def _check_qrels_unique(
    qrels: Qrels,
    q_keys: np.ndarray,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    qids: list[str],
) -> None:
    """trec_eval refuses a document judged twice for an evaluated query; so do we."""
    if q_keys.size < 2 or np.unique(q_keys).size == q_keys.size:
        return
    frame = pl.DataFrame({"c": q_codes, "d": q_docno})
    dup = frame.filter(pl.struct("c", "d").is_duplicated())
    if dup.height == 0:
        return
    qid, name = qids[dup.item(0, "c")], dup.item(0, "d")
    line = locate_line(qrels.path, qid, name) if qrels.path else None
    raise InputError(
        f"document {name!r} is judged more than once for query {qid!r}",
        path=qrels.path,
        line=line,
    )


def _check_run_unique(
    hashes: np.ndarray,
    layout: _Layout,
    segs: _Segments,
    docno: pl.Series,
    qids: Sequence[str],
    run: Run,
) -> None:
    """trec_eval refuses a run listing a document twice for a query; so do we.

    Each query's 32-bit hash fragments are sorted row-wise in a padded 2-D array (cheap), and
    only queries where two fragments collide are checked on the docno strings.
    """
    frag = hashes.astype(np.uint32)  # low 32 bits, a fresh array we may sort in place
    lens = np.diff(layout.offsets)
    if layout.order is None:
        assert layout.starts is not None
        values, starts = frag, layout.starts
    else:
        values, starts = frag[layout.order], layout.offsets[:-1]
    del frag
    by_start = np.argsort(starts, kind="stable")  # file order: whole rows, no gathering
    suspects = by_start[_segments_with_equal_values(values, starts[by_start], lens[by_start])]
    for q in suspects.tolist():
        rows = layout.source(np.arange(layout.offsets[q], layout.offsets[q + 1]))
        names = docno.gather(rows)
        dup = names.filter(names.is_duplicated())
        if dup.len():
            name = dup[0]
            line = locate_line(run.path, qids[q], name) if run.path else None
            raise InputError(
                f"document {name!r} is retrieved more than once for query {qids[q]!r}",
                path=run.path,
                line=line,
            )


def _segments_with_equal_values(
    values: np.ndarray, starts: np.ndarray, lens: np.ndarray
) -> np.ndarray:
    """Indices of the segments (``values[starts[i]:starts[i] + lens[i]]``) holding some value
    twice: row-wise sorts of padded 2-D blocks, segments bucketed by length. ``values`` is
    scratch: it may be reordered within segments."""
    out: list[np.ndarray] = []
    for segs, width in _length_buckets(lens):
        cols = np.arange(width)
        for chunk in _chunks(segs, width):
            first = starts[chunk]
            clen = lens[chunk]
            if np.all(clen == width) and np.all(first == first[0] + np.arange(chunk.size) * width):
                # Whole rows of ``values``: sort them in place (the caller's scratch array).
                block = values[first[0] : first[0] + chunk.size * width].reshape(-1, width)
                block.sort(axis=1)
            else:
                # Pads get distinct values no real (32-bit) value can take.
                valid = cols[None, :] < clen[:, None]
                block = np.broadcast_to(
                    (np.uint64(1) << np.uint64(32)) + cols.astype(np.uint64), (chunk.size, width)
                ).copy()
                block[valid] = values[(first[:, None] + cols[None, :])[valid]]
                block.sort(axis=1)
            dup = (block[:, 1:] == block[:, :-1]).any(axis=1)
            out.append(chunk[dup])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.intp)


def _length_buckets(counts: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Segments with >= 2 elements grouped so that padding wastes at most half the space."""
    segs = np.flatnonzero(counts >= 2)
    if segs.size == 0:
        return []
    lens = counts[segs]
    if lens.min() * 2 >= lens.max():
        return [(segs, int(lens.max()))]
    exp = np.frexp(lens.astype(np.float64))[1]  # lens in [2**(e-1), 2**e)
    buckets = []
    for e in np.unique(exp):
        sel = segs[exp == e]
        buckets.append((sel, int(counts[sel].max())))
    return buckets


def _chunks(segs: np.ndarray, width: int, budget: int = 1 << 22) -> list[np.ndarray]:
    per = max(1, budget // max(width, 1))
    return [segs[i : i + per] for i in range(0, segs.size, per)]
