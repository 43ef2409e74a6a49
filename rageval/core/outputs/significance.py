"""One scale of significance marks, for every place rageval shows a p-value: ``rageval
compare``'s tables, the HTML report, and anything else that marks a difference as real.

The marks read a Holm-adjusted p-value where there is one: ``***`` below 0.001, ``**`` below
0.01, ``*`` below 0.05, nothing otherwise; :data:`SIGNIFICANCE_LEGEND` says so in words.
"""

from __future__ import annotations

import math

__all__ = ["MARKS", "SIGNIFICANCE_LEGEND", "significance_mark"]

# Bounds on the p-value and their marks, strictest first.
MARKS: tuple[tuple[float, str], ...] = ((0.001, "***"), (0.01, "**"), (0.05, "*"))

SIGNIFICANCE_LEGEND = ", ".join(f"{mark} p < {bound:g}" for bound, mark in reversed(MARKS))


def significance_mark(p_value: float | None) -> str:
    """The mark of ``p_value`` (``""`` for None, NaN or 0.05 and over)."""
    if p_value is None or math.isnan(p_value):
        return ""
    return next((mark for bound, mark in MARKS if p_value < bound), "")
