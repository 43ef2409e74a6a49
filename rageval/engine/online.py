"""A metric's summary kept as running sums: what a run keeps of it once it has more records
than the exact bootstrap holds (or from the start, with ``--ci poisson``).

Per output it keeps the exact sum and count of the scored values, and for each bootstrap
resample the Poisson-weighted sum and count (:mod:`rageval.stats.poisson`); for a metric with a
corpus figure (corpus BLEU) the exact and weighted sums of its additive statistics; of the
details, only the distinct ones the signature reads. That is ``resamples x columns`` numbers
and a few dicts, whatever the run's length.

Rows are summed in blocks that start at fixed record positions (:class:`OnlineBlocks`), so a
run gives the same sums, to the last bit, however it was split into windows, batches or Ray
blocks.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np

from rageval.core.metric import Metric, MetricResult
from rageval.core.results import MetricSummary
from rageval.core.signature import Field
from rageval.stats.poisson import ExactSums, poisson_weights
from rageval.stats.resampling import percentile_interval

#: The signature field of a value whose interval came from the Poisson bootstrap.
POISSON = Field("ci", "poisson")

#: Up to this many records a run keeps every value, for the exact percentile bootstrap (the
#: textbook method, the intervals of every earlier run); past them, running sums.
EXACT_RECORDS = 100_000

# Cells (records x resamples) weighed at once: 8 MB of weights.
_BLOCK_CELLS = 1 << 20


def block_rows(resamples: int) -> int:
    """How many records each block of the running sums holds (fixed for the run)."""
    return max(1, _BLOCK_CELLS // resamples)


class OnlineStore:
    """A metric's running sums (see the module). Rows wait in :attr:`pending` until the run's
    next block of records is complete, then :meth:`consume` sums them."""

    def __init__(self, metric: Metric, names: list[str], resamples: int) -> None:
        self.metric = metric
        self.names = names
        self.count = 0  # rows summed or pending
        self.pending: list[MetricResult] = []
        self._pending_rows = 0
        width = len(names)
        self._exact = ExactSums(width)
        self._scored = np.zeros(width, dtype=np.int64)
        self._corpus: np.ndarray | None = None  # exact sums of the additive statistics
        # Per resample: weighted sums of the values, then the weights of the scored rows,
        # then (with a corpus figure) the weighted additive statistics.
        self._replicates: np.ndarray | None = None
        self._resamples = resamples
        self.flagged: Counter[str] = Counter()
        self._details: dict[str, dict[str, Any]] = {}
        self._stats_rows: np.ndarray | None = None

    def add(self, part: MetricResult) -> None:
        """Keep a batch's summary part until its block is summed."""
        self._note(part)
        self.pending.append(part)
        rows = len(part.values[self.names[0]]) if self.names else len(part.reasons)
        self._pending_rows += rows
        self.count += rows

    def consume(self, rows: int, weights: np.ndarray) -> None:
        """Sum the first ``rows`` pending rows, weighted by ``weights`` (``(rows, resamples)``)
        in the resamples."""
        taken = self._take(rows)
        values = np.column_stack([taken.values[n] for n in self.names]) if self.names else (
            np.empty((rows, 0)))
        scored = ~np.isnan(values)
        filled = np.where(scored, values, 0.0)
        self._exact.add(filled)
        self._scored += scored.sum(axis=0)
        columns = [filled, scored.astype(np.float64)]
        sums = self.metric.corpus_sums(taken.stats) if taken.stats is not None else None
        if sums is not None:
            exact = sums.sum(axis=0, dtype=np.int64)
            self._corpus = exact if self._corpus is None else self._corpus + exact
            columns.append(sums.astype(np.float64))
        matrix = np.concatenate(columns, axis=1)
        weighted = matrix.T @ weights
        if self._replicates is None:
            self._replicates = weighted
        else:
            self._replicates += weighted

    def _take(self, rows: int) -> MetricResult:
        """The first ``rows`` pending rows, as one part, removed from :attr:`pending`."""
        parts: list[MetricResult] = []
        needed = rows
        while needed:
            part = self.pending[0]
            size = len(part.values[self.names[0]]) if self.names else len(part.reasons)
            if size <= needed:
                parts.append(self.pending.pop(0))
                needed -= size
            else:
                parts.append(_rows(part, slice(0, needed)))
                self.pending[0] = _rows(part, slice(needed, size))
                needed = 0
        self._pending_rows -= rows
        values = {n: np.concatenate([p.values[n] for p in parts]) for n in self.names}
        stats = [p.stats for p in parts if p.stats is not None]
        return MetricResult(values, [], None, np.concatenate(stats) if stats else None)

    def _note(self, part: MetricResult) -> None:
        """Count the part's flags and keep what the signature reads of its details and
        statistics (:meth:`~rageval.core.metric.Metric.signature_rows`), distinct only."""
        self.flagged.update(flag for detail in part.details or () if detail
                            for flag in detail.get("flags", ()))
        kept = self.metric.signature_rows(part)
        seen: set[int] = set()
        for detail in kept.details or ():
            if detail and id(detail) not in seen:
                seen.add(id(detail))
                self._details.setdefault(json.dumps(detail, sort_keys=True, default=str),
                                          detail)
        if kept.stats is not None and len(kept.stats):
            rows = kept.stats if self._stats_rows is None else np.concatenate(
                [self._stats_rows, kept.stats])
            self._stats_rows = np.unique(rows, axis=0)

    def signature_part(self) -> MetricResult:
        """The distinct details and statistics rows kept, as a result (no values)."""
        return MetricResult({}, [], list(self._details.values()) or None, self._stats_rows)

    def summarise(self, reasons: Counter[str], extra: list[Field],
                  level: float = 0.95) -> dict[str, MetricSummary]:
        """Each output's summary: the exact mean (or the corpus figure from the exact sums of
        its statistics), the Poisson bootstrap's percentile interval, and the counts;
        ``extra``: signature fields after the metric's own."""
        metric = self.metric
        signature = metric.result_signature(self.signature_part()).extend([*extra, POISSON])
        headline = metric.output_names()[0]
        width = len(self.names)
        out: dict[str, MetricSummary] = {}
        for k, name in enumerate(self.names):
            scored = int(self._scored[k])
            value: float | None = self._exact.mean(k, scored) if scored else None
            aggregate, ci = "mean", None
            if scored and self._replicates is not None:
                sums, weights = self._replicates[k], self._replicates[width + k]
                replicated = np.divide(sums, weights, out=np.full_like(sums, np.nan),
                                       where=weights > 0)
                if name == headline and self._corpus is not None:
                    value, aggregate = metric.corpus_from_sums(self._corpus), "corpus"
                    replicated = np.array([metric.corpus_from_sums(np.rint(column))
                                           for column in self._replicates[2 * width:].T])
                ci = percentile_interval(replicated, level)
            out[name] = MetricSummary(
                value, scored, self.count - scored, ci, signature.format(), dict(reasons),
                aggregate, signature.format(short=True), in_table=name in metric.table_names(),
                flagged=dict(self.flagged), ci_method="poisson")
        return out


def _rows(part: MetricResult, rows: slice) -> MetricResult:
    return MetricResult({n: v[rows] for n, v in part.values.items()}, [], None,
                        part.stats[rows] if part.stats is not None else None)


class OnlineBlocks:
    """The records' weights, block by block: the keys of the records whose rows are pending,
    and the fixed-size blocks they are summed in."""

    def __init__(self, resamples: int) -> None:
        self.resamples = resamples
        self.rows = block_rows(resamples)
        self._keys: list[np.ndarray] = []
        self._count = 0

    def add(self, seeded: np.ndarray) -> None:
        """The seeded keys of the records whose parts come next (in their order)."""
        self._keys.append(seeded)
        self._count += len(seeded)

    def advance(self, stores: list[OnlineStore], final: bool = False) -> None:
        """Sum every complete block (``final``: and the last, short one) in every store."""
        while self._count >= self.rows or (final and self._count):
            take = min(self.rows, self._count)
            keys = np.concatenate(self._keys)
            block, rest = keys[:take], keys[take:]
            self._keys, self._count = ([rest] if len(rest) else []), len(rest)
            weights = poisson_weights(block, self.resamples)
            for store in stores:
                store.consume(take, weights)
