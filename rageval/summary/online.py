"""A metric's summary kept as running sums: what a run keeps of it once it has more records
than the exact bootstrap holds (or from the start, with ``--ci poisson``).

The rows are folded into units, records on their own or whole conversations. Per output it
keeps the exact sum and count of the units' values, and for each bootstrap resample their
Poisson-weighted sum and count (:mod:`rageval.stats.poisson`); for a metric with a corpus figure
(corpus BLEU) the exact and weighted sums of its additive statistics; of the details, only the
distinct ones the signature reads. That is ``resamples x columns`` numbers and a few dicts,
whatever the run's length.

Units are summed in blocks that start at fixed unit positions (:class:`OnlineBlocks`), so a
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
from rageval.stats.exact import ExactSums, exact_group_means
from rageval.stats.poisson import block_rows, poisson_weights
from rageval.stats.resampling import percentile_interval

#: The signature field of a value whose interval came from the Poisson bootstrap.
POISSON = Field("ci", "poisson")

class OnlineStore:
    """A metric's running sums (see the module). Each batch's rows are folded into units,
    records on their own or whole conversations (:class:`UnitFolder`), which wait in a queue
    until the run's next block of units is complete; then :meth:`consume` sums them."""

    def __init__(self, metric: Metric, names: list[str]) -> None:
        self.metric = metric
        self.names = names
        self.count = 0  # rows (records) added
        self.units = 0  # units folded
        self._folder = UnitFolder(len(names))
        self._queue: list[Units] = []
        width = len(names)
        self._exact = ExactSums(3 * width)  # unit means, then lowest and last values
        self._scored = np.zeros(width, dtype=np.int64)  # units with a scored row
        self._has_last = np.zeros(width, dtype=np.int64)  # units whose last row is scored
        self.turns = np.zeros(width, dtype=np.int64)  # scored rows
        self._corpus: np.ndarray | None = None  # exact sums of the additive statistics
        # Per resample: weighted sums of the unit means, then the weights of the units with a
        # scored row, then (with a corpus figure) the weighted additive statistics.
        self._replicates: np.ndarray | None = None
        self.flagged: Counter[str] = Counter()
        self._details: dict[str, dict[str, Any]] = {}
        self._stats_rows: np.ndarray | None = None

    def add(self, part: MetricResult, groups: np.ndarray, open_last: bool) -> None:
        """Fold a batch's summary part into units (``groups``: each row's unit number; with
        ``open_last``, the last unit may go on in the next batch)."""
        self._note(part)
        values = np.column_stack([part.values[n] for n in self.names])
        self.turns += (~np.isnan(values)).sum(axis=0)
        sums = self.metric.corpus_sums(part.stats) if part.stats is not None else None
        self.count += len(values)
        units = self._folder.fold(values, sums, groups, open_last)
        if units is not None:
            self._queue.append(units)
            self.units += len(units.means)

    def close(self) -> None:
        """The last unit is complete."""
        units = self._folder.close()
        if units is not None:
            self._queue.append(units)
            self.units += len(units.means)

    def consume(self, count: int, weights: np.ndarray) -> None:
        """Sum the next ``count`` units, weighted by ``weights`` (``(count, resamples)``)."""
        units = self._take(count)
        has = ~np.isnan(units.means)
        filled = np.where(has, units.means, 0.0)
        drawn = np.where(has, units.drawn, 0.0)
        self._scored += has.sum(axis=0)
        last = ~np.isnan(units.last)
        self._has_last += last.sum(axis=0)
        self._exact.add(np.concatenate([filled, np.where(has, units.lowest, 0.0),
                                        np.where(last, units.last, 0.0)], axis=1))
        columns = [drawn, has.astype(np.float64)]
        if units.stats is not None:
            exact = units.stats.sum(axis=0, dtype=np.int64)
            self._corpus = exact if self._corpus is None else self._corpus + exact
            columns.append(units.stats.astype(np.float64))
        weighted = np.concatenate(columns, axis=1).T @ weights
        if self._replicates is None:
            self._replicates = weighted
        else:
            self._replicates += weighted

    def _take(self, count: int) -> Units:
        """The next ``count`` units, removed from the queue."""
        taken: list[Units] = []
        while count:
            first = self._queue[0]
            if len(first.means) <= count:
                taken.append(self._queue.pop(0))
                count -= len(first.means)
            else:
                taken.append(first.rows(slice(0, count)))
                self._queue[0] = first.rows(slice(count, None))
                count = 0
        return Units.join(taken)

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

    def summarise(self, reasons: Counter[str], extra: list[Field], conversations: bool,
                  level: float = 0.95) -> dict[str, MetricSummary]:
        """Each output's summary: the exact mean of the unit means (or the corpus figure from
        the exact sums of its statistics), the Poisson bootstrap's percentile interval, and
        the counts; ``extra``: signature fields after the metric's own; with
        ``conversations``, the units are conversations, summed up as
        :func:`~rageval.summary.grouped.summarise_conversations` does."""
        metric = self.metric
        signature = metric.result_signature(self.signature_part()).extend([*extra, POISSON])
        headline = metric.output_names()[0]
        out: dict[str, MetricSummary] = {}
        for k, name in enumerate(self.names):
            scored = int(self._scored[k])
            value, aggregate = (self._exact.mean(k, scored) if scored else None), "mean"
            ci = None
            if scored and self._replicates is not None:
                replicated = self._replicated(k)
                if name == headline and self._corpus is not None:
                    value, aggregate = metric.corpus_from_sums(self._corpus), "corpus"
                    replicated = np.array([metric.corpus_from_sums(np.rint(column)) for column
                                           in self._replicates[2 * len(self.names):].T])
                ci = percentile_interval(replicated, level)
            figures = self._figures(k) if conversations else {}
            out[name] = MetricSummary(
                value, scored, self.units - scored, ci, signature.format(), dict(reasons),
                aggregate, signature.format(short=True), in_table=name in metric.table_names(),
                flagged=dict(self.flagged), figures=figures, ci_method="poisson")
        return out

    def _replicated(self, k: int) -> np.ndarray:
        """Output ``k``'s weighted mean in each resample (NaN: no scored unit drawn)."""
        assert self._replicates is not None
        sums, weights = self._replicates[k], self._replicates[len(self.names) + k]
        return np.divide(sums, weights, out=np.full_like(sums, np.nan), where=weights > 0)

    def _figures(self, k: int) -> dict[str, Any]:
        """The turns and the conversations' lowest and last values, as for every value kept."""
        width, scored, last = len(self.names), int(self._scored[k]), int(self._has_last[k])
        return {"turns": {"scored": int(self.turns[k]), "unscored": self.count - int(
                    self.turns[k])},
                "conversation_min": self._exact.mean(width + k, scored) if scored else None,
                "conversation_last": self._exact.mean(2 * width + k, last) if last else None}


class Units:
    """Units summed up from their rows: per output the mean of the scored rows, the lowest
    and the last row's value (NaN: none scored; the last row unscored), and per unit the
    summed additive statistics (None: no corpus figure)."""

    def __init__(self, means: np.ndarray, lowest: np.ndarray, last: np.ndarray,
                 stats: np.ndarray | None, drawn: np.ndarray | None = None) -> None:
        self.means, self.lowest, self.last, self.stats = means, lowest, last, stats
        # What the Poisson weights weigh: each unit's sum over its count, as every earlier
        # run's intervals drew them (the means above are correctly rounded).
        self.drawn = means if drawn is None else drawn

    def rows(self, which: slice) -> Units:
        return Units(self.means[which], self.lowest[which], self.last[which],
                     None if self.stats is None else self.stats[which], self.drawn[which])

    @staticmethod
    def join(parts: list[Units]) -> Units:
        if len(parts) == 1:
            return parts[0]
        stats = [p.stats for p in parts if p.stats is not None]
        means, lowest, last, drawn = (np.concatenate([getattr(p, a) for p in parts])
                                      for a in ("means", "lowest", "last", "drawn"))
        return Units(means, lowest, last, np.concatenate(stats) if stats else None, drawn)


class UnitFolder:
    """Rows folded into units as their units complete. A unit's rows are always summed
    together (those of a unit still open are kept until it completes), so its figures never
    depend on where batches split it."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._open: tuple[np.ndarray, np.ndarray | None, np.ndarray] | None = None

    def fold(self, values: np.ndarray, stats: np.ndarray | None, groups: np.ndarray,
             open_last: bool) -> Units | None:
        """The units these rows complete (with the open unit's rows kept before them)."""
        if self._open is not None:
            held_values, held_stats, held_groups = self._open
            values = np.concatenate([held_values, values])
            stats = None if stats is None or held_stats is None else np.concatenate(
                [held_stats, stats])
            groups = np.concatenate([held_groups, groups])
            self._open = None
        if not len(values):
            return None
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        if open_last:
            cut = starts[-1]
            self._open = (values[cut:], None if stats is None else stats[cut:], groups[cut:])
            values, groups = values[:cut], groups[:cut]
            stats = None if stats is None else stats[:cut]
            starts = starts[:-1]
        if not len(starts):
            return None
        if len(starts) == len(values):  # every row a unit of its own
            return Units(values, values, values, stats)
        return _summed(values, stats, starts)

    def close(self) -> Units | None:
        """The open unit, complete."""
        if self._open is None:
            return None
        values, stats, groups = self._open
        self._open = None
        return self.fold(values, stats, groups, open_last=False)


def _summed(values: np.ndarray, stats: np.ndarray | None, starts: np.ndarray) -> Units:
    scored = ~np.isnan(values)
    counts = np.add.reduceat(scored.astype(np.int64), starts, axis=0)
    sums = np.add.reduceat(np.where(scored, values, 0.0), starts, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        drawn = np.where(counts > 0, sums / counts, np.nan)
    groups = np.zeros(len(values), dtype=np.int64)
    groups[starts[1:]] = 1
    groups = np.cumsum(groups)
    means = np.column_stack([exact_group_means(column[kept], groups[kept], len(starts))
                             for column, kept in zip(values.T, scored.T, strict=True)])
    lowest = np.minimum.reduceat(np.where(scored, values, np.inf), starts, axis=0)
    lowest[counts == 0] = np.nan
    ends = np.r_[starts[1:], len(values)] - 1
    summed = None if stats is None else np.add.reduceat(stats.astype(np.int64), starts, axis=0)
    return Units(means, lowest, values[ends], summed, drawn)


class OnlineBlocks:
    """The units' weights, block by block: the keys of the units whose rows are pending, and
    the fixed-size blocks they are summed in."""

    def __init__(self, resamples: int) -> None:
        self.resamples = resamples
        self.rows = block_rows(resamples)
        self._keys: list[np.ndarray] = []
        self._count = 0

    def add(self, seeded: np.ndarray) -> None:
        """The seeded keys of the units that start next (in their order)."""
        self._keys.append(seeded)
        self._count += len(seeded)

    def advance(self, stores: list[OnlineStore], open_last: bool, final: bool = False) -> None:
        """Sum every complete block of complete units in every store (``open_last``: the
        last unit may go on; ``final``: the last, short block too)."""
        ready = self._count - (open_last and not final)
        while ready >= self.rows or (final and ready):
            take = min(self.rows, ready)
            keys = np.concatenate(self._keys)
            block, rest = keys[:take], keys[take:]
            self._keys, self._count = ([rest] if len(rest) else []), len(rest)
            ready -= take
            weights = poisson_weights(block, self.resamples)
            for store in stores:
                store.consume(take, weights)
