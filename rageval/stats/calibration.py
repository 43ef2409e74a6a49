"""Calibration by human labels, its arithmetic in one place: prediction-powered inference (PPI)
for a mean, a judge's scores over every record corrected by the records that also carry a human
label (Angelopoulos et al., Science 2023), and the
power-tuned PPI++ (Angelopoulos, Duchi and Zrnic, 2023), as the ``ppi_py`` package computes
them (``ppi_mean_pointestimate`` and ``ppi_mean_ci``, normal intervals, no weights).

With ``n`` labelled records (human label ``y``, judge score ``f``) and ``N`` unlabelled ones
(judge score ``f~``), for a weight ``lam`` in [0, 1]::

    estimate = lam * mean(f~) + mean(y - lam * f)
    se       = sqrt(var(lam * f~) / N + var(y - lam * f) / n)        (variances with ddof 0)

``lam = 1`` is PPI; ``lam = 0`` is the human labels alone (the classical interval); PPI++
estimates the ``lam`` that minimises the variance from the data, clipped to [0, 1]::

    lam = cov(y, f) / ((1 + n / N) * var(f and f~ together))          (cov ddof 0, var ddof 1)

One departure from ``ppi_py``: when every judge score is the same the judge tells nothing
(``ppi_py`` divides by zero); rageval then uses ``lam = 0``, the human labels alone.

Its two uses: a run's judge mean calibrated by the labels of some of its records
(:func:`calibrate`, as the summary reports it), and the paired difference of two runs
calibrated by the labels of both answers (:func:`calibrated_difference`, ``rageval compare
--human``). The means are correctly rounded (:mod:`~rageval.stats.exact`): whatever the order
the records come in, a comparison held in memory and one streamed from disk give one estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from rageval.core.calibration import MIN_LABELLED, Calibration
from rageval.stats.exact import exact_mean

__all__ = ["PPIEstimate", "calibrate", "calibrated_difference",
           "classical_mean", "normal_interval", "ppi_mean", "ppi_mean_moments"]


@dataclass(frozen=True)
class PPIEstimate:
    """A mean and its normal confidence interval, with what it was computed from: ``lam``
    (1: PPI, 0: the labels alone, else PPI++'s tuned weight), the labelled and unlabelled
    record counts."""

    mean: float
    ci: tuple[float, float]
    lam: float
    labelled: int
    unlabelled: int

    @property
    def width(self) -> float:
        return self.ci[1] - self.ci[0]


def ppi_mean(labels: Sequence[float] | np.ndarray, judged: Sequence[float] | np.ndarray,
             judged_unlabelled: Sequence[float] | np.ndarray, *, level: float = 0.95,
             tuned: bool = True) -> PPIEstimate:
    """The prediction-powered mean of the human labels: ``labels`` and ``judged`` (the judge's
    scores of the same records, aligned) and ``judged_unlabelled`` (the judge's scores of the
    records without a label). ``tuned``: PPI++'s weight, else PPI's (1)."""
    y, f, f_unlabelled = _arrays(labels, judged, judged_unlabelled)
    lam = _tuned_lam(y, f, f_unlabelled) if tuned else 1.0
    return _estimate(y, f, lam, exact_mean(f_unlabelled), float(f_unlabelled.var()),
                     len(f_unlabelled), level)


def ppi_mean_moments(labels: Sequence[float] | np.ndarray,
                     judged: Sequence[float] | np.ndarray, unlabelled_mean: float,
                     unlabelled_variance: float, unlabelled: int, *,
                     level: float = 0.95) -> PPIEstimate:
    """PPI's mean (weight 1) with the unlabelled records given by their judge scores' count,
    mean and variance (ddof 0) alone: what running sums over a stream of records keep."""
    y, f, _ = _arrays(labels, judged, [unlabelled_mean] if unlabelled else [])
    return _estimate(y, f, 1.0, unlabelled_mean, unlabelled_variance, unlabelled, level)


def _estimate(y: np.ndarray, f: np.ndarray, lam: float, unlabelled_mean: float,
              unlabelled_variance: float, unlabelled: int, level: float) -> PPIEstimate:
    n = len(y)
    estimate = float(lam * unlabelled_mean + exact_mean(y - lam * f))
    se = math.sqrt(lam**2 * unlabelled_variance / unlabelled + float((y - lam * f).std()) ** 2 / n)
    return PPIEstimate(estimate, normal_interval(estimate, se, level), lam, n, unlabelled)


def classical_mean(labels: Sequence[float] | np.ndarray, *,
                   level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """The mean of ``labels`` and its normal (central limit) interval, as ``ppi_py``'s
    ``classical_mean_ci``: what the human labels alone say."""
    y = np.asarray(labels, dtype=np.float64)
    if len(y) < 2:
        raise ValueError(f"a mean's interval needs at least 2 values, got {len(y)}")
    mean = exact_mean(y)
    return mean, normal_interval(mean, float(y.std()) / math.sqrt(len(y)), level)


def _arrays(labels: Sequence[float] | np.ndarray, judged: Sequence[float] | np.ndarray,
            judged_unlabelled: Sequence[float] | np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, f, f_unlabelled = (np.asarray(a, dtype=np.float64)
                          for a in (labels, judged, judged_unlabelled))
    if y.ndim != 1 or y.shape != f.shape:
        raise ValueError(f"labels and judged scores must be aligned 1-d arrays, got shapes "
                         f"{y.shape} and {f.shape}")
    if len(y) < 2 or f_unlabelled.ndim != 1 or len(f_unlabelled) < 1:
        raise ValueError(f"PPI needs at least 2 labelled and 1 unlabelled records, got "
                         f"{len(y)} and {f_unlabelled.size}")
    if not all(np.isfinite(a).all() for a in (y, f, f_unlabelled)):
        raise ValueError("labels and judged scores must be finite")
    return y, f, f_unlabelled


def _tuned_lam(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray) -> float:
    """PPI++'s variance-minimising weight, estimated as ``ppi_py`` estimates it."""
    n, big_n = len(y), len(f_unlabelled)
    covariance = float(((y - y.mean()) * (f - f.mean())).sum()) / n
    variance = float(np.var(np.concatenate([f, f_unlabelled]), ddof=1))
    if variance == 0:  # a constant judge tells nothing: the labels alone
        return 0.0
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0, 1))


def normal_interval(mean: float, se: float, level: float) -> tuple[float, float]:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    return mean - z * se, mean + z * se


def calibrate(values: np.ndarray, labels: np.ndarray) -> Calibration:
    """The calibrated mean of a metric's ``values`` (NaN: unscored) from ``labels`` (NaN: no
    label), aligned record by record. Only records the metric scored count: a labelled record
    the judge could not score says nothing about the judge (labels under active selection:
    :func:`rageval.stats.active_calibration.calibrate_active`)."""
    scored = ~np.isnan(values)
    labelled = scored & ~np.isnan(labels)
    unlabelled = scored & np.isnan(labels)
    n, big_n = int(labelled.sum()), int(unlabelled.sum())
    if n < MIN_LABELLED:
        return Calibration(n, big_n, refused=f"{n} scored records carry a human label; "
                                             f"calibration needs at least {MIN_LABELLED}")
    human_mean, human_ci = classical_mean(labels[labelled])
    if big_n == 0:
        return Calibration(n, 0, human_mean=human_mean, human_ci95=human_ci,
                           refused="every scored record carries a human label: their mean is "
                                   "the estimate")
    y, f, f_unlabelled = labels[labelled], values[labelled], values[unlabelled]
    tuned = ppi_mean(y, f, f_unlabelled)
    plain = ppi_mean(y, f, f_unlabelled, tuned=False)
    return Calibration(n, big_n, plain.mean, plain.ci, tuned.lam, tuned.mean, tuned.ci,
                       human_mean, human_ci)


def calibrated_difference(y: np.ndarray, unlabelled: int,
                          estimated: Callable[[], PPIEstimate]) -> dict[str, Any]:
    """A comparison row's ``calibrated`` entry from the labelled pairs' human differences
    (``y``), the count of unlabelled pairs and PPI's estimate over all of them
    (called only when there is one to give): the calibrated difference and its interval, the
    human-only difference, the pair counts, or why there is none."""
    n = len(y)
    out: dict[str, Any] = {"labelled": n, "unlabelled": unlabelled}
    if n < MIN_LABELLED:
        out["refused"] = (f"{n} pairs carry a human label for both answers; a calibrated "
                          f"difference needs at least {MIN_LABELLED}")
        return out
    human_mean, human_ci = classical_mean(y)
    out["human"] = {"delta": human_mean, "ci95": list(human_ci)}
    if unlabelled == 0:
        out["refused"] = "every pair carries human labels: their difference is the estimate"
        return out
    estimate = estimated()
    low, high = estimate.ci
    out.update({"method": "ppi", "delta": estimate.mean, "ci95": [low, high],
                "crosses_zero": bool(low <= 0 <= high)})
    return out
