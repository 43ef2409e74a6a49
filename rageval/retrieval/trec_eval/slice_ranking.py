"""A slice of a run written topic by topic, ranked as trec_eval ranks it, in the file's order.

The common case of a run read in slices: each topic's lines form one block, already in rank
order (scores not rising), every topic judged, no document judged twice. Then the ranking is
the file's rows as they are, one segment per block, with the topics in the file's order (the
caller puts the per-topic values in trec_eval's order afterwards): no permutation, no copy of
the columns. What is left is the grade of each row (a hash join checked on the strings), the
documents listed twice (refused, as trec_eval does) and trec_eval's tie-break (docno descending
among equal scores), settled for the tied rows that hold a judged document only.

:func:`ranked_slice` returns None wherever the slice is not that case, or is not cheaply shown
to be: :meth:`Ranking.from_trec` then ranks it, with every rule and every error of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from rageval.retrieval.ranking import Ranking
from rageval.retrieval.ranking.arrays import NOT_JUDGED, offsets_from_counts
from rageval.retrieval.ranking.trec_grades import check_run_unique, salted_keys
from rageval.retrieval.ranking.trec_order import Layout, Segments
from rageval.retrieval.trec import Run

__all__ = ["SliceJudgments", "ranked_slice"]

# Tied rows compared pairwise (a judged row against each row of its tie) before the slice is
# left to the general ranking: ties of hundreds of documents are rare but possible.
_MAX_TIE_PAIRS = 1 << 18
# Steps taken outward from a judged row to find the ends of its tie, likewise.
_MAX_TIE_STEPS = 32


@dataclass(frozen=True)
class SliceJudgments:
    """The judgments of a slice's topics, topic after topic in the slice's order."""

    hashes: np.ndarray  # uint64 docno hash of each judgment (the run's seed)
    rel: np.ndarray  # int64 grade of each judgment
    docno: pl.Series  # each judgment's docno
    counts: np.ndarray  # int64 judgments of each topic


def ranked_slice(run: Run, judged: SliceJudgments, max_retrieved: int | None) -> Ranking | None:
    """The slice's ranking, topics in file order (see the module); None where the general
    ranking must decide. Raises DuplicateDocument for a document listed twice for a topic."""
    layout = run.qid_layout()
    starts = layout.starts
    if (starts is None or not starts.size or len(layout.names) != starts.size
            or judged.counts.size != starts.size):
        return None  # no line, a topic in two blocks, or a topic the qrels do not judge
    n = len(run)
    offsets = np.append(starts, n).astype(np.int64)
    lengths = np.diff(offsets)
    if max_retrieved is not None and int(lengths.max(initial=0)) > max_retrieved:
        return None
    scores = run.frame.get_column("score").to_numpy()
    rising = np.flatnonzero(scores[1:] > scores[:-1]) + 1  # rows scored above the one before
    at = np.minimum(np.searchsorted(starts, rising), starts.size - 1)
    if not np.array_equal(starts[at], rising):
        return None  # a topic not in rank order (a rise inside a block, not at its start)
    qids = [layout.names[i] for i in layout.block_name.tolist()]  # type: ignore[union-attr]
    docno = run.frame.get_column("docno")
    hashes = run.docno_hashes()
    blocks = np.arange(starts.size, dtype=np.int64)
    check_run_unique(hashes, Layout(offsets=offsets, starts=starts),
                     Segments(blocks, starts, lengths, True), docno, qids, run)
    looked_up = _grades(hashes, offsets, docno, judged)
    if looked_up is None:
        return None
    grades, pooled = looked_up
    if not _break_ties(offsets, scores, grades, pooled, docno):
        return None
    judged_blocks = np.repeat(blocks, judged.counts)
    order = np.lexsort((-judged.rel, judged_blocks))
    return Ranking(
        qids=tuple(qids),
        offsets=offsets,
        grades=grades,
        scores=scores.astype(np.float64, copy=False),
        judged_offsets=offsets_from_counts(judged.counts.astype(np.int64)),
        judged_grades=judged.rel[order].astype(np.int64, copy=False),
        runid=run.runid,
        _pooled=pooled if bool(np.any(judged.rel < 0)) else None,
    )


def _grades(hashes: np.ndarray, offsets: np.ndarray, docno: pl.Series,
            judged: SliceJudgments) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's grade (NOT_JUDGED where its topic does not judge it) and whether it is
    judged; None on a 64-bit hash collision (the general ranking joins on the strings).

    Two bitmaps on independent bits of the docno hashes keep the few candidate rows; those
    are matched by (topic, hash) key, and the matches checked on the docno strings."""
    n = hashes.size
    grades = np.full(n, NOT_JUDGED, dtype=np.int64)
    pooled = np.zeros(n, dtype=bool)
    if n == 0 or judged.hashes.size == 0:
        return grades, pooled
    bits = max(16, min(24, int(judged.hashes.size * 16).bit_length()))
    shift, mask = np.uint64(64 - bits), np.uint64((1 << bits) - 1)
    high = np.zeros(1 << bits, dtype=bool)
    high[(judged.hashes >> shift).view(np.int64)] = True
    low = np.zeros(1 << bits, dtype=bool)
    low[(judged.hashes & mask).view(np.int64)] = True
    cand = np.flatnonzero(high[(hashes >> shift).view(np.int64)])
    cand = cand[low[(hashes[cand] & mask).view(np.int64)]]
    nq = offsets.size - 1
    keys = salted_keys(hashes[cand], np.searchsorted(offsets, cand, side="right") - 1, nq)
    judged_keys = salted_keys(judged.hashes, np.repeat(np.arange(nq), judged.counts), nq)
    by_key = np.argsort(judged_keys)
    sorted_keys = judged_keys[by_key]
    at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    hit = sorted_keys[at] == keys
    rows, which = cand[hit], by_key[at[hit]]
    if not (docno[rows] == judged.docno[which]).all():  # (indexing: a gather, no query)
        return None
    grades[rows] = judged.rel[which]
    pooled[rows] = True
    return grades, pooled


def _break_ties(offsets: np.ndarray, scores: np.ndarray, grades: np.ndarray,
                pooled: np.ndarray, docno: pl.Series) -> bool:
    """trec_eval's tie-break, in place: among rows of a topic with equal scores, docno
    descending. Only ties holding a judged row change anything a measure sees: each judged
    row of such a tie goes to the tie's start plus the number of its rows with a greater
    docno (docnos are distinct within a topic), the unjudged rows fill the rest. False where
    the ties are too long for that (the caller ranks the slice the general way)."""
    rows = np.flatnonzero(pooled)
    if rows.size == 0:
        return True
    first = offsets[np.searchsorted(offsets, rows, side="right") - 1]  # its topic's rows
    end = offsets[np.searchsorted(offsets, rows, side="right")]
    lo, hi = rows.copy(), rows + 1
    for _ in range(_MAX_TIE_STEPS):
        left = lo > first
        left[left] = scores[lo[left] - 1] == scores[rows[left]]
        right = hi < end
        right[right] = scores[hi[right]] == scores[rows[right]]
        if not (left.any() or right.any()):
            break
        lo -= left
        hi += right
    else:
        return False
    tied = hi - lo > 1
    if not tied.any():
        return True
    rows, lo, hi = rows[tied], lo[tied], hi[tied]
    sizes = hi - lo
    if int(sizes.sum()) > _MAX_TIE_PAIRS:
        return False
    # Each judged row against every row of its tie: how many have a greater docno.
    mine = np.repeat(rows, sizes)
    others = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
    greater = (docno[others] > docno[mine]).to_numpy()
    ahead = np.add.reduceat(greater.astype(np.int64), np.cumsum(sizes) - sizes)
    moved_grades, moved_pooled = grades[rows], pooled[rows]
    grades[others] = NOT_JUDGED
    pooled[others] = False
    target = lo + ahead
    grades[target] = moved_grades
    pooled[target] = moved_pooled
    return True
