"""A record a reader builds from fields it checked itself (``checked_record``) is the record
that validating its JSON form gives, or None where that validation would refuse or repair a
value; ``validate_records`` passes such a record on, its id checked as every other; and checked
qrels join a record keeping every other field of it."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import pytest

from rageval.core.errors import InputError
from rageval.core.records.judgments import CheckedQrels, apply_judgments
from rageval.core.records.model import checked_record, record_object
from rageval.core.records.tools import validate_tool_calls
from rageval.core.records.validation import validate_records

_EXTRA = {"trace_id": "t1", "span_id": "s1"}


def _json_form(id: str, query: str | None, contexts: list[tuple[str, str, float | None]],
               answer: str | None, references: tuple[str, ...]) -> dict[str, Any]:
    item: dict[str, Any] = {"id": id, **_EXTRA}
    if query is not None:
        item["query"] = query
    if answer is not None:
        item["answer"] = answer
    if contexts:
        item["contexts"] = [{"id": doc, "text": text} if score is None
                            else {"id": doc, "text": text, "score": score}
                            for doc, text, score in contexts]
    if references:
        item["reference"] = references[0] if len(references) == 1 else list(references)
    return item


@pytest.mark.parametrize(("id", "query", "contexts", "answer", "references"), [
    ("q1", "what?", [("d1", "one", 2.0), ("d2", "", None)], "it", ("ref",)),
    ("q2", None, [], None, ()),
    ("q3", "é?", [("dé", "ü", 0.5)], "ß", ("a", "b")),  # not ASCII, valid Unicode
])
def test_a_checked_record_is_the_record_its_json_form_gives(
        id: str, query: str | None, contexts: list[tuple[str, str, float | None]],
        answer: str | None, references: tuple[str, ...]) -> None:
    built = checked_record(id, query, contexts, answer, references, _EXTRA)
    assert built == record_object(_json_form(id, query, contexts, answer, references))
    assert built is not None and built.to_dict() == record_object(
        _json_form(id, query, contexts, answer, references)).to_dict()


@pytest.mark.parametrize("fields", [
    {"id": ""},  # refused: an empty id
    {"id": "q\ud800"},  # refused: an id that is not valid Unicode
    {"contexts": [("d\udc00", "text", None)]},  # refused: a context id likewise
    {"query": "lone \ud800"},  # repaired, and the repair noted: left to record_object
    {"answer": "\udfff"},
    {"references": ("ok", "bad \ud834")},
    {"contexts": [("d1", "bad \ud800 text", 1.0)]},
])
def test_a_value_validation_would_refuse_or_repair_gives_none(fields: dict[str, Any]) -> None:
    given: dict[str, Any] = {"id": "q1", "query": "q", "contexts": [("d1", "t", None)],
                             "answer": "a", "references": ("r",), **fields}
    assert checked_record(given["id"], given["query"], given["contexts"], given["answer"],
                          given["references"], _EXTRA) is None


def test_validate_records_passes_a_built_record_on_and_checks_its_id() -> None:
    built = checked_record("q1", "q", [], None, (), {})
    assert built is not None
    assert list(validate_records([(1, built), (2, {"id": "q2"})], "r.jsonl", "record",
                                 built=True)) == [
        built, record_object({"id": "q2"})]
    with pytest.raises(InputError, match="duplicate record id 'q1'"):
        list(validate_records([(1, built), (2, {"id": "q1"})], "r.jsonl", "record", built=True))


def test_checked_qrels_join_a_record_keeping_every_other_field() -> None:
    calls = validate_tool_calls([{"name": "search", "arguments": {"q": "x"}}], "tool_calls")
    record = dataclasses.replace(
        record_object({"id": "q1", "query": "q", "contexts": [{"id": "d1", "text": "t"}],
                       "answer": "a", "reference": ["r1", "r2"], "lane": 3}),
        tool_calls=calls, reference_tool_calls=calls, turn=2)
    (joined,) = apply_judgments([record], CheckedQrels({"q1": {"d1": 1}}), source="refs")
    assert joined == dataclasses.replace(record, judgments=MappingProxyType({"d1": 1}))
    assert all(getattr(joined, f.name) is getattr(record, f.name)
               for f in dataclasses.fields(record) if f.name != "judgments")
