"""Human labels from a labels file (``rageval score --human-labels FILE``) joined to a run's
records by record id and metric (:class:`LabelsFileColumns`), as the records' own label field
is joined by :class:`~rageval.core.records.human.LabelColumns`.

A line's metric names one of the run's judge metrics on a fixed scale, under any name
:func:`~rageval.core.records.human.label_keys` accepts (``judge:faithfulness``,
``faithfulness``, a rubric file's stem). What stands is read with
:func:`~rageval.core.labels.current_labels` (every undo applied); several annotators' labels
of one record are averaged. Each metric's labels come under one selection: ``uniform`` (the
run's records as a simple random sample: PPI) or ``active`` (each record labelled with the
probability its line records: the pool is the records with a standing label or a passed line,
and :attr:`LabelsFileColumns.chances` gives each record's probability, NaN outside the pool).

Errors name the labels file, the line and the field: a label outside its metric's scale, a
metric with uniform and active lines both, and (unless ``allow_unknown``) a label of a record
id the run does not have, found once every record was read (:meth:`LabelsFileColumns.check`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rageval.core.errors import InputError, UsageError
from rageval.core.labels import (
    ActivePool,
    LabelLine,
    active_pool,
    current_labels,
    read_labels_and_digest,
)
from rageval.core.records.human import label_keys
from rageval.core.records.model import Record

__all__ = ["LabelsFileColumns", "MetricLabels", "join_metric"]


@dataclass
class MetricLabels:
    """One metric's labels in the file: each record's label by annotator, the selection they
    were made under, and (active) each pooled record's probability."""

    metric: str
    selection: str = "uniform"
    labels: dict[str, dict[str, float]] = field(default_factory=dict)  # id -> annotator -> y
    chances: dict[str, float] = field(default_factory=dict)  # active: id -> probability
    lines: dict[str, list[int]] = field(default_factory=dict)  # id -> its lines standing
    pool: ActivePool | None = None  # active: the walk's complete stretch

    def mean(self, record_id: str) -> float:
        """The annotators' mean label of a record (NaN: none)."""
        given = self.labels.get(record_id)
        return math.nan if not given else sum(given.values()) / len(given)


def join_metric(metric: str, names: Sequence[str]) -> str | None:
    """The run metric among ``names`` that a labels file's ``metric`` names, or None."""
    return next((name for name in names if metric in label_keys([name])), None)


class LabelsFileColumns:
    """The labels of a labels file (``path``) for a run's metrics on a fixed scale
    (``scales``: metric name -> (lowest, highest)), taken window by window as the run reads
    its records (see the module)."""

    def __init__(self, path: str, scales: Mapping[str, tuple[float, float]], *,
                 allow_unknown: bool = False) -> None:
        self.path = path
        self.scales = dict(scales)
        self.allow_unknown = allow_unknown
        self.found = 0  # records with any label
        self.ignored_metrics: dict[str, int] = {}  # metrics the run does not score: lines
        # Set by check(): the (line, id) of each standing line of an id the run lacks.
        self.unknown: list[tuple[int, str]] = []
        self._seen: set[str] = set()  # labelled record ids the run has
        lines, self.sha256 = read_labels_and_digest(path)
        self.metrics = self._join(lines)

    @classmethod
    def of(cls, path: str, metrics: Sequence[tuple[str, tuple[float, float] | None]], *,
           allow_unknown: bool = False) -> LabelsFileColumns:
        scales = {name: scale for name, scale in metrics if scale is not None}
        if not scales:
            raise UsageError(f"human labels ({path}) calibrate metrics scored on a fixed "
                             f"scale (a rubric's), and no metric of the run is: "
                             f"{', '.join(name for name, _ in metrics)}")
        return cls(path, scales, allow_unknown=allow_unknown)

    def _join(self, lines: list[LabelLine]) -> dict[str, MetricLabels]:
        out = self._join_standing(lines)
        walked: dict[str, list[LabelLine]] = {}
        for line in lines:
            name = join_metric(line.metric, list(self.scales))
            if name in out and out[name].selection == "active":
                walked.setdefault(name, []).append(line)
        for name, own in walked.items():  # the pool: the walk up to its first gap
            item = out[name]
            item.pool = active_pool(own, self.path)
            item.chances = dict(item.pool.chances)
        return out

    def _join_standing(self, lines: list[LabelLine]) -> dict[str, MetricLabels]:
        standing, passed = current_labels(lines)
        out: dict[str, MetricLabels] = {}
        selections: dict[str, LabelLine] = {}  # metric -> its first standing line
        for line in sorted([*passed, *standing], key=lambda line: line.line):
            name = join_metric(line.metric, list(self.scales))
            if name is None:
                self.ignored_metrics[line.metric] = self.ignored_metrics.get(line.metric, 0) + 1
                continue
            first = selections.setdefault(name, line)
            if line.selection != first.selection:
                raise InputError(
                    f"{name} is labelled under both uniform and active selection (line "
                    f"{first.line}: {first.selection}, this line: {line.selection}); "
                    f"calibrate from one selection's labels", path=self.path, line=line.line,
                    field="selection")
            item = out.setdefault(name, MetricLabels(name, line.selection))
            item.lines.setdefault(line.id, []).append(line.line)
            if line.label is not None:
                self._check_scale(name, line)
                item.labels.setdefault(line.id, {})[line.annotator] = line.label
        if not out:
            metrics = ", ".join(sorted(self.ignored_metrics)) or "none"
            raise UsageError(f"human labels: no label of {self.path} is for a metric the run "
                             f"scores on a fixed scale ({', '.join(self.scales)}); its "
                             f"metrics: {metrics}")
        return out

    def _check_scale(self, name: str, line: LabelLine) -> None:
        low, high = self.scales[name]
        if line.label is not None and not low <= line.label <= high:
            raise InputError(f"record {line.id!r}: human label {line.label:g} for {name} is "
                             f"outside its scale {low:g}-{high:g}", path=self.path,
                             line=line.line, field="label")

    def take(self, records: Sequence[Record]) -> dict[str, list[float]]:
        """Each metric's averaged labels for these records, in their order (NaN: none)."""
        out: dict[str, list[float]] = {name: [] for name in self.scales}
        for record in records:
            labelled = False
            for name, values in out.items():
                item = self.metrics.get(name)
                value = math.nan if item is None else item.mean(record.id)
                labelled |= not math.isnan(value)
                values.append(value)
                if item is not None and record.id in item.lines:
                    self._seen.add(record.id)
            self.found += labelled
        return out

    def chances(self, records: Sequence[Record]) -> dict[str, list[float]]:
        """Each actively labelled metric's probabilities for these records, in their order
        (NaN: not in the pool)."""
        return {name: [item.chances.get(record.id, math.nan) for record in records]
                for name, item in self.metrics.items() if item.selection == "active"}

    def check(self) -> None:
        """Once every record was read: a label of a record id the run does not have is an
        error naming the file, the line and the id, unless ``allow_unknown`` (then counted in
        :attr:`unknown`)."""
        self.unknown = sorted((number, record_id) for item in self.metrics.values()
                              for record_id, numbers in item.lines.items()
                              if record_id not in self._seen for number in numbers)
        if self.unknown and not self.allow_unknown:
            number, record_id = self.unknown[0]
            more = f" (and {len(self.unknown) - 1} more)" if len(self.unknown) > 1 else ""
            raise InputError(f"label for record {record_id!r}, which the run does not have"
                             f"{more}; --allow-unknown-labels ignores such labels",
                             path=self.path, line=number, field="id")

    def ratings(self, name: str) -> dict[str, dict[str, float]]:
        """A metric's labels by annotator, then record id, for the records the run has."""
        out: dict[str, dict[str, float]] = {}
        for record_id, given in self.metrics[name].labels.items():
            if record_id in self._seen:
                for annotator, label in given.items():
                    out.setdefault(annotator, {})[record_id] = label
        return out

    def describe(self) -> dict[str, Any]:
        """The manifest's record of the labels (the agreement figures are added by the run)."""
        metrics: dict[str, Any] = {}
        for name, item in self.metrics.items():
            ratings = self.ratings(name)
            metrics[name] = {
                "selection": item.selection,
                "labelled": sum(1 for record_id in item.labels if record_id in self._seen),
                "annotators": {who: len(given) for who, given in sorted(ratings.items())}}
            if item.pool is not None:
                metrics[name].update(_walk_state(item.pool, self._seen))
        out: dict[str, Any] = {"file": self.path, "sha256": self.sha256, "records": self.found,
                               "metrics": metrics}
        if self.unknown:
            out["unknown_ignored"] = len(self.unknown)
        if self.ignored_metrics:
            out["other_metrics"] = dict(sorted(self.ignored_metrics.items()))
        return out



def _walk_state(pool: ActivePool, seen: set[str]) -> dict[str, Any]:
    """The manifest's account of an active walk: the records of its pool the run has, and
    where the walk is still open (the first record without an outcome, the labels beyond it
    left out until it has one)."""
    out: dict[str, Any] = {"pool": sum(1 for record_id in pool.chances if record_id in seen),
                           "seed": pool.seed, "walked_to": pool.cut}
    if pool.waiting:
        out["waiting"] = {"labels": pool.waiting, "position": pool.cut,
                          "record": pool.blocking}
    if len(pool.budgets) > 1:  # unbiased once the walk is labelled to its end, not before
        out["budgets"] = list(pool.budgets)
    return out
