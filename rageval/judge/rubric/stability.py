"""How steady a judge is when asked the same thing several times (``--judge-samples N`` with
a temperature above 0): per record, what the summary's ``stability`` figures and the two-level
bootstrap of ``--ci judge-noise`` read.

An *item* is what the judge grades: the record, or each context of a per-context rubric. An
item *flips* when its samples, rounded half up to the rubric's integer scores, are not all
equal; its spread is the standard deviation of its samples (ddof 1). Only items with at least
two usable samples count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["noise_samples", "sample_stats", "stability"]

# The columns before the samples': items with two samples or more, those that flip, and the
# sum of their standard deviations.
_ITEMS, _FLIPPED, _SD_SUM = 0, 1, 2
_HEAD = 3


def sample_stats(details: Sequence[Mapping[str, Any] | None], samples: int,
                 per_context: bool) -> np.ndarray:
    """One row per record: its items, flips and summed spread, then the values its score is
    the mean of (the samples; for a per-context rubric, the mean grade of each sample when
    every context kept the same number of samples, else the record's score once), NaN after."""
    rows = np.full((len(details), _HEAD + samples), np.nan)
    rows[:, :_HEAD] = 0.0
    for i, detail in enumerate(details):
        items = ([c.get("samples") or [] for c in detail.get("contexts", [])] if per_context
                 else [detail.get("samples") or []]) if detail else []
        for values in items:
            if len(values) >= 2:
                rows[i, _ITEMS] += 1
                rows[i, _FLIPPED] += len({_round_half_up(v) for v in values}) > 1
                rows[i, _SD_SUM] += float(np.std(values, ddof=1))
        usable = _record_samples(items)
        rows[i, _HEAD:_HEAD + len(usable)] = usable
    return rows


def stability(stats: np.ndarray, samples: int) -> dict[str, Any]:
    """The summary's figures: how many items had two samples or more, the share of them
    whose rounded score flips between samples, and their mean standard deviation."""
    items = int(stats[:, _ITEMS].sum())
    return {"samples": samples, "items": items,
            "flip_rate": float(stats[:, _FLIPPED].sum()) / items if items else None,
            "mean_sd": float(stats[:, _SD_SUM].sum()) / items if items else None}


def noise_samples(stats: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The sample columns, what the two-level bootstrap resamples within each record; a
    record whose samples are not known apart (``values``: the records' scores) keeps its
    score as its one sample."""
    columns = stats[:, _HEAD:].copy()
    alone = np.isnan(columns[:, 0])
    columns[alone, 0] = values[alone]
    return columns


def _record_samples(items: list[list[float]]) -> list[float]:
    if not items or not all(items):
        return []
    if len(items) == 1:
        return list(items[0])
    if len({len(values) for values in items}) == 1:
        return [float(np.mean(column)) for column in zip(*items, strict=True)]
    return [float(np.mean([np.mean(values) for values in items]))]


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)
