"""Active statistical inference for a mean (Zrnic and Candès, "Active Statistical Inference",
ICML 2024): the human labels were collected where a judge was least sure, each record ``i``
of the pool labelled with a known probability ``pi_i`` (``xi_i`` = 1 when it was), and every
labelled record weighted by the inverse of that probability so that the estimate of the mean
human label stays unbiased::

    estimate = mean_i( lam * f_i + (y_i - lam * f_i) * xi_i / pi_i )        over the n records
    se       = std(those n terms) / sqrt(n)                                  (ddof 0)

with the normal interval ``estimate +- z * se``. ``lam = 1`` is the paper's estimator; the
pool is every record the selection went through, labelled or passed over."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rageval.stats.calibration import PPIEstimate, normal_interval
from rageval.stats.exact import exact_mean

__all__ = ["active_mean"]


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
