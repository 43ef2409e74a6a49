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

from rageval.core.calibration import Calibration
from rageval.core.errors import UsageError
from rageval.core.metric import Metric, MetricResult
from rageval.core.records import Record
from rageval.core.results import MetricSummary
from rageval.stats.exact import exact_mean
from rageval.stats.poisson import EXACT_RECORDS, seeded_keys, unit_keys
from rageval.stats.resampling import bootstrap_ci, bootstrap_mean_cis, two_level_bootstrap_ci
from rageval.summary.columns import GrowingColumn
from rageval.summary.grouped import UNIT, ConversationGroups, summarise_conversations
from rageval.summary.online import OnlineBlocks, OnlineStore


class SummaryParts:
    """Per metric: the summary parts of every batch scored so far, and its reasons counted.
    Metrics are known by name, which run options never change.

    Up to ``exact_records`` records every value is kept, for the exact percentile bootstrap
    (:class:`MetricStore`); past them the parts go into running sums with the Poisson
    bootstrap's weights (:class:`~rageval.summary.online.OnlineStore`), so that what a run
    keeps no longer grows with its records (0: running sums from the first record; None:
    never). The weights are drawn per unit: a record on its own, or a whole conversation. A
    metric whose summary reads every record stays whole."""

    def __init__(self, metrics: list[Metric], *, over_conversations: bool = False,
                 seed: int = 0, bootstrap: int = 1000,
                 exact_records: int | None = EXACT_RECORDS) -> None:
        self._metrics = {str(m): m for m in metrics}
        self._stores: dict[str, MetricStore | OnlineStore] = {
            str(m): MetricStore() for m in metrics}
        self._reasons: dict[str, Counter[str]] = {str(m): Counter() for m in metrics}
        self.groups = ConversationGroups()
        # Each record stands for a conversation (the conversation-level metrics' records).
        self.over_conversations = over_conversations
        self.seed, self.bootstrap = seed, bootstrap
        self._exact_records = exact_records
        self._held_keys = GrowingColumn(np.uint64)  # the units' keys while values are held
        self._blocks: OnlineBlocks | None = None
        self._batch: np.ndarray = np.empty(0, dtype=np.int64)  # the batch's unit numbers
        self._count = 0

    def add_records(self, records: Sequence[Record]) -> None:
        """Note the records whose parts come next, in their order (their conversations)."""
        was_open = self.groups.open  # the last unit before these records may go on
        if self.over_conversations:  # each record a whole conversation: a unit of its own
            self._batch = np.arange(self._count, self._count + len(records), dtype=np.int64)
            starts = list(records)
        else:
            self._batch, starts = self.groups.add(records)
        self._count += len(records)
        if self._exact_records is None:
            return
        keys = seeded_keys(unit_keys([_unit_id(r) for r in starts]), self.seed)
        if self._blocks is None and self._count > self._exact_records:
            self._go_online(was_open)  # the values held so far, those of earlier records
        if self._blocks is None:
            self._held_keys.append(keys)
        else:
            self._blocks.advance(self._online(), was_open)
            self._blocks.add(keys)

    def _go_online(self, was_open: bool) -> None:
        """Move the values held so far into running sums, for every metric that can be
        (``was_open``: the last unit held may go on)."""
        blocks = OnlineBlocks(self.bootstrap)
        movable = {name for name, store in self._stores.items()
                   if isinstance(store, MetricStore)
                   and store.can_go_online(self._metrics[name])}
        groups = self.groups.release() if len(movable) == len(self._stores) else (
            self.groups.array_copy())
        for name in movable:
            metric = self._metrics[name]
            store = self._stores[name]
            assert isinstance(store, MetricStore)
            online = OnlineStore(metric, metric.output_names())
            if store.count:
                held = (np.arange(store.count, dtype=np.int64) if groups is None
                        else groups[:store.count])  # not the records noted for the next parts
                online.add(store.result(), held, was_open)
            self._stores[name] = online
        held_keys = self._held_keys.array()
        self._held_keys = GrowingColumn(np.uint64)
        if len(held_keys):
            blocks.add(held_keys)
        self._blocks = blocks
        blocks.advance(self._online(), was_open)

    def _online(self) -> list[OnlineStore]:
        return [s for s in self._stores.values() if isinstance(s, OnlineStore)]

    def add_part(self, metric: Metric, part: MetricResult,
                 reasons: list[str | None]) -> None:
        """Keep a batch's summary part (:meth:`~rageval.core.metric.Metric.summary_part`)
        and count its reasons."""
        self._reasons[str(metric)].update(r for r in reasons if r is not None)
        store = self._stores[str(metric)]
        if isinstance(store, OnlineStore):
            store.add(part, self._batch, self.groups.open)
        else:
            store.add(part)

    def add_labels(self, name: str, labels: list[float],
                   chances: list[float] | None = None) -> None:
        """Keep the human labels of the records scored next, in their order (NaN: none),
        and, for labels under active selection, each record's probability of being labelled
        (NaN: not in the pool the selection went through)."""
        store = self._stores[name]
        if not isinstance(store, MetricStore):
            raise UsageError(f"{name}: human labels need every value kept; the summary "
                             "keeps running sums")
        store.add_labels(labels, chances)

    def summarise(self, metrics: list[Metric], seed: int, bootstrap: int,
                  noise: bool = False) -> dict[str, MetricSummary]:
        """The run's summary, one item per output name (``metrics``: the metrics as they sign
        the run, which may differ from those that scored it by run options only)."""
        if (seed, bootstrap) != (self.seed, self.bootstrap) and self._blocks is not None:
            raise ValueError("the running sums were weighed with another seed or resample "
                             "count")
        if self._blocks is not None:
            for store in self._online():
                store.close()
            self._blocks.advance(self._online(), open_last=False, final=True)
        out: dict[str, MetricSummary] = {}
        means: dict[str, np.ndarray] = {}  # outputs whose CI is the mean's, resampled together
        groups = self.groups.array()
        extra = [UNIT] if self.over_conversations or self.groups.conversations else []
        for scored, signing in zip(self._stores, metrics, strict=True):
            store = self._stores[scored]
            if isinstance(store, OnlineStore):
                store.metric = signing
                out.update(store.summarise(self._reasons[scored], extra,
                                           conversations=bool(self.groups.conversations)))
                continue
            labels, chances = store.labels(), store.chances()
            result = store.result()  # the store hands its arrays over
            out.update(summarise(signing, result, self._reasons[scored], seed, bootstrap, means,
                                 labels, noise, groups, self.over_conversations, chances))
        names = list(means)
        cis = bootstrap_mean_cis([means[n] for n in names], resamples=bootstrap, seed=seed)
        for name, ci in zip(names, cis, strict=True):
            out[name] = replace(out[name], ci95=ci)
        return out


def _unit_id(record: Record) -> str:
    """What a unit's weights are drawn from: its conversation's id, or the record's own."""
    return record.conversation.id if record.conversation is not None else record.id


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
        self._chances: GrowingColumn | None = None  # active selection's probabilities
        self.count = 0

    def can_go_online(self, metric: Metric) -> bool:
        """Whether this store's values can become running sums: not when the summary reads
        every record of the metric, nor when human labels calibrate it."""
        return self._labels is None and not metric.summary_keeps_rows()

    def add_labels(self, labels: list[float], chances: list[float] | None = None) -> None:
        if self._labels is None:
            self._labels = GrowingColumn(np.float64)
        self._labels.append(np.asarray(labels, dtype=np.float64))
        if chances is not None:
            if self._chances is None:
                self._chances = GrowingColumn(np.float64)
            self._chances.append(np.asarray(chances, dtype=np.float64))

    def chances(self) -> np.ndarray | None:
        """The probabilities of active selection kept, aligned with the values (None: the
        labels were not actively selected)."""
        return None if self._chances is None else self._chances.array()

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
              chances: np.ndarray | None = None) -> dict[str, MetricSummary]:
    """Each output's summary: the mean (or the metric's corpus figure for its headline), the
    seeded bootstrap CI, scored and unscored counts, and the signature; with human ``labels``
    (aligned with the records), the headline's mean calibrated by them (by active inference
    where ``chances`` give the probabilities of an active selection); with ``noise``, the
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
            value = exact_mean(kept) if len(kept) else None
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
            calibrated=(None if labels is None or not headline
                        else _calibrated(values, labels, chances)),
            figures=metric.summary_figures(result) if headline else {},
            ci_method=("judge-noise" if within is not None and headline
                       else "conversations" if over_conversations else "records"),
        )
    return out


def _calibrated(values: np.ndarray, labels: np.ndarray,
                chances: np.ndarray | None) -> Calibration:
    """The headline calibrated by human labels: PPI, or its active form where the labels were
    drawn with known chances. Imported here, as only runs with human labels need it."""
    from rageval.stats.active_calibration import calibrate_active
    from rageval.stats.calibration import calibrate

    return calibrate(values, labels) if chances is None else calibrate_active(values, labels,
                                                                               chances)
