"""How unsure the judge was of one record's score, the measure an active walk draws records
by: the standard deviation (ddof 1) of the judge's samples of it (``--judge-samples N``), else
a panel's spread (the largest value given less the smallest), else how close the score sits to
the middle of the scale, ``min(v - lo, hi - v) / ((hi - lo) / 2)``: 0 at either end, 1 in the
middle."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["uncertainty"]


def uncertainty(score: float, details: Mapping[str, Any], low: float, high: float) -> float:
    """The judge's uncertainty of ``score`` (on the scale ``low``-``high``), from the details
    it left for the record."""
    samples = _finite_numbers(details.get("samples"))
    if len(samples) >= 2:
        return float(np.std(samples, ddof=1))
    spread = details.get("spread")
    if _finite(spread):
        return max(0.0, float(spread))
    if high <= low:
        return 0.0
    distance = min(score - low, high - score) / ((high - low) / 2)
    return min(1.0, max(0.0, distance))


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _finite_numbers(value: Any) -> list[float]:
    if not isinstance(value, list):
        return []
    return [float(v) for v in value if _finite(v)]
