"""``rageval compare`` streamed from disk, for runs too long to hold.

Each run's records are read once and spilled to partitions by a hash of their unit
(:mod:`~rageval.compare.runs.spill`). A first pass over the partitions pairs the records by
id with the pairing of every comparison (:class:`~rageval.compare.runs.pairing.PairingCheck`:
repeated ids, ids missing from a run, ``intersect``, and their messages); a second joins the
runs partition by partition into blocks of pairs
(:class:`~rageval.compare.runs.pairing.PairedBlock`, as a comparison held in memory reads its
one block) and adds them to running sums with Poisson weights
(:mod:`~rageval.compare.runs.sums`, :class:`~rageval.compare.runs.turns.TurnSums`,
:class:`~rageval.compare.runs.calibrated.CalibratedSums`). The comparison holds one partition
of each run and the sums, whatever the runs' length.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rageval.compare.runs.calibrated import CalibratedSums, RunLabels, calibrated_metrics
from rageval.compare.runs.pairing import NamedRun, PairedBlock, PairingCheck
from rageval.compare.runs.spill import Part, RunSpill, partition_count
from rageval.compare.runs.statistics import LEVEL, Draws, adjust, missing_outputs, row_head
from rageval.compare.runs.sums import PairedSums, PastFloats
from rageval.compare.runs.turns import TurnSums
from rageval.core.errors import InputError

__all__ = ["Streamed", "compare_streamed"]

# Units (records, or conversations) added to the sums at once: their working arrays stay a
# few MB, whatever a partition holds.
_UNITS = 4096


@dataclass
class Streamed:
    """What a streamed comparison found: its rows, per-turn rows, records each run lost to
    ``intersect``, the paired count, the outputs only one side has, and whether its units
    were conversations."""

    rows: list[dict[str, Any]]
    per_turn: list[dict[str, Any]]
    dropped: dict[str, int]
    paired: int
    not_compared: dict[str, dict[str, list[str]]]
    conversations: bool


@dataclass
class _Accumulated:
    """Everything one system's comparison adds its pairs to: the outputs compared, their
    running sums, the per-turn sums (runs of conversations) and the calibrated differences
    (``--human``)."""

    names: list[str]
    sums: PairedSums
    turns: TurnSums | None = None
    calibrated: CalibratedSums | None = None


def compare_streamed(base: NamedRun, systems: list[NamedRun], *, intersect: bool,
                     draws: Draws, labels: dict[str, RunLabels] | None = None) -> Streamed:
    """Compare every system with the baseline, streaming their records (see the module);
    ``labels``: each run's human labels, for calibrated differences."""
    runs = [base, *systems]
    shared = {s.name: [n for n in base.results.summary if n in s.results.summary]
              for s in systems}
    spilled = {run.name: _spilled_names(run, base, systems, shared) for run in runs}
    parts = partition_count(runs)
    with tempfile.TemporaryDirectory(prefix="rageval-compare-") as directory:
        spills = [RunSpill(run, *spilled[run.name], parts, Path(directory) / str(i))
                  for i, run in enumerate(runs)]
        for spill in spills:
            spill.fill()
        paired, dropped = _pair(spills, intersect)
        found = {s.name: _accumulated(base, s, (spills[0], spill), shared[s.name], labels,
                                      draws)
                 for s, spill in zip(systems, spills[1:], strict=True)}
        for index in range(parts):
            loaded = [spill.part(index) for spill in spills]
            for system, spill, part in zip(systems, spills[1:], loaded[1:], strict=True):
                try:
                    _add(found[system.name], loaded[0], part, (spills[0], spill))
                except PastFloats as error:
                    raise _past_floats(error, base, system) from None
    rows, not_compared, per_turn = [], {}, []
    for system in systems:
        rows += _rows(base, system, found[system.name])
        missing = missing_outputs(base, system)
        if missing["baseline_only"] or missing["system_only"]:
            not_compared[system.name] = missing
        turns = found[system.name].turns
        per_turn += [] if turns is None else turns.rows(base, system)
    return Streamed(rows, per_turn, dropped, paired, not_compared, spills[0].in_conversations)


def _accumulated(base: NamedRun, system: NamedRun, spills: tuple[RunSpill, RunSpill],
                 names: list[str], labels: dict[str, RunLabels] | None,
                 draws: Draws) -> _Accumulated:
    corpus = {n: spills[0].corpus[n] for n in names
              if n in spills[0].corpus and n in spills[1].corpus}
    widths = {n: max(spills[0].widths[n], spills[1].widths[n]) for n in corpus}
    found = _Accumulated(names, PairedSums(names, corpus, widths, draws, LEVEL))
    if spills[0].in_conversations:
        found.turns = TurnSums(_means(base, system, names), draws)
    if labels is not None:
        heads = [{"metric": n, "headline": base.results.summary[n].in_table} for n in names]
        found.calibrated = CalibratedSums(calibrated_metrics(heads), labels[base.name],
                                          labels[system.name])
    return found


def _spilled_names(run: NamedRun, base: NamedRun, systems: list[NamedRun],
                   shared: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """The outputs of ``run`` some comparison reads, and those read as corpus figures."""
    wanted = {n for names in shared.values() for n in names}
    names = [n for n in run.results.summary if n in wanted]
    corpus = [n for n in names if _corpus(n, base, [s for s in systems if n in shared[s.name]])]
    return names, corpus


def _corpus(name: str, base: NamedRun, systems: list[NamedRun]) -> bool:
    """Whether ``name`` is compared as a corpus figure with some system (both sides say so)."""
    return base.results.summary[name].aggregate == "corpus" and any(
        s.results.summary[name].aggregate == "corpus" for s in systems)


def _pair(spills: list[RunSpill], intersect: bool) -> tuple[int, dict[str, int]]:
    """Pair every partition's keys across the runs (:class:`PairingCheck`: the rules and
    messages of every comparison): the paired count and what each run lost to
    ``intersect``."""
    check = PairingCheck([spill.run.name for spill in spills])
    for index in range(spills[0].parts):
        check.add([spill.part(index).keys for spill in spills])
    dropped = check.finish(intersect)
    return check.paired, dropped


def _means(base: NamedRun, system: NamedRun, names: list[str]) -> list[str]:
    """The outputs compared turn by turn: those both runs average."""
    return [n for n in names if base.results.summary[n].aggregate == "mean"
            and system.results.summary[n].aggregate == "mean"]


def _add(found: _Accumulated, base: Part, system: Part,
         spills: tuple[RunSpill, RunSpill]) -> None:
    """Add one partition's pairs of one system to its sums, a few thousand units at a time
    (ids in every run: the pairing pass has checked them)."""
    where = {key: i for i, key in enumerate(system.keys)}
    rows = [(i, where[key]) for i, key in enumerate(base.keys) if key in where]
    if not rows:
        return
    b_rows, s_rows = (np.array(r, dtype=np.int64) for r in zip(*rows, strict=True))
    conversations = spills[0].in_conversations
    if conversations:
        numbers: dict[str, int] = {}
        units = np.fromiter((numbers.setdefault(base.units[i], len(numbers)) for i in b_rows),
                            dtype=np.int64, count=len(b_rows))
    else:
        units = np.arange(len(b_rows))
    names, sums = found.names, found.sums
    base_columns = [spills[0].names.index(n) for n in names]
    system_columns = [spills[1].names.index(n) for n in names]
    for first in range(0, int(units[-1]) + 1, _UNITS):
        chunk = np.flatnonzero((units >= first) & (units < first + _UNITS))
        br, sr = b_rows[chunk], s_rows[chunk]
        block = PairedBlock(names, base.values[br][:, base_columns],
                            system.values[sr][:, system_columns], br, sr)
        if conversations:
            block.groups = units[chunk] - first
            block.turns = base.turns[br]
            _, firsts = np.unique(block.groups, return_index=True)
            block.unit_keys = base.unit_keys[br][firsts]
        else:
            block.unit_keys = base.unit_keys[br]
        if found.calibrated is not None:
            block.ids = ([base.ids[i] for i in br], [system.ids[i] for i in sr])
        stats = {n: (_widened(base.corpus[n][br], sums.widths[n]),
                     _widened(system.corpus[n][sr], sums.widths[n])) for n in sums.corpus}
        sums.add(block, stats)
        if found.turns is not None:
            found.turns.add(block)
        if found.calibrated is not None:
            found.calibrated.add(block)


def _widened(stats: np.ndarray, width: int) -> np.ndarray:
    """Statistics with ``width`` columns (a run that scored none in a partition has none)."""
    if stats.shape[1] == width:
        return stats
    return np.zeros((len(stats), width), dtype=np.int64)


def _rows(base: NamedRun, system: NamedRun, found: _Accumulated) -> list[dict[str, Any]]:
    try:
        measured = found.sums.statistics()
    except PastFloats as error:
        raise _past_floats(error, base, system) from None
    rows = []
    for name in found.names:
        row = row_head(name, base, system, found.sums.tallies[name], name in found.sums.corpus)
        row.update(measured.get(name, {}))
        if found.calibrated is not None and name in found.calibrated.names:
            row["calibrated"] = found.calibrated.entry(name)
        rows.append(row)
    adjust(rows)
    return rows


def _past_floats(error: PastFloats, base: NamedRun, system: NamedRun) -> InputError:
    """The error of the output ``error`` names, naming the runs and the file."""
    return InputError(
        f"the values of {base.name} and {system.name} differ or sum past the largest number "
        "a float holds (about 1.8e308), so their means and differences cannot be computed; "
        "rescale the values", path=system.directory or system.name, field=error.name)
