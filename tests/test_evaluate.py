"""The orchestrator and the output contract (records.jsonl + summary.json)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.core.records import load_records, records_from_dicts
from rageval.stats.resampling import bootstrap_ci

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "records.jsonl"


def test_output_contract(tmp_path: Path) -> None:
    results = evaluate(DEMO, ["ndcg@3", "map", "p@3"], seed=3, bootstrap=200)
    results.write(tmp_path)
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    records = load_records(DEMO)
    assert [json.loads(line)["id"] for line in lines] == [r.id for r in records]
    for line in lines:
        row = json.loads(line)
        assert set(row) == {"id", "scores", "details", "errors"}
        assert set(row["scores"]) == {"ndcg@3", "map", "p@3"}
        for name, value in row["scores"].items():
            # Every null has a reason; every reason belongs to a null.
            assert (value is None) == (name in row["errors"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) == {"metrics", "manifest", "records_sha256"}
    records_bytes = (tmp_path / "records.jsonl").read_bytes()
    assert summary["records_sha256"] == hashlib.sha256(records_bytes).hexdigest()
    for name, item in summary["metrics"].items():
        assert {"value", "n", "unscored", "ci95", "signature"} <= set(item)
        assert item["n"] + item["unscored"] == len(records)
        values = [json.loads(line)["scores"][name] for line in lines]
        scored = [v for v in values if v is not None]
        assert item["value"] == pytest.approx(np.mean(scored))
        lo, hi = item["ci95"]
        assert lo <= item["value"] <= hi
        assert item["signature"].startswith(f"metric:{name.split('@')[0]}")
    manifest = summary["manifest"]
    assert manifest["records"]["count"] == len(records)
    assert manifest["bootstrap"] == {"resamples": 200, "seed": 3, "level": 0.95,
                                     "method": "percentile"}
    assert manifest["metrics"] == ["ndcg@3", "map", "p@3"]
    assert "numpy" in manifest["versions"]


def test_seeded_bootstrap_is_reproducible() -> None:
    first = evaluate(DEMO, ["map"], seed=11, bootstrap=300).summary["map"].ci95
    again = evaluate(DEMO, ["map"], seed=11, bootstrap=300).summary["map"].ci95
    other = evaluate(DEMO, ["map"], seed=12, bootstrap=300).summary["map"].ci95
    assert first == again
    assert first != other


def test_batches_do_not_change_values() -> None:
    whole = evaluate(DEMO, ["ndcg@5", "mrr"], bootstrap=10, batch_size=1000)
    pieces = evaluate(DEMO, ["ndcg@5", "mrr"], bootstrap=10, batch_size=3)
    assert [r.scores for r in whole.records] == [r.scores for r in pieces.records]


def test_progress_hook_reaches_total() -> None:
    seen: list[tuple[int, int]] = []
    evaluate(DEMO, ["mrr", "map"], bootstrap=10, batch_size=3,
             progress=lambda done, total: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] == len(load_records(DEMO))


def test_no_record_with_judgments_stops_before_scoring() -> None:
    items = records_from_dicts([{"id": "a", "contexts": ["x"]}])
    with pytest.raises(UsageError, match="needs 'judgments', and no record has it"):
        evaluate(items, ["ndcg@10"])


def test_duplicate_and_empty_metric_lists() -> None:
    with pytest.raises(UsageError, match="twice"):
        evaluate(DEMO, ["p@5", "p(rel=1)@5"])
    with pytest.raises(UsageError, match="no metrics"):
        evaluate(DEMO, [])


def test_qrels_mapping_fills_judgments() -> None:
    items = records_from_dicts([{"id": "a", "contexts": ["x", "y"]}])
    results = evaluate(items, ["mrr"], qrels={"a": {"2": 1}}, bootstrap=10)
    assert results.records[0].scores["mrr"] == 0.5
    assert "judgments:qrels" in results.summary["mrr"].signature


def test_inputs_are_not_mutated() -> None:
    items = records_from_dicts([{"id": "a", "contexts": ["x", "y"], "judgments": {"1": 1}}])
    before = [r.to_dict() for r in items]
    evaluate(items, ["mrr", "ndcg@2"], bootstrap=10)
    assert [r.to_dict() for r in items] == before


def test_bootstrap_ci_edges() -> None:
    assert bootstrap_ci(np.array([])) is None
    assert bootstrap_ci(np.array([0.25]), resamples=10) == (0.25, 0.25)
    lo, hi = bootstrap_ci(np.arange(100, dtype=float), resamples=2000, seed=1)
    assert 40 < lo < 49.5 < hi < 59
    with pytest.raises(ValueError):
        bootstrap_ci(np.array([1.0]), resamples=0)


def test_public_api_names_the_function() -> None:
    import rageval
    import rageval.api  # importing the module must not shadow the function

    assert callable(rageval.evaluate) and rageval.evaluate.__name__ == "evaluate"
    assert callable(rageval.load_records)


def test_metric_objects_take_the_run_options() -> None:
    from rageval.core.registry import create

    results = evaluate(DEMO, [create("recall@3")], trec_convention=True, bootstrap=10)
    assert results.summary["recall@3"].unscored == 0
    assert "undefined:zero" in results.summary["recall@3"].signature


def test_qrels_that_match_nothing_is_an_error_and_mixed_sources_are_named() -> None:
    from rageval.core.errors import InputError

    with pytest.raises(InputError, match="matches a record id"):
        evaluate(DEMO, ["mrr"], qrels={"zz": {"d1": 1}})
    items = records_from_dicts([
        {"id": "a", "contexts": ["x"], "judgments": {"1": 1}},
        {"id": "b", "contexts": ["x"]},
    ])
    results = evaluate(items, ["mrr"], qrels={"b": {"1": 1}}, bootstrap=10)
    assert "judgments:mixed" in results.summary["mrr"].signature


@pytest.mark.parametrize(("kwargs", "name"), [({"seed": -1}, "seed"),
                                              ({"bootstrap": 0}, "bootstrap"),
                                              ({"batch_size": 0}, "batch_size")])
def test_bad_settings_are_usage_errors(kwargs: dict, name: str) -> None:
    with pytest.raises(UsageError, match=name):
        evaluate(DEMO, ["mrr"], **kwargs)


def test_non_finite_and_unexplained_values_get_reasons() -> None:
    from rageval.core.metric import Batch, MetricResult
    from rageval.core.registry import create
    from rageval.engine.local import _checked

    batch = Batch(records_from_dicts([{"id": "a"}, {"id": "b"}]))
    result = MetricResult({"mrr": np.array([np.inf, np.nan])}, [None, None])
    _checked(create("mrr"), batch, result)
    assert np.isnan(result.values["mrr"]).all()
    assert "not finite" in result.reasons[0]
    assert result.reasons[1] == "undefined value"


def test_grades_are_bounded() -> None:
    from rageval.core.errors import InputError

    with pytest.raises(InputError, match="outside"):
        records_from_dicts([{"id": "a", "judgments": {"d": 10**30}}])


def test_family_names_are_case_insensitive() -> None:
    from rageval.core.registry import create

    assert str(create("ROUGE3")) == "rouge3"
