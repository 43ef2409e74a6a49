"""The human labels file: JSON Lines that ``rageval annotate`` appends to and that
``rageval score --human-labels`` and ``rageval agree`` read, one object per line::

    {"id": "q1", "metric": "judge:faithfulness", "label": 4, "annotator": "ana",
     "time": "2026-11-29T08:00:00Z", "shown_judge": false, "selection": "uniform"}

``selection`` says how the record came to be labelled: ``uniform`` (every record in a seeded
random order, as a simple random sample) or ``active`` (each record drawn with the
``probability`` the line records, higher where the judge is less sure). An active walk passes
over the records its draw did not select with a line of its own (``"label": null, "passed":
true``): the estimator needs to know every record the walk went through, labelled or not.
Nothing is ever rewritten: an annotator's undo is a line too (``"label": null, "undo": true``)
that takes back that annotator's label of that record, so the file keeps the whole story and
:func:`current_labels` says what stands.

Lines are appended under an exclusive lock on the file (``fcntl.flock``, where the system has
it), flushed and synced to disk one by one, so that a killed annotator loses no label and
several annotators writing one file at once lose none either; :class:`LabelsFile` reads what
others appended since it last looked before it writes, so that an annotator labels a record
once whatever the other processes did in between."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rageval.core.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one writer at a time is the user's care
    fcntl = None  # type: ignore[assignment]

__all__ = ["SELECTIONS", "LabelLine", "LabelsFile", "current_labels", "read_labels"]

#: How a labelled record was chosen.
SELECTIONS = ("uniform", "active")


@dataclass(frozen=True)
class LabelLine:
    """One line of a labels file. ``label`` is None on an active walk's passed line and on
    an undo line; ``probability`` is the chance the active draw gave the record (None under
    uniform selection); ``line`` is its 1-based line number once read (0 before it is
    written)."""

    id: str
    metric: str
    label: float | None
    annotator: str
    time: str
    shown_judge: bool = False
    selection: str = "uniform"
    probability: float | None = None
    passed: bool = False
    undo: bool = False
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "metric": self.metric, "label": self.label,
                               "annotator": self.annotator, "time": self.time,
                               "shown_judge": self.shown_judge, "selection": self.selection}
        if self.probability is not None:
            out["probability"] = self.probability
        if self.passed:
            out["passed"] = True
        if self.undo:
            out["undo"] = True
        return out

    def encode(self) -> bytes:
        label = self.label
        data = self.to_json()
        if label is not None and float(label).is_integer():
            data["label"] = int(label)  # 4, not 4.0: what the annotator pressed
        return (json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def read_labels(path: str | os.PathLike[str]) -> list[LabelLine]:
    """Every line of a labels file, checked: an error names the file, the line and the
    field. A missing file is an error; an empty one has no labels."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the labels file: {error.strerror or error}",
                         path=source) from None
    return list(_parse_lines(data, source, first_line=1))


def _parse_lines(data: bytes, source: str, first_line: int) -> Iterator[LabelLine]:
    for offset, raw in enumerate(data.splitlines()):
        number = first_line + offset
        if raw.strip():
            yield _parse_line(raw, source, number)


def _parse_line(raw: bytes, source: str, number: int) -> LabelLine:
    try:
        data = json.loads(raw)
    except ValueError:
        raise InputError("not a JSON object", path=source, line=number) from None
    if not isinstance(data, dict):
        raise InputError("not a JSON object", path=source, line=number)

    def text(name: str) -> str:
        value = data.get(name)
        if not isinstance(value, str) or not value:
            raise InputError("must be a non-empty string", path=source, line=number, field=name)
        return value

    selection = data.get("selection", "uniform")
    if selection not in SELECTIONS:
        raise InputError(f"must be one of {', '.join(SELECTIONS)}, got {selection!r}",
                         path=source, line=number, field="selection")
    passed, undo = data.get("passed", False), data.get("undo", False)
    shown = data.get("shown_judge", False)
    for name, flag in (("passed", passed), ("undo", undo), ("shown_judge", shown)):
        if not isinstance(flag, bool):
            raise InputError("must be true or false", path=source, line=number, field=name)
    if passed and undo:
        raise InputError("a line is a passed line or an undo line, not both", path=source,
                         line=number, field="undo")
    label = _number(data.get("label"), source, number, "label", allow_none=passed or undo)
    if (passed or undo) and label is not None:
        raise InputError(f"{'a passed' if passed else 'an undo'} line carries no label",
                         path=source, line=number, field="label")
    probability = _number(data.get("probability"), source, number, "probability",
                          allow_none=selection == "uniform")
    if probability is not None and not 0 < probability <= 1:
        raise InputError(f"must be in (0, 1], got {probability}", path=source, line=number,
                         field="probability")
    return LabelLine(text("id"), text("metric"), label, text("annotator"), text("time"),
                     shown, selection, probability, passed, undo, number)


def _number(value: Any, source: str, number: int, name: str, *,
            allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise InputError(f"must be a finite number, got {json.dumps(value)}", path=source,
                         line=number, field=name)
    return float(value)


def current_labels(lines: list[LabelLine]) -> tuple[list[LabelLine], list[LabelLine]]:
    """What stands once every undo is applied: the label lines in effect (the last label of
    each annotator, record and metric that no later undo took back), in file order, and the
    passed lines (the first for each record and metric)."""
    standing: dict[tuple[str, str, str], LabelLine] = {}
    passed: dict[tuple[str, str], LabelLine] = {}
    for line in lines:
        key = (line.annotator, line.id, line.metric)
        if line.passed:
            passed.setdefault((line.id, line.metric), line)
        elif line.undo:
            standing.pop(key, None)
        else:
            standing.pop(key, None)  # a relabel after an undo moves to its own place
            standing[key] = line
    return sorted(standing.values(), key=lambda x: x.line), list(passed.values())


class LabelsFile:
    """A labels file one process appends to while others may too. It keeps every line read
    so far and where it stopped reading, and reads the rest before each write, under the
    lock, so that :meth:`append` sees what every other writer appended before it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lines: list[LabelLine] = []
        self._read_to = 0  # bytes of the file parsed so far
        self._line_count = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked() as handle:
            self._catch_up(handle)

    def refresh(self) -> list[LabelLine]:
        """Read what other writers appended since the last look; returns the new lines."""
        with self._locked() as handle:
            return self._catch_up(handle)

    def append(self, line: LabelLine, *,
               unless: Any = None) -> tuple[LabelLine | None, list[LabelLine]]:
        """Append ``line`` (flushed and synced) unless ``unless(lines)`` — called under the
        lock with every line of the file, other writers' included — returns a reason not to.
        Returns the line as written (with its line number), or None when refused, and the
        lines other writers appended since the last look."""
        with self._locked() as handle:
            fresh = self._catch_up(handle)
            if unless is not None and unless(self.lines):
                return None, fresh
            # Every write happens under the lock in one piece, so bytes past the last newline
            # now are a line whose writer died mid-write: never acknowledged, cut away.
            handle.truncate(self._read_to)
            handle.seek(0, os.SEEK_END)
            handle.write(line.encode())
            handle.flush()
            os.fsync(handle.fileno())
            written = self._catch_up(handle)
        own = written[-1] if written else None
        return own, fresh

    @contextmanager
    def _locked(self) -> Iterator[IO[bytes]]:
        with open(self.path, "a+b") as handle:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield handle
            finally:
                if fcntl is not None:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def _catch_up(self, handle: IO[bytes]) -> list[LabelLine]:
        """Parse the whole lines past what was read (bytes after the last newline, a line cut
        short by a killed writer, are left alone until :meth:`append` cuts them)."""
        handle.seek(self._read_to)
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end == 0:
            return []
        chunk = data[:end]
        new = list(_parse_lines(chunk, str(self.path), self._line_count + 1))
        self._read_to += end
        self._line_count += chunk.count(b"\n")
        self.lines.extend(new)
        return new
