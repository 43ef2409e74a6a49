"""How many more human labels bring a calibrated mean's interval to a wanted half-width, under
uniform and under active selection: the power analysis behind ``rageval annotate --plan
WIDTH``, from the labels so far.

A pool of ``M`` records (every one with a judge score ``f``), ``n`` of them labelled so far
(label ``y``, residual ``e = y - f``). The labels so far may have been chosen uniformly or
actively (record ``i`` with probability ``q_i``); each labelled record then stands for
``1 / q_i`` records, and the moments below are weighted so (inverse-probability weights,
normalised to sum to one: the ratio form, which needs ``q`` only up to a constant)::

    s2_y = var_w(y)    s2_e = var_w(e)    rho = corr_w(y, f)    s2_f = var(f over the pool)

Half-width ``z * se`` at a total of ``n`` labels, uniform, for PPI (rageval's headline
calibration, :func:`~rageval.stats.calibration.ppi_mean` with ``tuned=False``)::

    se^2 = s2_f / (M - n) + s2_e / n                      (n = M: the labels alone, s2_y / M)

and for PPI++ with its best weight (``tuned=True``; ``ppi_py.ppi_mean_power``'s model with
``n + N = M``)::

    se^2 = s2_y * ((1 - rho^2) / n + rho^2 / M)

Active, at a budget of ``B`` labels in expectation with ``pi = selection_probabilities(u, B)``
over the pool, the paper's asymptotic variance of its estimator (Zrnic and Candès 2024; see
:mod:`rageval.stats.active`), its expectation estimated from the labelled records::

    se^2 = (s2_y + sum_w(e^2 * (1 / pi - 1))) / M

The smallest ``n`` (uniform) or ``B`` (active) that reaches the width is the answer; the
planner refuses with fewer than ``MIN_LABELLED`` labels, or where the labels so far already
reach it (the projected half-width at the current count, under the selection they came from).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from rageval.core.calibration import MIN_LABELLED
from rageval.stats.active import DEFAULT_MIX, selection_probabilities

__all__ = ["LabelMoments", "LabelPlan", "active_half_width", "label_moments", "plan_labels",
           "uniform_half_width"]

Floats = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class LabelPlan:
    """The labels needed for a half-width: totals (labels in all, uniform; the expected
    labels in all, active: the ``--budget``) and how many more than the labels so far; None
    with a reason where a selection cannot reach it or was not asked for; ``refused``: why
    there is no plan at all."""

    width: float
    level: float
    pool: int
    labelled: int
    uniform_total: int | None = None
    uniform_more: int | None = None
    uniform_reason: str | None = None
    active_total: int | None = None
    active_more: int | None = None
    active_reason: str | None = None
    refused: str | None = None


@dataclass(frozen=True)
class LabelMoments:
    """The parts of the variances, estimated from the labels so far (weighted by the inverse
    of each label's selection probability)."""

    pool: int
    var_labels: float  # s2_y
    var_residual: float  # s2_e
    correlation: float  # rho, capped at 1 - 1/n as ppi_py caps it
    var_judged: float  # s2_f, over the whole pool
    residual: np.ndarray  # e of the labelled records
    weight: np.ndarray  # their normalised weights
    where: np.ndarray  # their positions in the pool


def label_moments(judged: Floats, labels: Floats,
                  probabilities: Floats | None = None) -> LabelMoments:
    """The variances' parts from a pool's judge scores, its labels so far (NaN: none) and,
    for labels chosen actively, each record's selection probability (None: uniform)."""
    f, y = np.asarray(judged, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if f.ndim != 1 or f.shape != y.shape or not np.isfinite(f).all():
        raise ValueError("judged scores (finite) and labels must be aligned 1-d arrays")
    where = np.flatnonzero(~np.isnan(y))
    q = np.ones(len(where))
    if probabilities is not None:
        q = np.asarray(probabilities, dtype=np.float64)[where]
        if not ((q > 0) & (q <= 1)).all():
            raise ValueError("the probability of every labelled record must be in (0, 1]")
    weight = (1 / q) / (1 / q).sum() if len(where) else q
    yl, fl = y[where], f[where]
    residual = yl - fl
    return LabelMoments(len(f), _wvar(yl, weight), _wvar(residual, weight),
                        _wcorr(yl, fl, weight), float(f.var()), residual, weight, where)


def _wvar(x: np.ndarray, w: np.ndarray) -> float:
    return float((w * (x - (w * x).sum()) ** 2).sum()) if len(x) else 0.0


def _wcorr(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    vx, vy = _wvar(x, w), _wvar(y, w)
    if vx == 0 or vy == 0:
        return 0.0
    cov = float((w * (x - (w * x).sum()) * (y - (w * y).sum())).sum())
    return min(cov / math.sqrt(vx * vy), 1 - 1 / len(x))


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def uniform_half_width(n: int | np.ndarray, moments: LabelMoments, *, level: float = 0.95,
                       tuned: bool = False) -> np.ndarray:
    """The projected half-width at ``n`` labels in all (1 <= n <= M), uniform selection:
    PPI's, or PPI++'s with its best weight (``tuned``)."""
    m, z = moments.pool, _z(level)
    n = np.asarray(n, dtype=np.float64)
    if tuned:
        rho2 = moments.correlation ** 2
        return z * np.sqrt(moments.var_labels * ((1 - rho2) / n + rho2 / m))
    with np.errstate(divide="ignore"):
        ppi = moments.var_judged / (m - n) + moments.var_residual / n
    return z * np.sqrt(np.where(n >= m, moments.var_labels / m, ppi))


def active_half_width(budget: float, moments: LabelMoments, uncertainty: Floats, *,
                      level: float = 0.95, mix: float = DEFAULT_MIX) -> float:
    """The projected half-width of the paper's estimator over the pool at ``budget`` labels
    in expectation, the probabilities proportional to ``uncertainty`` (mixed by ``mix``)."""
    pi = selection_probabilities(uncertainty, budget, mix=mix)[moments.where]
    extra = float((moments.weight * moments.residual ** 2 * (1 / pi - 1)).sum())
    return _z(level) * math.sqrt((moments.var_labels + extra) / moments.pool)


def _uniform_total(moments: LabelMoments, width: float, level: float,
                   tuned: bool) -> int | None:
    counts = np.arange(1, moments.pool + 1)
    reached = np.flatnonzero(uniform_half_width(counts, moments, level=level, tuned=tuned)
                             <= width)
    return int(counts[reached[0]]) if len(reached) else None


def _active_total(moments: LabelMoments, uncertainty: Floats, width: float, level: float,
                  mix: float) -> int | None:
    """The smallest whole budget that reaches ``width`` (the half-width falls as the budget
    grows: every probability grows with it), by bisection."""
    def reaches(budget: int) -> bool:
        return active_half_width(budget, moments, uncertainty, level=level, mix=mix) <= width
    low, high = 1, moments.pool
    if not reaches(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle + 1
    return low


def plan_labels(judged: Floats, labels: Floats, width: float, *,
                probabilities: Floats | None = None, uncertainty: Floats | None = None,
                level: float = 0.95, mix: float = DEFAULT_MIX,
                tuned: bool = False) -> LabelPlan:
    """How many labels, uniform and active, bring the calibrated interval's half-width to
    ``width``: ``judged`` (the judge's score of every record of the pool), ``labels`` (NaN
    where none yet), ``probabilities`` (each record's selection probability where the labels
    so far were chosen actively; None: uniformly), ``uncertainty`` (the judge's uncertainty
    of every record; None: no active plan). ``tuned``: plan uniform for PPI++ instead of PPI."""
    if not (math.isfinite(width) and width > 0):
        raise ValueError(f"the width must be positive, got {width}")
    moments = label_moments(judged, labels, probabilities)
    n, pool = len(moments.where), moments.pool
    plan = LabelPlan(width, level, pool, n)
    if n < MIN_LABELLED:
        return _with(plan, refused=f"{n} records carry a label; a plan needs at least "
                                   f"{MIN_LABELLED}")
    if uncertainty is not None and len(uncertainty) != pool:
        raise ValueError(f"uncertainty must have one value per record of the pool ({pool}), "
                         f"got {len(uncertainty)}")
    now = (uniform_half_width(n, moments, level=level, tuned=tuned) if probabilities is None
           or uncertainty is None else active_half_width(n, moments, uncertainty, level=level,
                                                         mix=mix))
    if float(now) <= width:
        return _with(plan, refused=f"the {n} labels so far already give a half-width of "
                                   f"{float(now):.4g}, within {width:g}")
    every = f"even a label on every one of the {pool} records gives a wider interval"
    total = _uniform_total(moments, width, level, tuned)
    plan = _with(plan, uniform_total=total, uniform_more=_more(total, n),
                 uniform_reason=None if total is not None else every)
    if uncertainty is None:
        return _with(plan, active_reason="no uncertainty of the judge was given")
    total = _active_total(moments, uncertainty, width, level, mix)
    return _with(plan, active_total=total, active_more=_more(total, n),
                 active_reason=None if total is not None else every)


def _more(total: int | None, labelled: int) -> int | None:
    return None if total is None else max(0, total - labelled)


def _with(plan: LabelPlan, **changes: object) -> LabelPlan:
    return LabelPlan(**{**plan.__dict__, **changes})
