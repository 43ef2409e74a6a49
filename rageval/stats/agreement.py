"""Krippendorff's alpha: how far several raters (a judge panel's members) agree on the items
they all rated, beyond what their values' spread would give by chance, with missing ratings
allowed (Krippendorff, *Content Analysis*, 2004), as the ``krippendorff`` package computes it.

``ratings`` has one row per rater and one column per item, NaN where a rater gave nothing
(an abstention). Items with fewer than two ratings are not pairable and count for nothing.
With the coincidence matrix ``o`` of the pairable values (each item's ordered pairs of ratings
weighted by 1 / (ratings - 1)), ``n_c`` its margins and ``n`` their sum::

    alpha = 1 - (n - 1) * sum(o[c, k] * d(c, k)) / sum(n_c * n_k * d(c, k))

where ``d`` is the squared distance of the level of measurement: ``nominal`` (0 when equal,
else 1), ``interval`` ((c - k) squared) or ``ordinal`` (the number of values from c to k,
less half of c's and k's, squared).
"""

from __future__ import annotations

import numpy as np

__all__ = ["LEVELS", "krippendorff_alpha"]

LEVELS = ("nominal", "ordinal", "interval")


def krippendorff_alpha(ratings: np.ndarray, level: str = "interval") -> float | None:
    """Alpha of ``ratings`` (raters x items, NaN where missing) at ``level``; None when it is
    undefined (no item rated twice, or every pairable value the same)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    data = np.asarray(ratings, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"ratings must be raters x items, got shape {data.shape}")
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    domain = np.unique(pairable[~np.isnan(pairable)])
    if len(domain) < 2:
        return None
    coincidences = _coincidences(pairable, domain)
    margins = coincidences.sum(axis=1)
    n = margins.sum()
    distance = _distances(domain, margins, level)
    expected = (margins[:, None] * margins[None, :] * distance).sum()
    if expected == 0:
        return None
    return float(1 - (n - 1) * (coincidences * distance).sum() / expected)


def _coincidences(pairable: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """Each item's ordered pairs of ratings by value, weighted by 1 / (its ratings - 1)."""
    size = len(domain)
    out = np.zeros((size, size))
    for item in pairable.T:
        rated = item[~np.isnan(item)]
        counts = np.bincount(np.searchsorted(domain, rated), minlength=size).astype(float)
        pairs = np.outer(counts, counts) - np.diag(counts)  # a rating is not paired with itself
        out += pairs / (len(rated) - 1)
    return out


def _distances(domain: np.ndarray, margins: np.ndarray, level: str) -> np.ndarray:
    if level == "nominal":
        return 1.0 - np.eye(len(domain))
    if level == "interval":
        return (domain[:, None] - domain[None, :]) ** 2
    cumulative = np.cumsum(margins)
    between = cumulative[None, :] - cumulative[:, None] + margins[:, None]  # sum of n_g, c..k
    ranks = np.abs(np.triu(between) + np.triu(between, 1).T) - (margins[:, None]
                                                                  + margins[None, :]) / 2
    return ranks ** 2
