"""Values summed up by group: a run's conversations (records grouped by the conversation they
belong to, numbered from 0), for the summary and for comparisons over conversations."""

from __future__ import annotations

import numpy as np

from rageval.stats.exact import exact_group_means

__all__ = ["group_means", "group_rows", "group_sums"]


def group_sums(values: np.ndarray, kept: np.ndarray, groups: np.ndarray,
               count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group (``count`` of them), the sum of ``values`` over its ``kept`` records and how
    many those are."""
    where = groups[kept]
    return (np.bincount(where, weights=values[kept], minlength=count),
            np.bincount(where, minlength=count))


def group_means(values: np.ndarray, kept: np.ndarray, groups: np.ndarray,
                count: int) -> np.ndarray:
    """Per group, the mean of ``values`` over its ``kept`` records, correctly rounded
    (:mod:`~rageval.stats.exact`; NaN: none kept)."""
    return exact_group_means(values[kept], groups[kept], count)


def group_rows(columns: np.ndarray, groups: np.ndarray | None, count: int) -> np.ndarray:
    """The rows of ``columns`` summed by group (``count`` of them; ``groups=None``: each row
    is a group of its own), in the columns' type: integer statistics stay exact."""
    if groups is None:
        return columns
    out = np.zeros((count, columns.shape[1]), dtype=columns.dtype)
    np.add.at(out, groups, columns)
    return out
