"""Counting kernels: how many retrieved documents are relevant, at a cutoff or in the whole set.

num_ret, num_rel, num_rel_ret, num_nonrel_judged_ret; P@k, recall@k, relative_P@k, success@k
(hit@k), unj@k, Rprec, Rprec_mult and F1@k; the set measures (set_P, set_recall,
set_relative_P, set_map, set_F) and utility.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rageval.retrieval.kernels.segments import (
    _count_top,
    _judged,
    _num_rel_f,
    _relevant,
    _safe_div,
    _uncounted_relevant,
)
from rageval.retrieval.ranking import Ranking


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

    Like P@c (padded with non-relevant documents when c > num_ret); 0 when c = 0. With ``-l``
    below 0, trec_eval's count starts from num_rel_ret, which leaves out the unjudged rows its
    scan still counts down on: the count drops by their number (never below 0).
    """
    cut = _mult_cutoffs(r, mult, rel_level)
    cnt = _count_top(r, _relevant(r, rel_level), cut) - _uncounted_relevant(r, rel_level)
    cnt = np.maximum(cnt, 0)
    return _safe_div(cnt, cut.astype(np.float64))


def _mult_cutoffs(r: Ranking, frac: float, rel_level: int) -> np.ndarray:
    """trec_eval's ``(long)(frac * num_rel + 0.9)`` (truncation toward zero), for Rprec_mult."""
    return np.trunc(frac * _num_rel_f(r, rel_level) + 0.9).astype(np.int64)


def f1_at(r: Ranking, k: int, rel_level: int = 1) -> np.ndarray:
    """F1@k: harmonic mean of P@k and recall@k, 2PR / (P + R); 0 when both are 0."""
    p = precision_at(r, k, rel_level)
    rc = recall_at(r, k, rel_level)
    return _safe_div(2.0 * p * rc, p + rc)


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
