"""The HTML report's conversations: each conversation as a thread of its turns, their scores
in every run, the whole-conversation values at its head and the first failing turn marked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rageval
from rageval.core.records import load_records, records_from_dicts
from rageval.report.html.page import build_report

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONS = ROOT / "fixtures" / "demo" / "conversations.jsonl"


def _threads(page: str) -> list[str]:
    start = page.index('<section id="conversations">')
    section = page[start:page.index("</section>", start)]
    return section.split('<article class="thread">')[1:]


def test_each_conversation_is_a_thread_with_its_first_failing_turn_marked() -> None:
    records = load_records(CONVERSATIONS)
    results = rageval.evaluate(str(CONVERSATIONS), ["rouge1", "tools:f1"], bootstrap=20,
                               turn_thresholds={"rouge1": 0.55})
    page = build_report([("run", results)], records_by_run={"run": records})
    threads = _threads(page)
    assert [re.search(r"<h3>([^ <]+)", t).group(1) for t in threads] == [
        "conv-revenue", "conv-cash", "conv-europe"]
    revenue = threads[0]
    assert len(re.findall(r'class="turn(?: failing)?" data-turn', revenue)) == 3
    assert re.findall(r'class="turn failing" data-turn="(\d)"', revenue) == ["3"]
    assert "first failing turn: rouge1" in revenue
    assert "And how much of that came from subscriptions?" in revenue
    assert "calculator({&quot;expression&quot;: &quot;4.2 * 0.62&quot;})" in revenue
    cash = threads[1]
    assert "failing" not in cash  # no turn of it under 0.55
    assert "q-headcount" not in "".join(threads)  # a record on its own is no thread


def test_two_runs_show_both_scores_and_hostile_text_is_escaped() -> None:
    hostile = "<script>alert(1)</script>"
    items = [{"id": "c", "turns": [{"query": hostile, "answer": "a b", "reference": "a b"},
                                   {"query": "next", "answer": "c", "reference": "c d"}]}]
    runs = [(name, rageval.evaluate(records_from_dicts(items), ["rouge1"], bootstrap=10))
            for name in ("a", "b")]
    page = build_report(runs, records_by_run={"a": records_from_dicts(items)})
    [thread] = _threads(page)
    assert thread.count("rouge1 1") == 2  # the first turn, in both runs
    assert hostile not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in thread


def test_a_run_without_conversations_has_no_thread_section() -> None:
    results = rageval.evaluate(str(ROOT / "fixtures" / "demo" / "records.jsonl"), ["rouge1"],
                               bootstrap=10)
    assert 'id="conversations"' not in build_report([("run", results)])
