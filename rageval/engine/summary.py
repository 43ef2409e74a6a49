"""The summary of a run, built as the batches finish: for each metric its values (compact
float arrays, what the bootstrap resamples), the counts of its reasons, and what its corpus
figure and signature read (:meth:`~rageval.core.metric.Metric.summary_part`), never the
records' details. A run streamed window by window keeps only this, however long it is.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rageval.compare.stats import bootstrap_ci
from rageval.core.metric import Metric, MetricResult
from rageval.core.results import MetricSummary


class SummaryParts:
    """Per metric: the summary parts of every batch scored so far, and its reasons counted."""

    def __init__(self, metrics: list[Metric]) -> None:
        self._parts: dict[Metric, list[MetricResult]] = {m: [] for m in metrics}
        self._reasons: dict[Metric, Counter[str]] = {m: Counter() for m in metrics}

    def add_part(self, metric: Metric, part: MetricResult,
                 reasons: list[str | None]) -> None:
        """Keep a batch's summary part (:meth:`~rageval.core.metric.Metric.summary_part`)
        and count its reasons."""
        self._reasons[metric].update(r for r in reasons if r is not None)
        self._parts[metric].append(part)

    def summarise(self, metrics: list[Metric], seed: int,
                  bootstrap: int) -> dict[str, MetricSummary]:
        """The run's summary, one item per output name (``metrics``: the metrics as they sign
        the run, which may differ from those that scored it by run options only)."""
        out: dict[str, MetricSummary] = {}
        for scored, signing in zip(self._parts, metrics, strict=True):
            parts = self._parts[scored]
            result = concat(parts)
            parts.clear()  # the concatenated arrays replace the parts
            out.update(summarise(signing, result, self._reasons[scored], seed, bootstrap))
        return out


def concat(parts: list[MetricResult]) -> MetricResult:
    """One result from the results of consecutive batches."""
    names = list(parts[0].values)
    details: list[dict[str, Any] | None] | None = None
    if any(p.details is not None for p in parts):
        details = [d for p in parts
                   for d in (p.details or [None] * len(p.values[names[0]]))]
    stats = None
    if any(p.stats is not None for p in parts):
        stats = np.concatenate([p.stats for p in parts if p.stats is not None])
    return MetricResult(
        {n: np.concatenate([p.values[n] for p in parts]) for n in names},
        [r for p in parts for r in p.reasons],
        details,
        stats,
    )


def summarise(metric: Metric, result: MetricResult, reasons: Counter[str], seed: int,
              bootstrap: int) -> dict[str, MetricSummary]:
    """Each output's summary: the mean (or the metric's corpus figure for its headline), the
    seeded bootstrap CI, scored and unscored counts, and the signature."""
    signature = metric.result_signature(result)
    out: dict[str, MetricSummary] = {}
    for name, values in result.values.items():
        scored = ~np.isnan(values)
        kept = values[scored]
        indices = np.flatnonzero(scored)
        corpus = metric.corpus_value(result, indices) if len(kept) else None
        if corpus is not None and name == metric.output_names()[0]:
            value, aggregate = corpus, "corpus"
            ci = bootstrap_ci(
                kept, resamples=bootstrap, seed=seed,
                statistic=lambda idx, m=metric, r=result, ix=indices: m.corpus_value(r, ix[idx]),
            )
        else:
            value = float(kept.mean()) if len(kept) else None
            aggregate = "mean"
            ci = bootstrap_ci(kept, resamples=bootstrap, seed=seed)
        out[name] = MetricSummary(
            value, int(scored.sum()), int((~scored).sum()), ci, signature.format(),
            dict(reasons), aggregate, signature.format(short=True),
            in_table=name in metric.table_names(),
        )
    return out
