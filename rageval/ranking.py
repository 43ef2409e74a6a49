"""The columnar ranking structure every retrieval metric in rageval runs on.

A :class:`Ranking` holds, for a list of queries, the relevance grade of every retrieved
document in rank order plus every judgment of each query, as flat numpy arrays cut into
per-query segments by offsets (CSR layout). TREC files (:meth:`Ranking.from_trec`, with
trec_eval's ranking rules) and rageval records (:meth:`Ranking.from_lists`, which keeps the
given order) produce the same structure, so one set of kernels (:mod:`rageval.kernels`) serves
both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from rageval.errors import InputError
from rageval.trec import Qrels, Run, locate_line, read_qrels, read_run

__all__ = ["Ranking"]

# Grade stored for a retrieved document that is not in the query's judgments (trec_eval's
# RELVALUE_NONPOOL). Documents judged with a negative grade keep that grade in ``grades`` and
# are told apart by the private ``_pooled`` mask (trec_eval's RELVALUE_UNJUDGED).
NOT_JUDGED = -1
TE_NONPOOL = -1
TE_UNJUDGED = -2

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_HASH_SEED = 0x5EED


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
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

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
            if self._pooled is None:
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
        salt = (np.arange(1, nq + 1, dtype=np.uint64) * _GOLDEN) if nq else np.zeros(0, np.uint64)
    if not hashes.flags.writeable:
        return hashes ^ salt[codes]
    np.bitwise_xor(hashes, salt[codes], out=hashes)
    return hashes


def _take(values: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    return values if order is None else values[order]


def _build_from_trec(
    qrels: Qrels, run: Run, max_retrieved: int | None, all_qrels_queries: bool
) -> Ranking:
    frame = run.frame
    qids, q_codes_all, codes = _query_codes(qrels, run, all_qrels_queries)
    nq = len(qids)
    docno = frame.get_column("docno")
    scores = frame.get_column("score").to_numpy()
    if np.isnan(scores).any():
        raise InputError("a score is NaN", path=run.path)
    keys = _salted_keys(docno.hash(_HASH_SEED).to_numpy(), codes, nq)

    # Keep the rows of evaluated queries only (``rows`` maps back to the file's rows).
    rows: np.ndarray | None = None
    if codes.size and codes.min() < 0:
        rows = np.flatnonzero(codes >= 0)
        codes, scores, keys = codes[rows], scores[rows], keys[rows]

    # Judgments of the evaluated queries.
    q_frame = qrels.frame
    q_rows = np.flatnonzero(q_codes_all >= 0)
    q_codes = q_codes_all[q_rows]
    q_docno = q_frame.get_column("docno").gather(q_rows)
    q_rel = q_frame.get_column("rel").to_numpy()[q_rows]
    q_keys = _salted_keys(q_docno.hash(_HASH_SEED).to_numpy(), q_codes, nq)
    _check_qrels_unique(qrels, q_keys, q_codes, q_docno, qids)

    # Grades by a hash join, in file order (the join does not care about order).
    grades, pooled = _lookup_grades(keys, codes, docno, rows, q_keys, q_codes, q_docno, q_rel)

    counts = np.bincount(codes, minlength=nq).astype(np.int64)
    order, blocks = _rank_order(codes, scores)
    block_qids = [qids[c] for c in codes[blocks[:-1]].tolist()] if blocks is not None else []
    del codes
    scores = _take(scores, order)
    offsets = _offsets(counts)
    truncate = max_retrieved is not None and counts.size > 0 and counts.max() > max_retrieved
    if truncate:
        assert max_retrieved is not None
        kept = _truncate(order, scores, offsets, max_retrieved, docno, rows)
        order = kept if order is None else order[kept]
        scores = scores[kept]
        counts = np.minimum(counts, max_retrieved)
        offsets = _offsets(counts)
    if blocks is not None and not truncate:
        # Rows of a query are contiguous in the file: check duplicates in file order.
        _check_run_unique(keys, blocks, block_qids, docno, rows, run)
        del keys
    else:
        keys = _take(keys, order)
        _check_run_unique(keys, offsets, qids, docno, _compose(rows, order), run)
        del keys
    grades = _take(grades, order)
    pooled = _take(pooled, order)
    source = _compose(rows, order)
    _resolve_ties(offsets, scores, grades, pooled, docno, source)

    j_order = np.lexsort((-q_rel, q_codes))
    judged_counts = np.bincount(q_codes, minlength=nq).astype(np.int64)
    has_negative = bool(np.any(q_rel < 0))
    return Ranking(
        qids=tuple(qids),
        offsets=offsets,
        grades=grades,
        scores=scores.astype(np.float64, copy=False),
        judged_offsets=_offsets(judged_counts),
        judged_grades=q_rel[j_order].astype(np.int64, copy=False),
        runid=run.runid,
        _pooled=pooled if has_negative else None,
    )


def _query_codes(
    qrels: Qrels, run: Run, all_qrels_queries: bool
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Evaluated qids (strcmp order) and the code (index into them, -1 = not evaluated) of
    every qrels row and every run row (int64 / intp)."""
    q_series = qrels.frame.get_column("qid")
    qrels_qids = sorted(q_series.unique().to_list())
    run_q = run.frame.get_column("qid")
    if run_q.dtype != pl.Categorical:
        run_q = run_q.cast(pl.Categorical())
    phys = run_q.to_physical().to_numpy()
    if phys.size:
        # Distinct categories and one row holding each (a category first appears where the
        # value changes, so only those rows need a look).
        change = np.flatnonzero(np.concatenate(([True], phys[1:] != phys[:-1])))
        distinct, first = np.unique(phys[change], return_index=True)
        names = run_q.gather(change[first]).cast(pl.String).to_list()
    else:
        distinct, names = np.zeros(0, dtype=np.int64), []
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
    lookup = np.full(int(distinct.max()) + 1 if distinct.size else 1, -1, dtype=np.intp)
    lookup[distinct] = [index.get(name, -1) for name in names]
    run_codes = lookup[phys]
    q_codes = q_series.replace_strict(index, default=-1, return_dtype=pl.Int64).to_numpy()
    return qids, q_codes.astype(np.intp, copy=False), run_codes


def _rank_order(
    codes: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Permutation putting rows in (query code asc, score desc) order (None: already so),
    and, when each query's rows are contiguous in the input, the offsets of those blocks.

    Runs are usually written query by query in rank order, so that case is detected in O(n)
    and costs no sort (at most a reordering of whole blocks); otherwise polars sorts on the
    two numeric keys. Ties in score are left for :func:`_resolve_ties` (trec_eval breaks them
    by docno, which only matters when the tied documents differ in relevance).
    """
    n = codes.size
    if n == 0:
        return None, None
    brk = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    starts = np.concatenate(([0], brk))
    block_codes = codes[starts]
    if np.unique(block_codes).size == block_codes.size:
        blocks = np.concatenate((starts, [n])).astype(np.int64)
        rising = scores[1:] > scores[:-1]
        rising[brk - 1] = False
        if not rising.any():
            if np.all(block_codes[1:] > block_codes[:-1]):
                return None, blocks
            lengths = np.diff(blocks)
            by_code = np.argsort(block_codes, kind="stable")
            lens = lengths[by_code]
            begin = starts[by_code]
            dest_start = np.cumsum(lens) - lens
            order = np.repeat(begin - dest_start, lens)
            order += np.arange(n)
            return order, blocks
    frame = pl.DataFrame({"c": codes, "s": scores})
    order = frame.select(pl.arg_sort_by(["c", "s"], descending=[False, True])).to_series()
    return order.to_numpy().astype(np.int64, copy=False), None


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


def _truncate(
    order: np.ndarray | None,
    scores_o: np.ndarray,
    offsets: np.ndarray,
    m: int,
    docno: pl.Series,
    rows: np.ndarray | None,
) -> np.ndarray:
    """Positions (in ranked order) of the top ``m`` results of every query.

    A tie straddling the cut is first put in trec_eval's docno order, since which of the tied
    documents survive the cut depends on it; ``order`` is updated in place for those rows.
    """
    counts = np.diff(offsets)
    kept = _kept_rows(offsets, np.minimum(counts, m))
    cut = offsets[:-1][counts > m] + m  # first dropped row of each long query
    straddle = cut[scores_o[cut] == scores_o[cut - 1]] if m > 0 else cut[:0]
    if straddle.size == 0:
        return kept
    sel_rows, sel_run = _runs_rows(*_run_bounds(offsets, scores_o, straddle))
    src = sel_rows if order is None else order[sel_rows]
    names = docno.gather(src if rows is None else rows[src])
    perm = sel_rows[_docno_desc_order(names, sel_run)]
    # Express the reordering as a permutation of positions, applied through ``kept``.
    position = np.arange(scores_o.size, dtype=np.int64)
    position[sel_rows] = perm
    return position[kept]


def _kept_rows(offsets: np.ndarray, take: np.ndarray) -> np.ndarray:
    starts = offsets[:-1]
    total = int(take.sum())
    return np.arange(total) - np.repeat(np.cumsum(take) - take, take) + np.repeat(starts, take)


def _compose(rows: np.ndarray | None, order: np.ndarray | None) -> np.ndarray | None:
    if rows is None:
        return order
    if order is None:
        return rows
    return rows[order]


def _lookup_grades(
    keys: np.ndarray,
    codes: np.ndarray,
    docno: pl.Series,
    rows: np.ndarray | None,
    q_keys: np.ndarray,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    q_rel: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Grade of every run row (-1 when not judged) and whether it is judged.

    A hash join: a bitmap indexed by the top bits of the judged keys filters the (few)
    candidate rows, which are then matched exactly by key, query code and docno string.
    """
    n = keys.size
    grades = np.full(n, NOT_JUDGED, dtype=np.int64)
    pooled = np.zeros(n, dtype=bool)
    if n == 0 or q_keys.size == 0:
        return grades, pooled
    bits = max(16, min(26, int(q_keys.size * 32).bit_length()))
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, dtype=bool)
    table[(q_keys >> shift).view(np.int64)] = True
    cand = np.flatnonzero(table[(keys >> shift).view(np.int64)])
    if cand.size == 0:
        return grades, pooled
    sort_q = np.argsort(q_keys, kind="stable")
    sorted_keys = q_keys[sort_q]
    at = np.minimum(np.searchsorted(sorted_keys, keys[cand]), sorted_keys.size - 1)
    hit = sorted_keys[at] == keys[cand]
    found = cand[hit]
    judg = sort_q[at[hit]]
    names = docno.gather(found if rows is None else rows[found])
    same = (q_codes[judg] == codes[found]) & (names == q_docno.gather(judg)).to_numpy()
    if not same.all():
        # A 64-bit hash collision: fall back to an exact join on the strings.
        return _exact_lookup(codes, docno if rows is None else docno.gather(rows),
                             q_codes, q_docno, q_rel)
    grades[found] = q_rel[judg]
    pooled[found] = True
    return grades, pooled


def _exact_lookup(
    codes: np.ndarray,
    docno: pl.Series,
    q_codes: np.ndarray,
    q_docno: pl.Series,
    q_rel: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    left = pl.DataFrame({"c": codes, "d": docno}).with_row_index("i")
    right = pl.DataFrame({"c": q_codes, "d": q_docno, "g": q_rel})
    joined = left.join(right, on=["c", "d"], how="inner")
    rows = joined.get_column("i").to_numpy()
    grades = np.full(codes.size, NOT_JUDGED, dtype=np.int64)
    pooled = np.zeros(codes.size, dtype=bool)
    grades[rows] = joined.get_column("g").to_numpy()
    pooled[rows] = True
    return grades, pooled


def _resolve_ties(
    offsets: np.ndarray,
    scores: np.ndarray,
    grades: np.ndarray,
    pooled: np.ndarray,
    docno: pl.Series,
    source: np.ndarray | None,
) -> None:
    """Order tied results by docno descending (trec_eval's tie-break), in place.

    Only ties that contain a judged document are reordered: among unjudged documents the
    order changes nothing a metric can see (they all carry the same relevance value).
    ``source`` maps ranked rows to rows of ``docno`` (None: the same).
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
    names = docno.gather(rows if source is None else source[rows])
    src = rows[_docno_desc_order(names, run)]
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
    keys: np.ndarray,
    offsets: np.ndarray,
    seg_qids: Sequence[str],
    docno: pl.Series,
    source: np.ndarray | None,
    run: Run,
) -> None:
    """trec_eval refuses a run listing a document twice for a query; so do we.

    Each query's 32-bit key fragments are sorted row-wise in a padded 2-D array (cheap), and
    only queries where two fragments collide are checked on the docno strings. ``offsets``
    cut ``keys`` into segments (one query each, named by ``seg_qids``); ``source`` maps rows
    to rows of ``docno`` (None: the same).
    """
    if keys.size < 2:
        return
    frag = (keys >> np.uint64(32)).astype(np.uint32)
    frag ^= keys.astype(np.uint32)
    suspects = _queries_with_equal_values(frag, offsets)
    if suspects.size == 0:
        return
    rows = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in suspects])
    seg = np.repeat(suspects, np.diff(offsets)[suspects])
    names = docno.gather(rows if source is None else source[rows])
    frame = pl.DataFrame({"s": seg, "d": names})
    dup = frame.filter(pl.struct("s", "d").is_duplicated())
    if dup.height == 0:
        return
    qid, name = seg_qids[dup.item(0, "s")], dup.item(0, "d")
    line = locate_line(run.path, qid, name) if run.path else None
    raise InputError(
        f"document {name!r} is retrieved more than once for query {qid!r}",
        path=run.path,
        line=line,
    )


def _queries_with_equal_values(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Indices of the segments holding some value twice (row-wise sorts, bucketed by length)."""
    counts = np.diff(offsets)
    out: list[np.ndarray] = []
    for segs, width in _length_buckets(counts):
        cols = np.arange(width)
        for chunk in _chunks(segs, width):
            starts = offsets[chunk]
            lens = counts[chunk]
            if np.all(lens == width):
                block = values[starts[:, None] + cols[None, :]]
            else:
                # Pads get distinct values no real (32-bit) value can take.
                valid = cols[None, :] < lens[:, None]
                block = np.broadcast_to(
                    (np.uint64(1) << np.uint64(32)) + cols.astype(np.uint64), (chunk.size, width)
                ).copy()
                block[valid] = values[(starts[:, None] + cols[None, :])[valid]]
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
