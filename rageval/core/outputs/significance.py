"""One scale of significance marks, for every place rageval shows a p-value: ``rageval
compare``'s tables, the HTML report, the Markdown summary, and anything else that marks a
difference as real; and one way of writing the p-value beside its mark (:func:`p_value_text`,
:func:`marked_p_value`).

The marks read a Holm-adjusted p-value where there is one: ``***`` below 0.001, ``**`` below
0.01, ``*`` below 0.05, nothing otherwise; :data:`SIGNIFICANCE_LEGEND` says so in words.
"""

from __future__ import annotations

import math

__all__ = ["MARKS", "SIGNIFICANCE_LEGEND", "marked_p_value", "p_value_text", "significance_legend",
           "significance_mark"]

# Bounds on the p-value and their marks, strictest first.
MARKS: tuple[tuple[float, str], ...] = ((0.001, "***"), (0.01, "**"), (0.05, "*"))



def significance_legend(p_name: str = "p") -> str:
    """The marks in words, naming the p-value they read: ``* p < 0.05, ** p < 0.01, ...``."""
    return ", ".join(f"{mark} {p_name} < {bound:g}" for bound, mark in reversed(MARKS))


SIGNIFICANCE_LEGEND = significance_legend()


def significance_mark(p_value: float | None) -> str:
    """The mark of ``p_value`` (``""`` for None, NaN or 0.05 and over)."""
    if p_value is None or math.isnan(p_value):
        return ""
    return next((mark for bound, mark in MARKS if p_value < bound), "")


def p_value_text(p_value: float | None) -> str:
    """A p-value as every channel writes it: four decimals, ``<0.0001`` below that, ``—`` for
    none (so ``0.0009 ***`` reads the same in the terminal, the report and the Markdown)."""
    if p_value is None or math.isnan(p_value):
        return "—"
    return "<0.0001" if p_value < 1e-4 else f"{p_value:.4f}"


def marked_p_value(p_value: float | None) -> str:
    """The p-value and its mark, as a table cell shows them: ``0.0185 *``, ``0.2182``."""
    return f"{p_value_text(p_value)} {significance_mark(p_value)}".rstrip()
