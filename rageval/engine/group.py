"""A group of metrics scored together over a run's windows (:class:`MetricGroup`): a run's
metrics of turns, or those of whole conversations (:mod:`rageval.engine.whole`).

What the group keeps between windows: its summary's parts, the fields its metrics need, the
digest of what they read (the manifest's ``data``), the human labels that calibrate them, and
how many records it scored. Before the first window, the passes its metrics make over the run
(:class:`~rageval.core.metric.RunPass`). How a window goes through it: read (digested and
checked by the metrics' hooks, before anything fills it), taken in (its fields required of a
run of one window, noted of one of several; its human labels kept), and scored batch by batch
on the engine, each batch's per-record results to the sink and what the summary needs to the
parts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, RunPass, ScoreOptions, by_hooks, settled
from rageval.core.records import Record
from rageval.core.records.digest import DataDigest
from rageval.core.records.field_hints import NeededFields
from rageval.core.records.human import LabelColumns
from rageval.core.records.label_file import LabelsFileColumns
from rageval.engine.local import Engine, merge_run_wide
from rageval.engine.sink import Sink
from rageval.summary import SummaryParts

__all__ = ["MetricGroup", "made"]


class MetricGroup:
    """Metrics scored together over a run's windows (see the module). ``shared`` is the run's
    (its judge work is counted with the rest); ``parts_options`` say how the summary is kept
    (the bootstrap's ``seed`` and resamples, ``exact_records``: see
    :class:`~rageval.summary.parts.SummaryParts`); ``over_conversations``: the summary is over
    conversations, one record each."""

    def __init__(self, metrics: list[Metric], shared: dict[Any, Any],
                 parts_options: dict[str, Any] | None = None, *,
                 over_conversations: bool = False) -> None:
        self.metrics = metrics
        self.shared = shared
        self.parts = SummaryParts(metrics, over_conversations=over_conversations,
                                  **(parts_options or {}))
        self.fields = NeededFields({str(m): m.needs for m in metrics})
        # What was scored, for telling a baseline of other data (the manifest's "data").
        self.digest = DataDigest(field for m in metrics for field in m.needs)
        # The human labels, when the run has them: a field of its records, or a labels file.
        self.labels: LabelColumns | LabelsFileColumns | None = None
        self.count = 0

    def passes(self) -> dict[Hashable, RunPass]:
        """The passes over the run its metrics read, one per key (see :func:`made`)."""
        passes: dict[Hashable, RunPass] = {}
        for metric in self.metrics:
            run_pass = metric.run_pass()
            if run_pass is not None:
                passes.setdefault(run_pass.key, run_pass)
        return passes

    def calibrate(self, field: str, source: str) -> None:
        """Calibrate the metrics on a fixed scale (a rubric's) by the human labels in the
        records' ``field`` (``source``: the records, as errors name them)."""
        self.labels = LabelColumns.of(field, [(str(m), m.score_range())
                                              for m in self.metrics], source)

    def calibrate_from_file(self, path: str, allow_unknown: bool) -> None:
        """Calibrate the metrics on a fixed scale by the labels of a labels file (``path``),
        joined by record id and metric (``allow_unknown``: labels of ids the run lacks are
        ignored, not refused)."""
        self.labels = LabelsFileColumns.of(path, [(str(m), m.score_range())
                                                  for m in self.metrics],
                                           allow_unknown=allow_unknown)

    def read(self, records: Sequence[Record]) -> None:
        """Records as read, before anything fills them: digested (judgments given during the
        run are not the evaluation set's), and checked by the metrics' hooks."""
        self.digest.add(records)
        for hooks, group in by_hooks(self.metrics):
            hooks.check(records, group)

    def require(self, records: Sequence[Record], options: ScoreOptions,
                judgments: str) -> None:
        """A run of one window, every record in: refused when a metric could not score one
        of them; the metrics settle on the options they sign with (``judgments``: where the
        run's judgments came from)."""
        self.fields.require(records)
        self.metrics = settled(self.metrics, options, judgments)
        self._take_labels(records, every=True)

    def note(self, records: Sequence[Record]) -> None:
        """A window of several: which needed fields its records have, for :meth:`finish`;
        its human labels kept."""
        self.fields.note(records)
        self._take_labels(records, every=False)

    def finish(self) -> None:
        """After a run of several windows: a metric whose inputs no record had is an error,
        and so are human labels that no record had."""
        self.fields.check()
        self._check_labels_found()

    def data(self, signers: list[Metric]) -> dict[str, Any]:
        """The manifest's ``data`` section of what the group scored, for the outputs of its
        metrics as they sign the run: what each reads of the records, and the graders'
        configuration."""
        return self.digest.manifest(
            {name: m.needs for m in signers for name in m.output_names()},
            {name: m.grading() for m in signers if m.grades for name in m.output_names()})

    def _take_labels(self, records: Sequence[Record], every: bool) -> None:
        """The records' human labels to the summary's parts (``every``: the run's every
        record is in, and some must have one)."""
        if self.labels is None:
            return
        chances = (self.labels.chances(records)
                   if isinstance(self.labels, LabelsFileColumns) else {})
        for name, labels in self.labels.take(records).items():
            self.parts.add_labels(name, labels, chances.get(name))
        if every:
            self._check_labels_found()

    def _check_labels_found(self) -> None:
        if isinstance(self.labels, LabelsFileColumns):
            self.labels.check()
            if self.labels.found == 0:
                raise UsageError(f"human labels: no label of {self.labels.path} is for a "
                                 "record of the run; do the record ids match?")
            return
        if self.labels is not None and self.labels.found == 0:
            raise UsageError(f"human labels: no record of {self.labels.source} has a field "
                             f"{self.labels.field!r}")

    def score(self, batch: Batch, *, batch_size: int, sink: Sink, engine: Engine,
              progress: Callable[[int, int | None], None] | None = None,
              total: int | None = None) -> None:
        """Score a window batch by batch on the engine, in order: each batch's per-record
        results go to the sink and what the summary needs to the parts; ``progress`` is told
        how many records the group has scored, of ``total``."""
        done = self.count
        start = 0
        for scored in engine.score(self.metrics, batch, batch_size):
            self.parts.add_records(batch.records[start : start + len(scored.block)])
            start += len(scored.block)
            sink.write(scored.block)
            for metric, (part, reasons) in zip(self.metrics, scored.parts, strict=True):
                self.parts.add_part(metric, part, reasons)
            merge_run_wide(self.shared, scored.run_wide)
            done += len(scored.block)
            if progress is not None:
                progress(done, total)
        self.count += len(batch.records)


def made(passes: dict[Hashable, RunPass], windows: Iterable[list[Record]]) -> dict[Hashable, Any]:
    """The passes' results over every window of the run (:meth:`MetricGroup.passes`)."""
    for window in windows:
        for run_pass in passes.values():
            run_pass.add(window)
    return {key: run_pass.result() for key, run_pass in passes.items()}
