"""The report's data model: each run as the report shows it, and the numbers the page reads.

:func:`prepare_runs` turns the ``(name, Results)`` pairs given to
:func:`~rageval.report.html.page.build_report` into :class:`ReportRun` objects (name, color,
results, records and results by id); the rest picks the headline metrics, collects a metric's
scores and reads the fields of a comparison row of :mod:`rageval.compare.runs.compare` (its CI,
its signature mismatch). No HTML and no matplotlib here: the sections and the plots both build
on this.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rageval.core.errors import InputError, UsageError
from rageval.core.labels import current_labels, read_labels_and_digest
from rageval.core.records import Record
from rageval.core.records.label_file import join_metric
from rageval.core.results import RecordResult, Results
from rageval.core.results.counts import unit_values
from rageval.core.scale import Scale

# One color per run, used in plots and next to run names in tables (matplotlib's tab10).
_RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_MAX_BAR_SPAN = 20  # integer scores spanning at most this many values are drawn as bar counts


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per run
class ReportRun:
    """One run as the report shows it."""

    name: str
    results: Results
    color: str
    records: Mapping[str, Record] | None  # the scored inputs by id, when they could be read
    by_id: Mapping[str, RecordResult]
    # The human labels of a labels file (--human-labels): metric -> id -> annotator -> label.
    labels: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
    # Why the labels shown are not those the run was calibrated by (missing, changed, ...).
    labels_note: str | None = None


def prepare_runs(
    runs: Sequence[tuple[str, Results]], records_by_run: Mapping[str, list[Record]]
) -> list[ReportRun]:
    """The runs in the given order, each with its color and its records and results by id;
    a usage error for no runs, repeated names or records of a run not given."""
    if not runs:
        raise UsageError("a report needs at least one run")
    names = [name for name, _ in runs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise UsageError(f"run names must be distinct; repeated: {', '.join(duplicates)}")
    unknown = sorted(set(records_by_run) - set(names))
    if unknown:
        raise UsageError(f"records given for unknown runs: {', '.join(unknown)}")
    prepared = []
    for index, (name, results) in enumerate(runs):
        records = records_by_run.get(name)
        found = human_labels_of(results)
        prepared.append(ReportRun(
            name=name,
            results=results,
            color=_RUN_COLORS[index % len(_RUN_COLORS)],
            records=None if records is None else {record.id: record for record in records},
            by_id={result.id: result for result in results.records},
            labels=None if found is None else found.labels,
            labels_note=None if found is None else found.note,
        ))
    return prepared


@dataclass(frozen=True)
class RunLabels:
    """The labels file a run was calibrated by, as the report finds it now: its labels
    (metric -> id -> annotator -> label; None when it cannot be read) and, when they are not
    what the run was calibrated by, why (``note``: missing, unreadable, changed)."""

    labels: dict[str, dict[str, dict[str, float]]] | None
    note: str | None = None


def human_labels_of(results: Results) -> RunLabels | None:
    """The labels of the labels file a run was calibrated by (named in its manifest), each
    joined to the run's metric, undos applied; None for a run without one. A file that is
    missing or no longer reads gives no labels and a note saying so; one whose sha256 differs
    from the manifest's (where the manifest holds one) gives its labels and a note that they
    changed since the run. A relative path is read from the current directory, as the
    manifest gives it: the note says so rather than guess another folder."""
    about = results.manifest.get("human_labels")
    if not isinstance(about, Mapping) or not isinstance(about.get("file"), str):
        return None
    path = about["file"]
    named = f"the labels file {path} named by the run's manifest"
    if not os.path.isabs(path):
        named += f" (a relative path, read from {os.getcwd()})"
    if not os.path.isfile(path):
        return RunLabels(None, f"{named} was not found: the human labels are not shown")
    try:
        lines, now = read_labels_and_digest(path)
    except InputError as error:
        return RunLabels(None, f"{named} no longer reads: {error}; the human labels are "
                               "not shown")
    standing, _ = current_labels(lines)
    names = list(about.get("metrics") or ())
    out: dict[str, dict[str, dict[str, float]]] = {}
    for line in standing:
        metric = join_metric(line.metric, names)
        if metric is not None and line.label is not None:
            out.setdefault(metric, {}).setdefault(line.id, {})[line.annotator] = line.label
    digest = about.get("sha256")
    if isinstance(digest, str) and now != digest:
        return RunLabels(out, f"{named} changed since the run: the human labels shown are the "
                              "file's now, not those the calibrated figures were computed from")
    return RunLabels(out)


def headline_names(results: Results) -> list[str]:
    """The metrics the user asked for (the manifest lists them); components such as
    ``rouge1.precision`` only when nothing says which names are headlines."""
    requested = results.manifest.get("metrics")
    if isinstance(requested, list):
        names = [name for name in requested if isinstance(name, str) and name in results.summary]
        if names:
            return names
    return [name for name, item in results.summary.items()
            if item.in_table and name.rpartition(".")[0] not in results.summary]


def headline_metrics(runs: list[ReportRun]) -> list[str]:
    """Headline metrics of all runs, in order of first appearance."""
    return list(dict.fromkeys(name for run in runs for name in headline_names(run.results)))


def as_finite(value: Any) -> float | None:
    """The value as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def scored_values(run: ReportRun, metric: str) -> np.ndarray:
    """The values the run's summary averages for the metric, unscored ones left out: each
    record's, in record order; in a run of conversations, each conversation's (the mean of
    its scored turns), so that a plot counts what the summary's ``n`` counts."""
    if isinstance(run.results.manifest.get("conversations"), Mapping):
        means = unit_values(run.results.records, metric).values()
        return np.array([mean for mean, _ in means], dtype=float)
    values = [as_finite(result.scores.get(metric)) for result in run.results.records]
    return np.array([v for v in values if v is not None], dtype=float)


def value_span(scale: Scale | None, values: Sequence[float]) -> tuple[float, float] | None:
    """The span an axis or a shading gives the values: the metric's scale where it is bounded
    (widened to any value outside it), else None (the values' own span)."""
    if scale is None or scale[0] is None or scale[1] is None:
        return None
    low, high = scale[0], scale[1]
    return (min([low, *values]), max([high, *values]))


def drawn_as_bars(series: list[tuple[ReportRun, np.ndarray]]) -> bool:
    """Counts per value suit scores on a small integer scale (a 1-5 rubric, 0/1 success)."""
    values = [v for _, scores in series for v in scores]
    if not values or not all(float(v).is_integer() for v in values):
        return False
    return max(values) - min(values) <= _MAX_BAR_SPAN


def ci_excludes_zero(row: Mapping[str, Any]) -> int:
    """+1 or -1 when the 95% CI lies wholly above or below zero, else 0."""
    ci = row.get("ci95")
    if not isinstance(ci, Sequence) or len(ci) != 2:
        return 0
    low, high = as_finite(ci[0]), as_finite(ci[1])
    if low is None or high is None:
        return 0
    return 1 if low > 0 else -1 if high < 0 else 0


def ci_pair(value: Any) -> tuple[float | None, float | None] | None:
    """A row's ``ci95`` as (low, high), either None when not finite; None when not a pair."""
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        return None
    return as_finite(value[0]), as_finite(value[1])


def mismatch_text(value: Any) -> str | None:
    """A description of a signature mismatch, or None when the signatures agree."""
    if not value:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return "the runs' signatures for this metric differ: the delta may not be meaningful"
