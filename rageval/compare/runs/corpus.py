"""Corpus figures (corpus BLEU) in ``rageval compare``: each record's additive statistics read
back from its details (:meth:`~rageval.core.metric.Metric.corpus_row`), and the figure of
weighted sets of records recomputed from their sums, on both sides of a comparison."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rageval.core.errors import InputError, UsageError
from rageval.core.metric import Metric
from rageval.core.registry import create
from rageval.core.results import RecordResult

__all__ = ["corpus_matrix", "corpus_metric", "corpus_resampler", "record_details"]


def corpus_resampler(name: str, details: Sequence[Mapping[str, Any] | None]
                     ) -> Callable[[np.ndarray | None], np.ndarray]:
    """The metric's corpus figure over weighted sets of these records: given a ``(k, n)``
    array of integer multiplicities (resamples, relabellings; None: each record once), the
    ``k`` figures of each row's summed statistics
    (:meth:`~rageval.core.metric.Metric.corpus_row`)."""
    metric = corpus_metric(name)
    matrix = corpus_matrix(metric, details).astype(np.float64)

    def figures(weights: np.ndarray | None) -> np.ndarray:
        rows = np.ones((1, len(matrix))) if weights is None else np.asarray(weights, np.float64)
        if rows.ndim != 2 or rows.shape[1] != len(matrix):
            raise ValueError(f"weights must have shape (k, {len(matrix)}), got {rows.shape}")
        # Float products are exact for these integer sums (far below 2**53).
        sums = np.rint(rows @ matrix).astype(np.int64)
        return np.array([metric.corpus_from_sums(row) for row in sums])

    return figures


def corpus_metric(name: str) -> Metric:
    """The metric of a corpus output, refused when it has no corpus figure to recompute."""
    metric = create(name)
    if type(metric).corpus_row is Metric.corpus_row:
        raise UsageError(f"{name} has no corpus figure to recompute")
    return metric


def corpus_matrix(metric: Metric, details: Sequence[Mapping[str, Any] | None]) -> np.ndarray:
    """The records' corpus statistics (:meth:`~rageval.core.metric.Metric.corpus_row`), one
    row each, zeros for a record without details (None: not compared there)."""
    rows = [None if d is None else metric.corpus_row(d) for d in details]
    width = next((len(r) for r in rows if r is not None), 0)
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        if row is not None:
            out[i] = row
    return out


def record_details(record: RecordResult, name: str, run: str) -> dict[str, Any]:
    """The statistics a scored record keeps of corpus output ``name`` (its details), which a
    record of run ``run`` must have."""
    detail = record.details.get(name)
    if not isinstance(detail, dict):
        raise InputError(f"record {record.id!r} has a {name} value but no details to "
                         "recompute the corpus figure from", path=run)
    return detail
