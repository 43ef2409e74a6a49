"""Corpus BLEU from summed statistics: each record's sufficient statistics read back (from its
kept ``stats`` or its ``details``), and corpus BLEU of weighted sets of records, for the
summary's bootstrap and ``rageval compare``."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import MetricResult
from rageval.core.registry import create
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


def corpus_bleu_scorer(
    details: Sequence[Mapping[str, Any] | None], *, metric: str = "bleu"
) -> Callable[[np.ndarray | None], np.ndarray]:
    """Corpus BLEU of weighted sets of records, recomputed from their per-record ``details``.

    ``details`` are the records' ``details[metric]`` as ``records.jsonl`` holds them (None for
    an unscored record: it adds nothing). Their statistics are read once; the function returned
    takes a ``(k, n)`` array of non-negative integer multiplicities, one row per corpus
    (bootstrap resamples, randomization relabellings), and returns the ``k`` corpus BLEU values:
    each row's statistics are summed (one matrix product for all rows) and BLEU is computed from
    the sums as :meth:`Bleu.corpus_value` does, with the smoothing of the ``metric`` name
    (``"bleu(smooth=floor)"``). Given None it scores every record once: the one value is the
    run's corpus BLEU (``sacrebleu.corpus_bleu``).
    """
    scorer = create(metric)
    if scorer.base != "bleu":
        raise UsageError(f"{metric} is not a BLEU metric: no corpus BLEU to recompute")
    matrix = np.zeros((len(details), 2 + 2 * MAX_ORDER), dtype=np.float64)
    for i, detail in enumerate(details):
        if detail is not None:
            matrix[i] = stats_row(detail)

    def score(weights: np.ndarray | None) -> np.ndarray:
        rows = np.ones((1, len(matrix))) if weights is None else np.asarray(weights, np.float64)
        if rows.ndim != 2 or rows.shape[1] != len(matrix):
            raise ValueError(f"weights must have shape (k, {len(matrix)}), got {rows.shape}")
        # Float products are exact for these integer sums (far below 2**53); sacrebleu gets ints.
        sums = np.rint(rows @ matrix).astype(np.int64)
        return np.array([scorer.corpus_from_sums(row) for row in sums])

    return score
