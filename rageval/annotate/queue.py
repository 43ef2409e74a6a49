"""One annotator's queue over a walk: what to label next, and every change the annotator
makes (a label, a skip, an undo), each written to the labels file before it is acknowledged.

The queue keeps no label of its own: it reads the labels file (other annotators' processes
append to it too) before each answer, so that a restart resumes at the next record this
annotator has not labelled, and a label of a record this annotator already labelled is refused
under the file's lock. A skip moves a record to the end of the queue for as long as the queue
lives. On an active walk, moving past a record the draw did not select appends one passed line
for it (unless the file has one), so that the estimator knows every record the walk went
through."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rageval.annotate.run import LabelledItem, LabellingRun
from rageval.annotate.walk import Walk
from rageval.core.errors import UsageError
from rageval.core.labels import LabelLine, LabelsFile, current_labels

__all__ = ["AnnotatorQueue", "Refused", "utc_now"]

# Two probabilities are the same when they differ by less than this (a float's round trip
# through JSON is exact; this only forgives another platform's last bit).
_SAME_PROBABILITY = 1e-9


class Refused(Exception):
    """A request the queue turns down, with the reason said to the client."""


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class AnnotatorQueue:
    """The walk as one annotator goes through it; safe to call from several threads."""

    def __init__(self, run: LabellingRun, walk: Walk, labels: LabelsFile, annotator: str, *,
                 shown_judge: bool = False, clock: Callable[[], str] = utc_now) -> None:
        self.run, self.walk, self.labels = run, walk, labels
        self.annotator, self.shown_judge, self._clock = annotator, shown_judge, clock
        self._skipped: list[str] = []
        self._lock = threading.Lock()
        self._check_file()

    @property
    def metric(self) -> str:
        return self.run.metric

    # -- answers ----------------------------------------------------------------------------

    def next(self) -> LabelledItem | None:
        """The next record to label (None when the walk is done), passing over, on an active
        walk, the records before it the draw did not select."""
        with self._lock:
            lines = self._refresh()
            mine = self._mine(lines)
            passed = self._passed(lines)
            for record_id in self.walk.order:
                if record_id not in self.walk.offered:
                    if record_id not in passed:
                        self._pass(record_id)
                    continue
                if record_id not in mine and record_id not in self._skipped:
                    return self.run.items[record_id]
            for record_id in self._skipped:
                if record_id not in mine:
                    return self.run.items[record_id]
            return None

    def item(self, record_id: Any) -> tuple[LabelledItem, float | None]:
        """A record of the walk and this annotator's standing label of it (None: none)."""
        with self._lock:
            self._check_offered(record_id, self.metric)
            own = self._standing(self._refresh()).get(record_id)
            return self.run.items[record_id], None if own is None else own.label

    def progress(self) -> dict[str, int]:
        with self._lock:
            return self._progress(self._refresh())

    # -- changes ----------------------------------------------------------------------------

    def label(self, record_id: Any, metric: Any, value: Any) -> tuple[LabelLine, dict]:
        """Write this annotator's label of a record; refused when it is off the scale, not a
        record of the walk, or already labelled by this annotator."""
        with self._lock:
            self._check_offered(record_id, metric)
            if not self.run.scale.accepts(value):
                raise Refused(f"label {value!r} is off the scale: one of "
                              f"{', '.join(map(str, self.run.scale.values))}")
            line = self._line(record_id, float(value))
            already = f"{self.annotator} already labelled record {record_id!r}"
            written, _ = self.labels.append(
                line, unless=lambda lines: already if record_id in self._mine(lines) else None)
            if written is None:
                raise Refused(already)
            if record_id in self._skipped:
                self._skipped.remove(record_id)
            return written, self._progress(self.labels.lines)

    def skip(self, record_id: Any, metric: Any) -> dict[str, int]:
        """Move a record to the end of this annotator's queue."""
        with self._lock:
            self._check_offered(record_id, metric)
            if record_id in self._skipped:
                self._skipped.remove(record_id)
            self._skipped.append(record_id)
            return self._progress(self._refresh())

    def undo(self) -> tuple[LabelLine, dict[str, int]]:
        """Take back this annotator's last standing label of the metric (an undo line)."""
        with self._lock:
            target = self._last(self._refresh())
            if target is None:
                raise Refused(f"{self.annotator} has no label of {self.metric} to undo")
            line = LabelLine(target.id, self.metric, None, self.annotator, self._clock(),
                             self.shown_judge, self.walk.selection, target.probability,
                             undo=True)
            written, _ = self.labels.append(
                line, unless=lambda lines: None if _same(self._last(lines), target)
                else "the last label changed meanwhile: try again")
            if written is None:
                raise Refused("the last label changed meanwhile: try again")
            return written, self._progress(self.labels.lines)

    # -- reading the file -------------------------------------------------------------------

    def _refresh(self) -> list[LabelLine]:
        self.labels.refresh()
        return self.labels.lines

    def _standing(self, lines: list[LabelLine]) -> dict[str, LabelLine]:
        standing, _ = current_labels(lines)
        return {line.id: line for line in standing
                if line.annotator == self.annotator and line.metric == self.metric}

    def _mine(self, lines: list[LabelLine]) -> set[str]:
        return set(self._standing(lines))

    def _last(self, lines: list[LabelLine]) -> LabelLine | None:
        own = list(self._standing(lines).values())
        return max(own, key=lambda line: line.line) if own else None

    def _passed(self, lines: list[LabelLine]) -> set[str]:
        return {line.id for line in lines if line.passed and line.metric == self.metric}

    def _progress(self, lines: list[LabelLine]) -> dict[str, int]:
        mine = self._mine(lines) & self.walk.offered
        total = len(self.walk.offered)
        return {"labelled": len(mine), "left": total - len(mine), "total": total,
                "skipped": len([i for i in self._skipped if i not in mine]),
                "pool": len(self.walk.order)}

    # -- writing ----------------------------------------------------------------------------

    def _line(self, record_id: str, value: float | None, *, passed: bool = False) -> LabelLine:
        return LabelLine(record_id, self.metric, value, self.annotator, self._clock(),
                         False if passed else self.shown_judge, self.walk.selection,
                         self.walk.chance(record_id), passed=passed)

    def _pass(self, record_id: str) -> None:
        self.labels.append(self._line(record_id, None, passed=True),
                           unless=lambda lines: "passed" if record_id in self._passed(lines)
                           else None)

    def _check_offered(self, record_id: Any, metric: Any) -> None:
        if metric != self.metric:
            raise Refused(f"unknown metric {metric!r}: this page labels {self.metric}")
        if not isinstance(record_id, str) or record_id not in self.run.items:
            raise Refused(f"unknown record {record_id!r}: not in the pool of {self.metric}")
        if record_id not in self.walk.offered:
            raise Refused(f"record {record_id!r} was not selected by the active walk")

    def _check_file(self) -> None:
        """The labels already in the file for this metric were written by a walk like this
        one: the same selection and, when active, the same probabilities."""
        for line in self.labels.lines:
            if line.metric != self.metric or line.id not in self.run.items:
                continue
            where = f"{self.labels.path}, line {line.line}"
            if line.selection != self.walk.selection:
                raise UsageError(f"{where}: a {line.selection} line for {self.metric}, but "
                                 f"this walk is --select {self.walk.selection}: use the same "
                                 "selection, or another labels file")
            expected = self.walk.chance(line.id)
            if expected is not None and line.probability is not None \
                    and abs(line.probability - expected) > _SAME_PROBABILITY:
                raise UsageError(f"{where}: record {line.id!r} was drawn with probability "
                                 f"{line.probability}, this walk gives it {expected}: use the "
                                 "run, --budget and --seed the file was labelled with")


def _same(a: LabelLine | None, b: LabelLine) -> bool:
    return a is not None and a.line == b.line
