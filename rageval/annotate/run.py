"""The judged run ``rageval annotate`` labels: one judge metric of a run directory, with what
a person needs to grade each of its records the way the judge did.

From ``RUN_DIR`` it reads the manifest and the judge's score and details of every record
(``records.jsonl``); from the records file the manifest names (or ``--records FILE``) each
record's query, contexts, answer and reference; from the rubric file the run used (the
manifest's ``judge.prompts[NAME].source``) the criterion, the scale and its anchors. The pool
of the metric is the records the judge scored (a finite value), in the run's order."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.core.errors import InputError, UsageError
from rageval.core.outputs.text import terminal
from rageval.core.records import Record, load_records
from rageval.core.results import Results
from rageval.judge.rubric.rubrics import Rubric, load_rubric

__all__ = ["JUDGE_PREFIX", "LabelledItem", "LabellingRun", "Scale", "load_labelling_run"]

JUDGE_PREFIX = "judge:"


@dataclass(frozen=True)
class Scale:
    """The grades a person may give: every integer from ``low`` to ``high``, each with the
    rubric's description of it."""

    low: int
    high: int
    anchors: tuple[tuple[int, str], ...]

    @property
    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1))

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return math.isfinite(value) and float(value).is_integer() \
            and self.low <= value <= self.high

    def to_json(self) -> dict[str, Any]:
        return {"min": self.low, "max": self.high, "values": self.values,
                "anchors": {str(score): text for score, text in self.anchors}}


@dataclass(frozen=True)
class LabelledItem:
    """One record of the pool: the record as the judge saw it, the judge's score of it and
    the details the judge left (reasoning, samples, a panel's spread)."""

    record: Record
    score: float
    details: Mapping[str, Any]

    @property
    def id(self) -> str:
        return self.record.id

    def reasoning(self) -> str | None:
        value = self.details.get("reasoning")
        return value if isinstance(value, str) else None

    def to_json(self) -> dict[str, Any]:
        """The record's texts as the page shows them (never the judge's)."""
        record = self.record
        return {"id": record.id, "query": record.query,
                "contexts": [{"id": c.id, "text": c.text} for c in record.contexts],
                "answer": record.answer, "reference": record.reference}


@dataclass(frozen=True)
class LabellingRun:
    """A run's judge metric ready to label: its pool (by id, in the run's order), the
    rubric's criterion and scale."""

    path: str
    metric: str
    rubric: Rubric
    scale: Scale
    items: dict[str, LabelledItem]

    @property
    def criterion(self) -> str:
        return self.rubric.description


def load_labelling_run(run_dir: str | os.PathLike[str], metric: str,
                       records_path: str | os.PathLike[str] | None = None) -> LabellingRun:
    """Read ``metric`` of the run in ``run_dir``; errors (exit 2) name what is wrong and,
    for a metric the run lacks, the metrics it has."""
    path = os.fspath(run_dir)
    if not Path(path).is_dir():
        raise UsageError(f"{path}: not a run directory (rageval score --out DIR writes one)")
    results = Results.load(path)
    rubric = _rubric(results, path, metric)
    source = _records_source(results, path, records_path)
    records = {record.id: record for record in load_records(source)}
    items: dict[str, LabelledItem] = {}
    for result in results.records:
        value = result.scores.get(metric)
        if value is None or not math.isfinite(value):
            continue
        record = records.get(result.id)
        if record is None:
            raise InputError(f"has no record {result.id!r}, which the run scored: is this the "
                             "file the run scored? (give it with --records FILE)", path=source)
        items[result.id] = LabelledItem(record, float(value), result.details.get(metric) or {})
    if not items:
        raise UsageError(f"{path}: {metric} scored no record: there is nothing to label")
    scale = Scale(rubric.scale_min, rubric.scale_max, rubric.anchors)
    return LabellingRun(path, metric, rubric, scale, items)


def _rubric(results: Results, path: str, metric: str) -> Rubric:
    judge = results.manifest.get("judge")
    prompts = judge.get("prompts") if isinstance(judge, Mapping) else None
    prompts = prompts if isinstance(prompts, Mapping) else {}
    names = list(dict.fromkeys(name for record in results.records for name in record.scores))
    labellable = [n for n in names if n.startswith(JUDGE_PREFIX)
                  and _labellable(prompts.get(n[len(JUDGE_PREFIX):]))]
    has = (f"its rubric judge metrics: {', '.join(labellable)}" if labellable
           else "it has no rubric judge metric to label")
    if metric not in names:
        raise UsageError(f"--metric {metric}: the run in {path} has no such metric; {has}")
    entry = prompts.get(metric[len(JUDGE_PREFIX):]) if metric.startswith(JUDGE_PREFIX) else None
    if not isinstance(entry, Mapping) or not isinstance(entry.get("source"), str):
        raise UsageError(f"--metric {metric}: not a rubric judge metric of the run in {path} "
                         f"(no rubric file in its manifest); {has}")
    rubric = load_rubric(Path(entry["source"]))
    if rubric.level != "turn" or "context" in rubric.inputs:
        what = "whole conversations" if rubric.level != "turn" else "one context at a time"
        raise UsageError(f"--metric {metric}: its rubric grades {what}, not a record on the "
                         f"rubric's scale; {has}")
    if entry.get("hash") not in (None, rubric.hash):
        print(terminal(f"rageval: warning: {rubric.source} changed since the run was judged; "
                       "the page shows the rubric as it is now"), file=sys.stderr)
    return rubric


def _labellable(entry: Any) -> bool:
    """Whether a manifest's prompt entry names a rubric file (a rubric judge metric)."""
    return isinstance(entry, Mapping) and isinstance(entry.get("source"), str)


def _records_source(results: Results, path: str,
                    records_path: str | os.PathLike[str] | None) -> str:
    """The records file: ``records_path``, else the file the run scored (its manifest)."""
    if records_path is not None:
        return os.fspath(records_path)
    return results.records_info.scored_file(f"the run in {path}")
