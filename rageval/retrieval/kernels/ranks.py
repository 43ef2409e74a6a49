"""Kernels that depend on the ranks of the relevant documents.

AP (``map``; ``map_cut`` with a cutoff), yaap, the first relevant rank and reciprocal rank
(``recip_rank``), bpref and infAP.
"""

from __future__ import annotations

import math

import numpy as np

from rageval.retrieval.kernels.segments import (
    _exclusive_count,
    _judged,
    _num_rel_f,
    _offsets,
    _relevant,
    _safe_div,
    _seq_sum,
    _subset,
)
from rageval.retrieval.ranking import TE_NONPOOL, TE_UNJUDGED, Ranking

MIN_GEO_MEAN = 1e-5
"""Floor applied before taking logs for geometric means (gm_map, gm_bpref), as trec_eval."""

INFAP_EPSILON = 1e-5
"""Smoothing constant of infAP (trec_eval's INFAP_EPSILON)."""


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
    relevant is retrieved or num_rel = 0, except as trec_eval's ``map`` (no ``k``) with
    ``rel_level`` below 0: rows it finds relevant may all be unjudged, and it divides by a
    num_rel of 0 (+inf).
    """
    sums, found = _ap_sums(r, rel_level, k)
    nrel = _num_rel_f(r, rel_level)
    if k is None and rel_level < 0:
        return _divide_found(sums, nrel, found)
    return np.where(found > 0, _safe_div(sums, nrel), 0.0)


def _divide_found(sums: np.ndarray, nrel: np.ndarray, found: np.ndarray) -> np.ndarray:
    """sums / nrel where something was found (x / 0 = inf, as C), else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(found > 0, sums / nrel, 0.0)


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
