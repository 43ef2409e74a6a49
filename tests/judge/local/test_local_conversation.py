"""A three-turn conversation judged by a real model (SmolLM2-135M-Instruct served by
llama-cpp-python): each turn with the turns before it, the conversation whole, then an offline
replay that asks nothing and gives the same numbers. Skipped, with the reason, without the
``local`` extra; CI installs it (and with ``CI=true`` a missing extra fails instead)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from local_model import need_local_extra

from rageval.api import evaluate
from rageval.judge.llm.options import JudgeOptions

pytestmark = pytest.mark.real_model

CONVERSATION = {"id": "refund", "reference": "The user learns who can approve a late refund.",
                "turns": [
    {"query": "Can I get a refund for my order?",
     "contexts": [{"id": "p1", "text": "Refunds are accepted within 30 days of delivery."}],
     "answer": "Yes, refunds are accepted within 30 days of delivery.",
     "reference": "Yes, within 30 days of delivery."},
    {"query": "It was delivered 40 days ago.",
     "contexts": [{"id": "p2", "text": "After 30 days a manager may grant an exception."}],
     "answer": "After 30 days only a manager can grant an exception.",
     "tool_calls": [{"name": "order_lookup", "arguments": {"order": 17},
                     "result": {"delivered_days_ago": 40}}],
     "reference_tool_calls": [{"name": "order_lookup", "arguments": {"order": 17}}],
     "reference": "Only a manager can grant an exception after 30 days."},
    {"query": "How do I reach a manager?",
     "contexts": [{"id": "p3", "text": "Managers answer at support@example.com."}],
     "answer": "Write to support@example.com and ask for a manager.",
     "reference": "Write to support@example.com."},
]}
METRICS = ["judge:answer_relevance", "judge:faithfulness", "judge:resolution",
           "judge:consistency", "rouge1", "tools:f1"]


@pytest.fixture(scope="module")
def local_judge() -> Iterator[object]:
    need_local_extra()
    from rageval.judge.local import LocalJudge

    with LocalJudge(port=0) as judge:
        yield judge


def test_a_conversation_judged_then_replayed_offline(tmp_path: Path, local_judge: object) -> None:
    path = tmp_path / "conversation.jsonl"
    path.write_text(json.dumps(CONVERSATION) + "\n", encoding="utf-8")
    judge = JudgeOptions(model=local_judge.name, base_url=local_judge.base_url,  # type: ignore[attr-defined]
                         cache=str(tmp_path / "cache.sqlite"), concurrency=1, max_tokens=256)
    first = evaluate(str(path), METRICS, judge=judge, bootstrap=50, out=tmp_path / "first")
    asked = first.manifest["judge"]["requests"]
    assert asked == 3 * 2 + 2  # two rubrics per turn, two for the conversation
    lines = [json.loads(x) for x in (tmp_path / "first" / "records.jsonl").read_text()
             .splitlines()]
    assert [x["id"] for x in lines] == ["refund#1", "refund#2", "refund#3", "refund"]
    for line in lines:
        for name, value in line["scores"].items():
            if name.startswith("judge:"):  # on the rubric's scale, or unscored with a reason
                assert (value is None and line["errors"][name]) or 1 <= value <= 5, (name, value)
    assert set(lines[-1]["scores"]) == {"judge:resolution", "judge:consistency"}
    assert lines[1]["scores"]["tools:f1"] == 1.0
    [row] = first.conversations()
    assert row["turns"] == 3 and set(row["conversation_scores"]) == {
        "judge:resolution", "judge:consistency"}

    offline = replace(judge, base_url=None, offline=True)
    again = evaluate(str(path), METRICS, judge=offline, bootstrap=50, out=tmp_path / "again")
    assert again.manifest["judge"]["requests"] == 0
    assert again.manifest["judge"]["cache"]["misses"] == 0
    for a, b in zip(first.records, again.records, strict=True):
        assert a.scores.keys() == b.scores.keys()
        for name in a.scores:
            x, y = a.scores[name], b.scores[name]
            assert x == y or (math.isnan(x) and math.isnan(y)), (a.id, name)
    assert again.conversations() == [row]
