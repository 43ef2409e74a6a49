"""The summary of a run, built as the batches finish: for each metric its values (compact
float arrays, what the bootstrap resamples), the counts of its reasons, and what its corpus
figure and signature read (:meth:`~rageval.core.metric.Metric.summary_part`), never the
records' details. A run streamed window by window keeps only this, however long it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import Metric, MetricResult
from rageval.core.records import Record
from rageval.core.results import MetricSummary
from rageval.engine.calibration import calibrate
from rageval.engine.columns import GrowingColumn
from rageval.engine.grouped import UNIT, ConversationGroups, summarise_conversations
from rageval.stats.resampling import bootstrap_ci, bootstrap_mean_cis, two_level_bootstrap_ci


class SummaryParts:
    """Per metric: the summary parts of every batch scored so far, and its reasons counted.
    Metrics are known by name, which run options never change."""

    def __init__(self, metrics: list[Metric], *, over_conversations: bool = False) -> None:
        self._stores: dict[str, MetricStore] = {str(m): MetricStore() for m in metrics}
        self._reasons: dict[str, Counter[str]] = {str(m): Counter() for m in metrics}
        self.groups = ConversationGroups()
        # Each record stands for a conversation (the conversation-level metrics' records).
        self.over_conversations = over_conversations

    def add_records(self, records: Sequence[Record]) -> None:
        """Note the records whose parts come next, in their order (their conversations)."""
        self.groups.add(records)

    def add_part(self, metric: Metric, part: MetricResult,
                 reasons: list[str | None]) -> None:
        """Keep a batch's summary part (:meth:`~rageval.core.metric.Metric.summary_part`)
        and count its reasons."""
        self._reasons[str(metric)].update(r for r in reasons if r is not None)
        self._stores[str(metric)].add(part)

    def add_labels(self, name: str, labels: list[float]) -> None:
        """Keep the human labels of the records scored next, in their order (NaN: none)."""
        self._stores[name].add_labels(labels)

    def summarise(self, metrics: list[Metric], seed: int, bootstrap: int,
                  noise: bool = False) -> dict[str, MetricSummary]:
        """The run's summary, one item per output name (``metrics``: the metrics as they sign
        the run, which may differ from those that scored it by run options only)."""
        out: dict[str, MetricSummary] = {}
        means: dict[str, np.ndarray] = {}  # outputs whose CI is the mean's, resampled together
        groups = self.groups.array()
        for scored, signing in zip(self._stores, metrics, strict=True):
            store = self._stores[scored]
            labels = store.labels()
            result = store.result()  # the store hands its arrays over
            out.update(summarise(signing, result, self._reasons[scored], seed, bootstrap, means,
                                 labels, noise, groups, self.over_conversations))
        names = list(means)
        cis = bootstrap_mean_cis([means[n] for n in names], resamples=bootstrap, seed=seed)
        for name, ci in zip(names, cis, strict=True):
            out[name] = replace(out[name], ci95=ci)
        return out


class MetricStore:
    """A metric's summary parts joined as they come: each distinct output column, the corpus
    statistics and the details the signature reads, in large chunks (:mod:`.columns`).

    Outputs equal in every batch so far (a headline and the component it repeats, such as
    ``rouge1`` and ``rouge1.fmeasure``) share one column; a batch where they differ gives
    each its own copy from there on."""

    def __init__(self) -> None:
        self._groups: list[tuple[list[str], GrowingColumn]] = []
        self._names: list[str] = []
        self._stats: GrowingColumn | None = None
        self._details: list[dict[str, Any] | None] | None = None
        self._labels: GrowingColumn | None = None
        self.count = 0

    def add_labels(self, labels: list[float]) -> None:
        if self._labels is None:
            self._labels = GrowingColumn(np.float64)
        self._labels.append(np.asarray(labels, dtype=np.float64))

    def labels(self) -> np.ndarray | None:
        """The human labels kept, aligned with the values (None: the run has none)."""
        return None if self._labels is None else self._labels.array()

    def add(self, part: MetricResult) -> None:
        if not self._names:
            self._names = list(part.values)
            self._groups = [(names, GrowingColumn(np.float64))
                            for names in _equal_outputs(part.values, [self._names])]
        else:
            self._groups = [(names, column if i == 0 else column.copy())
                            for group, column in self._groups
                            for i, names in enumerate(_equal_outputs(part.values, [group]))]
        for names, column in self._groups:
            column.append(part.values[names[0]])
        rows = len(part.values[self._names[0]]) if self._names else len(part.reasons)
        if part.stats is not None:
            if self._stats is None:
                self._stats = GrowingColumn(part.stats.dtype, part.stats.shape[1])
            self._stats.append(part.stats)
        if part.details is not None and self._details is None:
            self._details = [None] * self.count
        if self._details is not None:
            self._details.extend(part.details if part.details is not None else [None] * rows)
        self.count += rows

    def result(self) -> MetricResult:
        """Everything kept, as one result; the store is emptied on the way, one column at a
        time, so that a long run never holds two copies of all its values."""
        values: dict[str, np.ndarray] = {}
        for names, column in self._groups:
            values.update(dict.fromkeys(names, column.array()))
        stats = self._stats.array() if self._stats is not None else None
        details, self._details, self._groups = self._details, None, []
        return MetricResult({n: values[n] for n in self._names}, [], details, stats)


def _equal_outputs(values: dict[str, np.ndarray], groups: list[list[str]]) -> list[list[str]]:
    """``groups`` split where this batch's values differ: names whose arrays are equal (NaN
    equal to NaN) stay together, in their order."""
    out: list[list[str]] = []
    for group in groups:
        split: list[list[str]] = []
        for name in group:
            array = values[name]
            same = next((g for g in split if _same(values[g[0]], array)), None)
            if same is None:
                split.append([name])
            else:
                same.append(name)
        out.extend(split)
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.shape == b.shape and a.dtype == b.dtype
                      and bool(np.array_equal(a, b, equal_nan=True)))


def summarise(metric: Metric, result: MetricResult, reasons: Counter[str], seed: int,
              bootstrap: int, means: dict[str, np.ndarray] | None = None,
              labels: np.ndarray | None = None, noise: bool = False,
              groups: np.ndarray | None = None, over_conversations: bool = False,
              ) -> dict[str, MetricSummary]:
    """Each output's summary: the mean (or the metric's corpus figure for its headline), the
    seeded bootstrap CI, scored and unscored counts, and the signature; with human ``labels``
    (aligned with the records), the headline's mean calibrated by them; with ``noise``, the
    headline's CI of a metric that has samples within its records
    (:meth:`~rageval.core.metric.Metric.noise_samples`) resamples them too.

    With ``means`` given, outputs whose CI is the mean's are left without one and their scored
    values put in ``means``, for the caller to resample every metric's together. With
    ``groups`` (each record's conversation), the summary is over conversations
    (:mod:`.grouped`); with ``over_conversations``, each record already stands for a
    conversation (the conversation-level metrics': :mod:`.whole`)."""
    if groups is not None:
        if noise and metric.noise_samples(result) is not None:
            raise UsageError("--ci judge-noise resamples the samples of records; a run of "
                             "conversations resamples conversations: leave --ci out")
        return summarise_conversations(metric, result, reasons, seed, bootstrap, means, groups)
    signature = metric.result_signature(result)
    if over_conversations:
        signature = signature.extend([UNIT])
    within = metric.noise_samples(result) if noise else None
    flagged = Counter(flag for detail in result.details or () if detail
                      for flag in detail.get("flags", ()))
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
            if within is not None and name == metric.output_names()[0]:
                ci = two_level_bootstrap_ci(within[scored], resamples=bootstrap, seed=seed)
            elif means is None:
                ci = bootstrap_ci(kept, resamples=bootstrap, seed=seed)
            else:
                ci, means[name] = None, kept
        headline = name == metric.output_names()[0]
        out[name] = MetricSummary(
            value, int(scored.sum()), int((~scored).sum()), ci, signature.format(),
            dict(reasons), aggregate, signature.format(short=True),
            in_table=name in metric.table_names(), flagged=dict(flagged),
            calibrated=calibrate(values, labels) if labels is not None and headline else None,
            figures=metric.summary_figures(result) if headline else {},
            ci_method=("judge-noise" if within is not None and headline
                       else "conversations" if over_conversations else "records"),
        )
    return out
