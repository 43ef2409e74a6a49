"""rageval's metrics as scorers of ``mlflow.genai.evaluate``, on the demo data: each row's value
is the value ``rageval score`` gives its record (a judge's offline, from the demo's cached
replies, its reasoning the rationale), each mean MLflow logs is the run's, and a record left
unscored is an error giving why."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer, judge_score, keyed_options
from mlflow_server import need_mlflow

import rageval
from rageval.core.errors import InputError, UsageError
from rageval.core.records import Record, records_from_dicts
from rageval.mlflow import eval_data, judge_scorers, record_of, scorer

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"
METRICS = ["ndcg@3", "p(rel=2)@3", "rouge1", "judge:faithfulness"]


def demo_judge() -> rageval.JudgeOptions:
    return rageval.JudgeOptions(model="smollm2-135m-instruct",
                                cache=str(DEMO / "judge_cache.jsonl"), offline=True)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``mlflow.genai.evaluate`` of the demo records with rageval's scorers, into a SQLite
    store of its own."""
    need_mlflow()
    import mlflow

    folder = tmp_path_factory.mktemp("genai")
    previous = mlflow.get_tracking_uri()
    with contextlib.chdir(folder):
        mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
        try:
            yield mlflow.genai.evaluate(
                data=eval_data(DEMO / "records.jsonl"),
                scorers=[scorer(m, judge=demo_judge() if m.startswith("judge:") else None)
                         for m in METRICS])
        finally:
            mlflow.set_tracking_uri(previous)


def test_each_row_and_each_mean_are_rageval_s(evaluated: Any) -> None:
    results = rageval.evaluate(DEMO / "records.jsonl", METRICS, judge=demo_judge(),
                               bootstrap=10)
    frame = evaluated.result_df
    ids = [request["id"] for request in frame["request"]]
    assert sorted(ids) == sorted(r.id for r in results.records)
    by_id = {r.id: r for r in results.records}
    for name, key in (("ndcg@3", "ndcg_at_3"), ("p(rel=2)@3", "p_rel_2_at_3"),
                      ("rouge1", "rouge1"), ("judge:faithfulness", "judge/faithfulness")):
        for record_id, got in zip(ids, frame[f"{key}/value"], strict=True):
            want = by_id[record_id].scores[name]
            if want is None:
                assert math.isnan(got)
                assert by_id[record_id].errors[name] in frame.loc[
                    ids.index(record_id), f"{key}/error_message"]
            else:
                assert got == pytest.approx(want)
        assert evaluated.metrics[f"{key}/mean"] == pytest.approx(results.summary[name].value)
    reasons = {i: r for i, r in zip(ids, frame["judge/faithfulness/rationale"], strict=True)}
    assert reasons["q1"] == by_id["q1"].details["judge:faithfulness"]["reasoning"]


def test_a_row_is_read_as_a_record() -> None:
    record = record_of("why?", "because", {"expected_response": "so", "judgments": {"d1": 2}})
    assert (record.query, record.answer, record.references) == ("why?", "because", ("so",))
    assert dict(record.judgments or {}) == {"d1": 2}
    record = record_of({"query": "q", "id": "x"},
                       {"response": "a", "contexts": ["first", "second"]})
    assert record.id == "x" and record.answer == "a"
    assert [c.text for c in record.contexts] == ["first", "second"]
    with pytest.raises(UsageError, match="outputs must be a string or a mapping"):
        record_of("q", 3)
    with pytest.raises(InputError, match=r"mlflow\.genai\.evaluate row, line 1, field 'query'"):
        record_of({"query": 5}, "a")


def test_a_scorer_is_checked_when_made() -> None:
    need_mlflow()
    with pytest.raises(UsageError, match="judge:faithfulness needs a judge"):
        scorer("judge:faithfulness")
    with pytest.raises(UsageError, match="unknown metric"):
        scorer("ndgc@3")
    assert scorer("ndcg@10").name == "ndcg_at_10"
    assert scorer("judge:correctness", judge=demo_judge()).name == "judge/correctness"


def test_every_rubric_is_a_scorer() -> None:
    need_mlflow()
    names = {s.name for s in judge_scorers(demo_judge())}
    assert {"judge/faithfulness", "judge/correctness", "judge/context_relevance",
            "judge/answer_relevance"} <= names
    # Neither the pairwise comparison nor the rubrics of whole conversations, which a row is not.
    assert not names & {"judge/pairwise", "judge/resolution", "judge/consistency"}
    assert len(names) == len(list((ROOT / "prompts").glob("*.toml"))) - 2  # the two above


def tool_records() -> list[Record]:
    calls = [{"name": "search", "arguments": {"q": "revenue"}},
             {"name": "calculator", "arguments": {"expression": "4.2 * 0.62"}}]
    rows = [
        {"id": "t1", "query": "q1", "answer": "a1", "tool_calls": calls,
         "reference_tool_calls": calls, "team": "finance"},
        {"id": "t2", "query": "q2", "answer": "a2", "tool_calls": calls[:1],
         "reference_tool_calls": calls, "team": "finance"},
        {"id": "t3", "query": "q3", "answer": "a3", "tool_calls": [],
         "reference_tool_calls": calls[1:]},
    ]
    return records_from_dicts(rows, source="tools")


def test_tool_calls_and_extra_fields_travel_through_the_rows() -> None:
    need_mlflow()
    records = tool_records()
    rows = eval_data(records)
    assert rows[0]["inputs"]["team"] == "finance"
    assert "tool_calls" in rows[0]["outputs"]
    assert "reference_tool_calls" in rows[0]["expectations"]
    for row, record in zip(rows, records, strict=True):
        assert record_of(**row) == record
    results = rageval.evaluate(records, ["tools:f1", "tools:recall"], bootstrap=1)
    for name in ("tools:f1", "tools:recall"):
        made = scorer(name)
        for row, scored in zip(rows, results.records, strict=True):
            feedback = made(**row)
            assert feedback.error is None
            assert feedback.value == pytest.approx(scored.scores[name])
    assert [scorer("tools:f1")(**row).value for row in rows] == pytest.approx([1.0, 2 / 3, 0.0])


def test_a_metric_of_whole_conversations_is_refused_when_made() -> None:
    need_mlflow()
    with pytest.raises(UsageError, match=r"tools:f1\(scope=conversation\) grades whole "):
        scorer("tools:f1(scope=conversation)")
    with pytest.raises(UsageError, match="judge:resolution grades whole conversations"):
        scorer("judge:resolution", judge=demo_judge())


def test_a_judge_scorer_asks_a_live_judge_through_its_faults(
        keyed_judge: JudgeServer, tmp_path: Path) -> None:
    """Against the loopback judge (real HTTP): a server error is retried and the row gets the
    judge's score and reasoning; a reply without a score is the row's error."""
    need_mlflow()
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create
    from rageval.judge.rubric.render import render

    judge = keyed_options(keyed_judge, tmp_path / "cache.sqlite")
    made = scorer("judge:faithfulness", judge=judge)
    row = {"inputs": {"id": "r1", "query": "What colour is the sky?"},
           "outputs": {"answer": "The sky is blue.", "contexts": ["The sky is blue by day."]}}
    keyed_judge.fail_next("500")
    feedback = made(**row)
    assert keyed_judge.requests == 2  # the 500, then the reply
    metric = create("judge:faithfulness", ScoreOptions(judge=judge))
    prompt = render(metric.rubric, record_of(**row))[-1]["content"]
    assert feedback.error is None and feedback.value == judge_score(prompt)
    assert feedback.rationale.startswith("Scripted")
    keyed_judge.always = "prose"
    row["outputs"]["answer"] = "The sky is green."  # not in the cache: asked again
    failed = made(**row)
    assert keyed_judge.requests > 2
    assert failed.value is None and failed.error is not None
    assert failed.error.error_message == ("unscored: judge reply not usable: no JSON object in "
                                          "the reply")
