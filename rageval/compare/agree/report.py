"""What ``rageval agree`` reports, and the rows of one metric.

An :class:`AgreementReport` holds one :class:`AgreementRow` per pair of raters of each compared
judge metric. :func:`metric_rows` builds a metric's rows (each run against the humans, then
run A against run B) on the metric's grade scale: its rubric's, widened with a note when a judge
value falls outside it; a human label off that scale is an error (a labels file's names its
line).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rageval.compare.agree.inputs import HUMAN, JUDGE_PREFIX, HumanLabels, JudgedRun, Rater
from rageval.core.errors import InputError, RagevalError
from rageval.core.names import MetricName
from rageval.core.registry import create
from rageval.stats.agreement import Agreement, agreement, round_half_up

__all__ = ["AgreementReport", "AgreementRow", "metric_rows"]

_UNSCORED = "unscored in {}"
_NO_LABEL = "no human label"


@dataclass(frozen=True)
class AgreementRow:
    """One compared pair: ``metric_a`` as graded by ``rater_a`` against ``metric_b`` by
    ``rater_b`` (for humans, ``metric_b`` is the label's field path, e.g. ``human.faithfulness``).

    ``total`` records were considered; ``left_out`` counts those not compared, each under the
    first reason that applies, so that ``stats.n + sum(left_out.values()) == total``.
    """

    rater_a: str
    rater_b: str
    metric_a: str
    metric_b: str
    stats: Agreement
    total: int
    left_out: Mapping[str, int]
    signature_a: str | None = None
    signature_b: str | None = None

    @property
    def metric(self) -> str:
        if self.rater_b == HUMAN or self.metric_a == self.metric_b:
            return self.metric_a
        return f"{self.metric_a} = {self.metric_b}"

    @property
    def title(self) -> str:
        return f"{self.metric} ({self.rater_a} vs {self.rater_b})"

    def to_json(self) -> dict[str, Any]:
        return {
            "rater_a": self.rater_a,
            "rater_b": self.rater_b,
            "metric_a": self.metric_a,
            "metric_b": self.metric_b,
            "signature_a": self.signature_a,
            "signature_b": self.signature_b,
            "total": self.total,
            "left_out": dict(self.left_out),
            **self.stats.to_json(),
        }


@dataclass(frozen=True)
class AgreementReport:
    """Every comparison of one ``rageval agree`` call, with the raters and record counts."""

    raters: tuple[Rater, ...]
    rows: tuple[AgreementRow, ...]
    records: Mapping[str, int]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "raters": [r.to_json() for r in self.raters],
            "records": dict(self.records),
            "rows": [row.to_json() for row in self.rows],
            "notes": list(self.notes),
        }


def metric_rows(run_a: JudgedRun, run_b: JudgedRun | None, labels: HumanLabels | None,
                name_a: str, name_b: str, ids: Sequence[str],
                notes: list[str]) -> list[AgreementRow]:
    """Rows for one metric pair: each run against the humans, then A against B."""
    columns: dict[str, np.ndarray] = {"A": np.array([run_a.value(i, name_a) for i in ids])}
    metrics = {"A": name_a}
    if run_b is not None:
        columns["B"] = np.array([run_b.value(i, name_b) for i in ids])
        metrics["B"] = name_b
    wheres: list[str] = []
    if labels is not None:
        found = [labels.lookup(i, (name_a, name_b)) for i in ids]
        wheres = [where for _, where in found]
        fields = [where for value, where in found if not math.isnan(value)]
        if fields:
            columns[HUMAN] = np.array([value for value, _ in found])
            # Records may use different keys for one criterion: name each, in order of use.
            metrics[HUMAN] = ", ".join(dict.fromkeys(fields))
        else:
            where = (f"in {labels.path}" if labels.of_file
                     else f"in field '{labels.field}'")
            notes.append(f"{_pair_name(name_a, name_b)}: no human label {where}; not compared "
                         "with the humans")
    scale = _pair_scale(run_a, run_b, name_a, name_b, columns, notes)
    if labels is not None and labels.lines is not None:
        for name in dict.fromkeys((name_a, name_b)):
            labels.lines.check_scale(name, scale)
    elif labels is not None and HUMAN in columns:
        _check_human_scale(columns[HUMAN], ids, wheres, scale, labels.path, name_a)
    order = [("A", HUMAN), ("B", HUMAN), ("A", "B")]
    rows = []
    for first, second in order:
        if first in columns and second in columns:
            rows.append(_row(first, second, columns, metrics, scale, run_a, run_b))
    return rows


def _pair_name(name_a: str, name_b: str) -> str:
    return name_a if name_a == name_b else f"{name_a} = {name_b}"


def _row(first: str, second: str, columns: Mapping[str, np.ndarray],
         metrics: Mapping[str, str], scale: tuple[int, int], run_a: JudgedRun,
         run_b: JudgedRun | None) -> AgreementRow:
    x, y = columns[first], columns[second]
    missing_x, missing_y = np.isnan(x), np.isnan(y)
    left_out: dict[str, int] = {}
    for side, missing in ((first, missing_x), (second, missing_y & ~missing_x)):
        count = int(np.count_nonzero(missing))
        if count:
            left_out[_NO_LABEL if side == HUMAN else _UNSCORED.format(side)] = count
    keep = ~(missing_x | missing_y)
    runs = {"A": run_a, "B": run_b}

    def signature(side: str) -> str | None:
        run = runs.get(side)  # None for the humans
        return None if run is None else run.signature(metrics[side])

    return AgreementRow(first, second, metrics[first], metrics[second],
                        agreement(x[keep], y[keep], scale), int(x.size), left_out,
                        signature(first), signature(second))


def _pair_scale(run_a: JudgedRun, run_b: JudgedRun | None, name_a: str, name_b: str,
                columns: Mapping[str, np.ndarray], notes: list[str]) -> tuple[int, int]:
    """The grade scale of a metric pair: the rubrics' (their union if the two differ), else
    the observed range; widened, with a note, if a judge value falls outside it."""
    scales = {_rubric_scale(run_a, name_a)}
    if run_b is not None:
        scales.add(_rubric_scale(run_b, name_b))
    known = [s for s in scales if s is not None]
    judged = np.concatenate([columns[k] for k in columns if k != HUMAN])
    judged = round_half_up(judged[~np.isnan(judged)])
    title = _pair_name(name_a, name_b)
    if not known:
        every = np.concatenate(list(columns.values()))
        every = round_half_up(every[~np.isnan(every)])
        scale = (int(every.min()), int(every.max())) if every.size else (0, 0)
        notes.append(f"{title}: rubric not found, so the scale is the observed range "
                     f"{scale[0]}-{scale[1]}")
        return scale
    lo, hi = min(s[0] for s in known), max(s[1] for s in known)
    if len(known) > 1:
        notes.append(f"{title}: the two rubrics have different scales "
                     f"({', '.join(f'{s[0]}-{s[1]}' for s in known)}); using {lo}-{hi}")
    if judged.size and (judged.min() < lo or judged.max() > hi):
        lo, hi = min(lo, int(judged.min())), max(hi, int(judged.max()))
        notes.append(f"{title}: judge scores fall outside the rubric's scale; widened to "
                     f"{lo}-{hi}")
    return lo, hi


def _rubric_scale(run: JudgedRun, name: str) -> tuple[int, int] | None:
    """The scale of the rubric behind ``judge:<target>``: from the rubric file the run's
    manifest names, else by name or path as the judge metric finds it; None if neither loads
    (a user rubric that has moved)."""
    target = name[len(JUDGE_PREFIX):].split("(", 1)[0]
    judge = run.results.manifest.get("judge") or {}
    prompts = judge.get("prompts") if isinstance(judge, Mapping) else None
    entry = prompts.get(target) if isinstance(prompts, Mapping) else None
    candidates: list[str] = []
    if isinstance(entry, Mapping) and entry.get("source"):
        candidates.append(str(entry["source"]))
    candidates.append(target)
    for candidate in candidates:
        try:
            # A MetricName, not a parsed string: a rubric path may hold any character.
            scale = create(MetricName(JUDGE_PREFIX + candidate)).score_range()
        except (RagevalError, OSError):
            continue
        if scale is not None:
            return int(scale[0]), int(scale[1])
    return None


def _check_human_scale(labels: np.ndarray, ids: Sequence[str], wheres: Sequence[str],
                       scale: tuple[int, int], path: str, metric: str) -> None:
    """A human label off the rubric's scale is a labelling mistake (or another scale):
    widening the scale to fit it would quietly change kappa, so it is an error."""
    rounded = round_half_up(labels)
    bad = np.flatnonzero(~np.isnan(labels) & ((rounded < scale[0]) | (rounded > scale[1])))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"record {ids[i]!r}: human label {labels[i]:g} is outside the scale "
                         f"{scale[0]}-{scale[1]} of {metric}", path=path, field=wheres[i])
