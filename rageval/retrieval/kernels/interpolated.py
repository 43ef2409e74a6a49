"""Interpolated precision kernels: iprec_at_recall and 11pt_avg.

The interpolated precision at a relevant retrieved document is the best precision at any rank
at or below it; a recall level becomes a number of relevant documents with trec_eval 10.0's
rounding (:func:`recall_cutoffs`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rageval.retrieval.kernels.segments import (
    _num_rel_f,
    _relevant,
    _seq_scan,
    _Sub,
    _subset_rows,
    _uncounted_relevant,
)
from rageval.retrieval.ranking import Ranking


def recall_cutoffs(r: Ranking, frac: float, rel_level: int) -> np.ndarray:
    """trec_eval 10.0's ``lround(frac * num_rel)`` (halves away from zero), the number of
    relevant documents for a recall level in iprec_at_recall and 11pt_avg.

    (trec_eval 9 and pytrec_eval use ``(long)(frac * num_rel + 0.9)`` there.)
    """
    v = frac * _num_rel_f(r, rel_level)
    a = np.abs(v)
    f = np.floor(a)
    rounded = f + (a - f >= 0.5)  # a - f is exact, unlike a + 0.5
    return (np.sign(v) * rounded).astype(np.int64)


def _interpolated(r: Ranking, rel_level: int) -> tuple[_Sub, np.ndarray]:
    """Interpolated precision at each relevant retrieved document: max precision at any rank
    at or below it (as trec_eval's backwards scan).

    With ``-l`` below 0 the scan counts from num_rel_ret down on rows it does not count in
    num_rel_ret (unjudged ones): the first such many relevant rows are never reached, and the
    others' counts drop by as many."""
    key = ("iprec", rel_level)
    if key not in r._cache:
        sub = _relevant(r, rel_level)
        uncounted = _uncounted_relevant(r, rel_level)
        if uncounted.any():
            sub = _subset_rows(r, sub.rows[sub.nth > uncounted[sub.seg]])
        prec = sub.nth / (sub.pos + 1.0)
        r._cache[key] = (sub, _seq_scan(prec, sub.offsets, np.maximum, -np.inf, reverse=True))
    out: tuple[_Sub, np.ndarray] = r._cache[key]
    return out


def _iprec_values(r: Ranking, cuts: np.ndarray, rel_level: int) -> np.ndarray:
    """Interpolated precision once ``cuts[q]`` relevant documents are found (trec_eval's
    assignment for non-decreasing cutoffs): 0 if cuts exceed num_rel_ret; the overall maximum
    when the cut is 0."""
    sub, ip = _interpolated(r, rel_level)
    nrr = sub.counts
    out = np.zeros(r.num_queries, dtype=np.float64)
    at = np.where(cuts <= 0, 1, cuts)  # a cut of 0 (or below) takes the final maximum
    ok = (at <= nrr) & (nrr > 0)
    out[ok] = ip[sub.offsets[:-1][ok] + at[ok] - 1]
    return out


def interpolated_precision_at_recall(
    r: Ranking, recall_levels: Sequence[float], rel_level: int = 1
) -> np.ndarray:
    """iprec_at_recall: interpolated precision at recall levels, ``[nq, K]``.

    Level x becomes the document count c = lround(x * num_rel) (trec_eval 10.0); the value is
    max over ranks i at or below the c-th relevant retrieved document of P@i (for c = 0: over
    all ranks), 0 when fewer than c relevant documents are retrieved.
    ``recall_levels`` must be sorted ascending (trec_eval sorts them).
    """
    cols = [
        _iprec_values(r, recall_cutoffs(r, x, rel_level), rel_level)
        for x in recall_levels
    ]
    return np.stack(cols, axis=1) if cols else np.zeros((r.num_queries, 0))


def eleven_point_average(
    r: Ranking,
    recall_levels: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    rel_level: int = 1,
) -> np.ndarray:
    """11pt_avg: mean of the interpolated precisions at the recall levels (default 0, .1, ...,
    1), summed from the highest level down as trec_eval does. Unsorted levels reproduce
    trec_eval's single backwards pass exactly (levels it never reaches count as the final
    interpolated precision, or 0)."""
    levels = list(recall_levels)
    if not levels:
        raise ValueError("11pt_avg needs at least one recall level")
    cuts = np.stack([recall_cutoffs(r, x, rel_level) for x in levels], axis=1)
    if np.all(np.diff(cuts, axis=1) >= 0):
        total = np.zeros(r.num_queries, dtype=np.float64)
        for c in range(len(levels) - 1, -1, -1):
            total = total + _iprec_values(r, cuts[:, c], rel_level)
        return total / float(len(levels))
    return _eleven_point_unsorted(r, cuts, rel_level) / float(len(levels))


def _eleven_point_unsorted(r: Ranking, cuts: np.ndarray, rel_level: int) -> np.ndarray:
    sub, ip = _interpolated(r, rel_level)
    nrr = sub.counts.tolist()
    starts = sub.offsets[:-1].tolist()
    ipl = ip.tolist()
    out = np.zeros(r.num_queries, dtype=np.float64)
    for q in range(r.num_queries):
        row = cuts[q].tolist()
        n = nrr[q]
        cc = len(row) - 1
        while cc >= 0 and row[cc] > n:
            cc -= 1
        total = 0.0
        m = n
        while cc >= 0 and 1 <= row[cc] <= m:
            m = row[cc]
            total += ipl[starts[q] + m - 1]
            cc -= 1
        final = ipl[starts[q]] if n > 0 else 0.0
        while cc >= 0:
            total += final
            cc -= 1
        out[q] = total
    return out
