"""The one place a run's judgments join its records (core/records/judgments.py)."""

from __future__ import annotations

import pytest

from rageval.core.errors import InputError
from rageval.core.records import records_from_dicts
from rageval.core.records.judgments import JudgmentsJoin


def _records(*judged: bool) -> list:
    return records_from_dicts([{"id": f"q{i}", "contexts": ["c"], **({"judgments": {"1": 1}}
                                                                    if j else {})}
                               for i, j in enumerate(judged)])


def test_without_qrels_the_records_pass_as_they_are_and_are_inline() -> None:
    join = JudgmentsJoin()
    records = _records(True, False)
    assert join.fill(records) is records
    windows = iter([records])
    assert join.filled(windows) is windows
    assert join.source() == "inline"


def test_qrels_fill_the_records_as_the_windows_pass() -> None:
    join = JudgmentsJoin({"q1": {"1": 2}, "q9": {"1": 1}}, qrels_source="run.qrels")
    first, second = join.filled(iter([_records(False), _records(False, False)]))
    assert first[0].judgments is None  # q0: not in the qrels
    assert second[1].judgments == {"1": 2}
    assert join.source() == "qrels"


def test_qrels_beside_inline_judgments_are_mixed() -> None:
    join = JudgmentsJoin({"q1": {"1": 0}})
    join.fill(_records(True, False))
    assert join.source() == "mixed"


def test_a_record_judged_in_both_places_is_an_error_naming_both() -> None:
    join = JudgmentsJoin({"q0": {"1": 0}}, qrels_source="run.qrels", records_source="r.jsonl")
    with pytest.raises(InputError) as caught:
        join.fill(_records(True))
    assert "inline judgments in r.jsonl and judgments in run.qrels" in str(caught.value)


def test_qrels_that_match_no_record_are_an_error_once_every_record_was_seen() -> None:
    join = JudgmentsJoin({"q7": {"1": 1}}, qrels_source="run.qrels")
    join.fill(_records(False))
    with pytest.raises(InputError, match="no query id of the qrels matches a record id") as caught:
        join.source()
    assert caught.value.path == "run.qrels"


def test_a_provider_label_is_the_source_from_then_on() -> None:
    join = JudgmentsJoin({"q0": {"1": 1}})
    join.fill(_records(False, False))
    join.provided("qrels+judge/context_relevance@abc/m")
    assert join.source() == "qrels+judge/context_relevance@abc/m"
