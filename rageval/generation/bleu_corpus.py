"""Corpus BLEU from summed statistics: each record's sufficient statistics read back from its
kept ``stats`` or its ``details``, for the summary's bootstrap (and, through
:meth:`Bleu.corpus_row`, ``rageval compare``)."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from rageval.core.metric import MetricResult
from rageval.generation.bleu_stats import MAX_ORDER

Stats = list[int]  # sacrebleu's layout: [sys_len, ref_len, correct_1..4, total_1..4]

# sys_len, ref_len, then the matches and totals of each n-gram order (sacrebleu's layout).
STATS_WIDTH = 2 + 2 * MAX_ORDER
# The statistics matrix of a result without ``stats`` (one built from details), built once
# and reused by every bootstrap resample.
_MATRICES: dict[int, tuple[weakref.ref[MetricResult], np.ndarray]] = {}


# The statistics of a result by column, as float64, for the resamples of its bootstrap.
_COLUMNS: dict[int, tuple[weakref.ref[MetricResult], np.ndarray]] = {}


def stats_columns(result: MetricResult, matrix: np.ndarray) -> np.ndarray:
    key = id(result)
    cached = _COLUMNS.get(key)
    if cached is not None and cached[0]() is result:
        return cached[1]
    columns = np.ascontiguousarray(matrix.T, dtype=np.float64)
    _COLUMNS[key] = (weakref.ref(result, lambda _ref: _COLUMNS.pop(key, None)), columns)
    return columns


def stats_matrix(result: MetricResult) -> np.ndarray:
    if result.stats is not None:  # kept by score() (and by a streamed run's summary)
        return result.stats[:, :STATS_WIDTH]
    key = id(result)
    cached = _MATRICES.get(key)
    if cached is not None and cached[0]() is result:
        return cached[1]
    details = result.details or []
    width = 2 + 2 * MAX_ORDER
    matrix = np.zeros((len(details), width), dtype=np.int64)
    for i, detail in enumerate(details):
        if detail is not None:
            matrix[i] = stats_row(detail)
    _MATRICES[key] = (weakref.ref(result, lambda _ref: _MATRICES.pop(key, None)), matrix)
    return matrix


def stats_row(detail: Mapping[str, Any]) -> Stats:
    """A record's statistics back in sacrebleu's layout."""
    return [int(detail["sys_len"]), int(detail["ref_len"]),
            *(int(c) for c in detail["counts"]), *(int(t) for t in detail["totals"])]
