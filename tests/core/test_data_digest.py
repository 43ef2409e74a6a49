"""The data digest of a run (the manifest's ``data``): the same records give the same digests
whatever their order and however they are split into windows; a change in a field changes that
field's digest and those of the outputs that read it, and no other."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rageval.core.records import records_from_dicts
from rageval.core.records.digest import DataDigest

FIELDS = ("query", "contexts", "answer", "reference", "judgments")
NEEDS = {"ndcg@3": ("contexts", "judgments"), "rouge1": ("answer", "reference")}


def _rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "query": f"question {i}", "answer": f"answer {i}",
             "reference": f"reference {i}", "contexts": [{"id": "d1", "text": f"text {i}"}],
             "judgments": {"d1": i % 3}} for i in range(n)]


def _digest(rows: list[dict[str, Any]], windows: int = 1,
            grading: dict[str, str] | None = None) -> dict[str, Any]:
    digest = DataDigest(FIELDS)
    records = records_from_dicts(rows)
    step = max(1, -(-len(records) // windows))
    for start in range(0, len(records), step):
        digest.add(records[start:start + step])
    return digest.manifest(NEEDS, grading)


@given(st.permutations(list(range(12))), st.integers(1, 5))
def test_order_and_windows_change_nothing(order: list[int], windows: int) -> None:
    rows = _rows(12)
    assert _digest([rows[i] for i in order], windows) == _digest(rows)


def test_a_changed_field_changes_its_digest_and_the_sets_that_hold_it() -> None:
    rows = _rows(5)
    before = _digest(rows)
    rows[2]["reference"] = "another reference"
    after = _digest(rows)
    assert [f for f in FIELDS if before["fields"][f] != after["fields"][f]] == ["reference"]
    assert before["metrics"]["ndcg@3"] == after["metrics"]["ndcg@3"]
    assert before["metrics"]["rouge1"] != after["metrics"]["rouge1"]
    assert before["ids"] == after["ids"] and after["records"] == 5


def test_a_system_s_outputs_are_not_its_evaluation_set() -> None:
    rows = _rows(5)
    before = _digest(rows)
    rows[2]["answer"] = "another answer"
    rows[3]["contexts"] = [{"id": "d9", "text": "other"}]
    after = _digest(rows)
    assert [f for f in FIELDS if before["fields"][f] != after["fields"][f]] == [
        "contexts", "answer"]
    assert before["metrics"] == after["metrics"]


def test_two_records_swapping_answers_is_a_change() -> None:
    rows = _rows(3)
    swapped = [dict(r) for r in rows]
    swapped[0]["answer"], swapped[1]["answer"] = rows[1]["answer"], rows[0]["answer"]
    assert _digest(swapped)["fields"]["answer"] != _digest(rows)["fields"]["answer"]


def test_ambiguous_joins_of_texts_differ() -> None:
    one = _rows(1)
    two = [dict(one[0], contexts=[{"id": "d1", "text": "ab"}, {"id": "d2", "text": "c"}])]
    three = [dict(one[0], contexts=[{"id": "d1", "text": "a"}, {"id": "d2", "text": "bc"}])]
    assert _digest(two)["fields"]["contexts"] != _digest(three)["fields"]["contexts"]


def test_the_judge_configuration_enters_the_judge_outputs_only() -> None:
    rows = _rows(3)
    needs = {**NEEDS, "judge:faithfulness": ("contexts", "answer")}
    first, second = DataDigest(FIELDS), DataDigest(FIELDS)
    for digest in (first, second):
        digest.add(records_from_dicts(rows))
    a = first.manifest(needs, {"judge:faithfulness": "metric:judge|model:a"})
    b = second.manifest(needs, {"judge:faithfulness": "metric:judge|model:b"})
    assert a["judge"] != b["judge"]
    assert a["metrics"]["judge:faithfulness"] != b["metrics"]["judge:faithfulness"]
    assert a["metrics"]["rouge1"] == b["metrics"]["rouge1"]
