"""Judge agreement: how closely two judges, or a judge and human labels, agree.

``rageval agree DIR_A DIR_B [--human FIELD]`` answers the question a user asks before trusting a
judge prompt or model: on the records both raters scored, how often do they give the same grade,
and how well do they order the records? For every judge metric the raters share it reports:

* ``n``: records compared (records unscored on either side, or without a human label, are left
  out and counted by reason: unscored is not zero);
* exact agreement (share of equal grades) and adjacent agreement (grades at most 1 apart);
* Cohen's kappa with quadratic weights over the rubric's full scale (chance-corrected, and a
  disagreement of 1 costs far less than one of 4);
* Spearman's rho (average ranks for ties) and Kendall's tau-b (the tie-corrected tau);
* the confusion matrix over the full scale (rows the first rater, columns the second), the two
  means and their difference (first minus second).

Judge scores are integers on the rubric's scale, except when a run averaged several samples:
such means are rounded half up for the grade-based statistics (exact and adjacent agreement,
kappa, confusion matrix), and the report says how many were; the correlations use raw values.

Everything here is numpy: scipy is only a test dependency, so Spearman and Kendall tau-b are
implemented here (O(n log^2 n)) and a parity test holds them to ``scipy.stats``. Using the same
code whether or not scipy is installed keeps the numbers identical on every machine.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from rich.console import Console
from rich.table import Table

from rageval.core.errors import InputError, RagevalError, UsageError
from rageval.core.files import atomic_write
from rageval.core.results import Results

__all__ = [
    "Agreement",
    "AgreementReport",
    "AgreementRow",
    "Rater",
    "agree_runs",
    "agreement",
    "kendall_tau_b",
    "quadratic_kappa",
    "render_agreement",
    "run_agree",
    "spearman_rho",
]

JUDGE_PREFIX = "judge:"
PAIRWISE_PREFIX = "judge:pairwise"
HUMAN = "human"
_SHOWN_IDS = 5
_NO_RECORDS = "no records to compare"
_UNSCORED = "unscored in {}"
_NO_LABEL = "no human label"

# --------------------------------------------------------------------------------------------
# Statistics on two vectors of grades
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """Agreement statistics of two raters over the same ``n`` records.

    A statistic that is undefined on this data (no records, a constant rater, ...) is ``None``
    and ``undefined`` maps its name to the reason, so that an undefined kappa is never shown
    as 0 or 1. ``confusion[i][j]`` counts records the first rater graded ``scale[0] + i`` and
    the second ``scale[0] + j``. ``rounded`` counts non-integer values (means of several judge
    samples) that were rounded half up for the grade-based statistics.
    """

    n: int
    scale: tuple[int, int]
    exact: float | None
    adjacent: float | None
    kappa: float | None
    spearman: float | None
    kendall: float | None
    confusion: tuple[tuple[int, ...], ...]
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    rounded: int = 0
    undefined: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "scale": list(self.scale),
            "exact": self.exact,
            "adjacent": self.adjacent,
            "kappa_quadratic": self.kappa,
            "spearman": self.spearman,
            "kendall_tau_b": self.kendall,
            "confusion": {"rows": "first rater", "columns": "second rater",
                          "labels": list(range(self.scale[0], self.scale[1] + 1)),
                          "counts": [list(row) for row in self.confusion]},
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "mean_diff": self.mean_diff,
            "rounded": self.rounded,
            "undefined": dict(self.undefined),
        }


def agreement(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    scale: tuple[int, int],
) -> Agreement:
    """Agreement of two raters' grades on the same records, over the scale ``(lo, hi)``.

    ``a[i]`` and ``b[i]`` grade the same record; both must be finite (leave unscored records
    out first). Non-integer values are rounded half up for exact and adjacent agreement, kappa
    and the confusion matrix; the correlations and means use the raw values. A rounded value
    outside the scale is a :class:`UsageError`: silently widening the scale would change kappa.
    """
    x, y = _vectors(a, b)
    lo, hi = _check_scale(scale)
    rx, ry = _round_half_up(x), _round_half_up(y)
    for values in (rx, ry):
        outside = values[(values < lo) | (values > hi)]
        if outside.size:
            raise UsageError(f"grade {int(outside[0])} is outside the scale {lo}-{hi}")
    n = x.size
    undefined: dict[str, str] = {}
    confusion = _confusion(rx - lo, ry - lo, hi - lo + 1)
    rounded = int(np.count_nonzero(rx != x) + np.count_nonzero(ry != y))
    if n == 0:
        for name in ("exact", "adjacent", "kappa", "spearman", "kendall", "means"):
            undefined[name] = _NO_RECORDS
        return Agreement(0, (lo, hi), None, None, None, None, None, _as_tuples(confusion),
                         None, None, None, rounded, undefined)
    kappa, why = _kappa_from_confusion(confusion)
    if why is not None:
        undefined["kappa"] = why
    spearman, kendall = spearman_rho(x, y), kendall_tau_b(x, y)
    why = _correlation_undefined(x, y)
    if why is not None:
        undefined["spearman"] = undefined["kendall"] = why
    diff = np.abs(rx - ry)
    return Agreement(
        n=n, scale=(lo, hi),
        exact=float(np.mean(diff == 0)), adjacent=float(np.mean(diff <= 1)),
        kappa=kappa, spearman=spearman, kendall=kendall,
        confusion=_as_tuples(confusion),
        mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=float(x.mean() - y.mean()),
        rounded=rounded, undefined=undefined,
    )


def quadratic_kappa(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                    scale: tuple[int, int]) -> float | None:
    """Cohen's kappa with quadratic weights over every grade of ``scale`` (None if undefined).

    Same value as ``sklearn.metrics.cohen_kappa_score(a, b, weights="quadratic",
    labels=range(lo, hi + 1))`` wherever sklearn's is finite, except that two constant raters
    give None rather than NaN or 0: with no variation there is nothing to chance-correct.
    """
    return agreement(a, b, scale).kappa


def _kappa_from_confusion(confusion: np.ndarray) -> tuple[float | None, str | None]:
    """kappa = 1 - sum(w * observed) / sum(w * expected), w_ij = (i - j)^2.

    Expected counts are the outer product of the two raters' marginals over n. When only one
    rater is constant, observed equals expected and kappa is 0 (that rater's grades carry no
    information beyond chance). When both are constant, kappa is 0/0 if they gave the same
    grade and an artefact of a single cell otherwise: undefined either way.
    """
    counts = confusion.astype(np.float64)
    n = counts.sum()
    rows, cols = counts.sum(axis=1), counts.sum(axis=0)
    if np.count_nonzero(rows) <= 1 and np.count_nonzero(cols) <= 1:
        return None, "both raters gave every record the same grade"
    k = counts.shape[0]
    index = np.arange(k, dtype=np.float64)
    weights = (index[:, None] - index[None, :]) ** 2
    expected = np.outer(rows, cols) / n
    kappa = 1.0 - float((weights * counts).sum()) / float((weights * expected).sum())
    return kappa, None


def spearman_rho(a: Sequence[float] | np.ndarray,
                 b: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's rho: Pearson's correlation of average ranks (ties share their mean rank).

    None when undefined: fewer than 2 values, or a constant input. Matches
    ``scipy.stats.spearmanr(a, b).statistic`` (which is NaN there).
    """
    x, y = _vectors(a, b)
    if _correlation_undefined(x, y) is not None:
        return None
    rx, ry = _average_ranks(x), _average_ranks(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    rho = float(np.dot(dx, dy) / math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy))))
    return max(-1.0, min(1.0, rho))


def kendall_tau_b(a: Sequence[float] | np.ndarray,
                  b: Sequence[float] | np.ndarray) -> float | None:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_a) (n0 - ties_b)).

    Judge grades are heavily tied, which is why tau-b (not tau-a) is the right variant. With
    n0 = n(n-1)/2, ties counted as tied pairs and ``joint`` the pairs tied in both,
    concordant - discordant = n0 - ties_a - ties_b + joint - 2 * discordant, and the discordant
    pairs are the inversions of b once records are sorted by (a, b). None when undefined
    (fewer than 2 values, a constant input). Matches ``scipy.stats.kendalltau(a, b)``.
    """
    x, y = _vectors(a, b)
    if _correlation_undefined(x, y) is not None:
        return None
    n = x.size
    codes_x, _ = _dense_codes(x)
    codes_y, size_y = _dense_codes(y)
    pairs = n * (n - 1) // 2
    ties_x, ties_y = _tied_pairs(codes_x), _tied_pairs(codes_y)
    joint = _tied_pairs(codes_x.astype(np.int64) * size_y + codes_y)
    order = np.lexsort((codes_y, codes_x))
    discordant = _count_inversions(codes_y[order], size_y)
    numerator = pairs - ties_x - ties_y + joint - 2 * discordant
    tau = numerator / math.sqrt(float(pairs - ties_x) * float(pairs - ties_y))
    return max(-1.0, min(1.0, tau))


def _vectors(a: Sequence[float] | np.ndarray,
             b: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise UsageError(f"agreement needs two 1-d sequences of equal length, got shapes "
                         f"{x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise UsageError("agreement needs finite grades: leave unscored (NaN) records out")
    return x, y


def _check_scale(scale: tuple[int, int]) -> tuple[int, int]:
    try:
        lo, hi = scale
        whole = all(not isinstance(v, bool) and float(v).is_integer() for v in (lo, hi))
    except (TypeError, ValueError):
        whole = False
    if not whole or lo > hi:
        raise UsageError(f"scale must be two integers (lowest, highest), got {scale!r}")
    return int(lo), int(hi)


def _round_half_up(values: np.ndarray) -> np.ndarray:
    """Half up, not numpy's half-to-even: a mean of 3.5 over two samples is not 'closer' to 4
    than 2.5 is to 3, and banker's rounding would send them different ways."""
    return np.floor(values + 0.5)


def _confusion(rows: np.ndarray, cols: np.ndarray, k: int) -> np.ndarray:
    flat = rows.astype(np.int64) * k + cols.astype(np.int64)
    return np.bincount(flat, minlength=k * k).reshape(k, k)


def _as_tuples(matrix: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(v) for v in row) for row in matrix)


def _correlation_undefined(x: np.ndarray, y: np.ndarray) -> str | None:
    if x.size < 2:
        return "needs at least 2 records"
    const_x, const_y = bool(np.all(x == x[0])), bool(np.all(y == y[0]))
    if const_x and const_y:
        return "both raters gave every record the same score"
    if const_x or const_y:
        which = "first" if const_x else "second"
        return f"the {which} rater gave every record the same score"
    return None


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span (scipy 'average')."""
    n = values.size
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts_mask = np.empty(n, dtype=bool)
    starts_mask[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts_mask[1:])
    starts = np.flatnonzero(starts_mask)
    ends = np.append(starts[1:], n)
    mean_rank = (starts + ends + 1) / 2.0  # mean of start+1 .. end
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = mean_rank[np.cumsum(starts_mask) - 1]
    return ranks


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    unique, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), int(unique.size)


def _tied_pairs(codes: np.ndarray) -> int:
    _, counts = np.unique(codes, return_counts=True)
    counts = counts.astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _count_inversions(codes: np.ndarray, size: int) -> int:
    """Pairs i < j with codes[i] > codes[j], by a bottom-up merge sort vectorised per level.

    At each level the array is made of sorted blocks of ``width``; for each element of a right
    block, the elements of its left block that are greater are counted with one searchsorted
    over all left blocks at once (keys offset by block pair so that blocks never mix), then
    each pair of blocks is merged by a single sort of the offset keys.
    """
    n = codes.size
    values = codes.astype(np.int64)
    index = np.arange(n, dtype=np.int64)
    total = 0
    width = 1
    while width < n:
        pair = index // (2 * width)
        right = (index // width) % 2 == 1
        keys = pair * size + values
        left_keys = keys[~right]
        right_keys, right_pair = keys[right], pair[right]
        upper = np.searchsorted(left_keys, (right_pair + 1) * size, side="left")
        above = np.searchsorted(left_keys, right_keys, side="right")
        total += int((upper - above).sum())
        values = np.sort(keys) - pair * size
        width *= 2
    return total


# --------------------------------------------------------------------------------------------
# Comparing runs (and human labels)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rater:
    """One side of a comparison: a scored run (``A``, ``B``) or the human labels."""

    label: str
    source: str  # the run directory, or the records file holding the labels
    judge_model: str | None = None
    field: str | None = None  # the record field holding human labels

    def describe(self) -> str:
        if self.field is not None:
            return f"labels in field '{self.field}' of {self.source}"
        model = f" (judge {self.judge_model})" if self.judge_model else ""
        return f"{self.source}{model}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "source": self.source}
        if self.field is not None:
            out["field"] = self.field
        else:
            out["judge_model"] = self.judge_model
        return out


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


@dataclass(frozen=True)
class _Run:
    label: str
    path: str
    results: Results
    scores: dict[str, Mapping[str, float | None]]
    names: tuple[str, ...]

    @property
    def rater(self) -> Rater:
        judge = self.results.manifest.get("judge") or {}
        model = judge.get("model") if isinstance(judge, Mapping) else None
        return Rater(self.label, self.path, judge_model=None if model is None else str(model))

    def value(self, record_id: str, metric: str) -> float:
        score = self.scores[record_id].get(metric)
        return math.nan if score is None else float(score)

    def signature(self, metric: str) -> str | None:
        item = self.results.summary.get(metric)
        return None if item is None else item.signature


def _load_run(path: str | os.PathLike[str], label: str) -> _Run:
    results = Results.load(path)
    scores: dict[str, Mapping[str, float | None]] = {}
    for record in results.records:
        if record.id in scores:
            raise InputError(f"record id {record.id!r} appears twice",
                             path=os.path.join(os.fspath(path), "records.jsonl"))
        scores[record.id] = record.scores
    names = dict.fromkeys(n for n in results.summary if _graded(n))
    for record in results.records:
        names.update(dict.fromkeys(n for n in record.scores if _graded(n)))
    return _Run(label, os.fspath(path), results, scores, tuple(names))


def _graded(name: str) -> bool:
    """A judge output holding grades on a rubric's scale. judge:pairwise outputs are win/tie/
    loss outcomes (0, 0.5, 1), not grades: rounding would count a tie as a win."""
    return name.startswith(JUDGE_PREFIX) and not name.startswith(PAIRWISE_PREFIX)


def agree_runs(
    dir_a: str | os.PathLike[str],
    dir_b: str | os.PathLike[str] | None = None,
    *,
    human: str | None = None,
    records_path: str | os.PathLike[str] | None = None,
    metric_pairs: Sequence[tuple[str, str]] | None = None,
    intersect: bool = False,
    metric: str | None = None,
) -> AgreementReport:
    """Compare the judge metrics of run ``dir_a`` with run ``dir_b`` and/or human labels.

    Two runs are paired by record id: differing id sets are a :class:`UsageError` naming the
    ids, unless ``intersect`` compares the common records (the report counts those dropped).
    Judge metrics with the same name in both runs are compared; ``metric_pairs`` pairs names
    that differ because the runs used different rubric files (``("judge:a", "judge:b")``).

    ``human`` names a top-level field of the records file the run scored (its manifest's
    ``records.source``, or ``records_path``) holding either one number (when one metric is
    compared; choose it with ``metric``) or an object mapping criterion names (with or without
    ``judge:``) to numbers. Each run is then compared with the humans, and two runs with each
    other as well. Missing labels are left out and counted; a non-numeric label is an
    :class:`InputError` naming the record and the field.
    """
    if dir_b is None and human is None:
        raise UsageError("agree needs a second run directory or --human FIELD to compare with")
    if metric_pairs and dir_b is None:
        raise UsageError("--pair pairs the metrics of two runs: give a second run directory")
    run_a = _load_run(dir_a, "A")
    run_b = None if dir_b is None else _load_run(dir_b, "B")
    notes: list[str] = []
    ids, records = _pair_ids(run_a, run_b, intersect, notes)
    pairs = _select_metric(_metric_pairs(run_a, run_b, metric_pairs), metric)
    raters = [run_a.rater] + ([] if run_b is None else [run_b.rater])
    labels: _HumanLabels | None = None
    if human is not None:
        labels = _HumanLabels.load(human, _records_source(run_a, run_b, records_path, notes),
                                   ids, pairs)
        raters.append(Rater(HUMAN, labels.path, field=human))
    rows: list[AgreementRow] = []
    for name_a, name_b in pairs:
        rows.extend(_compare_metric(run_a, run_b, labels, name_a, name_b, ids, notes))
    return AgreementReport(tuple(raters), tuple(rows), records, tuple(notes))


def _pair_ids(run_a: _Run, run_b: _Run | None, intersect: bool,
              notes: list[str]) -> tuple[list[str], dict[str, int]]:
    """The record ids to compare, in run A's order, and the record counts for the report."""
    ids_a = [r.id for r in run_a.results.records]
    if run_b is None:
        return ids_a, {"A": len(ids_a), "compared": len(ids_a)}
    ids_b = [r.id for r in run_b.results.records]
    only_a = [i for i in ids_a if i not in run_b.scores]
    only_b = [i for i in ids_b if i not in run_a.scores]
    common = [i for i in ids_a if i in run_b.scores]
    if (only_a or only_b) and not intersect:
        parts = [f"{len(ids)} only in {label} ({_show_ids(ids)})"
                 for label, ids in (("A", only_a), ("B", only_b)) if ids]
        raise UsageError(f"runs A ({run_a.path}) and B ({run_b.path}) scored different records: "
                         f"{'; '.join(parts)}; compare the common records with --intersect")
    if not common:
        raise UsageError(f"runs A ({run_a.path}) and B ({run_b.path}) have no record id in "
                         "common")
    if only_a or only_b:
        notes.append(f"--intersect: compared the {len(common)} records both runs scored; left "
                     f"out {len(only_a)} only in A and {len(only_b)} only in B")
    counts = {"A": len(ids_a), "B": len(ids_b), "compared": len(common),
              "only_in_A": len(only_a), "only_in_B": len(only_b)}
    return common, counts


def _show_ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN_IDS])
    return shown + (f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else "")


def _judge_name(name: str) -> str:
    name = name.strip()
    return name if name.startswith(JUDGE_PREFIX) else JUDGE_PREFIX + name


def _metric_pairs(run_a: _Run, run_b: _Run | None,
                  explicit: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """(metric in A, metric in B) pairs: explicit pairs, then names common to both runs.

    With one run, every judge metric pairs with itself (it is compared with the humans)."""
    if not run_a.names:
        raise UsageError(f"run A ({run_a.path}) has no judge metric (judge:...) to compare")
    if run_b is None:
        return [(name, name) for name in run_a.names]
    if not run_b.names:
        raise UsageError(f"run B ({run_b.path}) has no judge metric (judge:...) to compare")
    chosen: dict[str, str] = {}
    for raw_a, raw_b in explicit or ():
        name_a, name_b = _judge_name(raw_a), _judge_name(raw_b)
        for run, name in ((run_a, name_a), (run_b, name_b)):
            if name not in run.names:
                raise UsageError(f"--pair {name_a}={name_b}: run {run.label} ({run.path}) has "
                                 f"no {name}; its judge metrics: {', '.join(run.names)}")
        if name_a in chosen or name_b in chosen.values():
            raise UsageError(f"--pair {name_a}={name_b}: each metric may be paired only once")
        chosen[name_a] = name_b
    taken_b = set(chosen.values())
    pairs = []
    for name in run_a.names:
        if name in chosen:
            pairs.append((name, chosen[name]))
        elif name in run_b.names and name not in taken_b:
            pairs.append((name, name))
    if not pairs:
        raise UsageError(
            f"no judge metric in common: A has {', '.join(run_a.names)}; B has "
            f"{', '.join(run_b.names)}; pair metrics scored under different rubric names with "
            "--pair A=B"
        )
    return pairs


def _select_metric(pairs: list[tuple[str, str]], metric: str | None) -> list[tuple[str, str]]:
    if metric is None:
        return pairs
    name = _judge_name(metric)
    kept = [p for p in pairs if name in p]
    if not kept:
        known = ", ".join(dict.fromkeys(n for p in pairs for n in p))
        raise UsageError(f"--metric {name}: not among the compared judge metrics ({known})")
    return kept


def _records_source(run_a: _Run, run_b: _Run | None,
                    records_path: str | os.PathLike[str] | None, notes: list[str]) -> str:
    """The records file holding the human labels: ``records_path``, else the file run A
    scored (named in its manifest)."""
    if records_path is not None:
        return os.fspath(records_path)
    source = _manifest_source(run_a)
    if source is None or source == "<memory>":
        raise UsageError(f"run A ({run_a.path}) does not name a records file in its manifest "
                         "(it scored records held in memory): give it with --records FILE")
    if not Path(source).is_file():
        raise UsageError(f"run A ({run_a.path}) scored {source}, which no longer exists here: "
                         "give the records file with --records FILE")
    other = None if run_b is None else _manifest_source(run_b)
    if other is not None and other != source:
        notes.append(f"run B scored {other}; human labels were read from run A's {source}")
    return source


def _manifest_source(run: _Run) -> str | None:
    records = run.results.manifest.get("records")
    source = records.get("source") if isinstance(records, Mapping) else None
    return None if source is None else str(source)


@dataclass(frozen=True)
class _HumanLabels:
    """Human labels by record id: one number, or criterion name -> number (None: missing)."""

    field: str
    path: str
    labels: dict[str, float | dict[str, float | None] | None]

    @classmethod
    def load(cls, field_name: str, path: str, ids: Sequence[str],
             pairs: Sequence[tuple[str, str]]) -> _HumanLabels:
        from rageval.core.records import load_records

        records = load_records(path)
        if not any(field_name in r.extra for r in records):
            extras = sorted({k for r in records for k in r.extra})
            hint = f"; fields there: {', '.join(extras)}" if extras else ""
            raise UsageError(f"--human {field_name}: no record of {path} has a field "
                             f"'{field_name}'{hint}")
        labels = {r.id: _parse_label(r.extra.get(field_name), r.id, field_name, path)
                  for r in records}
        single = next((i for i in ids if isinstance(labels.get(i), float)), None)
        if single is not None and len(pairs) > 1:
            names = ", ".join(dict.fromkeys(n for p in pairs for n in p))
            raise UsageError(
                f"--human {field_name}: record {single!r} holds a single number but "
                f"{len(pairs)} judge metrics are compared ({names}); choose one with --metric, "
                "or give an object mapping criteria to labels"
            )
        if not any(labels.get(i) is not None for i in ids):
            raise UsageError(f"--human {field_name}: none of the {len(ids)} compared records "
                             f"has a label in {path} ({len(records)} records there); do the "
                             "record ids match?")
        return cls(field_name, path, labels)

    def lookup(self, record_id: str, names: Iterable[str]) -> tuple[float, str]:
        """The label of ``record_id`` for the first of ``names`` found (NaN if none), and
        the field path it came from."""
        value = self.labels.get(record_id)
        if value is None:
            return math.nan, self.field
        if isinstance(value, float):
            return value, self.field
        for key in _label_keys(names):
            label = value.get(key)
            if label is not None:
                return label, f"{self.field}.{key}"
        return math.nan, self.field


def _label_keys(names: Iterable[str]) -> list[str]:
    """Keys a human label object may use for a metric: the full output name, then without
    ``judge:``, without parameters, and the file stem of a rubric given by path."""
    keys: dict[str, None] = {}
    for name in names:
        target = name[len(JUDGE_PREFIX):] if name.startswith(JUDGE_PREFIX) else name
        base = target.split("(", 1)[0]
        for key in (name, target, JUDGE_PREFIX + base, base, Path(base).stem):
            keys.setdefault(key, None)
    return list(keys)


def _parse_label(value: Any, record_id: str, field_name: str,
                 path: str) -> float | dict[str, float | None] | None:
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)  # a CSV cell holding a JSON object
        except ValueError:
            raise InputError(f"record {record_id!r}: human label is not a valid JSON object",
                             path=path, field=field_name) from None
    if isinstance(value, Mapping):
        return {str(k): _parse_number(v, record_id, f"{field_name}.{k}", path)
                for k, v in value.items()}
    return _parse_number(value, record_id, field_name, path)


def _parse_number(value: Any, record_id: str, field_name: str, path: str) -> float | None:
    """A finite number; a numeric string (CSV cells are strings); None or "" for missing."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise InputError(f"record {record_id!r}: human label must be a finite number, found "
                         f"{value!r}", path=path, field=field_name)
    return number


def _compare_metric(run_a: _Run, run_b: _Run | None, labels: _HumanLabels | None,
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
            notes.append(f"{_pair_name(name_a, name_b)}: no human label in field "
                         f"'{labels.field}'; not compared with the humans")
    scale = _pair_scale(run_a, run_b, name_a, name_b, columns, notes)
    if labels is not None and HUMAN in columns:
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
         metrics: Mapping[str, str], scale: tuple[int, int], run_a: _Run,
         run_b: _Run | None) -> AgreementRow:
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


def _pair_scale(run_a: _Run, run_b: _Run | None, name_a: str, name_b: str,
                columns: Mapping[str, np.ndarray], notes: list[str]) -> tuple[int, int]:
    """The grade scale of a metric pair: the rubrics' (their union if the two differ), else
    the observed range; widened, with a note, if a judge value falls outside it."""
    scales = {_rubric_scale(run_a, name_a)}
    if run_b is not None:
        scales.add(_rubric_scale(run_b, name_b))
    known = [s for s in scales if s is not None]
    judged = np.concatenate([columns[k] for k in columns if k != HUMAN])
    judged = _round_half_up(judged[~np.isnan(judged)])
    title = _pair_name(name_a, name_b)
    if not known:
        every = np.concatenate(list(columns.values()))
        every = _round_half_up(every[~np.isnan(every)])
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


def _rubric_scale(run: _Run, name: str) -> tuple[int, int] | None:
    """The scale of the rubric behind ``judge:<target>``: from the rubric file the run's
    manifest names, else by name or path as ``load_rubric`` finds it; None if neither loads
    (a user rubric that has moved)."""
    from rageval.judge.prompts import load_rubric

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
            rubric = load_rubric(candidate)
        except (RagevalError, OSError):
            continue
        return rubric.scale_min, rubric.scale_max
    return None


def _check_human_scale(labels: np.ndarray, ids: Sequence[str], wheres: Sequence[str],
                       scale: tuple[int, int], path: str, metric: str) -> None:
    """A human label off the rubric's scale is a labelling mistake (or another scale):
    widening the scale to fit it would quietly change kappa, so it is an error."""
    rounded = _round_half_up(labels)
    bad = np.flatnonzero(~np.isnan(labels) & ((rounded < scale[0]) | (rounded > scale[1])))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"record {ids[i]!r}: human label {labels[i]:g} is outside the scale "
                         f"{scale[0]}-{scale[1]} of {metric}", path=path, field=wheres[i])


# --------------------------------------------------------------------------------------------
# Presentation and the command
# --------------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def summary_table(report: AgreementReport) -> Table:
    """One row per compared pair: n, exact and adjacent agreement, kappa, rho, tau-b, means."""
    table = Table(title="rageval agreement", title_justify="left")
    for name, justify in (("metric", "left"), ("raters", "left"), ("n", "right"),
                          ("left out", "right"), ("exact", "right"), ("±1", "right"),
                          ("kappa (quad.)", "right"), ("spearman", "right"),
                          ("kendall tau-b", "right"), ("mean 1st", "right"),
                          ("mean 2nd", "right"), ("diff", "right")):
        table.add_column(name, justify=justify, style="bold" if name == "metric" else None)
    for row in report.rows:
        s = row.stats
        diff = None if s.mean_diff is None else f"{s.mean_diff:+.3f}"
        table.add_row(row.metric, f"{row.rater_a} vs {row.rater_b}", str(s.n),
                      str(row.total - s.n), _fmt(s.exact), _fmt(s.adjacent), _fmt(s.kappa),
                      _fmt(s.spearman), _fmt(s.kendall), _fmt(s.mean_a), _fmt(s.mean_b),
                      diff or "—")
    return table


def confusion_table(row: AgreementRow) -> Table:
    """The confusion matrix over the full scale: rows the first rater, columns the second."""
    lo, hi = row.stats.scale
    grades = list(range(lo, hi + 1))
    table = Table()
    table.add_column(f"{row.rater_a} \\ {row.rater_b}", justify="right", style="bold")
    for grade in grades:
        table.add_column(str(grade), justify="right")
    table.add_column("total", justify="right", style="dim")
    counts = np.array(row.stats.confusion, dtype=np.int64).reshape(len(grades), len(grades))
    for grade, line in zip(grades, counts, strict=True):
        table.add_row(str(grade), *(str(int(v)) for v in line), str(int(line.sum())))
    table.add_row("total", *(str(int(v)) for v in counts.sum(axis=0)), str(row.stats.n),
                  style="dim")
    return table


def report_lines(report: AgreementReport) -> list[str]:
    """Notes, what was left out and why, undefined statistics, and each metric's signature
    (a number without its signature is not reproducible)."""
    lines = list(report.notes)
    for row in report.rows:
        for reason, count in row.left_out.items():
            lines.append(f"{row.title}: {count} left out: {reason}")
        for stat, reason in row.stats.undefined.items():
            lines.append(f"{row.title}: {stat} undefined: {reason}")
        if row.stats.rounded:
            lines.append(f"{row.title}: {row.stats.rounded} non-integer scores (means of "
                         "several samples) rounded half up for exact/±1 agreement, kappa and "
                         "the confusion matrix; correlations use the raw values")
    seen: set[tuple[str, str]] = set()
    for row in report.rows:
        for rater, metric, signature in ((row.rater_a, row.metric_a, row.signature_a),
                                         (row.rater_b, row.metric_b, row.signature_b)):
            if signature and (rater, metric) not in seen:
                seen.add((rater, metric))
                lines.append(f"{rater} {metric}: {signature}")
    return lines


def render_agreement(report: AgreementReport, console: Console) -> None:
    """Print who the raters are, the summary table, one confusion matrix per pair, then the
    notes and signatures."""
    for rater in report.raters:
        console.print(f"{rater.label}: {rater.describe()}", markup=False, highlight=False)
    console.print(summary_table(report))
    for row in report.rows:
        # The heading is printed, not a table title: rich wraps titles to the table's width.
        console.print(f"{row.title}: rows {row.rater_a}, columns {row.rater_b}, n={row.stats.n}",
                      markup=False, highlight=False)
        console.print(confusion_table(row))
    for line in report_lines(report):
        console.print(line, markup=False, highlight=False)


def parse_pair(text: str) -> tuple[str, str]:
    """``"judge:a=judge:b"`` -> ``("judge:a", "judge:b")``; an ``=`` inside parentheses
    belongs to a metric parameter (``judge:f(samples=3)``), not to the pair."""
    depth = 0
    split = None
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "=" and depth == 0:
            if split is not None:
                split = -1
                break
            split = index
    if split is None or split < 0 or not text[:split].strip() or not text[split + 1:].strip():
        raise UsageError(f"--pair expects METRIC_A=METRIC_B, got {text!r}")
    return text[:split].strip(), text[split + 1:].strip()


def run_agree(
    dir_a: str,
    dir_b: str | None,
    human: str | None,
    records_path: str | None,
    pairs: Sequence[str | tuple[str, str]] | None,
    intersect: bool,
    json_path: str | None,
    out: TextIO,
    *,
    metric: str | None = None,
) -> int:
    """``rageval agree``: compute, print to ``out``, write JSON (atomically) when asked."""
    parsed = [p if isinstance(p, tuple) else parse_pair(p) for p in pairs or ()]
    report = agree_runs(dir_a, dir_b, human=human, records_path=records_path,
                        metric_pairs=parsed or None, intersect=intersect, metric=metric)
    is_tty = hasattr(out, "isatty") and out.isatty()
    console = Console(file=out, width=None if is_tty else 160, no_color=not is_tty,
                      highlight=False)
    render_agreement(report, console)
    if json_path is not None:
        text = json.dumps(report.to_json(), indent=2, ensure_ascii=False, allow_nan=False)
        try:
            atomic_write(Path(json_path), text + "\n")
        except OSError as error:
            raise UsageError(f"--json {json_path}: cannot write: {error}") from None
        console.print(f"wrote {json_path}", markup=False, highlight=False)
    return 0
