"""The runs of ``rageval compare``, loaded and paired by record id: the one pairing of both
ways to compare.

:func:`load_runs` loads the runs and names them, :func:`pick_baseline` sets the baseline apart
from the systems, and :class:`PairingCheck` holds the pairing rules and their messages (ids
repeated in a run, ids missing from a run, unless ``intersect`` keeps those common to all
runs), whether the runs' keys come whole (:func:`pair_record_ids`) or partition by partition
(a comparison streamed from disk). What a baseline-system comparison then reads is a
:class:`PairedBlock` of pairs: one block of every pair for runs held in memory
(:func:`whole_block`), a block per partition and few thousand units for runs streamed from disk,
each consumed by the same accumulators' ``add`` or by the exact statistics at once.
"""

from __future__ import annotations

import heapq
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rageval.core.errors import InputError, UsageError
from rageval.core.results import RecordResult, Results
from rageval.core.results.run_records import open_run

__all__ = ["SHOWN_IDS", "NamedRun", "PairKey", "PairedBlock", "PairingCheck", "RunLike",
           "column", "conversation_groups", "label", "load_runs", "pair_key", "pair_record_ids",
           "pick_baseline", "some_ids", "whole_block"]

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
    check = PairingCheck(list(id_lists))
    common = check.add(list(id_lists.values()))
    dropped = check.finish(intersect)
    ids = [i for i in id_lists[runs[0].name] if i in common]
    positions = {}
    for name, run_ids in id_lists.items():
        where = {record_id: k for k, record_id in enumerate(run_ids)}
        positions[name] = np.array([where[i] for i in ids], dtype=np.int64)
    return ids, positions, dropped


@dataclass
class PairedBlock:
    """Pairs of one baseline-system comparison: for each pair (a record of each run), both
    runs' values of the compared outputs (``names``, one column each, NaN where unscored), its
    rows in either run's records (or partition), its unit and, for runs of conversations, its
    turn position (0: not a turn). ``groups`` numbers each pair's unit from 0 within the block
    (None: every pair a unit of its own); ``unit_keys`` are the units' 64-bit keys, from which
    streamed draws weigh them; ``ids`` each pair's record ids (kept for human labels)."""

    names: list[str]
    base: np.ndarray
    system: np.ndarray
    base_rows: np.ndarray
    system_rows: np.ndarray
    groups: np.ndarray | None = None
    turns: np.ndarray | None = None
    unit_keys: np.ndarray | None = None
    ids: tuple[list[str], list[str]] | None = None

    def values(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The baseline's and the system's values of output ``name``, pair by pair."""
        k = self.names.index(name)
        return self.base[:, k], self.system[:, k]

    def columns(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The baseline's and the system's values of ``names`` (a column each)."""
        index = [self.names.index(n) for n in names]
        return self.base[:, index], self.system[:, index]


def whole_block(base: NamedRun, system: NamedRun, names: list[str], positions: tuple[np.ndarray,
                np.ndarray], threads: tuple[np.ndarray, np.ndarray] | None, *,
                ids: bool = False) -> PairedBlock:
    """Every pair of a baseline-system comparison held in memory, as one block
    (``positions``: each pair's record in either run, as :func:`pair_record_ids` gives them;
    ``threads``: :func:`conversation_groups`' conversations and turns; ``ids``: keep the
    pairs' record ids)."""
    base_pos, system_pos = positions

    def table(run: NamedRun, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), len(names)))
        for k, name in enumerate(names):
            out[:, k] = column(run.results, name)[rows]
        return out

    record_ids = None
    if ids:
        record_ids = ([base.results.records[int(i)].id for i in base_pos],
                      [system.results.records[int(i)].id for i in system_pos])
    groups, turns = (None, None) if threads is None else threads
    return PairedBlock(names, table(base, base_pos), table(system, system_pos), base_pos,
                       system_pos, groups, turns, None, record_ids)


def column(results: Results, name: str) -> np.ndarray:
    """Per-record values of one output name, NaN where unscored (or absent)."""
    values = (r.scores.get(name) for r in results.records)
    return np.fromiter((math.nan if v is None else v for v in values), dtype=np.float64,
                       count=len(results.records))


@dataclass
class _Keys:
    """A count of pairing keys and the first few of them, as messages show them."""

    count: int = 0
    first: list[PairKey] = field(default_factory=list)

    def add(self, keys: list[PairKey]) -> None:
        self.count += len(keys)
        self.first = heapq.nsmallest(SHOWN_IDS, [*self.first, *keys], key=label)

    def text(self) -> str:
        return some_ids(self.count, self.first)


class PairingCheck:
    """The pairing rules of a comparison, over the runs' keys met part by part (a part: the
    keys of one partition of every run, or every key of runs held whole): what each run
    repeats, what each system and the baseline lack of the other, how many pair."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self._repeated = {name: _Keys() for name in names}
        self._lacks = {pair: _Keys() for name in names[1:]
                       for pair in ((name, names[0]), (names[0], name))}
        self.paired = 0
        self._totals = dict.fromkeys(names, 0)

    def add(self, keys: list[list[PairKey]]) -> set[PairKey]:
        """Note one part's keys of every run (in :attr:`names` order): the keys all share."""
        sets = []
        for name, run_keys in zip(self.names, keys, strict=True):
            unique = set(run_keys)
            if len(unique) < len(run_keys):
                self._repeated[name].add([k for k, n in Counter(run_keys).items() if n > 1])
            self._totals[name] += len(run_keys)
            sets.append(unique)
        common = set.intersection(*sets)
        self.paired += len(common)
        base = self.names[0]
        for name, other in zip(self.names[1:], sets[1:], strict=True):
            self._lacks[(name, base)].add(list(sets[0] - other))
            self._lacks[(base, name)].add(list(other - sets[0]))
        return common

    def finish(self, intersect: bool) -> dict[str, int]:
        """The records each run lost to ``intersect``, once every part is noted; an
        :class:`InputError` for repeated ids, for ids missing from a run (without
        ``intersect``) and when no id is common to all runs."""
        for name in self.names:
            if self._repeated[name].count:
                raise InputError(f"record ids must be unique to pair records; repeated: "
                                 f"{self._repeated[name].text()}", path=name)
        problems = [f"{holder} lacks {keys.text()} (in {owner})"
                    for (holder, owner), keys in self._lacks.items() if keys.count]
        if problems and not intersect:
            raise InputError("records do not pair by id: " + "; ".join(problems)
                             + " (use --intersect to compare the ids common to all runs)")
        if not self.paired:
            raise InputError("no record id is common to all runs: nothing to compare")
        return {name: total - self.paired for name, total in self._totals.items()}


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


def some_ids(count: int, first: list[PairKey]) -> str:
    """``count`` ids as messages show them: how many, and the ``first`` few."""
    shown = ", ".join(label(i) for i in first)
    more = f" and {count - len(first)} more" if count > len(first) else ""
    return f"{count} id{'s' if count != 1 else ''} ({shown}{more})"
