"""The summary of a run, built as the batches finish: for each metric its values (compact
float arrays, what the bootstrap resamples), the counts of its reasons, and what its corpus
figure and signature read (:meth:`~rageval.core.metric.Metric.summary_part`), never the
records' details. A run streamed window by window keeps only this, however long it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from rageval.compare.stats import bootstrap_ci, bootstrap_mean_cis
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
        self._parts[metric].append(
            MetricResult(_shared_outputs(part.values), part.reasons, part.details, part.stats))

    def summarise(self, metrics: list[Metric], seed: int,
                  bootstrap: int) -> dict[str, MetricSummary]:
        """The run's summary, one item per output name (``metrics``: the metrics as they sign
        the run, which may differ from those that scored it by run options only)."""
        out: dict[str, MetricSummary] = {}
        means: dict[str, np.ndarray] = {}  # outputs whose CI is the mean's, resampled together
        for scored, signing in zip(self._parts, metrics, strict=True):
            parts = self._parts[scored]
            result = concat(parts, release=True)
            parts.clear()  # the concatenated arrays replace the parts
            out.update(summarise(signing, result, self._reasons[scored], seed, bootstrap, means))
        names = list(means)
        cis = bootstrap_mean_cis([means[n] for n in names], resamples=bootstrap, seed=seed)
        for name, ci in zip(names, cis, strict=True):
            out[name] = replace(out[name], ci95=ci)
        return out


def _shared_outputs(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs with outputs of equal values holding one array (a headline and the
    component it repeats, such as ``rouge1`` and ``rouge1.fmeasure``): a long run keeps
    each distinct column once."""
    distinct: list[np.ndarray] = []
    out: dict[str, np.ndarray] = {}
    for name, array in values.items():
        same = next((d for d in distinct if d.shape == array.shape and d.dtype == array.dtype
                     and np.array_equal(d, array, equal_nan=True)), None)
        if same is None:
            distinct.append(array)
        out[name] = array if same is None else same
    return out


def concat(parts: list[MetricResult], *, release: bool = False) -> MetricResult:
    """One result from the results of consecutive batches. With ``release``, each output's
    part arrays are dropped as soon as they are joined (``parts`` is then spent), so that a
    long run never holds two copies of all its values at once."""
    names = list(parts[0].values)
    details: list[dict[str, Any] | None] | None = None
    if any(p.details is not None for p in parts):
        details = [d for p in parts
                   for d in (p.details or [None] * len(p.values[names[0]]))]
    stats = None
    if any(p.stats is not None for p in parts):
        stats = np.concatenate([p.stats for p in parts if p.stats is not None])
    reasons = [r for p in parts for r in p.reasons]
    # Outputs holding the same arrays in every part (see _shared_outputs) share one result.
    groups: dict[tuple[int, ...], list[str]] = {}
    for name in names:
        groups.setdefault(tuple(id(p.values[name]) for p in parts), []).append(name)
    values: dict[str, np.ndarray] = {}
    for group in groups.values():
        joined = np.concatenate([p.values[group[0]] for p in parts])
        values.update(dict.fromkeys(group, joined))
        if release:  # at most one output's values held twice at any time
            for part in parts:
                for name in group:
                    del part.values[name]
    return MetricResult(dict((n, values[n]) for n in names), reasons, details, stats)


def summarise(metric: Metric, result: MetricResult, reasons: Counter[str], seed: int,
              bootstrap: int, means: dict[str, np.ndarray] | None = None
              ) -> dict[str, MetricSummary]:
    """Each output's summary: the mean (or the metric's corpus figure for its headline), the
    seeded bootstrap CI, scored and unscored counts, and the signature.

    With ``means`` given, outputs whose CI is the mean's are left without one and their scored
    values put in ``means``, for the caller to resample every metric's together."""
    signature = metric.result_signature(result)
    out: dict[str, MetricSummary] = {}
    for name, values in result.values.items():
        scored = ~np.isnan(values)
        kept = values if scored.all() else values[scored]
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
            if means is None:
                ci = bootstrap_ci(kept, resamples=bootstrap, seed=seed)
            else:
                ci, means[name] = None, kept
        out[name] = MetricSummary(
            value, int(scored.sum()), int((~scored).sum()), ci, signature.format(),
            dict(reasons), aggregate, signature.format(short=True),
            in_table=name in metric.table_names(),
        )
    return out
