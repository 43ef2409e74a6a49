"""Active statistical inference for a mean (Zrnic and Candès, "Active Statistical Inference",
ICML 2024): the human labels were collected where a judge was least sure, each record ``i``
of the pool labelled with a known probability ``pi_i`` (``xi_i`` = 1 when it was), and every
labelled record weighted by the inverse of that probability so that the estimate of the mean
human label stays unbiased::

    estimate = mean_i( lam * f_i + (y_i - lam * f_i) * xi_i / pi_i )        over the n records
    se       = std(those n terms) / sqrt(n)                                  (ddof 0)

with the normal interval ``estimate +- z * se``. ``lam = 1`` is the paper's estimator; the
pool is every record the selection went through, labelled or passed over.

The probabilities (:func:`selection_probabilities`) follow the paper's rule for a budget of
``B`` labels in expectation over ``N`` records: proportional to the judge's uncertainty ``u``,
mixed with the uniform rule so that no record's chance is tiny (a tiny chance, if drawn, is a
huge weight)::

    pi_i = min(1, (1 - mix) * B * u_i / sum(u) + mix * B / N)

and the chance the cap at 1 takes from the surest records handed on to the others, so that
the chances still add up to ``B``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rageval.stats.calibration import PPIEstimate, normal_interval
from rageval.stats.exact import exact_mean

__all__ = ["DEFAULT_MIX", "active_mean", "selection_probabilities"]

#: The uniform rule's share in the mixture.
DEFAULT_MIX = 0.1


def active_mean(judged: Sequence[float] | np.ndarray, labels: Sequence[float] | np.ndarray,
                probabilities: Sequence[float] | np.ndarray, *, level: float = 0.95,
                lam: float = 1.0) -> PPIEstimate:
    """The actively sampled mean of the human labels over a pool of records: ``judged`` (the
    judge's score of each), ``labels`` (the human label, NaN where the record was not
    labelled) and ``probabilities`` (the chance each labelled record had of being chosen;
    read only where there is a label)."""
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
    chance = pi[labelled]
    if not (np.isfinite(chance).all() and (chance > 0).all() and (chance <= 1).all()):
        raise ValueError("the probability of every labelled record must be in (0, 1]")
    terms = lam * f
    terms[labelled] += (y[labelled] - lam * f[labelled]) / chance
    estimate = exact_mean(terms)
    se = float(terms.std()) / math.sqrt(len(terms))
    return PPIEstimate(estimate, normal_interval(estimate, se, level), lam,
                       int(labelled.sum()), int((~labelled).sum()))


def selection_probabilities(uncertainty: Sequence[float] | np.ndarray, budget: float, *,
                            mix: float = DEFAULT_MIX) -> np.ndarray:
    """Each record's chance of being labelled, for ``budget`` labels in expectation, from the
    judge's ``uncertainty`` of each (non-negative; all zero: the uniform rule)."""
    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or len(u) == 0:
        raise ValueError("uncertainty must be a non-empty 1-d array")
    if not (np.isfinite(u).all() and (u >= 0).all()):
        raise ValueError("uncertainty must be finite and non-negative")
    if not budget > 0:
        raise ValueError(f"the budget must be positive, got {budget}")
    if not 0 <= mix <= 1:
        raise ValueError(f"mix must be in [0, 1], got {mix}")
    n = len(u)
    if budget >= n:
        return np.ones(n)
    weight = u / u.sum() if u.sum() > 0 else np.full(n, 1 / n)
    weight = (1 - mix) * weight + mix / n
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
