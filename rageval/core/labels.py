"""The human labels file: JSON Lines that ``rageval annotate`` appends to and that
``rageval score --human-labels`` and ``rageval agree`` read, one object per line::

    {"id": "q1", "metric": "judge:faithfulness", "label": 4, "annotator": "ana",
     "time": "2026-11-29T08:00:00Z", "shown_judge": false, "selection": "uniform"}

``selection`` says how the record came to be labelled: ``uniform`` (every record in a seeded
random order, as a simple random sample) or ``active`` (each record drawn with the
``probability`` the line records, higher where the judge is less sure). An active walk passes
over the records its draw did not select with a line of its own (``"label": null, "passed":
true``): the estimator needs to know every record the walk went through, labelled or not. An
active line also carries the walk's ``seed`` and the record's ``position`` in the walk's order
(0 first), so that :func:`active_pool` can tell the stretch of the walk that is complete (every
record up to there passed over or labelled) from what lies beyond a record still unlabelled.
A record the draw selected is written down the moment the walk shows it (``"label": null,
"drawn": true``, in the same write as the passed lines before it), so that its draw is fixed
before anyone sees it: a later walk with another budget, or a walk of another annotator, never
draws it again.
Nothing is ever rewritten: an annotator's undo is a line too (``"label": null, "undo": true``)
that takes back that annotator's label of that record, so the file keeps the whole story and
:func:`current_labels` says what stands.

Lines are appended under an exclusive lock on the file (``fcntl.flock``, where the system has
it), flushed and synced to disk before they are acknowledged, so that a killed annotator loses
no label and several annotators writing one file at once lose none either; :class:`LabelsFile`
reads what others appended since it last looked before it writes, so that an annotator labels a
record once whatever the other processes did in between. A last line without its newline that
is not JSON is a write cut short by a kill, never acknowledged: readers skip it and the next
append cuts it away (one that is JSON, a file written by hand without a final newline, is read
and checked like any other line)."""

from __future__ import annotations

import hashlib
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

__all__ = ["SELECTIONS", "ActivePool", "LabelLine", "LabelsFile", "active_pool", "current_labels",
           "read_labels", "read_labels_and_digest"]

#: How a labelled record was chosen.
SELECTIONS = ("uniform", "active")


@dataclass(frozen=True)
class LabelLine:
    """One line of a labels file. ``label`` is None on an active walk's passed and drawn
    lines and on an undo line; ``probability`` is the chance the active draw gave the record,
    ``seed`` the active walk's seed and ``position`` the record's place in its order (all three
    None under uniform selection); ``line`` is its 1-based line number once read (0 before it is
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
    seed: int | None = None
    position: int | None = None
    drawn: bool = False
    budget: float | None = None
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "metric": self.metric, "label": self.label,
                               "annotator": self.annotator, "time": self.time,
                               "shown_judge": self.shown_judge, "selection": self.selection}
        for name in ("probability", "seed", "position", "budget"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.passed:
            out["passed"] = True
        if self.undo:
            out["undo"] = True
        if self.drawn:
            out["drawn"] = True
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
    return read_labels_and_digest(path)[0]


def read_labels_and_digest(path: str | os.PathLike[str]) -> tuple[list[LabelLine], str]:
    """:func:`read_labels`, and the sha256 of the bytes read (what a run records, so that a
    report can tell the file changed since)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the labels file: {error.strerror or error}",
                         path=source) from None
    return list(_parse_lines(data, source, first_line=1)), hashlib.sha256(data).hexdigest()


def _parse_lines(data: bytes, source: str, first_line: int) -> Iterator[LabelLine]:
    whole, tail = _split_tail(data)
    for offset, raw in enumerate(whole.splitlines()):
        if raw.strip():
            yield _parse_line(raw, source, first_line + offset)
    if tail is not None:
        yield _parse_line(tail, source, first_line + whole.count(b"\n"))


def _split_tail(data: bytes) -> tuple[bytes, bytes | None]:
    """The whole lines of ``data``, and its last line when it lacks a newline but is JSON (a
    fragment that is not, a write cut short, is dropped; one that is JSON is checked like any
    line, its errors reported)."""
    end = data.rfind(b"\n") + 1
    rest = data[end:]
    if not rest.strip():
        return data, None
    try:
        json.loads(rest)
    except (ValueError, RecursionError):
        return data[:end], None
    return data[:end], rest


def _parse_line(raw: bytes, source: str, number: int) -> LabelLine:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past all reason
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
    kinds = {name: data.get(name, False) for name in ("passed", "undo", "drawn")}
    shown = data.get("shown_judge", False)
    for name, flag in (*kinds.items(), ("shown_judge", shown)):
        if not isinstance(flag, bool):
            raise InputError("must be true or false", path=source, line=number, field=name)
    kind = [name for name, flag in kinds.items() if flag]
    if len(kind) > 1:
        raise InputError(f"a line is one of a passed, an undo or a drawn line, not "
                         f"{' and '.join(kind)}", path=source, line=number, field=kind[-1])
    if kinds["drawn"] and selection != "active":
        raise InputError("only an active walk draws", path=source, line=number, field="drawn")
    label = _number(data.get("label"), source, number, "label", allow_none=bool(kind))
    if kind and label is not None:
        raise InputError(f"a{'n' if kind[0] == 'undo' else ''} {kind[0]} line carries no "
                         "label", path=source, line=number, field="label")
    probability = _number(data.get("probability"), source, number, "probability",
                          allow_none=selection == "uniform")
    if probability is not None and not 0 < probability <= 1:
        raise InputError(f"must be in (0, 1], got {probability}", path=source, line=number,
                         field="probability")
    seed, position = (_integer(data.get(name), source, number, name,
                               allow_none=selection == "uniform", least=least)
                      for name, least in (("seed", None), ("position", 0)))
    budget = _number(data.get("budget"), source, number, "budget", allow_none=True)
    if budget is not None and not budget > 0:
        raise InputError(f"must be positive, got {budget:g}", path=source, line=number,
                         field="budget")
    return LabelLine(text("id"), text("metric"), label, text("annotator"), text("time"),
                     shown, selection, probability, kinds["passed"], kinds["undo"], seed,
                     position, kinds["drawn"], budget, number)


def _integer(value: Any, source: str, number: int, name: str, *, allow_none: bool,
             least: int | None) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) \
            or (least is not None and value < least):
        bound = "" if least is None else f" of at least {least}"
        raise InputError(f"must be an integer{bound}, got {json.dumps(value)}", path=source,
                         line=number, field=name)
    return value


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
        elif line.drawn:
            continue  # a draw, not a label
        elif line.undo:
            standing.pop(key, None)
        else:
            standing.pop(key, None)  # a relabel after an undo moves to its own place
            standing[key] = line
    return sorted(standing.values(), key=lambda x: x.line), list(passed.values())


@dataclass(frozen=True)
class ActivePool:
    """The complete stretch of an active walk, read from one metric's lines: ``chances``, the
    probability of each record of the pool (every record of the walk before ``cut``, the
    first position with no outcome yet: a record neither passed over nor labelled);
    ``blocking``, the record at ``cut`` where the file knows it (selected, its label skipped
    or undone); ``waiting``, the standing labels beyond ``cut``, left out until the walk is
    complete up to them; ``budgets``, the walk budgets the pool's records were decided under
    (the lines' ``budget``, where they say)."""

    seed: int
    chances: dict[str, float]
    cut: int
    blocking: str | None
    waiting: int
    budgets: tuple[float, ...] = ()


def active_pool(lines: list[LabelLine], path: str) -> ActivePool:
    """The pool of one metric's active walk from its lines (undo and drawn lines included).
    Errors name the file, the line and the field: two seeds, a record given two positions or
    two probabilities, two records at one position, a record both passed over and selected
    (drawn or labelled)."""
    seed = lines[0].seed
    first: dict[str, LabelLine] = {}
    at: dict[int, str] = {}
    passed: dict[str, LabelLine] = {}
    selected: dict[str, LabelLine] = {}  # drawn or labelled
    for line in lines:
        if line.seed != seed:
            raise InputError(f"{line.metric} was walked with seed {seed} (line {lines[0].line})"
                             f", this line says {line.seed}", path=path, line=line.line,
                             field="seed")
        known = first.setdefault(line.id, line)
        for name in ("position", "probability"):
            if getattr(line, name) != getattr(known, name):
                raise InputError(f"record {line.id!r} has {name} {getattr(known, name)} on "
                                 f"line {known.line}, {getattr(line, name)} here", path=path,
                                 line=line.line, field=name)
        other = at.setdefault(int(line.position or 0), line.id)
        if other != line.id:
            raise InputError(f"records {other!r} and {line.id!r} share position "
                             f"{line.position} of the walk", path=path, line=line.line,
                             field="position")
        (passed if line.passed else selected if not line.undo else {}).setdefault(line.id, line)
    for record_id in passed.keys() & selected.keys():
        a, b = sorted((passed[record_id], selected[record_id]), key=lambda x: x.line)
        raise InputError(f"record {record_id!r} is both passed over by the walk and selected "
                         f"(lines {a.line} and {b.line})", path=path, line=b.line,
                         field="passed" if b.passed else "drawn" if b.drawn else "label")
    standing = {line.id for line in current_labels(lines)[0]}
    done = {int(first[i].position or 0) for i in (set(passed) | standing)}
    cut = next(k for k in range(len(done) + 1) if k not in done)
    chances = {i: float(first[i].probability or 1.0) for i in set(passed) | standing
               if int(first[i].position or 0) < cut}
    waiting = sum(1 for line in current_labels(lines)[0]
                  if int(first[line.id].position or 0) > cut)
    budgets = tuple(sorted({first[i].budget for i in chances if first[i].budget is not None}))
    return ActivePool(int(seed or 0), chances, cut, at.get(cut), waiting, budgets)


class LabelsFile:
    """A labels file one process appends to while others may too. It keeps every line read
    so far and where it stopped reading, and reads the rest before each write, under the
    lock, so that :meth:`append` sees what every other writer appended before it. A file
    replaced or cut short under it is an error: its lines would no longer be the file's."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lines: list[LabelLine] = []
        self._read_to = 0  # bytes of the file parsed so far
        self._line_count = 0
        self._identity: tuple[int, int] | None = None  # the file's device and inode
        self._last = b""  # the bytes of the last whole line read, to find it again
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(f"cannot make the labels file's folder: "
                             f"{error.strerror or error}", path=str(self.path)) from None
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
        written, fresh = self.append_all([line], unless=unless)
        return (written[-1] if written else None), fresh

    def append_all(self, lines: list[LabelLine], *,
                   unless: Any = None) -> tuple[list[LabelLine] | None, list[LabelLine]]:
        """:meth:`append` for several lines at once: one write, one sync."""
        with self._locked() as handle:
            fresh = self._catch_up(handle)
            if self._end_the_last_line(handle):  # a line written by hand: seen before checks
                fresh += self._catch_up(handle)
            if unless is not None and unless(self.lines):
                return None, fresh
            handle.write(b"".join(line.encode() for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
            written = self._catch_up(handle)
        return written[len(written) - len(lines):], fresh

    def _end_the_last_line(self, handle: IO[bytes]) -> bool:
        """Every write happens under the lock in one piece, so bytes past the last newline
        now are a line whose writer died mid-write, never acknowledged: cut away; or a whole
        line written by hand without its newline: ended (True: there is a line to read)."""
        handle.seek(self._read_to)
        rest = handle.read()
        if not rest:
            return False
        if _split_tail(rest)[1] is None:
            handle.truncate(self._read_to)
            return False
        handle.write(b"\n")
        return True

    @contextmanager
    def _locked(self) -> Iterator[IO[bytes]]:
        # Created on the first open only: a file removed while in use is an error, not a
        # new empty file.
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if self._identity is None else 0)
        try:
            handle = os.fdopen(os.open(self.path, flags, 0o644), "a+b")
        except FileNotFoundError:
            raise InputError("the labels file was removed while in use; nothing was written",
                             path=str(self.path)) from None
        except OSError as error:
            raise InputError(f"cannot open the labels file: {error.strerror or error}",
                             path=str(self.path)) from None
        with handle:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self._check_same_file(handle)
                yield handle
            finally:
                if fcntl is not None:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def _check_same_file(self, handle: IO[bytes]) -> None:
        """The file is the one read so far: the same inode, at least as long, and the last
        line read still where it was (a file copied over in place keeps its inode)."""
        status = os.fstat(handle.fileno())
        identity = (status.st_dev, status.st_ino)
        if self._identity is None:
            self._identity = identity
            return
        same = identity == self._identity and status.st_size >= self._read_to
        if same and self._last:
            handle.seek(self._read_to - len(self._last))
            same = handle.read(len(self._last)) == self._last
        if not same:
            raise InputError("the labels file was replaced or rewritten while in use; "
                             "nothing was written: start again on the file as it is now",
                             path=str(self.path))

    def _catch_up(self, handle: IO[bytes]) -> list[LabelLine]:
        """Parse the whole lines past what was read (bytes after the last newline are left
        for :meth:`_end_the_last_line`)."""
        handle.seek(self._read_to)
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end == 0:
            return []
        chunk = data[:end]
        new = list(_parse_lines(chunk, str(self.path), self._line_count + 1))
        self._last = chunk[chunk.rfind(b"\n", 0, len(chunk) - 1) + 1:][-4096:]
        self._read_to += end
        self._line_count += chunk.count(b"\n")
        self.lines.extend(new)
        return new
