"""Log-discounted gain kernels: the nDCG family, and G.

DCG and nDCG at a cutoff (linear or exponential gain); trec_eval's dcg and ideal_dcg with gain
overrides, ndcg_rel and Rndcg (experimental); G and its binary form binG. A relevance value's
gain is trec_eval's (:func:`_gain_values`); the ideal ranking sorts all of a query's judgments,
retrieved or not (:func:`_ideal_gains`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from rageval.retrieval.kernels.segments import (
    _last_or_zero,
    _log2_of,
    _log2_table,
    _num_rel_f,
    _offsets,
    _prefix_at,
    _relevant,
    _safe_div,
    _seq_scan,
    _seq_sum,
    _Sub,
    _subset,
    _subset_rows,
)
from rageval.retrieval.ranking import Ranking

Gain = Literal["linear", "exp"]


def _gain_values(values: np.ndarray, gains: Mapping[int, float] | None) -> np.ndarray:
    """trec_eval's gain of a relevance value: the value itself for grades >= 0 unless
    overridden by ``gains`` ({level: gain}); 0 for negative values unless overridden."""
    out = np.where(values > 0, values, 0).astype(np.float64)
    if gains:
        for level, gain in gains.items():
            out[values == level] = float(gain)
    return out


def _ideal_gains(r: Ranking, gains: Mapping[int, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Positive gains of each query's judgments (grades >= 0), sorted descending: the ideal
    ranking. Returns (values, offsets)."""
    key = ("ideal", tuple(sorted(gains.items())) if gains else None)
    if key not in r._cache:
        g = r.judged_grades
        jseg = r.judged_segment_ids()
        keep = g >= 0
        gv = _gain_values(g[keep], gains)
        seg = jseg[keep]
        pos = gv > 0
        gv, seg = gv[pos], seg[pos]
        order = np.lexsort((-gv, seg))
        counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
        r._cache[key] = (gv[order], _offsets(counts))
    out: tuple[np.ndarray, np.ndarray] = r._cache[key]
    return out


def _exp_gain(values: np.ndarray) -> np.ndarray:
    return np.ldexp(1.0, np.maximum(values, 0).astype(np.int64)) - 1.0


def dcg_at(r: Ranking, k: int | None = None, gain: Gain = "linear") -> np.ndarray:
    """DCG@k = sum over the top ``k`` ranks i (1-based) of gain(d_i) / log2(i + 1).

    ``gain="linear"``: gain = grade (trec_eval's ``ndcg_cut``); ``"exp"``: 2**grade - 1
    (Burges et al.). Unjudged documents and grades <= 0 give no gain. ``k=None``: all ranks.
    """
    te = r.te_rel()
    sub = _subset(r, te > 0)
    if k is not None:
        sub = _subset_rows(r, sub.rows[sub.pos < k])
    grades = te[sub.rows]
    g = grades.astype(np.float64) if gain == "linear" else _exp_gain(grades)
    table = _log2_table(int(sub.pos.max()) + 2 if sub.pos.size else 2)
    return _seq_sum(g / table[sub.pos + 2], sub.offsets)


def ideal_dcg_at(r: Ranking, k: int | None = None, gain: Gain = "linear") -> np.ndarray:
    """Ideal DCG@k: DCG of the query's judgments sorted by grade, descending (all judgments,
    not only the retrieved ones, as trec_eval). 0 when no judgment has a positive grade."""
    values, offsets = _ideal_gains(r, None)
    seg = np.repeat(np.arange(r.num_queries), np.diff(offsets))
    pos = np.arange(values.size) - offsets[seg]
    keep = slice(None) if k is None else pos < k
    vals, pos, seg = values[keep], pos[keep], seg[keep]
    if gain == "exp":
        vals = _exp_gain(vals.astype(np.int64))
    counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
    table = _log2_table(int(pos.max()) + 2 if pos.size else 2)
    return _seq_sum(vals / table[pos + 2], _offsets(counts))


def ndcg_at(r: Ranking, k: int | None = None, gain: Gain = "linear") -> np.ndarray:
    """nDCG@k = DCG@k / ideal DCG@k (trec_eval ``ndcg_cut.k``; ``ndcg`` when k is None).

    Linear gain (default) is trec_eval's: gain = grade, the ideal ranking built from all the
    query's judgments. ``gain="exp"`` uses 2**grade - 1. 0 when the ideal DCG is 0.
    """
    dcg = dcg_at(r, k, gain)
    ideal = ideal_dcg_at(r, k, gain)
    return np.where(ideal > 0, _safe_div(dcg, ideal), dcg)


def trec_dcg(
    r: Ranking, gains: Mapping[int, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """trec_eval's ``dcg`` and ``ideal_dcg`` (no cutoff) with optional gain overrides
    ``{level: gain}`` (``-m ndcg.1=3.5,2=9``); ``ndcg`` = dcg / ideal_dcg (0 if ideal is 0).

    Results: sum of gain / log2(rank + 1) over retrieved documents with non-zero gain.
    Ideal: the positive gains of all judgments (grades >= 0), sorted descending.
    """
    te = r.te_rel()
    rg = _gain_values(te, gains)
    sub = _subset(r, rg != 0)
    table = _log2_table(int(sub.pos.max()) + 2 if sub.pos.size else 2)
    dcg = _seq_sum(rg[sub.rows] / table[sub.pos + 2], sub.offsets)
    values, offsets = _ideal_gains(r, gains)
    seg = np.repeat(np.arange(r.num_queries), np.diff(offsets))
    pos = np.arange(values.size) - offsets[seg]
    table = _log2_table(int(pos.max()) + 2 if pos.size else 2)
    ideal = _seq_sum(values / table[pos + 2], offsets)
    return dcg, ideal


def _ideal_prefix(r: Ranking, gains: Mapping[int, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Running ideal DCG after each ideal rank, and offsets."""
    values, offsets = _ideal_gains(r, gains)
    seg = np.repeat(np.arange(r.num_queries), np.diff(offsets))
    pos = np.arange(values.size) - offsets[seg]
    table = _log2_table(int(pos.max()) + 2 if pos.size else 2)
    return _seq_scan(values / table[pos + 2], offsets, np.add, 0.0), offsets


def _results_prefix(
    r: Ranking, gains: Mapping[int, float] | None
) -> tuple[_Sub, np.ndarray, np.ndarray]:
    """Retrieved rows with non-zero gain, their gain and running DCG (inclusive)."""
    rg = _gain_values(r.te_rel(), gains)
    sub = _subset(r, rg != 0)
    g = rg[sub.rows]
    table = _log2_table(int(sub.pos.max()) + 2 if sub.pos.size else 2)
    return sub, g, _seq_scan(g / table[sub.pos + 2], sub.offsets, np.add, 0.0)


def ndcg_rel(r: Ranking, gains: Mapping[int, float] | None = None) -> np.ndarray:
    """ndcg_rel (trec_eval, experimental): nDCG averaged over the relevant documents.

    For each retrieved document with positive gain at rank i: DCG@i / idealDCG@min(i, L)
    (L = number of positive ideal gains); each of the L - (such documents) missing ones counts
    DCG@end / idealDCG@L. Divided by L; 0 when that sum is not positive.
    """
    nq = r.num_queries
    sub, g, run_dcg = _results_prefix(r, gains)
    ideal, ioff = _ideal_prefix(r, gains)
    big_l = np.diff(ioff)
    pos_rows = g > 0
    seg = sub.seg[pos_rows]
    at = np.minimum(sub.pos[pos_rows], big_l[seg] - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal_at = np.where(big_l[seg] > 0, ideal[np.maximum(ioff[seg] + at, 0)], 0.0)
        terms = run_dcg[pos_rows] / ideal_at
    counts = np.bincount(seg, minlength=nq).astype(np.int64)
    total = _seq_sum(terms, _offsets(counts))
    final_dcg = _last_or_zero(run_dcg, sub.offsets)
    final_ideal = _last_or_zero(ideal, ioff)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = total + ((big_l - counts).astype(np.float64) * final_dcg) / final_ideal
    ok = total > 0
    out = np.zeros(nq, dtype=np.float64)
    out[ok] = total[ok] / big_l[ok]
    return out


def rndcg(
    r: Ranking, gains: Mapping[int, float] | None = None, rel_level: int = 1
) -> np.ndarray:
    """Rndcg (trec_eval, experimental): nDCG averaged at the R-levels of the ideal ranking.

    At each ideal rank where the ideal gain changes (gain levels sorted descending, and the
    end of the positive gains), take DCG / idealDCG of the ranks above it; if the retrieval
    continues past the positive ideal gains (num_ret > L + 1), add DCG/idealDCG at the end.
    Average of those values; 0 when num_rel = 0.
    """
    nq = r.num_queries
    sub, _, run_dcg = _results_prefix(r, gains)
    values, ioff = _ideal_gains(r, gains)
    ideal, _ = _ideal_prefix(r, gains)
    big_l = np.diff(ioff)
    nret = r.num_ret()
    # Change points c in 1..L: gain at c differs from gain at c-1 (gain at L is "none").
    iseg = np.repeat(np.arange(nq), big_l)
    ipos = np.arange(values.size) - ioff[iseg]
    nxt = np.full(values.size, -np.inf)
    if values.size > 1:
        nxt[:-1] = np.where(iseg[1:] == iseg[:-1], values[1:], -np.inf)
    change = values != nxt  # change at ideal rank ipos + 1
    c_seg = iseg[change]
    c = ipos[change] + 1
    ideal_before = ideal[np.flatnonzero(change)]  # ideal DCG through rank c - 1 (0-based)
    # Results DCG through rank min(c - 1, num_ret - 1): count nonzero-gain rows ranked < c.
    dcg_before = _prefix_at(sub, run_dcg, c_seg, np.minimum(c, nret[c_seg]))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = dcg_before / ideal_before
    counts = np.bincount(c_seg, minlength=nq).astype(np.int64)
    total = _seq_sum(terms, _offsets(counts))
    final_ideal = _last_or_zero(ideal, ioff)
    extra = (nret > big_l + 1) & (final_ideal > 0)
    final_dcg = _last_or_zero(run_dcg, sub.offsets)
    total[extra] = total[extra] + final_dcg[extra] / final_ideal[extra]
    n_terms = counts + extra
    with np.errstate(divide="ignore", invalid="ignore"):
        out = total / n_terms
    out[r.num_rel(rel_level) == 0] = 0.0
    return out


def g_measure(r: Ranking, gains: Mapping[int, float] | None = None) -> np.ndarray:
    """G (trec_eval, experimental): sum over retrieved d_i with non-zero gain of
    gain(d_i) / log2(2 + cost_i - got_i) / (sum of positive ideal gains), where got_i is the
    gain retrieved so far and cost_i the sum of max(ideal gain, 1) over ranks <= i (1 per rank
    past the ideal list). 0 when there is no positive ideal gain."""
    nq = r.num_queries
    rg = _gain_values(r.te_rel(), gains)
    sub = _subset(r, rg != 0)
    g = rg[sub.rows]
    got = _seq_scan(g, sub.offsets, np.add, 0.0)
    values, ioff = _ideal_gains(r, gains)
    cost_steps = np.maximum(values, 1.0)
    cost_prefix = _seq_scan(cost_steps, ioff, np.add, 0.0)
    big_l = np.diff(ioff)
    seg = sub.seg
    pos = sub.pos
    inside = pos < big_l[seg]
    cost = np.empty(g.size, dtype=np.float64)
    cost[inside] = cost_prefix[ioff[seg[inside]] + pos[inside]]
    out_rows = ~inside
    if out_rows.any():
        last = _last_or_zero(cost_prefix, ioff)
        integral = np.all(cost_steps == np.floor(cost_steps))
        extra = (pos[out_rows] - big_l[seg[out_rows]] + 1).astype(np.float64)
        if integral:
            cost[out_rows] = last[seg[out_rows]] + extra
        else:  # add 1.0 rank by rank, exactly as trec_eval does
            cost[out_rows] = _cost_past_ideal(last, seg[out_rows], extra)
    arg = (2.0 + cost) - got
    with np.errstate(divide="ignore", invalid="ignore"):
        contrib = g / _log2_of(arg)
    total = _seq_sum(contrib, sub.offsets)
    ideal_sum = _seq_sum(values, ioff)
    out = np.zeros(nq, dtype=np.float64)
    ok = ideal_sum > 0
    out[ok] = total[ok] / ideal_sum[ok]
    return out


def _cost_past_ideal(last: np.ndarray, seg: np.ndarray, extra: np.ndarray) -> np.ndarray:
    out = np.empty(seg.size, dtype=np.float64)
    for i, (q, e) in enumerate(zip(seg.tolist(), extra.tolist(), strict=True)):
        v = float(last[q])
        for _ in range(int(e)):
            v += 1.0
        out[i] = v
    return out


def bin_g(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """binG: (1/num_rel) * sum over relevant retrieved d of 1 / log2(2 + non-relevant above d).
    0 when nothing relevant is retrieved; +inf as trec_eval when ``rel_level`` below 0 finds
    only unjudged rows of a topic whose num_rel is 0."""
    sub = _relevant(r, rel_level)
    arg = 3 + sub.pos - sub.nth  # 2 + documents above d that are not relevant
    table = _log2_table(int(arg.max()) if arg.size else 2)
    contrib = 1.0 / table[arg]
    sums = _seq_sum(contrib, sub.offsets)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sub.counts > 0, sums / _num_rel_f(r, rel_level), 0.0)
