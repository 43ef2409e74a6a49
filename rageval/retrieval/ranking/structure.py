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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rageval.core.errors import InputError
from rageval.retrieval.ranking.arrays import (
    NOT_JUDGED,
    TE_NONPOOL,
    TE_UNJUDGED,
    fast_allocation,
    offsets_from_counts,
    segment_ids_of,
)
from rageval.retrieval.ranking.trec_grades import (
    check_qrels_unique,
    check_run_unique,
    lookup_grades,
    salted_keys,
)
from rageval.retrieval.ranking.trec_order import query_codes, rank_layout, resolve_ties, truncate
from rageval.retrieval.trec import Qrels, Run, read_qrels, read_run

__all__ = ["Ranking"]


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
            self._cache["seg"] = segment_ids_of(self.offsets)
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
            self._cache["jseg"] = segment_ids_of(self.judged_offsets)
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
            offsets=offsets_from_counts(counts),
            grades=grade_arr,
            scores=score_arr,
            judged_offsets=offsets_from_counts(jcounts),
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


def _build_from_trec(
    qrels: Qrels, run: Run, max_retrieved: int | None, all_qrels_queries: bool
) -> Ranking:
    frame = run.frame
    qids, q_codes_all, segs = query_codes(qrels, run, all_qrels_queries)
    nq = len(qids)
    docno = frame.get_column("docno")
    scores = frame.get_column("score").to_numpy()  # once: a copy where there are chunks
    if np.isnan(scores).any():
        raise InputError("a score is NaN", path=run.path)

    layout = rank_layout(segs, scores, nq)
    if max_retrieved is not None and np.diff(layout.offsets).max(initial=0) > max_retrieved:
        layout = truncate(layout, scores, max_retrieved, docno)
    offsets = layout.offsets
    scores_o = layout.take(scores)
    del scores

    # Judgments of the evaluated queries.
    q_frame = qrels.frame
    q_docno = q_frame.get_column("docno")
    q_rel = q_frame.get_column("rel").to_numpy()
    q_codes = q_codes_all
    q_rows = None
    if q_codes_all.size and q_codes_all.min() < 0:  # judgments of queries not evaluated
        q_rows = np.flatnonzero(q_codes_all >= 0)
        q_codes, q_docno, q_rel = q_codes_all[q_rows], q_docno.gather(q_rows), q_rel[q_rows]
    q_hash = qrels.docno_hashes()
    if q_rows is not None:
        q_hash = q_hash[q_rows]
    check_qrels_unique(qrels, salted_keys(q_hash, q_codes, nq), q_codes, q_docno, qids)

    hashes = run.docno_hashes()
    check_run_unique(hashes, layout, segs, docno, qids, run)
    grades, pooled = lookup_grades(hashes, layout, segs, docno, q_hash, q_codes, q_docno, q_rel)
    del hashes
    resolve_ties(offsets, scores_o, grades, pooled, docno, layout)

    j_order = np.lexsort((-q_rel, q_codes))
    judged_counts = np.bincount(q_codes, minlength=nq).astype(np.int64)
    has_negative = bool(np.any(q_rel < 0))
    return Ranking(
        qids=tuple(qids),
        offsets=offsets,
        grades=grades,
        scores=scores_o.astype(np.float64, copy=False),
        judged_offsets=offsets_from_counts(judged_counts),
        judged_grades=q_rel[j_order].astype(np.int64, copy=False),
        runid=run.runid,
        _pooled=pooled if has_negative else None,
    )


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
