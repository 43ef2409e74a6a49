"""Paired differences of judge metrics calibrated by human labels (``rageval compare --human
FIELD``): prediction-powered inference on the per-record differences.

Both runs are judged by the same judge on the same records, and some records carry a human
label for each run's answer (a field of each run's records file, read as ``rageval agree
--human`` reads it). For a judge metric, a paired record's judge difference is ``f = system -
baseline``; where both answers are labelled, its human difference is ``y = label(system) -
label(baseline)``. PPI (:func:`rageval.stats.ppi.ppi_mean`, weight 1) then estimates the mean
human difference from the labelled pairs and the judge differences of all pairs, with its 95%
interval; the labelled pairs alone give the human-only difference for contrast. An interval
that holds 0 does not establish a difference, and the row says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rageval.compare.agree.inputs import JUDGE_PREFIX, PAIRWISE_PREFIX
from rageval.compare.runs.pairing import NamedRun
from rageval.compare.runs.statistics import column
from rageval.core.calibration import MIN_LABELLED
from rageval.core.errors import UsageError
from rageval.core.records import load_records
from rageval.core.records.human import Label, label_keys, parse_label
from rageval.stats.ppi import classical_mean, ppi_mean

__all__ = ["RunLabels", "add_calibrated", "calibrated_delta", "calibrated_metrics"]


class RunLabels:
    """The human labels of one run's records (``field`` of the records file it scored)."""

    def __init__(self, run: NamedRun, field: str) -> None:
        source = run.results.records_info.source
        if source is None or source == "<memory>" or not Path(source).is_file():
            raise UsageError(f"--human {field}: run {run.name} scored records that cannot be "
                             f"read again ({source or 'unknown'}): calibrated differences need "
                             "the records files the runs scored")
        self.field, self.source = field, source
        records = load_records(source)
        self.labels: dict[str, Label] = {
            r.id: parse_label(r.extra.get(field), r.id, field, source) for r in records}
        if not any(label is not None for label in self.labels.values()):
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


def add_calibrated(rows: list[dict[str, Any]], base: NamedRun, system: NamedRun,
                   base_pos: np.ndarray, system_pos: np.ndarray, base_labels: RunLabels,
                   system_labels: RunLabels) -> None:
    """Give each rubric judge row of one comparison its ``calibrated`` entry."""
    names = calibrated_metrics(rows)
    base_ids = [base.results.records[i].id for i in base_pos]
    system_ids = [system.results.records[i].id for i in system_pos]
    for row in rows:
        if row["metric"] not in names:
            continue
        several = len(names) > 1
        row["calibrated"] = calibrated_delta(
            column(base.results, row["metric"])[base_pos],
            column(system.results, row["metric"])[system_pos],
            base_labels.column(base_ids, row["metric"], several),
            system_labels.column(system_ids, row["metric"], several))


def calibrated_delta(base: np.ndarray, system: np.ndarray,
                     base_labels: np.ndarray, system_labels: np.ndarray) -> dict[str, Any]:
    """The row entry for one metric: the calibrated difference and its interval, the
    human-only difference, the pair counts, or why there is none."""
    judged = ~(np.isnan(base) | np.isnan(system))
    labelled = judged & ~(np.isnan(base_labels) | np.isnan(system_labels))
    unlabelled = judged & ~labelled
    n, big_n = int(labelled.sum()), int(unlabelled.sum())
    out: dict[str, Any] = {"labelled": n, "unlabelled": big_n}
    if n < MIN_LABELLED:
        out["refused"] = (f"{n} pairs carry a human label for both answers; a calibrated "
                          f"difference needs at least {MIN_LABELLED}")
        return out
    y = system_labels[labelled] - base_labels[labelled]
    human_mean, human_ci = classical_mean(y)
    out["human"] = {"delta": human_mean, "ci95": list(human_ci)}
    if big_n == 0:
        out["refused"] = "every pair carries human labels: their difference is the estimate"
        return out
    f = system - base
    estimate = ppi_mean(y, f[labelled], f[unlabelled], tuned=False)
    low, high = estimate.ci
    out.update({"method": "ppi", "delta": estimate.mean, "ci95": [low, high],
                "crosses_zero": bool(low <= 0 <= high)})
    return out


def calibrated_metrics(rows: list[dict[str, Any]]) -> list[str]:
    """The rubric judge metrics among a comparison's headline rows: those human labels
    calibrate (pairwise verdicts and claim-level shares are not labelled on their scale)."""
    return [r["metric"] for r in rows if r["headline"] and r["metric"].startswith(JUDGE_PREFIX)
            and not r["metric"].startswith(PAIRWISE_PREFIX)]
