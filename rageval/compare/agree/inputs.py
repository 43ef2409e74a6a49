"""What ``rageval agree`` compares: the raters, loaded and matched.

Scored runs are loaded with their judge grades by record id (:func:`load_run`) and paired by
record id (:func:`pair_record_ids`); their judge metrics are paired by name or by ``--pair``
(:func:`pair_metrics`, :func:`select_metric`). Human labels are read from a field of the
records file the run scored (:func:`human_labels_path`, :class:`HumanLabels`), or from a labels
file (:mod:`~rageval.compare.agree.label_lines`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rageval.compare.agree.label_lines import FileLabels, read_file_labels
from rageval.core.errors import InputError, UsageError
from rageval.core.records.human import label_keys, parse_label
from rageval.core.results import Results

__all__ = [
    "HUMAN",
    "JUDGE_PREFIX",
    "HumanLabels",
    "JudgedRun",
    "Rater",
    "human_labels_path",
    "load_run",
    "pair_metrics",
    "pair_record_ids",
    "select_metric",
]

JUDGE_PREFIX = "judge:"
PAIRWISE_PREFIX = "judge:pairwise"
HUMAN = "human"
_SHOWN_IDS = 5


@dataclass(frozen=True)
class Rater:
    """One side of a comparison: a scored run (``A``, ``B``) or the human labels."""

    label: str
    source: str  # the run directory, or the records file holding the labels
    judge_model: str | None = None
    field: str | None = None  # the record field holding human labels
    labels_file: bool = False  # the human labels of a labels file (``source``)

    def describe(self) -> str:
        if self.labels_file:
            return f"labels file {self.source} (averaged across annotators)"
        if self.field is not None:
            return f"labels in field '{self.field}' of {self.source}"
        model = f" (judge {self.judge_model})" if self.judge_model else ""
        return f"{self.source}{model}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "source": self.source}
        if self.labels_file:
            out["labels_file"] = True
        elif self.field is not None:
            out["field"] = self.field
        else:
            out["judge_model"] = self.judge_model
        return out


@dataclass(frozen=True)
class JudgedRun:
    """A scored run as a rater: its judge grades by record id, and its judge metrics
    (``names``: grades on a rubric's scale, in the run's order)."""

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


def load_run(path: str | os.PathLike[str], label: str) -> JudgedRun:
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
    return JudgedRun(label, os.fspath(path), results, scores, tuple(names))


def _graded(name: str) -> bool:
    """A judge output holding grades on a rubric's scale. judge:pairwise outputs are win/tie/
    loss outcomes (0, 0.5, 1), not grades: rounding would count a tie as a win."""
    return name.startswith(JUDGE_PREFIX) and not name.startswith(PAIRWISE_PREFIX)


def pair_record_ids(run_a: JudgedRun, run_b: JudgedRun | None, intersect: bool,
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


def pair_metrics(run_a: JudgedRun, run_b: JudgedRun | None,
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


def select_metric(pairs: list[tuple[str, str]], metric: str | None) -> list[tuple[str, str]]:
    if metric is None:
        return pairs
    name = _judge_name(metric)
    kept = [p for p in pairs if name in p]
    if not kept:
        known = ", ".join(dict.fromkeys(n for p in pairs for n in p))
        raise UsageError(f"--metric {name}: not among the compared judge metrics ({known})")
    return kept


def human_labels_path(run_a: JudgedRun, run_b: JudgedRun | None,
                      records_path: str | os.PathLike[str] | None, notes: list[str]) -> str:
    """The records file holding the human labels: ``records_path``, else the file run A
    scored (named in its manifest)."""
    if records_path is not None:
        return os.fspath(records_path)
    source = run_a.results.records_info.scored_file(f"run A ({run_a.path})")
    other = None if run_b is None else _manifest_source(run_b)
    if other is not None and other != source:
        notes.append(f"run B scored {other}; human labels were read from run A's {source}")
    return source


def _manifest_source(run: JudgedRun) -> str | None:
    return run.results.records_info.source


@dataclass(frozen=True)
class HumanLabels:
    """Human labels by record id: one number, or criterion name -> number (None: missing)."""

    field: str
    path: str
    labels: dict[str, float | dict[str, float | None] | None]
    of_file: bool = False  # read from a labels file: keyed by its metric names
    lines: FileLabels | None = None  # read from a labels file: each label with its line

    @classmethod
    def from_file(cls, path: str, ids: Sequence[str],
                  pairs: Sequence[tuple[str, str]]) -> HumanLabels:
        """The labels of a labels file (``rageval annotate``'s) read as ``rageval score``
        reads them (:func:`~rageval.compare.agree.label_lines.read_file_labels`), joined to
        the compared metrics (``pairs``), each record's labels of a metric averaged across
        annotators; a usage error when none is of a compared record."""
        names = list(dict.fromkeys(name for pair in pairs for name in pair))
        read = read_file_labels(path, names, ids)
        if not any(i in read.given for i in ids):
            raise UsageError(f"--human-labels {path}: none of the {len(ids)} compared records "
                             f"has a label there ({len(read.given)} labelled records); do the "
                             "record ids match?")
        labels: dict[str, float | dict[str, float | None] | None] = dict(read.means())
        return cls("labels", path, labels, of_file=True, lines=read)

    @classmethod
    def load(cls, field_name: str, path: str, ids: Sequence[str],
             pairs: Sequence[tuple[str, str]]) -> HumanLabels:
        from rageval.core.records import load_records

        records = load_records(path)
        if not any(field_name in r.extra for r in records):
            extras = sorted({k for r in records for k in r.extra})
            hint = f"; fields there: {', '.join(extras)}" if extras else ""
            raise UsageError(f"--human {field_name}: no record of {path} has a field "
                             f"'{field_name}'{hint}")
        labels = {r.id: parse_label(r.extra.get(field_name), r.id, field_name, path)
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
        for key in label_keys(names):
            label = value.get(key)
            if label is not None:
                return label, key if self.of_file else f"{self.field}.{key}"
        return math.nan, self.field
