"""A metric's mean calibrated by the human labels of some of its records (``--human FIELD``):
prediction-powered inference over the records the judge scored (:mod:`rageval.stats.ppi`)."""

from __future__ import annotations

import numpy as np

from rageval.core.calibration import MIN_LABELLED, Calibration
from rageval.stats.ppi import classical_mean, ppi_mean

__all__ = ["calibrate"]


def calibrate(values: np.ndarray, labels: np.ndarray) -> Calibration:
    """The calibrated mean of a metric's ``values`` (NaN: unscored) from ``labels`` (NaN: no
    label), aligned record by record. Only records the metric scored count: a labelled record
    the judge could not score says nothing about the judge."""
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
