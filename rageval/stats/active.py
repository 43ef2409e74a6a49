"""Active statistical inference for a mean (Zrnic and Candès, "Active Statistical Inference",
ICML 2024, arXiv 2403.03208): the human labels are collected where a judge is least sure, each
record ``i`` of a pool of ``n`` labelled with a known probability ``pi_i`` (``xi_i`` = 1 when it
was), and every label weighted by the inverse of that probability, so that the estimate of the
mean human label stays unbiased.

The estimator and its interval, as the paper gives them for a mean (its batch setting, with the
judge's score ``f_i`` as the model's prediction)::

    T_i      = lam * f_i + (y_i - lam * f_i) * xi_i / pi_i      (y_i is read only where xi_i = 1)
    estimate = mean(T_1 .. T_n)                                  over the whole pool
    se       = std(T_1 .. T_n) / sqrt(n)                         (ddof 0)
    interval = estimate +- z(1 - alpha / 2) * se                 (normal, the central limit)

``lam = 1`` is the paper's active estimator and rageval's headline: it is the one the paper's
sampling rule is designed for (its variance, below, is what the rule makes small) and the one
the authors' experiments for a mean report. With every ``pi_i`` equal it is PPI written as an
inverse-probability-weighted sum; with every ``pi_i = 1`` and every record labelled it is the
plain mean of the labels with the classical interval.

``lam=None`` asks for the power-tuned estimator (the paper carries PPI++'s power tuning over to
active sampling): ``T_i = A_i + lam * B_i`` with ``A_i = y_i xi_i / pi_i`` and
``B_i = f_i (1 - xi_i / pi_i)``; every ``B_i`` has mean zero, so any fixed ``lam`` leaves the
estimate unbiased, and the ``lam`` that makes the variance of ``T`` smallest is::

    lam = -cov(A, B) / var(B)          (over the pool, ddof 0; clipped to [0, 1] as PPI++ clips)

estimated on the same data (asymptotically free, as in PPI++). It is an option, not the headline:
it gains little when the judge's scale matches the labels' and it reads the data twice.

The variance that the sampling rule minimises, of one term (with ``e = y - f``)::

    Var(T) = Var(y) + E[ e^2 * (1 / pi - 1) ]

smallest, for a budget of ``B`` labels in expectation (``sum(pi) = B``), when ``pi`` is
proportional to ``sqrt(E[e^2 | record])``: the judge's uncertainty on the scale of its error.
:func:`selection_probabilities` follows the paper's practical rule: proportional to the judge's
uncertainty ``u``, mixed with the uniform rule so that no record's chance is tiny (a tiny chance,
if drawn, is a huge weight)::

    pi_i = min(1, c * ((1 - mix) * u_i / sum(u) + mix / N))

The paper clips at 1 with ``c = B`` and so spends less than ``B`` when it clips; rageval picks
``c`` so that the chances add up to ``B`` (the chance the cap takes from the records it caps is
handed on to the others), which keeps ``B`` an exact expected budget. :data:`DEFAULT_MIX` is the
mixing weight ``bench/bench_active_labels.py`` supports (docs/active-labels.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rageval.stats.calibration import PPIEstimate, normal_interval
from rageval.stats.exact import exact_mean

__all__ = ["DEFAULT_MIX", "active_mean", "active_terms", "selection_probabilities",
           "tuned_active_lam"]

#: The uniform rule's share in the mixture, as bench/bench_active_labels.py supports it: as narrow
#: as the smaller shares where the uncertainty is right, and far narrower than they where a
#: few records are confidently wrong (their small chance is a large weight); docs/active-labels.md.
DEFAULT_MIX = 0.3

Floats = Sequence[float] | np.ndarray


def active_mean(judged: Floats, labels: Floats, probabilities: Floats, *,
                level: float = 0.95, lam: float | None = 1.0) -> PPIEstimate:
    """The actively sampled mean of the human labels over a pool of records: ``judged`` (the
    judge's score of each), ``labels`` (the human label, NaN where the record was not
    labelled) and ``probabilities`` (the chance each record had of being labelled; read only
    where there is a label). ``lam``: 1 for the paper's estimator, None for the power-tuned
    one, or a fixed weight in [0, 1]."""
    f, y, pi = _checked(judged, labels, probabilities)
    labelled = ~np.isnan(y)
    if lam is None:
        lam = tuned_active_lam(f, y, pi)
    elif not 0 <= lam <= 1:
        raise ValueError(f"lam must be in [0, 1] or None (tuned), got {lam}")
    terms = active_terms(f, y, pi, lam)
    estimate = exact_mean(terms)
    se = float(terms.std()) / math.sqrt(len(terms))
    return PPIEstimate(estimate, normal_interval(estimate, se, level), float(lam),
                       int(labelled.sum()), int((~labelled).sum()))


def active_terms(judged: np.ndarray, labels: np.ndarray, probabilities: np.ndarray,
                 lam: float) -> np.ndarray:
    """The terms ``T_i = lam * f_i + (y_i - lam * f_i) * xi_i / pi_i`` whose mean is the
    estimate (aligned float arrays, NaN label: not labelled)."""
    labelled = ~np.isnan(labels)
    terms = lam * judged
    terms[labelled] += (labels[labelled] - lam * judged[labelled]) / probabilities[labelled]
    return terms


def tuned_active_lam(judged: np.ndarray, labels: np.ndarray,
                     probabilities: np.ndarray) -> float:
    """The power-tuned weight: ``-cov(A, B) / var(B)`` clipped to [0, 1], with
    ``A_i = y_i xi_i / pi_i`` and ``B_i = f_i (1 - xi_i / pi_i)``; 1 when ``B`` is constant
    (every record labelled with certainty: the weight changes nothing)."""
    labelled = ~np.isnan(labels)
    weight = np.zeros(len(judged))
    weight[labelled] = 1 / probabilities[labelled]
    a = np.where(labelled, np.nan_to_num(labels) * weight, 0.0)
    b = judged * (1 - weight)
    variance = float(b.var())
    if variance == 0:
        return 1.0
    covariance = float(((a - a.mean()) * (b - b.mean())).mean())
    return float(np.clip(-covariance / variance, 0, 1))


def _checked(judged: Floats, labels: Floats,
             probabilities: Floats) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f, y, pi = (np.asarray(a, dtype=np.float64) for a in (judged, labels, probabilities))
    if f.ndim != 1 or f.shape != y.shape or f.shape != pi.shape:
        raise ValueError(f"judged scores, labels and probabilities must be aligned 1-d "
                         f"arrays, got shapes {f.shape}, {y.shape} and {pi.shape}")
    labelled = ~np.isnan(y)
    if int(labelled.sum()) < 2 or len(f) < 2:
        raise ValueError(f"active inference needs at least 2 labelled records, got "
                         f"{int(labelled.sum())}")
    if not np.isfinite(f).all():
        raise ValueError("judged scores must be finite")
    if not np.isfinite(y[labelled]).all():
        raise ValueError("labels must be finite (NaN: not labelled)")
    chance = pi[labelled]
    if not (np.isfinite(chance).all() and (chance > 0).all() and (chance <= 1).all()):
        raise ValueError("the probability of every labelled record must be in (0, 1]")
    return f, y, pi


def selection_probabilities(uncertainty: Floats, budget: float, *,
                            mix: float = DEFAULT_MIX) -> np.ndarray:
    """Each record's chance of being labelled, for ``budget`` labels in expectation, from the
    judge's ``uncertainty`` of each (non-negative; all equal, or all zero: the uniform rule).
    Every chance is positive (``mix`` = 0 needs every uncertainty positive), at most 1, and
    they add up to ``min(budget, N)``."""
    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or len(u) == 0:
        raise ValueError("uncertainty must be a non-empty 1-d array")
    if not (np.isfinite(u).all() and (u >= 0).all()):
        raise ValueError("uncertainty must be finite and non-negative")
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"the budget must be positive, got {budget}")
    if not 0 <= mix <= 1:
        raise ValueError(f"mix must be in [0, 1], got {mix}")
    n = len(u)
    if budget >= n:
        return np.ones(n)
    weight = u / u.sum() if u.sum() > 0 else np.full(n, 1 / n)
    weight = (1 - mix) * weight + mix / n
    if not (weight > 0).all():
        raise ValueError("mix = 0 with an uncertainty of 0 gives a record no chance, which "
                         "biases the estimate: use mix > 0")
    pi = np.ones(n)
    free = np.ones(n, dtype=bool)  # records whose chance is still below the cap
    while True:  # at most n rounds: each caps one record or more, or ends
        left = budget - (n - int(free.sum()))
        pi[free] = left * weight[free] / weight[free].sum()
        over = free & (pi >= 1)
        if not over.any():
            return pi
        pi[over] = 1.0
        free &= ~over
