"""A judge mean calibrated by human labels collected under active selection (``rageval
annotate --select active``): the active-inference mean of Zrnic and Candès
(:func:`rageval.stats.active.active_mean`) over the pool of records the selection went through,
as the summary reports it (:class:`~rageval.core.calibration.Calibration`, method ``active``)."""

from __future__ import annotations

import numpy as np

from rageval.core.calibration import MIN_LABELLED, Calibration
from rageval.stats.active import active_mean

__all__ = ["calibrate_active"]


def calibrate_active(values: np.ndarray, labels: np.ndarray,
                     chances: np.ndarray) -> Calibration:
    """The active-inference mean (Zrnic and Candès) of the records of the pool (a probability
    given) the metric scored, from their judge ``values`` and ``labels`` (NaN: passed over),
    each label weighted by the inverse of its record's probability in ``chances``; what the
    labels alone say is the same estimator with the judge left out (weight 0)."""
    pool = ~np.isnan(values) & ~np.isnan(chances)
    f, y, pi = values[pool], labels[pool], chances[pool]
    n = int((~np.isnan(y)).sum())
    passed = len(f) - n
    if n < MIN_LABELLED:
        return Calibration(n, passed, method="active",
                           refused=f"{n} scored records of the active selection carry a human "
                                   f"label; calibration needs at least {MIN_LABELLED}")
    estimate = active_mean(f, y, pi)
    alone = active_mean(f, y, pi, lam=0.0)
    return Calibration(n, passed, estimate.mean, estimate.ci, human_mean=alone.mean,
                       human_ci95=alone.ci, method="active")
