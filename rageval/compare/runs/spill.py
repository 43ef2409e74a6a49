"""The records of a run, spilled to disk in partitions, for a comparison streamed from there.

A comparison of runs too long to hold reads each run's ``records.jsonl`` once and writes what
it compares of each record (its pairing key, its values, the sufficient statistics of its
corpus metrics) to one of ``parts`` files, chosen by a hash of the record's unit: its
conversation, or the record itself. The same unit lands in the same partition in every run,
so the runs are then joined one partition at a time (:mod:`~rageval.compare.runs.streamed`):
a comparison holds one partition of each run, never a whole run.
"""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from rageval.compare.runs.corpus import corpus_matrix, corpus_metric, record_details
from rageval.compare.runs.pairing import NamedRun, PairKey, pair_key
from rageval.core.metric import Metric
from rageval.core.results import RecordResult
from rageval.core.results.run_records import RecordsFile
from rageval.stats.poisson import unit_keys

__all__ = ["PARTITION_BYTES", "Part", "RunSpill", "partition_count"]

#: A partition holds about this much of a run's ``records.jsonl``: a few tens of MB once
#: parsed, whatever the run's length.
PARTITION_BYTES = 64 << 20
# Records parsed, hashed and routed to their partitions together.
_STAGED = 1 << 14


def partition_count(runs: list[NamedRun]) -> int:
    """How many partitions the runs are spilled to: enough that the largest run's partitions
    each hold about :data:`PARTITION_BYTES` of its file (one for runs held in memory), but
    no more than half the files this process may hold open (a run's partitions are all open
    while it is spilled): past that, about 32 GB of records on most systems, they grow."""
    sizes = [os.path.getsize(r.results.records.path) for r in runs
             if isinstance(r.results.records, RecordsFile)]
    wanted = max(1, *(math.ceil(size / PARTITION_BYTES) for size in sizes))
    return min(wanted, max(1, _open_files_limit() // 2))


def _open_files_limit() -> int:
    try:
        import resource
    except ImportError:  # not a POSIX system: the C runtime's usual limit
        return 512
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 512 if soft == resource.RLIM_INFINITY else soft


@dataclass
class Part:
    """One partition of one run, read back: its records in file order."""

    keys: list[PairKey] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)  # each record's unit (see unit_of)
    unit_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    turns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # 0: no turn
    values: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # NaN: unscored
    corpus: dict[str, np.ndarray] = field(default_factory=dict)  # statistics, 0 if unscored


def unit_of(record: RecordResult) -> str:
    """What a record is resampled and relabelled with: its conversation, or itself (a
    conversation's id and a record's never meet: the record's is marked)."""
    return record.conversation if record.conversation is not None else "\0" + record.id


class RunSpill:
    """One run's records spilled to ``parts`` files under ``directory`` (:meth:`fill`), read
    back one partition at a time (:meth:`part`). ``names`` are the outputs spilled, in column
    order; ``corpus`` those whose corpus statistics are spilled too."""

    def __init__(self, run: NamedRun, names: list[str], corpus: list[str], parts: int,
                 directory: Path) -> None:
        self.run, self.names, self.parts = run, names, parts
        self.corpus: dict[str, Metric] = {name: corpus_metric(name) for name in corpus}
        directory.mkdir()
        self.paths = [directory / f"{i}.part" for i in range(parts)]
        self.in_conversations = False  # whether any record is a conversation's
        self.widths = dict.fromkeys(self.corpus, 0)  # each corpus metric's statistics

    def fill(self) -> None:
        """Read the run's records once and write each to its partition."""
        handles = [path.open("wb") for path in self.paths]
        try:
            for staged in _batches(iter(self.run.results.records)):
                self._write(staged, handles)
        finally:
            for handle in handles:
                handle.close()

    def part(self, index: int) -> Part:
        """Partition ``index`` of the run, read back whole."""
        chunks = []
        with self.paths[index].open("rb") as handle:
            while True:
                try:
                    chunks.append(pickle.load(handle))
                except EOFError:
                    break
        if not chunks:
            return Part(values=np.zeros((0, len(self.names))),
                        corpus={n: np.zeros((0, w), np.int64) for n, w in self.widths.items()})
        return Part([k for c in chunks for k in c.keys], [i for c in chunks for i in c.ids],
                    [u for c in chunks for u in c.units],
                    np.concatenate([c.unit_keys for c in chunks]),
                    np.concatenate([c.turns for c in chunks]),
                    np.concatenate([c.values for c in chunks]),
                    {n: _stacked([c.corpus[n] for c in chunks], w)
                     for n, w in self.widths.items()})

    def _write(self, records: list[RecordResult], handles: list[BinaryIO]) -> None:
        staged = self._staged(records)
        where = staged.unit_keys % np.uint64(self.parts)
        for index in np.unique(where).tolist():
            rows = np.flatnonzero(where == index)
            chunk = Part([staged.keys[i] for i in rows], [staged.ids[i] for i in rows],
                         [staged.units[i] for i in rows],
                         staged.unit_keys[rows], staged.turns[rows], staged.values[rows],
                         {n: stats[rows] for n, stats in staged.corpus.items()})
            pickle.dump(chunk, handles[index], protocol=pickle.HIGHEST_PROTOCOL)

    def _staged(self, records: list[RecordResult]) -> Part:
        units = [unit_of(r) for r in records]
        self.in_conversations |= any(r.conversation is not None for r in records)
        nan = math.nan
        values = np.array([[nan if (v := r.scores.get(n)) is None else v for n in self.names]
                           for r in records], dtype=np.float64).reshape(len(records), -1)
        corpus = {name: self._statistics(records, values[:, self.names.index(name)], name,
                                         metric)
                  for name, metric in self.corpus.items()}
        turns = np.fromiter((r.turn or 0 for r in records), dtype=np.int64, count=len(records))
        return Part([pair_key(r) for r in records], [r.id for r in records], units,
                    unit_keys(units), turns, values, corpus)

    def _statistics(self, records: list[RecordResult], values: np.ndarray, name: str,
                    metric: Metric) -> np.ndarray:
        """Each scored record's corpus statistics (``details[name]``), zeros elsewhere."""
        scored = ~np.isnan(values)
        details = [record_details(r, name, self.run.name) if keep else None
                   for r, keep in zip(records, scored.tolist(), strict=True)]
        out = corpus_matrix(metric, details)
        self.widths[name] = max(self.widths[name], out.shape[1])
        return out


def _stacked(blocks: list[np.ndarray], width: int) -> np.ndarray:
    """Statistics blocks one under the other; a block that scored no record has no columns."""
    return np.concatenate([b if b.shape[1] == width else np.zeros((len(b), width), np.int64)
                           for b in blocks])


def _batches(records: Iterator[RecordResult]) -> Iterator[list[RecordResult]]:
    batch: list[RecordResult] = []
    for record in records:
        batch.append(record)
        if len(batch) == _STAGED:
            yield batch
            batch = []
    if batch:
        yield batch
