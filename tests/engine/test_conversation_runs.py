"""Runs of conversations: every turn scored exactly as the record it would be on its own, the
summary over conversations (a cluster bootstrap), conversations.jsonl, and the same results
however the run is windowed."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.core.records import records_from_dicts
from rageval.core.results import Results
from rageval.stats.resampling import bootstrap_ci

METRICS = ["ndcg@3", "p@2", "recall@5", "mrr", "mean_rank", "rouge1", "rougeL", "bleu",
           "tools:f1", "tools:recall(match=name)"]
WORDS = [f"w{i}" for i in range(12)]


def _text(draw: st.DrawFn, low: int = 1) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=low, max_size=6)))


@st.composite
def turns(draw: st.DrawFn) -> dict[str, Any]:
    docs = [f"d{i}" for i in range(6)]
    turn: dict[str, Any] = {"query": _text(draw)}
    if draw(st.booleans()):
        picked = draw(st.lists(st.sampled_from(docs), unique=True, max_size=5))
        turn["contexts"] = [{"id": d, "text": _text(draw)} for d in picked]
    if draw(st.booleans()):
        turn["judgments"] = draw(st.dictionaries(st.sampled_from(docs), st.integers(0, 3)))
    if draw(st.booleans()):
        turn["answer"] = _text(draw, 0)
    if draw(st.booleans()):
        turn["reference"] = _text(draw)
    if draw(st.booleans()):
        calls = st.lists(st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]),
                                                "arguments": st.dictionaries(
                                                    st.sampled_from("xy"), st.integers(0, 2))}),
                         max_size=3)
        turn["tool_calls"], turn["reference_tool_calls"] = draw(calls), draw(calls)
    return turn


conversations = st.lists(st.lists(turns(), min_size=1, max_size=4), min_size=1, max_size=5)


def _items(convs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "turns": t} for i, t in enumerate(convs)]


def _flattened(convs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"id": f"c{i}#{n}", **turn} for i, t in enumerate(convs)
            for n, turn in enumerate(t, 1)]


@settings(max_examples=60, deadline=None)
@given(conversations)
def test_each_turn_scores_as_the_record_it_would_be_on_its_own(convs):
    try:
        flat_run = evaluate(records_from_dicts(_flattened(convs)), METRICS, bootstrap=20)
    except UsageError as refused:  # a metric no record can feed is refused, as it is for turns
        with pytest.raises(UsageError) as also:
            evaluate(records_from_dicts(_items(convs)), METRICS, bootstrap=20)
        assert str(also.value) == str(refused)
        return
    turns_run = evaluate(records_from_dicts(_items(convs)), METRICS, bootstrap=20)
    assert len(turns_run.records) == len(flat_run.records)
    for turn, flat in zip(turns_run.records, flat_run.records, strict=True):
        assert (turn.id, turn.errors, turn.details) == (flat.id, flat.errors, flat.details)
        assert turn.scores.keys() == flat.scores.keys()
        for name, value in turn.scores.items():
            assert value == flat.scores[name], name  # unscored is None in both
        assert turn.conversation == turn.id.split("#")[0] and flat.conversation is None
        assert turn.turn == int(turn.id.split("#")[1])


def _conversation_means(results: Results, name: str) -> list[float]:
    by: dict[str, list[float]] = {}
    for record in results.records:
        value = record.scores[name]
        if value is not None and not math.isnan(value):
            by.setdefault(record.conversation or record.id, []).append(value)
    return [sum(v) / len(v) for v in by.values()]


CONVERSATIONS = [
    {"id": "a", "turns": [
        {"query": "q", "answer": "the cat sat on the mat", "reference": "the cat sat on a mat",
         "contexts": [{"id": "d1", "text": "x"}, {"id": "d2", "text": "y"}],
         "judgments": {"d2": 1}},
        {"query": "q2", "answer": "dogs", "reference": "the dog ran away",
         "contexts": [{"id": "d3", "text": "x"}], "judgments": {"d3": 2}},
        {"query": "q3", "answer": "no reference here"}]},
    {"id": "b", "turns": [
        {"query": "q", "answer": "red green blue", "reference": "red green",
         "contexts": [{"id": "d1", "text": "x"}], "judgments": {"d9": 1}}]},
    {"id": "single", "query": "q", "answer": "one two three", "reference": "one two four",
     "contexts": [{"id": "d5", "text": "x"}], "judgments": {"d5": 1}},
    {"id": "c", "turns": [{"query": "q", "contexts": [{"id": "d1", "text": "x"}],
                           "judgments": {}}, {"query": "q2", "answer": "x", "reference": "y"}]},
]


def test_the_summary_is_over_conversations_and_resamples_them():
    results = evaluate(records_from_dicts(CONVERSATIONS), ["rouge1", "mrr", "bleu"], seed=3,
                       bootstrap=200)
    for name in ("rouge1", "mrr", "bleu.sentence"):
        means = _conversation_means(results, name)
        item = results.summary[name]
        assert item.value == pytest.approx(float(np.mean(means)))
        assert item.ci95 == bootstrap_ci(np.array(means), resamples=200, seed=3)
        assert item.ci_method == "conversations"
        assert "|unit:conversation|" in item.signature
    rouge = results.summary["rouge1"]
    assert (rouge.n, rouge.unscored) == (4, 0)  # a, b, single and c (its second turn)
    assert rouge.figures["turns"] == {"scored": 5, "unscored": 2}
    mrr = results.summary["mrr"]
    assert (mrr.n, mrr.unscored) == (3, 1)  # c's one retrieval turn has nothing relevant
    # Corpus BLEU is over every scored turn; its interval resamples conversations.
    bleu = results.summary["bleu"]
    assert bleu.aggregate == "corpus" and bleu.ci_method == "conversations"
    assert results.manifest["conversations"] == {"count": 3, "turns": 6,
                                                 "turn_thresholds": {},
                                                 "lower_is_better": [],
                                                 "conversation_outputs": []}


def test_conversations_jsonl(tmp_path):
    out = tmp_path / "run"
    results = evaluate(records_from_dicts(CONVERSATIONS), ["rouge1", "mean_rank"],
                       bootstrap=20, out=out, turn_thresholds={"rouge1": 0.5, "mean_rank": 1})
    lines = [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]
    assert lines == results.conversations() == Results.load(out).conversations()
    assert [line["id"] for line in lines] == ["a", "b", "c"]
    a = lines[0]
    turn_values = [r.scores["rouge1"] for r in results.records[:3]]
    assert a["turns"] == 3
    assert a["scores"]["rouge1"] == {
        "mean": pytest.approx(sum(turn_values[:2]) / 2), "min": min(turn_values[:2]),
        "last": None, "scored": 2, "first_failing": 2}
    # mean_rank: lower is better, so a turn fails over its threshold (rank 2 > 1).
    assert a["scores"]["mean_rank"]["first_failing"] == 1
    assert lines[1]["scores"]["mean_rank"] == {"mean": None, "min": None, "last": None,
                                               "scored": 0, "first_failing": None}
    # A run without conversations in the same directory leaves no conversations.jsonl.
    evaluate(records_from_dicts([CONVERSATIONS[2]]), ["rouge1"], bootstrap=20, out=out)
    assert not (out / "conversations.jsonl").exists()


def test_the_same_run_whatever_the_window(tmp_path):
    path = tmp_path / "convs.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    runs = []
    for window in (1, 2, 100):
        out = tmp_path / f"w{window}"
        results = evaluate(str(path), ["rouge1", "ndcg@3", "bleu"], bootstrap=50, window=window,
                           out=out, turn_thresholds={"rouge1": 0.4})
        summary = {n: s.to_json() for n, s in results.summary.items()}
        runs.append(((out / "records.jsonl").read_text(),
                     (out / "conversations.jsonl").read_text(), summary))
    assert runs[0] == runs[1] == runs[2]


def test_options_that_resample_records_are_refused_before_scoring(tmp_path):
    records = records_from_dicts(CONVERSATIONS)
    with pytest.raises(UsageError, match="resamples conversations: leave --ci out"):
        evaluate(records, ["rouge1"], ci="judge-noise")
    with pytest.raises(UsageError, match="turn threshold rouge2: not an output scored per turn"):
        evaluate(records, ["rouge1"], turn_thresholds={"rouge2": 0.5})
    with pytest.raises(UsageError, match="turn threshold rouge1: expected a finite number"):
        evaluate(records, ["rouge1"], turn_thresholds={"rouge1": math.inf})


def test_a_run_without_conversations_is_summed_up_as_before():
    flat = records_from_dicts([CONVERSATIONS[2], {**CONVERSATIONS[2], "id": "other"}])
    results = evaluate(flat, ["rouge1"], bootstrap=50)
    assert "conversations" not in results.manifest
    assert results.summary["rouge1"].ci_method == "records"
    assert "unit:" not in results.summary["rouge1"].signature
    assert results.conversations() == []


WHOLE = [
    {"id": "c1", "reference_tool_calls": [{"name": "x"}], "turns": [
        {"query": "a", "tool_calls": [], "reference_tool_calls": []},
        {"query": "b", "tool_calls": [], "reference_tool_calls": [{"name": "x"}]}]},
    {"id": "c3", "reference_tool_calls": [], "turns": [
        {"query": "a", "tool_calls": [], "reference_tool_calls": []},
        {"query": "b", "tool_calls": [], "reference_tool_calls": [{"name": "x"}]}]},
    {"id": "b#1", "query": "q", "tool_calls": [], "reference_tool_calls": []},
    {"id": "b", "reference_tool_calls": [], "turns": [
        {"id": "z", "query": "q", "tool_calls": [], "reference_tool_calls": []}]},
]


def test_conversations_split_across_windows_sum_up_whole(tmp_path):
    """A conversation's own line comes at the end of the window holding its last turn, after
    the next conversation's first turns: each conversation still sums up all of its turns."""
    path = tmp_path / "convs.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in WHOLE))
    metrics = ["tools:f1", "tools:f1(scope=conversation)"]
    rows = []
    for window in (3, 100):
        results = evaluate(str(path), metrics, window=window, bootstrap=10,
                           out=tmp_path / f"w{window}")
        rows.append(results.conversations())
        if window == 3:
            assert [(r.id, r.turn) for r in results.records][:4] == [
                ("c1#1", 1), ("c1#2", 2), ("c3#1", 1), ("c1", None)]
    assert rows[0] == rows[1]
    by_id = {row["id"]: row for row in rows[0]}
    assert by_id["c3"]["turns"] == 2 and by_id["c3"]["scores"]["tools:f1"]["scored"] == 2
    assert by_id["c3"]["scores"]["tools:f1"]["mean"] == 0.5
    assert by_id["c1"]["conversation_scores"] == {"tools:f1(scope=conversation)": 0.0}


def test_the_data_digest_sees_the_expected_calls(tmp_path):
    metrics = ["tools:f1", "tools:f1(scope=conversation)"]
    first = evaluate(records_from_dicts(WHOLE), metrics, bootstrap=10)
    changed = json.loads(json.dumps(WHOLE))
    changed[0]["reference_tool_calls"] = [{"name": "y"}]  # a conversation's own expectation
    second = evaluate(records_from_dicts(changed), metrics, bootstrap=10)
    data = first.manifest["data"], second.manifest["data"]
    name = "tools:f1(scope=conversation)"
    assert data[0]["metrics"][name] != data[1]["metrics"][name]
    assert data[0]["metrics"]["tools:f1"] == data[1]["metrics"]["tools:f1"]


def test_whole_conversation_metrics_need_conversations(tmp_path):
    flat = [{"id": "r", "query": "q", "tool_calls": [], "reference_tool_calls": []}]
    path = tmp_path / "flat.jsonl"
    path.write_text(json.dumps(flat[0]) + "\n" + json.dumps({**flat[0], "id": "s"}) + "\n")
    for records, window in ((records_from_dicts(flat), None), (str(path), 1)):
        with pytest.raises(UsageError, match="grades whole conversations, and no record of "
                                             "this run has turns"):
            evaluate(records, ["tools:f1(scope=conversation)"], bootstrap=10, window=window)


def test_a_run_of_one_window_checks_its_conversations_before_scoring_its_turns():
    flat = records_from_dicts([{"id": "r", "query": "q", "tool_calls": [],
                                "reference_tool_calls": []}])
    told: list[tuple[int, int | None]] = []
    with pytest.raises(UsageError, match="grades whole conversations"):
        evaluate(flat, ["tools:f1", "tools:f1(scope=conversation)"], bootstrap=10,
                 progress=lambda done, total: told.append((done, total)))
    assert told == []  # not one turn was scored
