"""The labels of a labels file (``rageval agree --human-labels FILE``) as agree compares them,
read as ``rageval score --human-labels`` reads them.

What stands is read with :func:`~rageval.core.labels.current_labels` (every undo applied); a
line's metric is joined to a compared metric with
:func:`~rageval.core.records.label_file.join_metric` (``faithfulness`` and
``judge:faithfulness`` name one metric); each annotator gives a record one label per metric,
the later line winning when two of its names collide, and a record's labels are averaged
across annotators. Each label keeps its line, so that a label off its metric's scale is an
error naming the file, the line and the field (:meth:`FileLabels.check_scale`).

Agree compares the records the compared runs have, a subset by design: labels of other ids
are left out and counted, as are labels of metrics not compared, and metrics labelled under
active selection are named (:meth:`FileLabels.notes`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from rageval.core.errors import InputError
from rageval.core.labels import current_labels, read_labels
from rageval.core.records.label_file import join_metric
from rageval.core.results.counts import count_of

__all__ = ["FileLabels", "read_file_labels"]


@dataclass
class FileLabels:
    """A labels file's standing labels of the compared metrics and what was left out."""

    path: str
    # record id -> metric -> annotator -> (label, line)
    given: dict[str, dict[str, dict[str, tuple[float, int]]]] = field(default_factory=dict)
    active: dict[str, None] = field(default_factory=dict)  # metrics labelled actively
    other_ids: dict[str, int] = field(default_factory=dict)  # ids not compared -> labels
    other_metrics: dict[str, int] = field(default_factory=dict)  # not compared -> labels

    def means(self) -> dict[str, dict[str, float]]:
        """Each record's label of each metric, averaged across annotators."""
        return {record_id: {metric: sum(label for label, _ in by.values()) / len(by)
                            for metric, by in metrics.items()}
                for record_id, metrics in self.given.items()}

    def check_scale(self, metric: str, scale: tuple[float, float]) -> None:
        """A label of ``metric`` outside ``scale`` is an error naming the file, its line and
        the field, as ``rageval score`` says it; every label of the file is checked, compared
        or not."""
        low, high = scale
        for record_id, metrics in self.given.items():
            for label, line in metrics.get(metric, {}).values():
                if not low <= label <= high:
                    raise InputError(f"record {record_id!r}: human label {label:g} for "
                                     f"{metric} is outside its scale {low:g}-{high:g}",
                                     path=self.path, line=line, field="label")

    def notes(self) -> list[str]:
        """What the report says of the file: the labels left out, and the metrics whose
        records were chosen by active selection (compared unweighted)."""
        out = []
        if self.other_ids:
            labels = sum(self.other_ids.values())
            out.append(f"--human-labels {self.path}: left out "
                       f"{count_of(labels, 'label')} of "
                       f"{count_of(len(self.other_ids), 'record')} the compared runs do not "
                       "have (agree compares the records the runs have)")
        for metric, labels in self.other_metrics.items():
            out.append(f"--human-labels {self.path}: left out {count_of(labels, 'label')} "
                       f"for {metric}, not a compared metric")
        for metric in self.active:
            out.append(f"{metric}: its labels were chosen by active selection; agree compares "
                       "the labelled records unweighted, so the agreement is the agreement "
                       "on the records labelled, not an estimate over the run's records")
        return out


def read_file_labels(path: str, names: Sequence[str], ids: Collection[str]) -> FileLabels:
    """The labels of ``path`` for the compared metrics ``names`` (see the module); ``ids``:
    the records compared."""
    standing, _ = current_labels(read_labels(path))
    compared = set(ids)
    out = FileLabels(path)
    for line in standing:  # in file order: a later line overwrites an earlier alias's
        metric = join_metric(line.metric, names)
        if metric is None:
            out.other_metrics[line.metric] = out.other_metrics.get(line.metric, 0) + 1
            continue
        if line.label is None:
            continue
        out.given.setdefault(line.id, {}).setdefault(metric, {})[line.annotator] = (
            line.label, line.line)
        if line.selection == "active" and line.id in compared:
            out.active.setdefault(metric)
    for record_id, metrics in out.given.items():
        if record_id not in compared:
            out.other_ids[record_id] = sum(len(by) for by in metrics.values())
    return out
