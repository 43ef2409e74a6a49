"""A metric's scale: the range its values take, as each metric declares it
(:meth:`rageval.core.metric.Metric.output_scale`), carried in the summary (``"scale"``), and
shown beside every value so that a 1-5 rubric is never read as a 0-1 ratio.

A scale is ``(low, high)``; an end that is ``None`` is unbounded that way (DCG, ranks). The
scales of the house: a judge rubric's own (1-5 for the built-in rubrics, 0-3 for
``context_relevance``), 0-1 for ratios (precision, recall, NDCG, ROUGE, claim and tool
metrics), 0-100 for BLEU.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["RATIO", "UNBOUNDED", "Scale", "scale_from_json", "scale_text"]

Scale = tuple[float | None, float | None]

RATIO: Scale = (0.0, 1.0)
UNBOUNDED: Scale = (None, None)


def scale_text(scale: Scale | None) -> str:
    """``1–5``, ``0–1``, ``0–100``, ``≤ 1``, ``≥ 0``, ``unbounded``; ``?`` for a scale a run
    did not record (written before scales were)."""
    if scale is None:
        return "?"
    low, high = (None if end is None else _number(end) for end in scale)
    if low is not None and high is not None:
        return f"{low}–{high}"
    if low is not None:
        return f"≥ {low}"
    if high is not None:
        return f"≤ {high}"
    return "unbounded"


def scale_from_json(data: Any) -> Scale | None:
    """A summary's ``"scale"`` back: ``[low, high]`` (null: unbounded that way); None when the
    run recorded none."""
    if not isinstance(data, list | tuple) or len(data) != 2:
        return None
    ends = [None if end is None else float(end) for end in data
            if end is None or (isinstance(end, int | float) and not isinstance(end, bool))]
    if len(ends) != 2 or any(end is not None and not math.isfinite(end) for end in ends):
        return None
    return ends[0], ends[1]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
