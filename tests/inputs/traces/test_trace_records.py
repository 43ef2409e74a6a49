"""Trace records are built straight from their spans, and a references file's usual lines
straight from their objects, without a record object walked and validated: they are the
records that validating those objects gives, and a value the validation refuses or repairs
goes through it, with the same error or repair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from genai_spans import any_value

from rageval.core.errors import InputError
from rageval.core.records import iter_records, records_from_dicts
from rageval.inputs import InputSpec, load_inputs
from rageval.inputs.traces.openinference import unit_records
from rageval.inputs.traces.otlp import otlp_traces
from rageval.inputs.traces.references import ReferencesJoin


def _span(trace: str, span: str, attributes: dict[str, Any], parent: str | None = None,
          start: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": trace, "spanId": span, "name": "s",
                           "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1),
                           "attributes": [{"key": k, "value": any_value(v)}
                                          for k, v in attributes.items()]}
    if parent is not None:
        out["parentSpanId"] = parent
    return out


def _trace(n: int, root: dict[str, Any], documents: list[dict[str, Any]] | None,
           answer: str | None) -> list[dict[str, Any]]:
    trace = f"{n:032x}"
    spans = [_span(trace, f"{n:08x}00000001", {"openinference.span.kind": "CHAIN", **root})]
    if documents is not None:
        attributes: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
        for i, doc in enumerate(documents):
            attributes.update({f"retrieval.documents.{i}.document.{k}": v
                               for k, v in doc.items()})
        spans.append(_span(trace, f"{n:08x}00000002", attributes, f"{n:08x}00000001", 2))
    if answer is not None:
        spans.append(_span(trace, f"{n:08x}00000003", {
            "openinference.span.kind": "LLM", "llm.output_messages.0.message.content": answer},
            f"{n:08x}00000001", 3))
    return spans


def _write(path: Path, traces: list[list[dict[str, Any]]]) -> Path:
    spans = [span for trace in traces for span in trace]
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n")
    return path


def _validated(path: Path, field_map: dict[str, str]) -> list[Any]:
    """The records that validating each trace's record object gives."""
    objects = [item for spans in otlp_traces(str(path), 1 << 20)
               for _, item in unit_records(spans, "trace", field_map, str(path))]
    return records_from_dicts(objects)


_TRACES = [
    _trace(1, {"input.value": "who?", "metadata": '{"qid": "q1", "gold": ["a", "b"]}'},
           [{"id": "d1", "content": "one", "score": 2.5}, {"id": "d2", "content": "two"}],
           "Ann."),
    _trace(2, {"input.value": "where?", "metadata": '{"qid": 7, "gold": "Oslo"}'},
           [{"content": "no id", "score": float("nan")}, {"id": 12, "content": "x", "score": 3},
            {"id": "d9", "content": "", "score": float("inf")}], None),
    _trace(3, {"input.value": "{}", "input.mime_type": "application/json",
               "metadata": '{"qid": "q3", "gold": 4}'}, None, "é ü"),
    _trace(4, {"input.value": "ß?", "metadata": '{"qid": "é4"}'},
           [{"id": "dé", "content": "ö"}], "x"),
]


@pytest.mark.parametrize("field_map", [
    {"id": "metadata.qid"},
    {"id": "metadata.qid", "reference": "metadata.gold"},
    {"id": "metadata.qid", "query": "metadata.gold", "answer": "metadata.qid"},
    {},
])
def test_records_built_from_spans_are_those_their_objects_validate_to(
        tmp_path: Path, field_map: dict[str, str]) -> None:
    traces = _TRACES if "reference" not in field_map else [
        trace for trace in _TRACES if "gold" in json.dumps(trace)]
    path = _write(tmp_path / "spans.jsonl", traces[:3] if "reference" in field_map else traces)
    spec = InputSpec(records=str(path), kind="openinference",
                     field_map=tuple(field_map.items()))
    if "reference" in field_map:  # the third trace's gold is a number: refused as validated
        with pytest.raises(InputError, match=r"reference.*expected a string") as error:
            load_inputs(spec)
        assert error.value.field == "reference" and "trace 0000" in error.value.message
        _write(path, traces[:2])
    built = load_inputs(spec).records
    assert built == _validated(path, field_map)
    assert [r.to_dict() for r in built] == [r.to_dict() for r in _validated(path, field_map)]


def test_a_lone_surrogate_in_a_text_is_repaired_and_noted(tmp_path: Path) -> None:
    path = _write(tmp_path / "spans.jsonl",
                  [_trace(1, {"input.value": "bad \ud800 query"},
                          [{"id": "d1", "content": "bad \udc00 text"}], "fine")])
    (record,) = load_inputs(InputSpec(records=str(path), kind="openinference")).records
    assert record.query == "bad \ufffd query"
    assert record.contexts[0].text == "bad \ufffd text"
    assert record.extra["lone_surrogates"] == ("query", "contexts[0].text")
    assert (record.extra["trace_id"], record.answer) == (f"{1:032x}", "fine")


@pytest.mark.parametrize(("root", "documents", "message", "field"), [
    ({"metadata": '{"qid": ""}'}, None, "non-empty string", "id"),
    ({"metadata": '{"qid": "q\\ud800"}'}, None, "not valid Unicode", "id"),
    ({"metadata": '{"qid": "q1"}'}, [{"id": "d\ud800", "content": "t"}], "not valid Unicode",
     "contexts[0].id"),
])
def test_an_id_validation_refuses_is_refused_as_before(tmp_path: Path, root: dict[str, Any],
                                                        documents: Any, message: str,
                                                        field: str) -> None:
    path = _write(tmp_path / "spans.jsonl",
                  [_trace(1, {"metadata": '{"qid": "ok"}'}, None, "a"),
                   _trace(2, root, documents, "b")])
    spec = InputSpec(records=str(path), kind="openinference",
                     field_map=(("id", "metadata.qid"),))
    with pytest.raises(InputError, match=message) as error:
        load_inputs(spec)
    assert error.value.field == field
    assert error.value.message.startswith(f"record 2 (trace {2:032x})")
    assert error.value.line == 1


def test_a_references_file_reads_as_its_records_validate(tmp_path: Path) -> None:
    lines = [{"id": "q1", "reference": "one", "judgments": {"d1": 2, "d2": 0.0}},
             {"id": 2, "reference": ["a", "b"]},  # an integer id, several references
             {"id": "q3", "judgments": {}},
             {"id": "q4", "reference": "bad \ud800", "judgments": {"d": -1}},  # repaired
             {"id": "q5", "reference": "r", "lane": "extra keys are read as a record's"},
             {"id": "q6"}]
    path = tmp_path / "refs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    join = ReferencesJoin(str(path))
    expected = list(iter_records(path))
    assert join.qrels == {r.id: dict(r.judgments) for r in expected if r.judgments is not None}
    filled = [join.fill({"id": r.id}, "t", 1).get("reference") for r in expected]
    assert filled == ["one", ["a", "b"], None, "bad \ufffd", "r", None]


@pytest.mark.parametrize(("line", "message", "field"), [
    ({"id": "q2", "judgments": {"d1": "high"}}, "integer grade", "judgments.d1"),
    ({"id": "q2", "judgments": {"d1": 1001}}, "outside", "judgments.d1"),
    ({"id": "", "reference": "r"}, "non-empty string", "id"),
    ({"id": "q\ud800", "reference": "r"}, "not valid Unicode", "id"),
    ({"id": "q2", "reference": 5}, "a string or a non-empty list", "reference"),
    ({"id": "q2", "contexts": 5}, "a list of strings or objects", "contexts"),
    ({"id": "q1", "reference": "again"}, "duplicate record id 'q1'", "id"),
])
def test_a_bad_references_line_is_named_as_before(tmp_path: Path, line: dict[str, Any],
                                                   message: str, field: str) -> None:
    path = tmp_path / "refs.jsonl"
    path.write_text(json.dumps({"id": "q1", "reference": "r"}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError, match=message) as error:
        ReferencesJoin(str(path))
    assert (error.value.path, error.value.line, error.value.field) == (str(path), 2, field)


def test_a_score_too_large_for_a_float_is_left_out_as_a_nan(tmp_path: Path) -> None:
    """An integer score past a float's range ranks nothing, as a NaN, rather than crashing."""
    path = _write(tmp_path / "spans.jsonl", [_trace(
        1, {"input.value": "who?"},
        [{"id": "d1", "content": "one", "score": 10 ** 400}, {"id": "d2", "content": "two",
                                                              "score": 2}], "Ann.")])
    record, = load_inputs(InputSpec(records=str(path), kind="openinference")).records
    assert [(c.id, c.score) for c in record.contexts] == [("d1", None), ("d2", 2.0)]


def test_a_record_object_is_refused_where_record_json_is_expected() -> None:
    """Only the traces reader hands over records it built; anywhere else a Record in place of
    its JSON is refused, unchecked values and all, as before."""
    from rageval.core.records import Record

    for item in (Record(id=""), Record(id="q1")):
        with pytest.raises(InputError, match="expected a record object"):
            records_from_dicts([item])  # type: ignore[list-item]


def test_trace_records_come_with_the_references_file_s_judgments(tmp_path: Path) -> None:
    """Each trace record is built once, its judgments in it; the run's judgments join then
    only counts them and signs with the references file as qrels, as before. A record built
    from its object (a query repaired) gets its judgments there too."""
    from rageval.core.records.judgments import JudgmentsJoin
    from rageval.inputs.traces import references_of, trace_windows

    path = _write(tmp_path / "spans.jsonl", [
        _trace(1, {"input.value": "who?"}, [{"id": "d1", "content": "one"}], "Ann."),
        _trace(2, {"input.value": "bad \ud800"}, [{"id": "d1", "content": "one"}], "Bo."),
        _trace(3, {"input.value": "why?"}, None, "So.")])
    refs = tmp_path / "refs.jsonl"
    refs.write_text("".join(json.dumps(line) + "\n" for line in [
        {"id": f"{1:032x}", "reference": "Ann", "judgments": {"d1": 2}},
        {"id": f"{2:032x}", "judgments": {"d1": 0}}]))
    spec = InputSpec(records=str(path), kind="openinference", references=str(refs))
    join = references_of(spec)
    assert join is not None and join.qrels is not None
    (window,) = trace_windows(spec, 10, join=join)
    assert [r.query for r in window] == ["who?", "bad \ufffd", "why?"]
    assert [None if r.judgments is None else dict(r.judgments) for r in window] == [
        {"d1": 2}, {"d1": 0}, None]
    assert window[0].references == ("Ann",)
    run_join = JudgmentsJoin(join.qrels, qrels_source=str(refs))
    assert run_join.fill(window) is window  # nothing built again
    assert run_join.source() == "qrels"
