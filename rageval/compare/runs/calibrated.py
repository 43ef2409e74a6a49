"""Paired differences of judge metrics calibrated by human labels (``rageval compare --human
FIELD``): prediction-powered inference on the per-record differences.

Both runs are judged by the same judge on the same records, and some records carry a human
label for each run's answer (a field of each run's records file, read as ``rageval agree
--human`` reads it). For a judge metric, a paired record's judge difference is ``f = system -
baseline``; where both answers are labelled, its human difference is ``y = label(system) -
label(baseline)``. PPI (:func:`rageval.stats.calibration.ppi_mean`, weight 1) then estimates
the mean human difference from the labelled pairs and the judge differences of all pairs, with
its 95% interval; the labelled pairs alone give the human-only difference for contrast. An
interval that holds 0 does not establish a difference, and the row says so. The arithmetic is
:mod:`rageval.stats.calibration`'s; this module reads the labels and gathers the pairs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rageval.compare.agree.inputs import JUDGE_PREFIX, PAIRWISE_PREFIX
from rageval.compare.runs.pairing import NamedRun, PairedBlock
from rageval.core.errors import UsageError
from rageval.core.records import iter_records
from rageval.core.records.human import Label, label_keys, parse_label
from rageval.stats.calibration import (
    PPIEstimate,
    calibrated_difference,
    ppi_mean,
    ppi_mean_moments,
)
from rageval.stats.exact import ExactSums

__all__ = ["CalibratedSums", "RunLabels", "add_calibrated", "calibrated_delta",
           "calibrated_metrics"]


class RunLabels:
    """The human labels of one run's records (``field`` of the records file it scored)."""

    def __init__(self, run: NamedRun, field: str) -> None:
        source = run.results.records_info.source
        if source is None or source == "<memory>" or not Path(source).is_file():
            raise UsageError(f"--human {field}: run {run.name} scored records that cannot be "
                             f"read again ({source or 'unknown'}): calibrated differences need "
                             "the records files the runs scored")
        self.field, self.source = field, source
        # Read as a stream and only the labelled records kept: a few among millions.
        self.labels: dict[str, Label] = {}
        for record in iter_records(source):
            label = parse_label(record.extra.get(field), record.id, field, source)
            if label is not None:
                self.labels[record.id] = label
        if not self.labels:
            raise UsageError(f"--human {field}: no record of {source} (run {run.name}) has a "
                             f"field '{field}'")

    def column(self, ids: list[str], metric: str, several: bool) -> np.ndarray:
        """The labels of ``metric`` for the records ``ids``, NaN where there is none
        (``several``: more than one judge metric is compared, so a label must name its
        metric)."""
        keys = label_keys([metric])
        out = np.full(len(ids), np.nan)
        for i, record_id in enumerate(ids):
            label = self.labels.get(record_id)
            if isinstance(label, dict):
                label = next((label[k] for k in keys if label.get(k) is not None), None)
            elif label is not None and several:
                raise UsageError(f"--human {self.field}: record {record_id!r} of {self.source} "
                                 "holds a single number, but several judge metrics are "
                                 "compared; give an object mapping each to its label")
            if label is not None:
                out[i] = label
        return out


def add_calibrated(rows: list[dict[str, Any]], block: PairedBlock, base_labels: RunLabels,
                   system_labels: RunLabels) -> None:
    """Give each rubric judge row of one comparison held in memory (``block``: every pair,
    with its record ids) its ``calibrated`` entry."""
    names = calibrated_metrics(rows)
    assert block.ids is not None  # kept for the labels
    base_ids, system_ids = block.ids
    several = len(names) > 1
    for row in rows:
        if row["metric"] not in names:
            continue
        row["calibrated"] = calibrated_delta(
            *block.values(row["metric"]),
            base_labels.column(base_ids, row["metric"], several),
            system_labels.column(system_ids, row["metric"], several))


def calibrated_delta(base: np.ndarray, system: np.ndarray,
                     base_labels: np.ndarray, system_labels: np.ndarray) -> dict[str, Any]:
    """The row entry for one metric: the calibrated difference and its interval, the
    human-only difference, the pair counts, or why there is none."""
    judged = ~(np.isnan(base) | np.isnan(system))
    labelled = judged & ~(np.isnan(base_labels) | np.isnan(system_labels))
    unlabelled = judged & ~labelled
    y = system_labels[labelled] - base_labels[labelled]
    f = system - base
    return calibrated_difference(y, int(unlabelled.sum()),
                  lambda: ppi_mean(y, f[labelled], f[unlabelled], tuned=False))


def calibrated_metrics(rows: list[dict[str, Any]]) -> list[str]:
    """The rubric judge metrics among a comparison's headline rows: those human labels
    calibrate (pairwise verdicts and claim-level shares are not labelled on their scale)."""
    return [r["metric"] for r in rows if r["headline"] and r["metric"].startswith(JUDGE_PREFIX)
            and not r["metric"].startswith(PAIRWISE_PREFIX)]


class CalibratedSums:
    """The calibrated differences of one comparison streamed from disk: per calibrated metric,
    the labelled pairs' human and judge differences (few) and the unlabelled pairs' judge
    differences as exact running sums of ``f`` and ``f ** 2``."""

    def __init__(self, names: list[str], base: RunLabels, system: RunLabels) -> None:
        self.names, self.base, self.system = names, base, system
        self._labelled: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {n: [] for n in names}
        self._sums = ExactSums(2 * len(names))
        self._unlabelled = np.zeros(len(names), dtype=np.int64)

    def add(self, block: PairedBlock) -> None:
        """A block of pairs, with their record ids."""
        assert block.ids is not None  # kept for the labels
        for name in self.names:
            self._add(name, *block.values(name), *block.ids)

    def _add(self, name: str, base: np.ndarray, system: np.ndarray, base_ids: list[str],
             system_ids: list[str]) -> None:
        several = len(self.names) > 1
        b_labels = self.base.column(base_ids, name, several)
        s_labels = self.system.column(system_ids, name, several)
        judged = ~(np.isnan(base) | np.isnan(system))
        labelled = judged & ~(np.isnan(b_labels) | np.isnan(s_labels))
        f = system - base
        self._labelled[name].append((s_labels[labelled] - b_labels[labelled], f[labelled]))
        rest = f[judged & ~labelled]
        k = self.names.index(name)
        columns = np.zeros((len(rest), 2 * len(self.names)))
        columns[:, k], columns[:, len(self.names) + k] = rest, rest**2
        self._sums.add(columns)
        self._unlabelled[k] += len(rest)

    def entry(self, name: str) -> dict[str, Any]:
        """The row's ``calibrated`` entry (as :func:`calibrated_delta` gives it)."""
        k, width = self.names.index(name), len(self.names)
        pairs = self._labelled[name]
        y = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0)
        f = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0)
        big_n = int(self._unlabelled[k])

        def estimated() -> PPIEstimate:
            mean = self._sums.mean(k, big_n)
            variance = max(0.0, self._sums.mean(width + k, big_n) - mean**2)
            return ppi_mean_moments(y, f, mean, variance, big_n)

        return calibrated_difference(y, big_n, estimated)
