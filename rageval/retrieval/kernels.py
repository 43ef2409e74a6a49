"""Vectorised retrieval-metric kernels over a :class:`~rageval.retrieval.ranking.Ranking`.

Every kernel takes a ranking and returns one float64 value per query (``[nq]``, or
``[nq, K]`` for the multi-cutoff ones), following trec_eval 10.0's definitions and edge cases
bit for bit: the same floating-point operations in the same order (sums are accumulated
sequentially in rank order, ``log2`` comes from the C library), so values print identically
to trec_eval's. A value trec_eval reports as 0 (e.g. recall of a query without relevant
documents) is 0 here.

Relevance conventions (trec_eval's). Each retrieved document carries a *relevance value*:
its grade when judged with a grade >= 0, ``-1`` when it is not in the query's judgments
("not pooled") and ``-2`` when it is judged with a negative grade ("pooled but unjudged",
used by infAP). A document is *relevant* when that value is ``>= rel_level``; ``num_rel`` is
the number of judgments with grade ``>= max(rel_level, 0)``. Graded measures (the nDCG family,
ERR, RBP) use the grade itself as gain, and a negative value gives no gain.

The docstring of each kernel is its metric card: formula, parameters, edge cases.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rageval.retrieval.ranking import TE_NONPOOL, TE_UNJUDGED, Ranking

__all__ = [
    "INFAP_EPSILON",
    "MIN_GEO_MEAN",
    "average_precision",
    "bin_g",
    "bpref",
    "dcg_at",
    "eleven_point_average",
    "err_at",
    "f1_at",
    "first_relevant_rank",
    "g_measure",
    "hit_at",
    "ideal_dcg_at",
    "infap",
    "interpolated_precision_at_recall",
    "ndcg_at",
    "ndcg_rel",
    "num_nonrel_judged_ret",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "precision_at",
    "r_precision",
    "r_precision_mult",
    "rbp",
    "rbp_residual",
    "recall_at",
    "reciprocal_rank",
    "relative_precision_at",
    "relstring",
    "rndcg",
    "roc_auc",
    "set_f",
    "set_map",
    "set_precision",
    "set_recall",
    "set_relative_precision",
    "success_at",
    "trec_dcg",
    "unjudged_at",
    "utility",
    "yaap",
]

MIN_GEO_MEAN = 1e-5
"""Floor applied before taking logs for geometric means (gm_map, gm_bpref), as trec_eval."""

INFAP_EPSILON = 1e-5
"""Smoothing constant of infAP (trec_eval's INFAP_EPSILON)."""

Gain = Literal["linear", "exp"]


# ==========================================================================================
# Helpers
# ==========================================================================================


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


_LOG2: list[np.ndarray] = [np.array([-np.inf])]


def _log2_table(n: int) -> np.ndarray:
    """``t[i] == log2(i)`` for ``0 < i <= n`` from the C library's log2 (as trec_eval uses).

    numpy's SIMD log2 may differ from libm's in the last bit, which can flip a 4th decimal.
    """
    table = _LOG2[0]
    if table.size <= n:
        size = max(n + 1, 2 * table.size, 1024)
        extra = np.fromiter((math.log2(i) for i in range(table.size, size)), np.float64)
        table = np.concatenate((table, extra))
        _LOG2[0] = table
    return table


def _log2_of(values: np.ndarray) -> np.ndarray:
    """libm log2 of arbitrary positive doubles (one Python call per distinct value)."""
    uniq, inv = np.unique(values, return_inverse=True)
    logs = np.fromiter((math.log2(v) for v in uniq.tolist()), np.float64, uniq.size)
    return logs[inv]


def _power_table(p: float, n: int) -> np.ndarray:
    """``t[i] == p**i`` computed by repeated multiplication (``cur_p *= p``), as trec_eval."""
    steps = np.full(n + 1, p, dtype=np.float64)
    steps[0] = 1.0
    return np.multiply.accumulate(steps)


def _length_buckets(counts: np.ndarray, min_len: int = 1) -> list[tuple[np.ndarray, int]]:
    """Segments with >= ``min_len`` elements grouped so that padding wastes <= half the space."""
    segs = np.flatnonzero(counts >= min_len)
    if segs.size == 0:
        return []
    lens = counts[segs]
    if lens.min() * 2 >= lens.max():
        return [(segs, int(lens.max()))]
    exp = np.frexp(lens.astype(np.float64))[1]
    return [(segs[exp == e], int(lens[exp == e].max())) for e in np.unique(exp)]


def _seq_scan(
    values: np.ndarray,
    offsets: np.ndarray,
    op: np.ufunc,
    identity: float,
    *,
    reverse: bool = False,
) -> np.ndarray:
    """Inclusive scan of ``op`` within each segment, evaluated strictly left to right.

    ``np.add.reduceat``/``np.sum`` sum pairwise, which can differ from trec_eval's running sums
    in the last bit; ``ufunc.accumulate`` along the rows of a padded 2-D block is sequential.
    Segments are bucketed by length so padding costs at most 2x.
    """
    n = values.size
    if reverse:
        back = _seq_scan(values[::-1], n - offsets[::-1], op, identity)
        return back[::-1]
    out = np.empty_like(values)
    if n == 0:
        return out
    counts = np.diff(offsets)
    nseg = counts.size
    width = int(counts.max())
    if width * nseg == n and np.all(counts == width):
        block = values.reshape(nseg, width).copy()
        op.accumulate(block, axis=1, out=block)
        return block.reshape(-1)
    for segs, w in _length_buckets(counts):
        cols = np.arange(w)
        per = max(1, (1 << 21) // w)
        for i in range(0, segs.size, per):
            chunk = segs[i : i + per]
            valid = cols[None, :] < counts[chunk][:, None]
            idx = (offsets[chunk][:, None] + cols[None, :])[valid]
            block = np.full((chunk.size, w), identity, dtype=values.dtype)
            block[valid] = values[idx]
            op.accumulate(block, axis=1, out=block)
            out[idx] = block[valid]
    return out


def _seq_sum(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-segment sums accumulated sequentially (0.0 for an empty segment)."""
    counts = np.diff(offsets)
    sums = np.zeros(counts.size, dtype=np.float64)
    if values.size == 0:
        return sums
    scan = _seq_scan(values.astype(np.float64, copy=False), offsets, np.add, 0.0)
    nz = counts > 0
    sums[nz] = scan[offsets[1:][nz] - 1]
    return sums


@dataclass(frozen=True)
class _Sub:
    """A subset of the retrieved rows, in rank order, with its own segment offsets."""

    rows: np.ndarray  # indices into the ranking's rows
    seg: np.ndarray  # query of each row
    pos: np.ndarray  # 0-based rank of each row within its query
    offsets: np.ndarray  # segment offsets of the subset
    counts: np.ndarray  # rows per query
    nth: np.ndarray  # 1-based index of each row within its query's subset


def _subset(r: Ranking, mask: np.ndarray) -> _Sub:
    return _subset_rows(r, np.flatnonzero(mask))


def _subset_rows(r: Ranking, rows: np.ndarray) -> _Sub:
    """Sub-ranking of the given rows (ascending); no per-row array of the full ranking."""
    seg = np.searchsorted(r.offsets, rows, side="right") - 1
    pos = rows - r.offsets[seg]
    counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
    offsets = _offsets(counts)
    nth = np.arange(rows.size, dtype=np.int64) - offsets[seg] + 1
    return _Sub(rows, seg, pos, offsets, counts, nth)


def _relevant(r: Ranking, rel_level: int) -> _Sub:
    """Retrieved rows with relevance value >= rel_level (cached per level)."""
    key = ("relsub", rel_level)
    if key not in r._cache:
        r._cache[key] = _subset(r, r.te_rel() >= rel_level)
    sub: _Sub = r._cache[key]
    return sub


def _judged(r: Ranking) -> _Sub:
    """Retrieved rows judged with a grade >= 0."""
    if "judgedsub" not in r._cache:
        r._cache["judgedsub"] = _subset(r, r.te_rel() >= 0)
    sub: _Sub = r._cache["judgedsub"]
    return sub


def _count_top(r: Ranking, sub: _Sub, k: int | np.ndarray) -> np.ndarray:
    """Per query, the number of subset rows ranked within the top ``k`` (k may vary by query)."""
    kk = k if np.isscalar(k) else np.asarray(k)[sub.seg]
    hit = sub.pos < kk
    return np.bincount(sub.seg[hit], minlength=r.num_queries).astype(np.int64)


def _exclusive_count(flags: np.ndarray, sub: _Sub) -> np.ndarray:
    """For each subset row, how many earlier rows of the same query have ``flags`` set."""
    inclusive = np.cumsum(flags, dtype=np.int64)
    before = np.concatenate(([0], inclusive))[sub.offsets[:-1]]
    return inclusive - before[sub.seg] - flags


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den where den != 0, else 0 (trec_eval leaves such values at 0)."""
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) != 0)
    return out


def _num_rel_f(r: Ranking, rel_level: int) -> np.ndarray:
    return r.num_rel(rel_level).astype(np.float64)


# ==========================================================================================
# Counts
# ==========================================================================================


def num_ret(r: Ranking) -> np.ndarray:
    """num_ret: number of retrieved documents (after ``-M``). Summed, not averaged, by trec_eval."""
    return r.num_ret().astype(np.float64)


def num_rel(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """num_rel: number of judged documents with grade >= ``rel_level`` (and >= 0)."""
    return _num_rel_f(r, rel_level)


def num_rel_ret(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """num_rel_ret: retrieved documents judged with grade >= max(rel_level, 0)."""
    return _relevant(r, max(rel_level, 0)).counts.astype(np.float64)


def num_nonrel_judged_ret(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """num_nonrel_judged_ret: retrieved documents judged non-relevant (0 <= grade < rel_level).

    = num_ret - not pooled - pooled-but-unjudged - num_rel_ret.
    """
    judged = _judged(r).counts
    return (judged - num_rel_ret(r, rel_level)).astype(np.float64)


# ==========================================================================================
# Precision / recall at cutoffs
# ==========================================================================================


def precision_at(r: Ranking, k: int, rel_level: int = 1) -> np.ndarray:
    """P@k (trec_eval ``P.k``): relevant documents in the top ``k``, divided by ``k``.

    ``k`` is always the denominator: a query retrieving fewer than ``k`` documents is padded
    with non-relevant ones (15 retrieved, 4 relevant: P@20 = 0.2).
    """
    if k < 1:
        raise ValueError(f"cutoff must be >= 1, got {k}")
    return _count_top(r, _relevant(r, rel_level), k) / float(k)


def recall_at(r: Ranking, k: int, rel_level: int = 1) -> np.ndarray:
    """recall@k (``recall.k``): relevant documents in the top ``k`` / num_rel; 0 if num_rel = 0."""
    return _safe_div(_count_top(r, _relevant(r, rel_level), k), _num_rel_f(r, rel_level))


def relative_precision_at(r: Ranking, k: int, rel_level: int = 1) -> np.ndarray:
    """relative_P@k (``relative_P.k``): relevant in the top ``k`` / min(k, num_rel).

    The best achievable value is 1 even when fewer than ``k`` relevant documents exist.
    0 when num_rel = 0.
    """
    nrel = _num_rel_f(r, rel_level)
    return _safe_div(_count_top(r, _relevant(r, rel_level), k), np.minimum(float(k), nrel))


def success_at(r: Ranking, k: int, rel_level: int = 1) -> np.ndarray:
    """success@k (``success.k``, a.k.a. hit@k): 1 if a relevant document is in the top ``k``."""
    return (_count_top(r, _relevant(r, rel_level), k) > 0).astype(np.float64)


hit_at = success_at


def unjudged_at(r: Ranking, k: int) -> np.ndarray:
    """unj@k (``unj.k``): fraction of the top ``k`` that is not judged (not pooled, or pooled
    with a negative grade), over ``k``; missing ranks below num_ret count as judged."""
    if k < 1:
        raise ValueError(f"cutoff must be >= 1, got {k}")
    top = np.minimum(r.num_ret(), k)
    judged = _count_top(r, _judged(r), k)
    return (top - judged) / float(k)


def r_precision(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """Rprec: precision after R = num_rel documents, i.e. relevant in the top R / R.

    Only the first min(num_ret, R) documents are looked at; 0 when that is 0.
    """
    nrel = r.num_rel(rel_level)
    look = np.minimum(r.num_ret(), nrel)
    cnt = _count_top(r, _relevant(r, rel_level), look)
    return np.where(look > 0, _safe_div(cnt, nrel.astype(np.float64)), 0.0)


def r_precision_mult(r: Ranking, mult: float, rel_level: int = 1) -> np.ndarray:
    """Rprec_mult.x: precision at cutoff c = (long)(x * num_rel + 0.9) (trec_eval's rounding).

    Like P@c (padded with non-relevant documents when c > num_ret); 0 when c = 0.
    """
    cut = _mult_cutoffs(r, mult, rel_level)
    cnt = _count_top(r, _relevant(r, rel_level), cut)
    return _safe_div(cnt, cut.astype(np.float64))


def _mult_cutoffs(r: Ranking, frac: float, rel_level: int) -> np.ndarray:
    """trec_eval's ``(long)(frac * num_rel + 0.9)`` (truncation toward zero), for Rprec_mult."""
    return np.trunc(frac * _num_rel_f(r, rel_level) + 0.9).astype(np.int64)


def _recall_cutoffs(r: Ranking, frac: float, rel_level: int) -> np.ndarray:
    """trec_eval 10.0's ``lround(frac * num_rel)`` (halves away from zero), the number of
    relevant documents for a recall level in iprec_at_recall and 11pt_avg.

    (trec_eval 9 and pytrec_eval use ``(long)(frac * num_rel + 0.9)`` there.)
    """
    v = frac * _num_rel_f(r, rel_level)
    a = np.abs(v)
    f = np.floor(a)
    rounded = f + (a - f >= 0.5)  # a - f is exact, unlike a + 0.5
    return (np.sign(v) * rounded).astype(np.int64)


# ==========================================================================================
# Rank-based: AP, RR, bpref, infAP, interpolated precision
# ==========================================================================================


def _ap_sums(r: Ranking, rel_level: int, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Sum over relevant ranks (within the top k) of precision at that rank; and count."""
    sub = _relevant(r, rel_level)
    contrib = sub.nth / (sub.pos + 1.0)
    if k is None:
        return _seq_sum(contrib, sub.offsets), sub.counts
    keep = sub.pos < k
    seg = sub.seg[keep]
    counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
    return _seq_sum(contrib[keep], _offsets(counts)), counts


def average_precision(r: Ranking, rel_level: int = 1, k: int | None = None) -> np.ndarray:
    """AP (trec_eval ``map`` per query; with ``k``, ``map_cut.k`` / map@k).

    AP = (1 / num_rel) * sum over relevant retrieved documents d (rank <= k) of P@rank(d).
    Relevant documents that are not retrieved (or ranked below k) contribute 0. 0 when nothing
    relevant is retrieved or num_rel = 0.
    """
    sums, found = _ap_sums(r, rel_level, k)
    nrel = _num_rel_f(r, rel_level)
    return np.where(found > 0, _safe_div(sums, nrel), 0.0)


def yaap(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """yaap (Robertson's "yet another AP"): log((1 + S) / (1 + num_rel - S)), S = AP's sum of
    precisions at relevant ranks (before dividing by num_rel)."""
    sums, _ = _ap_sums(r, rel_level, None)
    nrel = _num_rel_f(r, rel_level)
    pairs = zip(sums.tolist(), nrel.tolist(), strict=True)
    return np.array([math.log((1.0 + s) / (1.0 + n - s)) for s, n in pairs], dtype=np.float64)


def first_relevant_rank(r: Ranking, rel_level: int = 1, k: int | None = None) -> np.ndarray:
    """1-based rank of the first relevant document within the top ``k`` (all if None); NaN if
    there is none."""
    sub = _relevant(r, rel_level)
    out = np.full(r.num_queries, np.nan)
    has = sub.counts > 0
    first_pos = sub.pos[sub.offsets[:-1][has]]
    out[has] = first_pos + 1.0
    if k is not None:
        out[out > k] = np.nan
    return out


def reciprocal_rank(r: Ranking, rel_level: int = 1, k: int | None = None) -> np.ndarray:
    """RR (``recip_rank``; mrr@k with ``k``): 1 / rank of the first relevant document within
    the top ``k``; 0 if there is none."""
    rank = first_relevant_rank(r, rel_level, k)
    out = np.zeros(r.num_queries, dtype=np.float64)
    ok = ~np.isnan(rank)
    out[ok] = 1.0 / rank[ok]
    return out


def bpref(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """bpref (Buckley & Voorhees 2004), on judged documents only.

    bpref = (1/R) * sum over judged relevant retrieved d of
    (1 - min(n_d, R) / min(N, R)) where n_d is the number of judged non-relevant documents
    ranked above d, R = num_rel and N = judged non-relevant (0 <= grade < rel_level);
    a term is 1 when n_d = 0. Unjudged documents are skipped. 0 when R = 0.
    """
    sub = _judged(r)
    te = r.te_rel()[sub.rows]
    nonrel = te < rel_level
    before = _exclusive_count(nonrel, sub)
    nrel = r.num_rel(rel_level)
    n_nonrel = _num_nonrel(r, rel_level)
    rel_rows = ~nonrel
    nb = before[rel_rows]
    seg = sub.seg[rel_rows]
    r_q = nrel[seg]
    term = np.ones(nb.size, dtype=np.float64)
    pen = nb > 0
    term[pen] = 1.0 - (
        np.minimum(nb[pen], r_q[pen]).astype(np.float64)
        / np.minimum(n_nonrel[seg][pen], r_q[pen]).astype(np.float64)
    )
    counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
    sums = _seq_sum(term, _offsets(counts))
    return np.where(nrel > 0, _safe_div(sums, nrel.astype(np.float64)), sums)


def _num_nonrel(r: Ranking, rel_level: int) -> np.ndarray:
    """Judged documents with 0 <= grade < rel_level."""
    g = r.judged_grades
    hit = (g >= 0) & (g < rel_level)
    return np.bincount(r.judged_segment_ids()[hit], minlength=r.num_queries).astype(np.int64)


def infap(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """infAP (Yilmaz & Aslam 2006), trec_eval's implementation.

    Over pooled retrieved documents (not-pooled ones are skipped); for each judged relevant
    document at 0-based rank j with r-1 relevant, n non-relevant and u pooled-unjudged pooled
    documents above it, the term is 1 when j = 0, else
    1/(j+1) + (j/(j+1)) * ((r-1+n+u)/j) * ((r-1+eps)/(r-1+n+2 eps)), eps = 1e-5.
    infAP = sum of terms / num_rel (the raw sum when num_rel = 0).
    """
    te_all = r.te_rel()
    sub = _subset(r, te_all != TE_NONPOOL)
    te = te_all[sub.rows]
    unj = te == TE_UNJUDGED
    nonrel = (te >= 0) & (te < rel_level)
    rel = ~unj & ~nonrel
    n_before = _exclusive_count(nonrel, sub)[rel].astype(np.float64)
    u_before = _exclusive_count(unj, sub)[rel].astype(np.float64)
    r_before = (_exclusive_count(rel, sub)[rel]).astype(np.float64)  # rel_so_far - 1
    fj = sub.pos[rel].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((r_before + n_before + u_before) / fj) * (
            (r_before + INFAP_EPSILON) / (r_before + n_before + 2 * INFAP_EPSILON)
        )
    term[fj == 0] = 1.0
    seg = sub.seg[rel]
    counts = np.bincount(seg, minlength=r.num_queries).astype(np.int64)
    sums = _seq_sum(term, _offsets(counts))
    nrel = _num_rel_f(r, rel_level)
    return np.where(nrel > 0, _safe_div(sums, nrel), sums)


def _interpolated(r: Ranking, rel_level: int) -> tuple[_Sub, np.ndarray]:
    """Interpolated precision at each relevant retrieved document: max precision at any rank
    at or below it (as trec_eval's backwards scan)."""
    key = ("iprec", rel_level)
    if key not in r._cache:
        sub = _relevant(r, rel_level)
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
        _iprec_values(r, _recall_cutoffs(r, x, rel_level), rel_level)
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
    cuts = np.stack([_recall_cutoffs(r, x, rel_level) for x in levels], axis=1)
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


def bin_g(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """binG: (1/num_rel) * sum over relevant retrieved d of 1 / log2(2 + non-relevant above d).
    0 when nothing relevant is retrieved."""
    sub = _relevant(r, rel_level)
    arg = 3 + sub.pos - sub.nth  # 2 + documents above d that are not relevant
    table = _log2_table(int(arg.max()) if arg.size else 2)
    contrib = 1.0 / table[arg]
    sums = _seq_sum(contrib, sub.offsets)
    return np.where(sub.counts > 0, _safe_div(sums, _num_rel_f(r, rel_level)), 0.0)


# ==========================================================================================
# Graded: nDCG family, G, RBP, ERR
# ==========================================================================================


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


def _last_or_zero(scan: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    counts = np.diff(offsets)
    out = np.zeros(counts.size, dtype=np.float64)
    nz = counts > 0
    out[nz] = scan[offsets[1:][nz] - 1]
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


def _prefix_at(sub: _Sub, scan: np.ndarray, seg: np.ndarray, upto: np.ndarray) -> np.ndarray:
    """Value of a per-row running sum over the subset rows ranked before ``upto`` (0 if none)."""
    starts = sub.offsets[seg]
    ends = sub.offsets[seg + 1]
    # number of subset rows of the query with pos < upto
    idx = np.searchsorted(sub.pos + sub.seg.astype(np.int64) * _BIG, seg * _BIG + upto)
    idx = np.clip(idx, starts, ends)
    out = np.zeros(seg.size, dtype=np.float64)
    has = idx > starts
    out[has] = scan[idx[has] - 1]
    return out


_BIG = np.int64(1) << np.int64(40)


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


def rbp(r: Ranking, p: float = 0.9, gains: Mapping[int, float] | None = None) -> np.ndarray:
    """RBP (Moffat & Zobel 2008): (1 - p) * sum over ranks i >= 1 of gain_i * p**(i-1).

    Gains are trec_eval's (grade, or ``gains`` overrides), rescaled per query to [0, 1] by
    (g - min) / (max - min) over the query's gain levels when they leave that range.
    """
    te = r.te_rel()
    # Only values that are gain levels can have a gain; any other value (e.g. not pooled)
    # keeps gain 0 even after rescaling (trec_eval's get_gain).
    levels_mask = te >= 0
    for level in gains or {}:
        levels_mask |= te == int(level)
    sub = _subset(r, levels_mask)
    rg = _gain_values(te[sub.rows], gains)
    lo, hi = _query_gain_levels(r, gains)
    rescale = ((lo < 0) | (hi > 1))[sub.seg]
    if rescale.any():
        seg = sub.seg[rescale]
        with np.errstate(divide="ignore", invalid="ignore"):
            rg[rescale] = (rg[rescale] - lo[seg]) / (hi - lo)[seg]
    nz = rg != 0
    sub = _subset_rows(r, sub.rows[nz])
    table = _power_table(p, int(sub.pos.max()) + 1 if sub.pos.size else 1)
    sums = _seq_sum(rg[nz] * table[sub.pos], sub.offsets)
    return (1.0 - p) * sums


def _query_gain_levels(
    r: Ranking, gains: Mapping[int, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per query, min and max gain over trec_eval's gain levels (0..max grade, plus overrides)."""
    nq = r.num_queries
    g = r.judged_grades
    seg = r.judged_segment_ids()
    top = np.full(nq, -1, dtype=np.int64)
    keep = g >= 0
    np.maximum.at(top, seg[keep], g[keep])
    lo = np.zeros(nq, dtype=np.float64)
    hi = np.zeros(nq, dtype=np.float64)
    over = {int(k): float(v) for k, v in (gains or {}).items()}
    # Default levels 0..top have gain = level, except overridden ones.
    has = top >= 0
    hi[has] = top[has].astype(np.float64)
    lo[:] = 0.0
    if over:
        for q in range(nq):
            vals = [over.get(level, float(level)) for level in range(int(top[q]) + 1)]
            vals += list(over.values())
            lo[q] = min(vals)
            hi[q] = max(vals)
    return lo, hi


def rbp_residual(r: Ranking, p: float = 0.9) -> np.ndarray:
    """rbp_resid: the most RBP could grow if every unjudged retrieved document were fully
    relevant: p**num_ret + (1 - p) * sum over unjudged ranks i of p**(i-1); 0 when every
    retrieved document is judged."""
    unj = r.te_rel() < 0
    nret = r.num_ret()
    table = _power_table(p, max(int(nret.max()) if nret.size else 0, 1))
    # Unjudged documents are usually most of the run: work on the full layout.
    values = np.where(unj, table[r.positions()], 0.0)
    sums = _seq_sum(values, r.offsets)
    counts = np.concatenate(([0], np.cumsum(unj, dtype=np.int64)))
    has = (counts[r.offsets[1:]] - counts[r.offsets[:-1]]) > 0
    out = np.zeros(r.num_queries, dtype=np.float64)
    out[has] = table[nret[has]] + (1 - p) * sums[has]
    return out


def err_at(r: Ranking, k: int | None, gmax: int) -> np.ndarray:
    """ERR@k, Expected Reciprocal Rank (Chapelle et al. 2009).

    R_i = (2**g_i - 1) / 2**gmax with g_i the grade at rank i (clipped below at 0, unjudged =
    0); ERR = sum_{i<=k} (1/i) * R_i * prod_{j<i} (1 - R_j). Raises ValueError when a grade
    exceeds ``gmax``. ``k=None``: all ranks.
    """
    if r.judged_grades.size and int(r.judged_grades.max()) > gmax:
        raise ValueError(f"grade {int(r.judged_grades.max())} exceeds gmax={gmax}")
    te = r.te_rel()
    if k is None:
        sub = _subset_rows(r, np.arange(te.size))
    else:
        counts = np.minimum(r.num_ret(), k)
        starts = r.offsets[:-1]
        rows = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - starts, counts)
        sub = _subset_rows(r, rows)
    grades = np.maximum(te[sub.rows], 0)
    stop = (np.ldexp(1.0, grades) - 1.0) / math.ldexp(1.0, gmax)
    keep_going = _seq_scan(1.0 - stop, sub.offsets, np.multiply, 1.0)
    before = np.ones(stop.size, dtype=np.float64)  # prod over earlier ranks
    if stop.size:
        before[1:] = keep_going[:-1]
        before[sub.offsets[:-1][sub.counts > 0]] = 1.0
    return _seq_sum(stop * before / (sub.pos + 1.0), sub.offsets)


def f1_at(r: Ranking, k: int, rel_level: int = 1) -> np.ndarray:
    """F1@k: harmonic mean of P@k and recall@k, 2PR / (P + R); 0 when both are 0."""
    p = precision_at(r, k, rel_level)
    rc = recall_at(r, k, rel_level)
    return _safe_div(2.0 * p * rc, p + rc)


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


# ==========================================================================================
# Set-based measures
# ==========================================================================================


def set_precision(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """set_P: num_rel_ret / num_ret (0 when nothing is retrieved)."""
    return _safe_div(num_rel_ret(r, rel_level), num_ret(r))


def set_recall(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """set_recall: num_rel_ret / num_rel (0 when num_rel = 0)."""
    return _safe_div(num_rel_ret(r, rel_level), _num_rel_f(r, rel_level))


def set_relative_precision(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """set_relative_P: num_rel_ret / min(num_ret, num_rel) (0 if either is 0)."""
    nret = num_ret(r)
    nrel = _num_rel_f(r, rel_level)
    ok = (nret > 0) & (nrel > 0)
    return np.where(ok, _safe_div(num_rel_ret(r, rel_level), np.minimum(nret, nrel)), 0.0)


def set_map(r: Ranking, rel_level: int = 1) -> np.ndarray:
    """set_map: set precision * set recall = num_rel_ret**2 / (num_ret * num_rel)."""
    nrr = num_rel_ret(r, rel_level)
    den = num_ret(r) * _num_rel_f(r, rel_level)
    return _safe_div(nrr * nrr, den)


def set_f(r: Ranking, beta: float = 1.0, rel_level: int = 1) -> np.ndarray:
    """set_F.x: weighted harmonic mean (x + 1) P R / (x P + R) of set precision and recall,
    x the relative weight of recall (default 1: F1). 0 when nothing relevant is retrieved."""
    nrr = num_rel_ret(r, rel_level)
    p = _safe_div(nrr, num_ret(r))
    rc = _safe_div(nrr, _num_rel_f(r, rel_level))
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (beta + 1.0) * p * rc / (beta * p + rc)
    return np.where(nrr > 0, value, 0.0)


def utility(
    r: Ranking,
    coefficients: Sequence[float] = (1.0, -1.0, 0.0, 0.0),
    num_docs: int = 0,
    rel_level: int = 1,
) -> np.ndarray:
    """utility.a,b,c,d: a*relevant retrieved + b*non-relevant retrieved + c*relevant missed
    + d*non-relevant not retrieved (the last needs ``num_docs``, trec_eval's ``-N``)."""
    a, b, c, d = (float(x) for x in coefficients)
    nrr = num_rel_ret(r, rel_level)
    nret = num_ret(r)
    nrel = _num_rel_f(r, rel_level)
    return a * nrr + b * (nret - nrr) + c * (nrel - nrr) + d * (num_docs + nrr - nret - nrel)


def relstring(r: Ranking, length: int = 10) -> list[str]:
    """relstring.N: the relevance values of the first N retrieved documents as a string: the
    digit for 0-9, '>' above 9, '-' not pooled, '.' pooled but unjudged, '<' other negatives."""
    te = r.te_rel()
    out: list[str] = []
    for q in range(r.num_queries):
        lo = int(r.offsets[q])
        hi = min(int(r.offsets[q + 1]), lo + max(length, 0))
        chars = []
        for v in te[lo:hi].tolist():
            if v > 9:
                chars.append(">")
            elif v >= 0:
                chars.append(chr(ord("0") + v))
            elif v == TE_NONPOOL:
                chars.append("-")
            elif v == TE_UNJUDGED:
                chars.append(".")
            else:
                chars.append("<")
        out.append("".join(chars))
    return out
