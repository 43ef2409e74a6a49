"""ROC AUC of the retrieval scores (rageval's own measure; trec_eval has none)."""

from __future__ import annotations

import numpy as np

from rageval.retrieval.ranking import Ranking


def roc_auc(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """ROC AUC of the retrieval scores: probability that a retrieved relevant document scores
    above a retrieved non-relevant one (unjudged documents count as non-relevant), ties
    counting 1/2 (Mann-Whitney U / (P * N)). NaN when either class is empty or the ranking has
    no scores."""
    nq = r.num_queries
    out = np.full(nq, np.nan)
    if r.scores is None or r.grades.size == 0:
        return out
    seg = r.segment_ids()
    scores = r.scores
    pos_mask = r.te_rel() >= rel_level
    order = np.lexsort((scores, seg))
    s_sorted = scores[order]
    seg_sorted = seg[order]
    n = order.size
    new = np.ones(n, dtype=bool)
    new[1:] = (seg_sorted[1:] != seg_sorted[:-1]) | (s_sorted[1:] != s_sorted[:-1])
    group = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:], [n])) - 1
    seg_start = r.offsets[:-1][seg_sorted]
    mid_rank = (first[group] + last[group]) / 2.0 - seg_start + 1.0
    p = np.bincount(seg, weights=pos_mask, minlength=nq)
    rank_sum = np.bincount(seg_sorted, weights=mid_rank * pos_mask[order], minlength=nq)
    neg = r.num_ret() - p
    ok = (p > 0) & (neg > 0)
    with np.errstate(invalid="ignore"):
        u = rank_sum - p * (p + 1) / 2.0
        out[ok] = u[ok] / (p[ok] * neg[ok])
    nan_scores = np.bincount(seg, weights=np.isnan(scores), minlength=nq) > 0
    out[nan_scores] = np.nan
    return out
