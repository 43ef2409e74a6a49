"""The regression gate: real drops fail, noise and small drops pass, lower-is-better metrics
fail on a rise, records pair by id, signatures are checked, corpus BLEU is compared as compare
does; and the direction each metric declares."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.core.records import records_from_dicts
from rageval.core.registry import create
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.gate import check_regression, lower_is_better

SIG = "metric:{name}|tok:13a|rageval:0.1.0"


def _run(columns: dict[str, Sequence[float | None]], ids: Sequence[str] | None = None, *,
         signatures: dict[str, str] | None = None, components: Sequence[str] = ()) -> Results:
    """A run from per-record values (None: unscored); summary values are the means."""
    n = len(next(iter(columns.values())))
    ids = list(ids) if ids is not None else [f"q{i}" for i in range(n)]
    records = [RecordResult(i, {name: col[k] for name, col in columns.items()}, {}, {})
               for k, i in enumerate(ids)]
    summary = {}
    for name, col in columns.items():
        scored = [v for v in col if v is not None]
        summary[name] = MetricSummary(
            float(np.mean(scored)) if scored else math.nan, len(scored), n - len(scored), None,
            (signatures or {}).get(name, SIG.format(name=name)), in_table=name not in components)
    return Results(records, summary, {})


def _values(seed: int, n: int, low: float = 0.5, high: float = 0.9) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, n)


def test_a_real_drop_fails() -> None:
    base = _values(1, 40)
    current = base - 0.1 + np.random.default_rng(2).normal(0, 0.02, 40)
    (row,) = check_regression(_run({"ndcg@10": list(current)}), _run({"ndcg@10": list(base)}),
                              max_drop=0.02)
    assert not row.passed and row.check == "regression"
    assert row.rule == "drop <= 0.02 vs baseline"
    assert row.observed == pytest.approx(float(np.mean(base - current)))
    assert row.note.startswith("drop 0.0999, p<")
    assert ", p<0.0001 (paired randomization test); " in row.note
    assert "->" in row.note


def test_the_note_writes_p_as_every_channel_does() -> None:
    """The note beside a gate row writes its p-value as the Markdown table's p-value column
    and ``rageval compare`` do (``0.0185``), not to two significant digits (``0.018``)."""
    base = _values(1, 40)
    current = base - 0.1 + np.random.default_rng(2).normal(0, 0.3, 40)
    (row,) = check_regression(_run({"ndcg@10": list(current)}), _run({"ndcg@10": list(base)}),
                              max_drop=0.02)
    assert row.p_value is not None and row.p_value >= 1e-4
    assert f"p={row.p_value:.4f} (" in row.note


def test_a_small_noisy_drop_passes() -> None:
    base = _values(3, 10)
    swings = np.array([0.3, -0.4, 0.25, -0.35, 0.2, -0.3, 0.1, -0.2, 0.05, -0.15])
    assert swings.mean() == pytest.approx(-0.05)
    (row,) = check_regression(_run({"rouge1": list(base + swings)}), _run({"rouge1": list(base)}),
                              max_drop=0.02)
    assert row.passed
    assert row.observed == pytest.approx(0.05)
    assert "but not significant (p=" in row.note and "exact" in row.note  # 2**10 relabellings


def test_a_significant_drop_within_max_drop_passes() -> None:
    base = _values(4, 30)
    (row,) = check_regression(_run({"mrr": list(base - 0.01)}), _run({"mrr": list(base)}),
                              max_drop=0.02)
    assert row.passed and row.observed == pytest.approx(0.01)
    assert "drop" not in row.note.split(",")[0]  # only the values and p: nothing to flag


def test_a_drop_of_exactly_max_drop_passes_despite_rounding() -> None:
    base = [0.5, 0.7, 0.9, 0.3] * 10
    current = [v - 0.02 for v in base]  # 0.48, 0.68 ...: differences of 0.020000000000000018
    (row,) = check_regression(_run({"p@5": current}), _run({"p@5": base}), max_drop=0.02)
    assert row.passed


def test_an_improvement_passes_at_max_drop_zero() -> None:
    base = _values(5, 20)
    (row,) = check_regression(_run({"ndcg@10": list(base + 0.1)}), _run({"ndcg@10": list(base)}),
                              max_drop=0.0)
    assert row.passed and row.observed == pytest.approx(-0.1)


@pytest.mark.parametrize("name", ["mean_rank@10", "claims:hallucination",
                                  "claims:noise_sensitivity.relevant"])
def test_a_lower_is_better_metric_fails_on_a_rise(name: str) -> None:
    base = _values(6, 30, 0.1, 0.5)
    (row,) = check_regression(_run({name: list(base + 0.2)}), _run({name: list(base)}),
                              max_drop=0.05)
    assert not row.passed
    assert row.rule == "rise <= 0.05 vs baseline (lower is better)"
    assert row.observed == pytest.approx(0.2) and row.note.startswith("rise 0.2")
    (row,) = check_regression(_run({name: list(base - 0.2)}), _run({name: list(base)}),
                              max_drop=0.05)
    assert row.passed and row.observed == pytest.approx(-0.2)


def test_holm_adjusts_over_the_checked_metrics() -> None:
    base = _values(7, 30)
    run = _run({"a": list(base - 0.1), "b": list(base)})
    rows = check_regression(run, _run({"a": list(base), "b": list(base)}), max_drop=0.0)
    assert [r.metric for r in rows] == ["a", "b"]
    assert not rows[0].passed and rows[1].passed
    assert "Holm over 2 metrics" in rows[0].note


def test_records_pair_by_id_and_the_left_out_are_named() -> None:
    base = _values(8, 30)
    ids = [f"q{i}" for i in range(30)]
    current = _run({"mrr": [*list(base[2:] - 0.2), 0.5]}, [*ids[2:], "z9"])
    (row,) = check_regression(current, _run({"mrr": list(base)}, ids), max_drop=0.05)
    assert not row.passed and row.observed == pytest.approx(0.2)
    assert "2 record ids only in the baseline ('q0', 'q1') left out" in row.note
    assert "1 record ids only in this run ('z9') left out" in row.note


def test_records_unscored_in_either_run_are_counted() -> None:
    base = [0.5, 0.6, None, 0.7, 0.8]
    current = [0.5, None, 0.4, 0.7, 0.8]
    (row,) = check_regression(_run({"mrr": current}), _run({"mrr": base}), max_drop=0.0)
    assert row.passed and "2 records unscored in either run left out" in row.note


def test_signature_differences_are_noted() -> None:
    base = _values(9, 10)
    other = {"mrr": "metric:mrr|tok:intl|rageval:0.1.0", "p@5": "metric:p@5|tok:13a|rageval:0.2"}
    rows = check_regression(_run({"mrr": list(base), "p@5": list(base)}, signatures=other),
                            _run({"mrr": list(base), "p@5": list(base)}), max_drop=0.0)
    assert "signature differs from the baseline's (tok): the numbers may not be comparable" \
        in rows[0].note
    assert "in the rageval version only" in rows[1].note
    assert all(r.passed for r in rows)


def test_headlines_by_default_and_named_metrics_on_request() -> None:
    base = _values(10, 10)
    columns = {"rouge2": list(base), "rouge2.precision": list(base), "mrr": list(base)}
    run = _run(columns, components=["rouge2.precision"])
    baseline = _run({k: v for k, v in columns.items() if k != "mrr"},
                    components=["rouge2.precision"])
    assert [r.metric for r in check_regression(run, baseline, max_drop=0.0)] == ["rouge2"]
    rows = check_regression(run, baseline, max_drop=0.0,
                            metrics=["rouge2.precision", "mrr", "rouge3"])
    assert [r.metric for r in rows] == ["rouge2.precision", "mrr", "rouge3"]
    assert [r.passed for r in rows] == [True, False, False]
    assert rows[1].note == "not in the baseline: nothing to compare with"
    assert "did you mean 'rouge2'" in rows[2].note


def test_nothing_in_common_fails() -> None:
    (row,) = check_regression(_run({"a": [0.1, 0.2]}), _run({"b": [0.1, 0.2]}), max_drop=0.1)
    assert not row.passed and "share no headline metric" in row.note


def test_a_metric_unscored_everywhere_fails() -> None:
    (row,) = check_regression(_run({"mrr": [None, None]}), _run({"mrr": [0.5, 0.6]}),
                              max_drop=0.1)
    assert not row.passed and row.observed is None
    assert row.note.startswith("no record scored in both runs")


REFERENCES = ["the cat sat on the mat near the door",
              "revenue grew by eleven percent to four billion dollars",
              "the main risks are competition and currency exposure",
              "subscriptions are the largest source of revenue",
              "the company was founded in a small garage in ohio",
              "cash and equivalents were one billion at year end"]
WORSE = ["a cat", "revenue grew", "the risks", "subscriptions are the largest source",
         "it was founded", "cash was one billion"]


def _scored(answers: Sequence[str]) -> Results:
    records = records_from_dicts({"id": f"q{i}", "answer": a, "reference": r}
                                 for i, (a, r) in enumerate(zip(answers, REFERENCES, strict=True)))
    return evaluate(records, ["bleu"])


def test_corpus_bleu_is_compared_on_the_corpus_figure() -> None:
    baseline, current = _scored(REFERENCES), _scored(WORSE)
    assert current.summary["bleu"].aggregate == "corpus"
    rows = check_regression(current, baseline, max_drop=1.0, permutations=2000)
    assert [r.metric for r in rows] == ["bleu", "bleu.sentence"]  # the table's two headlines
    for row in rows:
        drop = baseline.summary[row.metric].value - current.summary[row.metric].value
        assert row.observed == pytest.approx(drop)
        assert row.rule == "drop <= 1.0 vs baseline"
    # 6 records: the exact test's smallest p is 2/64, doubled by Holm: a big drop, yet not
    # enough records to call it real.
    assert all(r.passed and "not significant (p=0.062" in r.note for r in rows)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_drop": -0.1}, "max_drop"), ({"max_drop": math.nan}, "max_drop"),
    ({"max_drop": 0.1, "alpha": 1.5}, "alpha"), ({"max_drop": 0.1, "resamples": 0}, "resamples"),
    ({"max_drop": 0.1, "seed": -1}, "seed")])
def test_bad_settings_are_usage_errors(kwargs: dict[str, float], message: str) -> None:
    run = _run({"mrr": [0.1, 0.2]})
    with pytest.raises(UsageError, match=message):
        check_regression(run, run, **kwargs)  # type: ignore[arg-type]


# ---- directions ----------------------------------------------------------------------------


@pytest.mark.parametrize(("output", "lower"), [
    ("mean_rank", True), ("mean_rank(missing=penalize)@10", True), ("ndcg@10", False),
    ("p(rel=2)@5", False), ("rouge2.precision", False), ("bleu.p1", False),
    ("claims:hallucination", True), ("claims:noise_sensitivity.relevant", True),
    ("claims:noise_sensitivity.irrelevant", True), ("claims:precision", False),
    ("claims:faithfulness", False), ("judge:faithfulness", False), ("not_a_metric.x", False)])
def test_direction_of_outputs(output: str, lower: bool) -> None:
    assert lower_is_better(output) is lower


def test_metrics_declare_their_direction() -> None:
    assert create("mean_rank@5").lower_is_better("mean_rank@5")
    assert not create("mrr").lower_is_better("mrr")
    assert create("claims:hallucination").lower_is_better("claims:hallucination")
    assert not create("claims:context_precision").lower_is_better("claims:context_precision")
