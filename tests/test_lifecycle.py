"""The metric lifecycle the orchestrator drives, seen from a family it has never heard of: a toy
family registered in a test reaches every hook (check, prepare, manifest) and a judgments
provider, with no line of the orchestrator naming it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.core import registry
from rageval.core.errors import UsageError
from rageval.core.metric import (
    Batch,
    Metric,
    MetricResult,
    RunHooks,
    ScoreOptions,
    Slot,
)
from rageval.core.names import MetricName
from rageval.core.providers import JudgmentsProvider
from rageval.core.records import Record, apply_judgments, records_from_dicts

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "records.jsonl"


class ToyHooks(RunHooks):
    section = "toy"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []
        self.refuse = False

    def check(self, records: Sequence[Record], metrics: Sequence[Metric]) -> None:
        self.calls.append(("check", [str(m) for m in metrics], len(records)))
        if self.refuse:
            raise UsageError("the toy family refuses this run")

    def prepare(self, run: Batch, metrics: Sequence[Metric]) -> None:
        self.calls.append(("prepare", [str(m) for m in metrics], len(run)))
        run.cached(LENGTHS, lambda: {r.id: len(r.answer or "") for r in run.records})

    def manifest(self, run: Batch, metrics: Sequence[Metric]) -> dict[str, Any] | None:
        self.calls.append(("manifest", [str(m) for m in metrics], len(run)))
        return {"metrics": [str(m) for m in metrics]}


HOOKS = ToyHooks()
# What prepare leaves for the metrics (answer lengths by record id), and what fill counts.
LENGTHS = Slot[dict[str, int]]("toy-lengths")
GRADED = Slot[list[int]]("toy-graded")


class ToyMetric(Metric):
    """The answer's length, read from what ``prepare`` left in the run's cache."""

    family = "toy"
    base = "toy"
    summary = "a toy"
    hooks = HOOKS
    libraries = ("numpy",)

    def __init__(self, target: str, cutoff: int | None = None,
                 options: ScoreOptions | None = None) -> None:
        self.target = target
        self.base = f"toy:{target}"  # type: ignore[misc]
        super().__init__(cutoff=cutoff, options=options)

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.target, options=options)

    def score(self, batch: Batch) -> MetricResult:
        lengths = batch.run.cached(LENGTHS, dict)
        values = np.array([float(lengths[r.id]) for r in batch.records])
        return MetricResult({str(self): values}, [None] * len(batch))


class ToyJudgments(JudgmentsProvider):
    """Every retrieved context is relevant (grade 1)."""

    section = "toy_judgments"

    refuse = False  # set by a test: the provider's check fails
    filled = 0  # how many times fill ran, over all instances

    def __init__(self, options: ScoreOptions) -> None:
        self.checked = 0

    def metrics(self) -> list[Metric]:
        return [ToyMetric("grader")]

    def check(self, records: Sequence[Record]) -> None:
        self.checked = len(records)
        if ToyJudgments.refuse:
            raise UsageError("the toy provider cannot grade these records")

    def fill(self, records: list[Record], run: Batch) -> list[Record]:
        ToyJudgments.filled += 1
        grades = {r.id: {c.id: 1 for c in r.contexts} for r in records if r.judgments is None}
        run.run_wide(GRADED, list).append(len(grades))
        return apply_judgments(records, grades, source="toy")

    def account(self, run: Batch, source: str) -> tuple[str, dict[str, Any]]:
        return f"toy({source})", {"graded": sum(run.run_wide(GRADED, list))}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyHooks:
    registry.metric_classes()  # the built-in families first, as a run would
    monkeypatch.setitem(registry._NAMESPACES, "toy",
                        lambda name, options: ToyMetric(name.base.split(":", 1)[1],
                                                        options=options))
    monkeypatch.setitem(registry._JUDGMENTS, "toy", ToyJudgments)
    HOOKS.calls.clear()
    HOOKS.refuse = False
    monkeypatch.setattr(ToyJudgments, "refuse", False)
    monkeypatch.setattr(ToyJudgments, "filled", 0)
    return HOOKS


def test_every_hook_is_called_once_per_run_with_the_metrics_sharing_it(toy: ToyHooks) -> None:
    results = evaluate(DEMO, ["toy:a", "mrr", "toy:b"], bootstrap=10)
    assert [(step, names) for step, names, _ in toy.calls] == [
        ("check", ["toy:a", "toy:b"]), ("prepare", ["toy:a", "toy:b"]),
        ("manifest", ["toy:a", "toy:b"])]
    assert results.manifest["toy"] == {"metrics": ["toy:a", "toy:b"]}
    q1 = next(r for r in results.records if r.id == "q1")
    assert q1.scores["toy:a"] == q1.scores["toy:b"] > 0


def test_a_hook_check_stops_the_run_before_any_scoring(toy: ToyHooks) -> None:
    toy.refuse = True
    with pytest.raises(UsageError, match="refuses"):
        evaluate(DEMO, ["mrr", "toy:a"], bootstrap=10)
    assert [step for step, _, _ in toy.calls] == ["check"]


def test_a_registered_judgments_provider_fills_judgments_and_signs_them(toy: ToyHooks) -> None:
    records = records_from_dicts([
        {"id": "a", "query": "q", "answer": "x", "contexts": ["c1", "c2"]},
        {"id": "b", "query": "q", "answer": "yy", "contexts": ["c3"], "judgments": {"c3": 0}},
    ])
    results = evaluate(records, ["p@2"], judgments_from="toy", bootstrap=10)
    assert results.manifest["toy_judgments"] == {"graded": 1}
    assert results.manifest["judgments"] == "toy(inline)"
    assert "judgments:toy(inline)" in results.summary["p@2"].signature
    scores = {r.id: r.scores["p@2"] for r in results.records}
    assert scores == {"a": 1.0, "b": 0.0}
    # The provider's grader shares the toy hooks, so their manifest section lists it.
    assert results.manifest["toy"] == {"metrics": ["toy:grader"]}


def test_every_check_runs_before_the_provider_does_any_work(toy: ToyHooks) -> None:
    records = records_from_dicts([{"id": "a", "query": "q", "answer": "x", "contexts": ["c"]}])
    toy.refuse = True  # a requested metric's hooks refuse the run
    with pytest.raises(UsageError, match="refuses"):
        evaluate(records, ["p@1", "toy:a"], judgments_from="toy", bootstrap=10)
    toy.refuse = False
    ToyJudgments.refuse = True  # the provider's own check refuses
    with pytest.raises(UsageError, match="cannot grade"):
        evaluate(records, ["p@1"], judgments_from="toy", bootstrap=10)
    ToyJudgments.refuse = False
    # A metric lacking a field nothing will fill stops the run before the provider grades.
    with pytest.raises(UsageError, match="needs 'reference'"):
        evaluate(records, ["p@1", "bleu"], judgments_from="toy", bootstrap=10)
    assert ToyJudgments.filled == 0


def test_settings_are_checked_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="bootstrap"):
        evaluate(tmp_path / "missing.jsonl", ["mrr"], bootstrap=0)


def test_an_empty_judgments_provider_name_is_refused_not_ignored() -> None:
    with pytest.raises(UsageError, match="judgments_from must be one of"):
        evaluate(DEMO, ["mrr"], judgments_from="", bootstrap=10)


def test_an_unknown_judgments_provider_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="judgments_from must be one of"):
        evaluate(DEMO, ["mrr"], judgments_from="nobody", bootstrap=10)


def test_the_manifest_names_the_libraries_of_the_metrics_run() -> None:
    only_ranks = evaluate(DEMO, ["mrr"], bootstrap=10).manifest["versions"]
    with_bleu = evaluate(DEMO, ["mrr", "bleu"], bootstrap=10).manifest["versions"]
    assert {"python", "numpy"} <= set(only_ranks) and "sacrebleu" not in only_ranks
    assert "sacrebleu" in with_bleu


def test_metric_names_reach_the_toy_factory(toy: ToyHooks) -> None:
    metric = registry.create(MetricName("toy:z"), ScoreOptions())
    assert isinstance(metric, ToyMetric) and metric.hooks is toy


def test_a_manifest_section_never_replaces_another_key(toy: ToyHooks,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ToyHooks, "section", "metrics")  # the manifest's own list of metrics
    with pytest.raises(RuntimeError, match="'metrics'"):
        evaluate(DEMO, ["toy:a"], bootstrap=10)
