"""The runs of ``rageval compare``, loaded and paired by record id.

:func:`load_runs` loads the runs and names them, :func:`pick_baseline` sets the baseline apart
from the systems, and :func:`pair_record_ids` matches the records of all runs by id (an error
naming the ids that do not pair, unless ``intersect`` keeps those common to all runs).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rageval.core.errors import InputError, UsageError
from rageval.core.results import RecordResult, Results
from rageval.core.results.run_records import open_run

__all__ = ["SHOWN_IDS", "NamedRun", "PairKey", "RunLike", "conversation_groups", "label",
           "load_runs", "pair_key", "pair_record_ids", "pick_baseline", "some_ids"]

# How many missing ids an error message spells out before giving the count only.
SHOWN_IDS = 5

RunLike = str | os.PathLike[str] | Results


@dataclass(frozen=True)
class NamedRun:
    """A scored run and the name it is shown under (its path as given, or a label). A run read
    from its directory keeps its records there until :meth:`whole` reads them in."""

    name: str
    results: Results
    directory: str | None = None

    def whole(self) -> NamedRun:
        """The run with every record in memory."""
        if self.directory is None:
            return self
        return NamedRun(self.name, Results.load(self.directory))


def load_runs(runs: Sequence[RunLike], names: Sequence[str] | None) -> list[NamedRun]:
    """The runs, named; a run given as a directory has its summary read and its records left
    on disk (:meth:`NamedRun.whole` reads them)."""
    if names is not None and len(names) != len(runs):
        raise UsageError(f"{len(names)} names given for {len(runs)} runs")
    loaded = []
    for i, run in enumerate(runs):
        if isinstance(run, Results):
            loaded.append(NamedRun(names[i] if names else f"run{i + 1}", run))
        else:
            loaded.append(NamedRun(names[i] if names else os.fspath(run), open_run(run),
                                   os.fspath(run)))
    seen: dict[str, str] = {}
    for run, given in zip(loaded, runs, strict=True):
        # The same directory spelled two ways ("a" and "a/") is the same run.
        key = run.name if isinstance(given, Results) else os.path.realpath(given)
        if key in seen or run.name in seen.values():
            raise UsageError(f"run {run.name} is given twice")
        seen[key] = run.name
    return loaded


def pick_baseline(runs: list[NamedRun],
                  baseline: RunLike | None) -> tuple[NamedRun, list[NamedRun]]:
    """The baseline (default the first run; an extra run when not among them) and the rest."""
    index = 0 if baseline is None else _find(runs, baseline)
    if index is not None:
        base, systems = runs[index], runs[:index] + runs[index + 1 :]
    elif isinstance(baseline, Results):
        base, systems = NamedRun("baseline", baseline), runs
    else:
        path = os.fspath(baseline)  # type: ignore[arg-type]  # None always finds index 0
        base, systems = NamedRun(path, open_run(path), path), runs
    if base.name in {r.name for r in systems}:
        raise UsageError(f"run {base.name} is given twice")
    if not systems:
        raise UsageError("compare needs at least two runs: a baseline and a system")
    return base, systems


def _find(runs: list[NamedRun], baseline: RunLike) -> int | None:
    if isinstance(baseline, Results):
        return next((i for i, r in enumerate(runs) if r.results is baseline), None)
    given = os.fspath(baseline)
    for i, run in enumerate(runs):
        if run.name == given:
            return i
    target = Path(given).resolve()
    return next((i for i, r in enumerate(runs) if Path(r.name).resolve() == target), None)


def pair_record_ids(
    runs: list[NamedRun], intersect: bool
) -> tuple[list[PairKey], dict[str, np.ndarray], dict[str, int]]:
    """Ids in the baseline's order, each run's positions of them, and records each run lost.
    A turn of a conversation pairs by its conversation and position
    (``<conversation>#<position>``), whatever its own id."""
    id_lists = {run.name: [pair_key(r) for r in run.results.records] for run in runs}
    for run in runs:
        _check_unique(run.name, id_lists[run.name])
    base_ids = id_lists[runs[0].name]
    sets = {name: set(ids) for name, ids in id_lists.items()}
    common = set.intersection(*sets.values())
    if not intersect:
        problems = _pairing_problems(runs[0].name, sets)
        if problems:
            raise InputError("records do not pair by id: " + "; ".join(problems)
                             + " (use --intersect to compare the ids common to all runs)")
    ids = [i for i in base_ids if i in common]
    if not ids:
        raise InputError("no record id is common to all runs: nothing to compare")
    positions = {}
    for name, run_ids in id_lists.items():
        where = {record_id: k for k, record_id in enumerate(run_ids)}
        positions[name] = np.array([where[i] for i in ids], dtype=np.int64)
    dropped = {name: len(run_ids) - len(ids) for name, run_ids in id_lists.items()}
    return ids, positions, dropped


PairKey = str | tuple[str, ...] | tuple[str, int]


def pair_key(record: RecordResult) -> PairKey:
    """What a record pairs by: its id; for a turn, its conversation and position; for a
    conversation's own line, its conversation (keys of the three kinds never collide)."""
    if record.conversation is None:
        return record.id
    if record.turn is None:
        return (record.conversation,)
    return (record.conversation, record.turn)


def label(key: PairKey) -> str:
    """A pairing key as messages show it."""
    if isinstance(key, str):
        return repr(key)
    if len(key) == 1:
        return f"conversation {key[0]!r}"
    return f"{key[0]!r} turn {key[1]}"


def conversation_groups(records: Sequence[RecordResult], positions: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """For the paired records (``positions`` in ``records``): each one's conversation, numbered
    from 0 (a record on its own is one of its own; a conversation's own line is in its
    conversation), and its turn (0 where it is not a turn); None when no record is in a
    conversation."""
    picked = [records[int(p)] for p in positions]
    if all(r.conversation is None for r in picked):
        return None
    numbers: dict[str, int] = {}
    groups = np.fromiter((numbers.setdefault(r.conversation or f"\0{r.id}", len(numbers))
                          for r in picked), dtype=np.int64, count=len(picked))
    turns = np.fromiter((r.turn or 0 for r in picked), dtype=np.int64, count=len(picked))
    return groups, turns


def _check_unique(name: str, ids: list[PairKey]) -> None:
    repeated = [i for i, count in Counter(ids).items() if count > 1]
    if repeated:
        raise InputError(f"record ids must be unique to pair records; repeated: "
                         f"{_some(repeated)}", path=name)


def _pairing_problems(base_name: str, sets: dict[str, set[PairKey]]) -> list[str]:
    base = sets[base_name]
    problems = []
    for name, ids in sets.items():
        if name == base_name:
            continue
        if base - ids:
            problems.append(f"{name} lacks {_some(sorted(base - ids, key=label))} "
                            f"(in {base_name})")
        if ids - base:
            problems.append(f"{base_name} lacks {_some(sorted(ids - base, key=label))} "
                            f"(in {name})")
    return problems


def _some(ids: list[PairKey]) -> str:
    return some_ids(len(ids), ids[:SHOWN_IDS])


def some_ids(count: int, first: list[PairKey]) -> str:
    """``count`` ids as messages show them: how many, and the ``first`` few."""
    shown = ", ".join(label(i) for i in first)
    more = f" and {count - len(first)} more" if count > len(first) else ""
    return f"{count} id{'s' if count != 1 else ''} ({shown}{more})"
