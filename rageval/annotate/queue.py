"""One annotator's queue over a walk: what to label next, and every change the annotator
makes (a label, a skip, an undo), each written to the labels file before it is acknowledged.

The queue keeps no label of its own: it reads the labels file (other annotators' processes
append to it too) before each answer, so that a restart resumes at the next record this
annotator has not labelled, and a label of a record this annotator already labelled is refused
under the file's lock. A skip moves a record to the end of the queue for as long as the queue
lives. On an active walk, moving past a record the draw did not select appends one passed line
for it (unless the file has one), so that the estimator knows every record the walk went
through; the passed lines up to the next record to label go in one write.

On an active walk the file's first line of a record decides it for good: passed over, or
selected with the probability that line records. A walk started later with another
``--budget`` (as ``--plan`` may advise) draws only the records the file has not decided yet:
each record's probability is fixed before its draw, as the sequential form of active inference
asks. The seed and the pool must stay those of the file (each line records the seed and the
record's position in the walk); another seed or another run's pool is refused."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from rageval.annotate.run import LabelledItem, LabellingRun
from rageval.annotate.walk import Walk
from rageval.core.errors import UsageError
from rageval.core.labels import LabelLine, LabelsFile, current_labels

__all__ = ["AnnotatorQueue", "Refused", "utc_now"]

#: How many times the queue redraws its passed lines when another annotator's walk decided
#: one of those records meanwhile.
_PASS_TRIES = 8


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
            found, mine, decided = self._advance()
            if found is not None:
                return self.run.items[found]
            for record_id in self._skipped:  # then the skipped ones still to label
                if record_id not in mine and self._selected(record_id, decided):
                    return self.run.items[record_id]
            return None

    def _advance(self) -> tuple[str | None, set[str], dict[str, LabelLine]]:
        """Walk to this annotator's next record. On an active walk what the walk decides on
        the way is written down in one write: a passed line for each record its draw did not
        select, and a drawn line for the record it stops at, so that the draw of a record
        shown is fixed before anyone labels it (tried again when another walk decided one of
        them meanwhile). Returns the record (None: only skipped ones are left), this
        annotator's labelled records and what the file decided."""
        for _ in range(_PASS_TRIES):
            lines = self._refresh()
            problem = self._foreign(lines)  # another server started on the file meanwhile
            if problem is not None:
                raise Refused(problem)
            decided, mine = self._decided(lines), self._mine(lines)
            to_pass: list[str] = []
            found = None
            for record_id in self.walk.order:
                if not self._selected(record_id, decided):
                    if record_id not in decided:
                        to_pass.append(record_id)
                elif record_id not in mine and record_id not in self._skipped:
                    found = record_id
                    break
            to_draw = [found] if self.walk.active and found and found not in decided else []
            if not (to_pass or to_draw) or self._write_walk(to_pass, to_draw):
                return found, mine, decided
        raise Refused("other annotators keep deciding the same records: try again")

    def item(self, record_id: Any) -> tuple[LabelledItem, float | None]:
        """A record of the walk and this annotator's standing label of it (None: none)."""
        with self._lock:
            lines = self._refresh()
            self._check_offered(record_id, self.metric, lines)
            own = self._standing(lines).get(record_id)
            return self.run.items[record_id], None if own is None else own.label

    def progress(self) -> dict[str, int]:
        with self._lock:
            return self._progress(self._refresh())

    # -- changes ----------------------------------------------------------------------------

    def label(self, record_id: Any, metric: Any, value: Any) -> tuple[LabelLine, dict]:
        """Write this annotator's label of a record; refused when it is off the scale, not a
        record of the walk, or already labelled by this annotator."""
        with self._lock:
            lines = self._refresh()
            self._check_offered(record_id, metric, lines)
            if not self.run.scale.accepts(value):
                raise Refused(f"label {value!r} is off the scale: one of "
                              f"{', '.join(map(str, self.run.scale.values))}")
            line = self._line(record_id, float(value), self._decided(lines))
            reason: list[str] = []
            written, _ = self.labels.append(line, unless=lambda seen: self._cannot_label(
                line, seen, reason))
            if written is None:
                raise Refused(reason[0])
            if record_id in self._skipped:
                self._skipped.remove(record_id)
            with suppress(Refused):  # the walk moves on (a script may never ask for more)
                self._advance()
            return written, self._progress(self.labels.lines)

    def skip(self, record_id: Any, metric: Any) -> dict[str, int]:
        """Move a record to the end of this annotator's queue."""
        with self._lock:
            self._check_offered(record_id, metric, self._refresh())
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
                             undo=True, seed=target.seed, position=target.position)
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

    def _decided(self, lines: list[LabelLine]) -> dict[str, LabelLine]:
        """On an active walk, the first line of each record the file decided (empty under
        uniform selection: nothing is drawn)."""
        out: dict[str, LabelLine] = {}
        if self.walk.active:
            for line in lines:
                if line.metric == self.metric:
                    out.setdefault(line.id, line)
        return out

    def _selected(self, record_id: str, decided: dict[str, LabelLine]) -> bool:
        """Offered to label: every record under uniform selection; on an active walk, as
        the file decided it, else as this walk's draw does."""
        first = decided.get(record_id)
        return record_id in self.walk.offered if first is None else not first.passed

    def _progress(self, lines: list[LabelLine]) -> dict[str, int]:
        decided = self._decided(lines)
        offered = {i for i in self.walk.order if self._selected(i, decided)}
        mine = self._mine(lines) & offered
        total = len(offered)
        return {"labelled": len(mine), "left": total - len(mine), "total": total,
                "skipped": len([i for i in self._skipped if i not in mine and i in offered]),
                "pool": len(self.walk.order)}

    # -- writing ----------------------------------------------------------------------------

    def _line(self, record_id: str, value: float | None, decided: dict[str, LabelLine], *,
              passed: bool = False, drawn: bool = False) -> LabelLine:
        walk, first = self.walk, decided.get(record_id)
        chance = (None if not walk.active else first.probability
                  if first is not None and first.selection == "active"
                  else walk.probability[record_id])
        return LabelLine(record_id, self.metric, value, self.annotator, self._clock(),
                         False if passed else self.shown_judge, walk.selection, chance,
                         passed=passed, seed=walk.seed if walk.active else None,
                         position=walk.position[record_id] if walk.active else None,
                         drawn=drawn, budget=walk.budget if walk.active else None)

    def _write_walk(self, to_pass: list[str], to_draw: list[str]) -> bool:
        """Pass over ``to_pass`` and draw ``to_draw`` in one write, unless another walk
        decided one of them meanwhile (False: read the file and try again)."""
        lines = [self._line(record_id, None, {}, passed=True) for record_id in to_pass]
        lines += [self._line(record_id, None, {}, drawn=True) for record_id in to_draw]
        ids = set(to_pass) | set(to_draw)
        foreign: list[str] = []

        def stale(seen: list[LabelLine]) -> str | None:
            foreign.extend(filter(None, [self._foreign(seen)]))
            return foreign[0] if foreign else (
                "decided" if self._decided(seen).keys() & ids else None)

        written, _ = self.labels.append_all(lines, unless=stale)
        if foreign:
            raise Refused(foreign[0])
        return written is not None

    def _cannot_label(self, line: LabelLine, seen: list[LabelLine],
                      reason: list[str]) -> str | None:
        """Why ``line`` may not be written, with every line of the file in view (None: it
        may); the reason is also kept in ``reason`` for the refusal."""
        first = self._decided(seen).get(line.id)
        foreign = self._foreign(seen)
        if foreign is not None:
            reason.append(foreign)
        elif line.id in self._mine(seen):
            reason.append(f"{self.annotator} already labelled record {line.id!r}")
        elif first is not None and first.passed:
            reason.append(f"record {line.id!r} was passed over by the active walk")
        elif first is not None and first.probability != line.probability:
            reason.append(f"record {line.id!r} was just drawn by another walk: try again")
        return reason[0] if reason else None

    def _check_offered(self, record_id: Any, metric: Any, lines: list[LabelLine]) -> None:
        if metric != self.metric:
            raise Refused(f"unknown metric {metric!r}: this page labels {self.metric}")
        if not isinstance(record_id, str) or record_id not in self.run.items:
            raise Refused(f"unknown record {record_id!r}: not in the pool of {self.metric}")
        if not self._selected(record_id, self._decided(lines)):
            raise Refused(f"record {record_id!r} was not selected by the active walk")

    def _check_file(self) -> None:
        """The lines already in the file for this metric were written by a walk like this
        one (see :meth:`_foreign`)."""
        problem = self._foreign(self.labels.lines)
        if problem is not None:
            raise UsageError(problem)

    def _foreign(self, lines: list[LabelLine]) -> str | None:
        """Why the file's lines for this metric come from a walk unlike this one, if they
        do: another selection or, when active, another seed or pool (a record at a position
        this walk does not give it). Checked at the start and, under the lock, before every
        write: another server may have started on the same file meanwhile."""
        walk = self.walk
        for line in lines:
            if line.metric != self.metric:
                continue
            where = f"{self.labels.path}, line {line.line}"
            if line.selection != walk.selection:
                return (f"{where}: a {line.selection} line for {self.metric}, but this walk is "
                        f"--select {walk.selection}: use the same selection, or another "
                        "labels file")
            if not walk.active:
                continue
            if line.seed != walk.seed:
                return (f"{where}: the walk was started with --seed {line.seed}, this one "
                        f"with --seed {walk.seed}: use the file's seed")
            if walk.position.get(line.id) != line.position:
                return (f"{where}: record {line.id!r} is at position {line.position} of the "
                        f"file's walk and {walk.position.get(line.id)} of this one: the file "
                        "was labelled on another run's records")
        return None


def _same(a: LabelLine | None, b: LabelLine) -> bool:
    return a is not None and a.line == b.line
