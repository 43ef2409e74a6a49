"""Scoring a window's batches: the engine the orchestrator hands each window to.

:class:`LocalEngine` scores the batches in this process, one after the other; the Ray engine
(:mod:`rageval.engine.ray_engine`) scores them on a cluster with the same
:func:`score_batch`, so both give the same values. Each batch comes back as a
:class:`ScoredBatch`: its per-record results, what the summary needs of each metric, and the
run-wide objects (counters for the manifest) its scoring filled in, which the orchestrator
merges into the run's.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rageval.core.metric import Batch, Metric, MetricResult, by_hooks
from rageval.core.records import Record
from rageval.engine.result_block import ResultBlock, result_block


@dataclass
class ScoredBatch:
    """One scored batch: its per-record results, each metric's (summary part, reasons) in the
    run's metric order, and the run-wide objects its scoring made (empty when it shared the
    run's)."""

    block: ResultBlock
    parts: list[tuple[MetricResult, list[str | None]]]
    run_wide: dict[Any, Any] = field(default_factory=dict)


class Engine(Protocol):
    """Prepares a window (the metrics' :meth:`~rageval.core.metric.RunHooks.prepare`, over
    the records scored together), scores its batches and yields them in order."""

    def score(self, metrics: list[Metric], run: Batch,
              batch_size: int) -> Iterator[ScoredBatch]: ...


class LocalEngine:
    """Every batch in this process, one after the other, sharing the window's caches (within
    a batch every metric shares the batch's cache, so what several metrics derive from the same
    records, a ranking or a tokenisation, is built once)."""

    def score(self, metrics: list[Metric], run: Batch,
              batch_size: int) -> Iterator[ScoredBatch]:
        prepare(metrics, run)
        records = run.records
        for start in range(0, len(records), batch_size):
            batch = Batch(records[start : start + batch_size], run=run, scope=records)
            yield score_batch(metrics, batch)


def score_batch(metrics: Sequence[Metric], batch: Batch) -> ScoredBatch:
    """Score one batch with every metric (checked) and keep what the run needs of it."""
    per_metric = {metric: _checked(metric, batch, metric.score(batch)) for metric in metrics}
    parts = [(metric.summary_part(result), result.reasons)
             for metric, result in per_metric.items()]
    return ScoredBatch(result_block(batch.records, per_metric), parts)


def prepare(metrics: Sequence[Metric], run: Batch) -> None:
    """The run hooks' preparation of the records scored together (a window, a worker's
    block), before the first of their batches."""
    for hooks, group in by_hooks(metrics):
        hooks.prepare(run, group)


def score_apart(metrics: Sequence[Metric], records: Sequence[Record],
                passes: Mapping[Hashable, Any] | None = None) -> ScoredBatch:
    """Score records as a run of their own (a worker's block), prepared on their own, with
    the run's ``passes``: what the scoring counted run-wide comes back with them, for the
    run's own counters."""
    shared: dict[Any, Any] = {}
    batch = Batch(records, shared=shared, passes=passes)
    prepare(metrics, batch)
    scored = score_batch(metrics, batch)
    scored.run_wide = shared
    return scored


def merge_run_wide(into: dict[Any, Any], other: dict[Any, Any]) -> None:
    """Fold a batch's run-wide objects into the run's: an object with ``merge(other)`` adds
    the other's counts to its own; one the run has not got yet is taken as it is."""
    for key, value in other.items():
        mine = into.get(key)
        if mine is None:
            into[key] = value
        elif mine is not value:
            mine.merge(value)


def _checked(metric: Metric, batch: Batch, result: MetricResult) -> MetricResult:
    """Check a metric's result and enforce "unscored is not zero" centrally: an infinite value
    becomes unscored, and every unscored headline value has a reason."""
    expected = metric.output_names()
    if list(result.values) != expected:
        raise RuntimeError(f"{metric} returned outputs {list(result.values)}, expected {expected}")
    for name, values in result.values.items():
        if len(values) != len(batch):
            raise RuntimeError(f"{metric} returned {len(values)} values for {name}, "
                               f"expected {len(batch)}")
        overflow = np.isinf(values)
        if overflow.any():
            values[overflow] = np.nan
            for i in np.flatnonzero(overflow):
                result.reasons[i] = result.reasons[i] or f"{name} is not finite (overflow)"
    headline = result.values[expected[0]]
    for i in np.flatnonzero(np.isnan(headline)):
        result.reasons[i] = result.reasons[i] or "undefined value"
    return result
