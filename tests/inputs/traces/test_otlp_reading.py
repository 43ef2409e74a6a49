"""The OTLP reader's quick paths read what the general one does: attribute values of every
type, errors at the attribute's own index, the collector left running after a bad line, a
mapped attribute that only some spans carry, and a references file's judgments checked once."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from rageval.core.errors import InputError
from rageval.core.records import apply_judgments, records_from_dicts
from rageval.inputs import InputSpec, load_inputs
from rageval.inputs.traces.otlp import otlp_traces

TRACE = "5b8efff798038103d269b633813fc60c"


def _span(span_id: str, attributes: list[dict[str, Any]], parent: str | None = None,
          start: int = 1) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": TRACE, "spanId": span_id, "name": "s",
                            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1),
                            "attributes": attributes}
    if parent is not None:
        span["parentSpanId"] = parent
    return span


def _line(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}) + "\n"


def _attribute(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


def _read(path: Path) -> list[list[Any]]:
    return list(otlp_traces(str(path), 1 << 20))


@pytest.mark.parametrize(("value", "read"), [
    ({"stringValue": "text"}, "text"),
    ({"doubleValue": 0.5}, 0.5),
    ({"doubleValue": 5}, 5.0),  # an integral double written without its point
    ({"doubleValue": "2.5"}, 2.5),
    ({"doubleValue": None}, None),
    ({"intValue": "7", "doubleValue": 0.5}, 7),  # an integer is read first
    ({"stringValue": "s", "doubleValue": 0.5}, "s"),
    ({"intValue": "9007199254740993"}, 9007199254740993),
    ({"boolValue": True}, True),
    ({}, None),
])
def test_attribute_values_of_every_type(tmp_path: Path, value: Any, read: Any) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(_span("051581bf3cb55c13", [_attribute("a", {"stringValue": "x"}),
                                                      _attribute("v", value)])))
    ((span,),) = _read(path)
    assert span.attributes == {"a": "x", "v": read}
    assert type(span.attributes["v"]) is type(read)


@pytest.mark.parametrize(("item", "message", "field"), [
    ({"key": 5, "value": {"stringValue": "x"}}, "string key", "attributes[2]"),
    ({"value": {"stringValue": "x"}}, "string key", "attributes[2]"),
    ("key", "string key", "attributes[2]"),
    ({"key": "k", "value": {"doubleValue": [1]}}, "attribute 'k'", "attributes[2].value"),
    ({"key": "k", "value": {"stringValue": 1}}, "stringValue: expected str",
     "attributes[2].value"),
])
def test_a_bad_attribute_is_named_by_its_index_and_line(tmp_path: Path, item: Any,
                                                        message: str, field: str) -> None:
    good = [_attribute("a", {"stringValue": "x"}), _attribute("b", {"doubleValue": 1.0})]
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(_span("051581bf3cb55c13", good))
                    + _line(_span("151581bf3cb55c13", [*good, item, *good], start=5)))
    with pytest.raises(InputError, match=message) as error:
        _read(path)
    assert error.value.line == 2
    assert error.value.field == f"resourceSpans[0].scopeSpans[0].spans[0].{field}"
    assert gc.isenabled()


def test_a_line_not_json_is_named_and_leaves_the_collector_running(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    line = _line(_span("051581bf3cb55c13", []))
    path.write_text(line + line[:-9] + "\n")
    with pytest.raises(InputError, match="malformed JSON") as error:
        _read(path)
    assert error.value.line == 2
    assert gc.isenabled()


def test_the_collector_stays_off_when_it_was_off(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(_span("051581bf3cb55c13", [])))
    gc.disable()
    try:
        assert len(_read(path)) == 1
        assert not gc.isenabled()
    finally:
        gc.enable()


def _trace(trace_id: str, root_attributes: list[dict[str, Any]],
           llm_attributes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kind = [_attribute("openinference.span.kind", {"stringValue": "CHAIN"})]
    llm = [_attribute("openinference.span.kind", {"stringValue": "LLM"})]
    root = dict(_span(trace_id[:16], kind + root_attributes), traceId=trace_id)
    child = dict(_span(trace_id[16:], llm + llm_attributes, parent=trace_id[:16], start=2),
                 traceId=trace_id)
    return [root, child]


def test_a_mapped_attribute_only_some_spans_carry(tmp_path: Path) -> None:
    first, second = "a" * 32, "b" * 32
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(
        *_trace(first, [_attribute("metadata", {"stringValue": '{"qid": "q1"}'})],
                [_attribute("llm.model_name", {"stringValue": "small"})]),
        *_trace(second, [_attribute("metadata", {"stringValue": '{"qid": "q2"}'}),
                         _attribute("llm.model_name", {"stringValue": "root's"})], [])))
    spec = InputSpec(records=str(path), kind="openinference",
                     field_map=(("id", "metadata.qid"), ("reference", "llm.model_name")))
    one, two = load_inputs(spec).records
    assert (one.id, one.references) == ("q1", ("small",))  # from the LLM span below the root
    assert (two.id, two.references) == ("q2", ("root's",))
    third = InputSpec(records=str(path), kind="openinference",
                      field_map=(("id", "metadata.qid"), ("answer", "metadata.missing")))
    assert [r.answer for r in load_inputs(third).records] == [None, None]


def test_a_references_file_s_bad_grade_is_named_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(*_trace("a" * 32, [_attribute("metadata",
                                                        {"stringValue": '{"qid": "q1"}'})], [])))
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "judgments": {"d1": 1}}\n{"id": "q2", "judgments": {"d": "x"}}\n')
    spec = InputSpec(records=str(path), kind="openinference",
                     field_map=(("id", "metadata.qid"),), references=str(refs))
    with pytest.raises(InputError, match="integer grade") as error:
        load_inputs(spec)
    assert (error.value.path, error.value.line) == (str(refs), 2)
    refs.write_text('{"id": "q1", "judgments": {"d1": 2}}\n')
    (record,) = load_inputs(spec).records
    assert dict(record.judgments or {}) == {"d1": 2}


def test_qrels_given_as_a_plain_mapping_are_still_checked() -> None:
    records = records_from_dicts([{"id": "q1"}])
    with pytest.raises(InputError, match="integer grade"):
        apply_judgments(records, {"q1": {"d1": "high"}}, source="qrels")


def test_a_references_file_s_grades_join_read_only(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(*_trace("a" * 32, [_attribute("metadata",
                                                        {"stringValue": '{"qid": "q1"}'})], [])))
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "judgments": {"d1": 2, "d2": 0}}\n')
    spec = InputSpec(records=str(path), kind="openinference",
                     field_map=(("id", "metadata.qid"),), references=str(refs))
    (record,) = load_inputs(spec).records
    assert dict(record.judgments or {}) == {"d1": 2, "d2": 0}
    with pytest.raises(TypeError):
        record.judgments["d1"] = 0  # type: ignore[index]


def test_no_later_change_to_the_qrels_reaches_a_joined_record(tmp_path: Path) -> None:
    """The qrels a references file gave (or a caller's checked qrels) are read-only or
    copied: a record joined with them keeps the grades it was checked with."""
    from rageval.core.records.judgments import CheckedQrels, apply_judgments
    from rageval.core.records.model import Record
    from rageval.inputs.traces.references import ReferencesJoin

    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "judgments": {"d1": 2}}\n'
                    '{"id": "q2", "reference": "r", "judgments": {"d1": 1}, "extra": 1}\n')
    join = ReferencesJoin(str(refs))
    for qid in ("q1", "q2"):  # the plain line and the line validated as a record
        with pytest.raises(TypeError):
            join.qrels[qid]["d1"] = -3  # type: ignore[index]
    grades = {"d1": 1}
    (record,) = apply_judgments([Record(id="q1")], CheckedQrels(q1=grades), source="qrels")
    grades["d1"] = -3
    assert dict(record.judgments or {}) == {"d1": 1}


def test_an_empty_reference_in_a_references_file_is_none_whatever_the_line(
        tmp_path: Path) -> None:
    """A plain line (id, reference, judgments) and a line validated as a record read an empty
    reference alike: as no reference, which leaves a trace's own reference standing."""
    from rageval.inputs.traces.references import ReferencesJoin

    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "reference": ""}\n'
                    '{"id": "q2", "reference": "", "extra": 1}\n')
    join = ReferencesJoin(str(refs))
    for qid in ("q1", "q2"):
        item = {"id": qid, "reference": "from the trace"}
        assert join.fill(item, "spans.jsonl", 1)["reference"] == "from the trace"


def test_a_trace_id_written_in_upper_case_on_a_later_line_is_one_trace(tmp_path: Path) -> None:
    root, child = _trace("ab" * 16, [_attribute("metadata", {"stringValue": '{"qid": "q1"}'})],
                         [_attribute("llm.output_messages.0.message.content",
                                     {"stringValue": "the answer"})])
    later = dict(_span("c" * 16, [], parent="ab" * 8, start=3), traceId="AB" * 16)
    path = tmp_path / "spans.jsonl"
    other, _ = _trace("e" * 32, [_attribute("metadata", {"stringValue": '{"qid": "q2"}'})], [])
    path.write_text(_line(root, child) + _line(other) + _line(later))
    spec = InputSpec(records=str(path), kind="openinference",
                     field_map=(("id", "metadata.qid"),))
    first, second = load_inputs(spec).records
    # The trace of "ab..." ends on line 3 (its upper-case mention): handed over after "ee...".
    assert (first.extra["trace_id"], second.extra["trace_id"]) == ("e" * 32, "ab" * 16)
    assert second.answer == "the answer"
