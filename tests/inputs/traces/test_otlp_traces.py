"""Records from OTLP/JSON trace files: spans made with opentelemetry-sdk and the OpenInference
conventions, written by the OTLP/JSON file exporter, read back as records; every way a file
can be malformed is an error naming the file, the line and the field."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rageval.core.errors import InputError, UsageError
from rageval.inputs import InputSpec, load_inputs
from rageval.inputs.traces import trace_windows

pytest.importorskip("opentelemetry.exporter.otlp.json.file",
                    reason="the trace tests need the test extra's OpenTelemetry exporter")


@contextmanager
def tracer(path: Path, batch: int = 512) -> Iterator[Any]:
    """A tracer whose spans go to ``path`` through the OTLP/JSON file exporter, ``batch``
    spans per line."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(path),
                                                   max_export_batch_size=batch))
    try:
        yield provider.get_tracer("tests")
    finally:
        provider.shutdown()


def rag_trace(tracer: Any, qid: str, question: str, hops: list[list[tuple[str, str]]],
              answer: str | None, kind: str = "CHAIN") -> None:
    """One question: a root span of ``kind``, a RETRIEVER span per hop, an LLM span."""
    with tracer.start_as_current_span("rag", attributes={
            "openinference.span.kind": kind, "input.value": question,
            "metadata": json.dumps({"qid": qid})}):
        for docs in hops:
            with tracer.start_as_current_span("retrieve", attributes={
                    "openinference.span.kind": "RETRIEVER"}) as span:
                for i, (doc, text) in enumerate(docs):
                    span.set_attribute(f"retrieval.documents.{i}.document.id", doc)
                    span.set_attribute(f"retrieval.documents.{i}.document.content", text)
                    span.set_attribute(f"retrieval.documents.{i}.document.score", 1.0 - i / 10)
        if answer is not None:
            with tracer.start_as_current_span("llm", attributes={
                    "openinference.span.kind": "LLM",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.content": f"ctx\n{question}",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": answer}):
                pass


def spec(path: Path, **more: Any) -> InputSpec:
    return InputSpec(records=str(path), kind="openinference", **more)


def records(path: Path, **more: Any) -> list[Any]:
    return load_inputs(spec(path, **more)).records


def test_one_record_per_trace_with_its_fields_from_spans_spread_over_lines(
        tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path, batch=1) as t:  # every span on its own line: traces come apart
        rag_trace(t, "q1", "Who?", [[("d1", "one"), ("d2", "two")]], "Ann.")
        rag_trace(t, "q2", "Where?", [[("d3", "three")], [("d4", "four"), ("d3", "three")]],
                  "Oslo.")
    assert len(path.read_text().splitlines()) == 7
    first, second = records(path)
    assert first.query == "Who?" and first.answer == "Ann."
    assert [(c.id, c.text, c.score) for c in first.contexts] == [("d1", "one", 1.0),
                                                                 ("d2", "two", 0.9)]
    # Two hops keep their order; a document retrieved again keeps its first rank.
    assert [c.id for c in second.contexts] == ["d3", "d4"]
    assert first.id == first.extra["trace_id"] and len(first.id) == 32
    assert len(first.extra["span_id"]) == 16


def test_ids_from_a_mapped_attribute_and_references_joined_by_id(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path) as t:
        rag_trace(t, "q1", "Who?", [[("d1", "one")]], "Ann.")
        rag_trace(t, "q2", "Where?", [[("d2", "two")]], "Oslo.")
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "reference": "Ann", "judgments": {"d1": 1}}\n'
                    '{"id": "q9", "reference": "nobody"}\n')
    q1, q2 = records(path, field_map=(("id", "metadata.qid"),), references=str(refs))
    assert (q1.id, q1.references, dict(q1.judgments)) == ("q1", ("Ann",), {"d1": 1})
    assert (q2.id, q2.references, q2.judgments) == ("q2", (), None)


def test_a_trace_without_a_retriever_or_llm_span_leaves_those_fields_out(
        tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path) as t:
        rag_trace(t, "q1", "Who?", [], None)
    (record,) = records(path)
    assert record.query == "Who?" and record.answer is None and record.contexts == ()


def test_one_record_per_top_level_span_of_a_kind(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path) as t, t.start_as_current_span("agent", attributes={
            "openinference.span.kind": "AGENT"}):
        rag_trace(t, "q1", "Who?", [[("d1", "one")]], "Ann.")
        rag_trace(t, "q2", "Where?", [[("d2", "two")]], "Oslo.")
    whole = records(path)
    assert len(whole) == 1 and [c.id for c in whole[0].contexts] == ["d1", "d2"]
    q1, q2 = records(path, trace_unit="CHAIN", field_map=(("id", "metadata.qid"),))
    assert (q1.id, q1.answer, [c.id for c in q1.contexts]) == ("q1", "Ann.", ["d1"])
    assert (q2.id, q2.answer, [c.id for c in q2.contexts]) == ("q2", "Oslo.", ["d2"])
    assert q1.extra["trace_id"] == q2.extra["trace_id"] != q1.extra["span_id"]
    with pytest.raises(InputError, match="no span of kind TOOL"):
        records(path, trace_unit="TOOL")
    with pytest.raises(UsageError, match="unknown trace unit 'chains'"):
        records(path, trace_unit="chains")


def test_a_single_pretty_printed_export_and_base64_ids_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path) as t:
        rag_trace(t, "q1", "Who?", [[("d1", "one")]], "Ann.")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    merged = {"resourceSpans": [rs for line in lines for rs in line["resourceSpans"]]}
    for rs in merged["resourceSpans"]:  # protobuf's JSON mapping: ids in base64
        for scope in rs["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(merged, indent=2))
    assert [r.to_dict() for r in records(pretty)] == [r.to_dict() for r in records(path)]


def test_windows_hold_at_most_their_size(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path, batch=3) as t:
        for i in range(7):
            rag_trace(t, f"q{i}", f"Question {i}?", [[("d1", "one")]], "A.")
    sizes = [len(w) for w in trace_windows(spec(path, field_map=(("id", "metadata.qid"),)), 3)]
    assert sizes == [3, 3, 1]


def _corrupt(path: Path, change: Any) -> Path:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    change(lines)
    out = path.with_name("bad.jsonl")
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return out


@pytest.fixture
def two_traces(tmp_path: Path) -> Path:
    path = tmp_path / "spans.jsonl"
    with tracer(path, batch=2) as t:
        rag_trace(t, "q1", "Who?", [[("d1", "one")]], "Ann.")
        rag_trace(t, "q2", "Where?", [[("d2", "two")]], "Oslo.")
    return path


def _span(lines: list[Any], line: int) -> dict[str, Any]:
    span: dict[str, Any] = lines[line]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


@pytest.mark.parametrize(("change", "message", "field"), [
    (lambda ls: _span(ls, 1).pop("traceId"), "16-byte trace id", "traceId"),
    (lambda ls: _span(ls, 1).update(spanId="xyz"), "8-byte span id", "spanId"),
    (lambda ls: _span(ls, 1).update(attributes={"a": 1}), "list of key/value", "attributes"),
    (lambda ls: _span(ls, 1)["attributes"].append({"key": "x", "value": {"weird": 1}}),
     "unknown value type", "value"),
    (lambda ls: ls.__setitem__(1, {"spans": []}), "an object with resourceSpans", None),
    (lambda ls: _span(ls, 1).update(startTimeUnixNano="soon"), "nanoseconds", "startTime"),
])
def test_a_malformed_span_names_the_file_line_and_field(two_traces: Path, change: Any,
                                                        message: str,
                                                        field: str | None) -> None:
    bad = _corrupt(two_traces, change)
    with pytest.raises(InputError, match=message) as error:
        records(bad)
    assert error.value.path == str(bad) and error.value.line == 2
    assert (error.value.field is None) if field is None else field in error.value.field


def test_a_line_that_is_not_json_names_its_line(two_traces: Path) -> None:
    bad = two_traces.with_name("bad.jsonl")
    lines = two_traces.read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1][:-5], *lines[2:]]) + "\n")
    with pytest.raises(InputError, match="malformed JSON") as error:
        records(bad)
    assert error.value.line == 2


def test_a_missing_mapped_id_and_duplicate_ids_name_the_trace(two_traces: Path) -> None:
    with pytest.raises(InputError, match=r"trace [0-9a-f]{32}: no attribute 'metadata.ticket'"):
        records(two_traces, field_map=(("id", "metadata.ticket"),))
    with pytest.raises(InputError, match=r"record 2 \(trace [0-9a-f]{32}\): duplicate record "
                       r"id 'same' \(first used at record 1\)") as error:
        records(_same_ids(two_traces), field_map=(("id", "metadata.qid"),))
    assert error.value.line is not None and error.value.field == "id"


def _same_ids(path: Path) -> Path:
    text = path.read_text().replace('\\"q2\\"', '\\"same\\"').replace('\\"q1\\"', '\\"same\\"')
    out = path.with_name("same.jsonl")
    out.write_text(text)
    return out


def test_one_document_id_with_two_texts_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path) as t:
        rag_trace(t, "q1", "Who?", [[("d1", "one")], [("d1", "another")]], "Ann.")
    with pytest.raises(InputError, match="document id 'd1' holds two different texts"):
        records(path)


def test_references_that_match_no_record_say_how_to_map_the_ids(two_traces: Path,
                                                                  tmp_path: Path) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "reference": "Ann"}\n')
    with pytest.raises(InputError, match=r"no record id of this file matched.*--map id="):
        records(two_traces, references=str(refs))
    with pytest.raises(InputError, match="has a reference from its trace and from"):
        records(two_traces, references=str(refs),
                field_map=(("id", "metadata.qid"), ("reference", "input.value")))


@pytest.mark.parametrize(("more", "message"), [
    ({"field_map": (("contexts", "x"),)}, "contexts cannot be mapped"),
    ({"corpus": "c.tsv"}, "corpus does not apply to traces"),
    ({"phoenix": "http://127.0.0.1:1"}, "not both"),
])
def test_specs_that_do_not_hold_together(tmp_path: Path, more: dict[str, Any],
                                         message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_inputs(spec(tmp_path / "x.jsonl", **more))
    with pytest.raises(UsageError, match="apply to traces"):
        load_inputs(InputSpec(records=str(tmp_path / "x.jsonl"), references="r.jsonl"))


@pytest.mark.parametrize(("value", "message"), [
    ({"arrayValue": [1, 2]}, "attribute 'x'"),
    ({"kvlistValue": {"values": [{"value": {"stringValue": "v"}}]}}, "attribute 'x'"),
    ({"intValue": 1e400}, "attribute 'x'"),
    ({"boolValue": "false"}, "boolValue: expected bool"),
    ({"stringValue": 5}, "stringValue: expected str"),
])
def test_odd_attribute_values_are_errors_not_crashes(two_traces: Path, value: Any,
                                                     message: str) -> None:
    bad = _corrupt(two_traces, lambda ls: _span(ls, 1)["attributes"].append(
        {"key": "x", "value": value}))
    with pytest.raises(InputError, match=message) as error:
        records(bad)
    assert error.value.line == 2


def test_a_time_too_large_and_a_file_not_utf8_are_errors(two_traces: Path,
                                                          tmp_path: Path) -> None:
    bad = _corrupt(two_traces, lambda ls: _span(ls, 1).update(startTimeUnixNano=1e400))
    with pytest.raises(InputError, match="nanoseconds"):
        records(bad)
    broken = tmp_path / "broken.json"
    broken.write_bytes(b'{"resourceSpans": [\n\xff\xfe]}\n')
    with pytest.raises(InputError) as error:
        records(broken)
    assert error.value.line == 1


def test_escaped_base64_ids_and_a_lower_case_unit(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    with tracer(path) as t:
        rag_trace(t, "q1", "Who?", [[("d1", "one")]], "Ann.")
    doc = json.loads(path.read_text())
    for scope in doc["resourceSpans"][0]["scopeSpans"]:
        for span in scope["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if span.get(key):
                    span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    escaped = tmp_path / "escaped.jsonl"
    escaped.write_text(json.dumps(doc).replace("/", "\\/") + "\n")
    assert [r.to_dict() for r in records(escaped)] == [r.to_dict() for r in records(path)]
    (record,) = records(path, trace_unit="chain", field_map=(("id", "metadata.qid"),))
    assert record.id == "q1"


def test_trace_options_on_a_run_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="apply to traces, not to a run"):
        load_inputs(InputSpec(run=str(tmp_path / "run.trec"), references="r.jsonl"))
    with pytest.raises(UsageError, match="a records format does not apply"):
        load_inputs(spec(tmp_path / "x.jsonl", format="csv"))


def test_a_time_window_needs_a_server_and_iso_times(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="selects the spans of a Phoenix project"):
        load_inputs(spec(tmp_path / "x.jsonl", since="2026-01-01"))
    with pytest.raises(UsageError, match="since: expected an ISO 8601 time"):
        load_inputs(InputSpec(phoenix="http://127.0.0.1:1", project="p", since="yesterday"))


def test_a_references_file_s_judgments_join_as_qrels_do(two_traces: Path,
                                                        tmp_path: Path) -> None:
    from rageval.api import evaluate
    from rageval.inputs.run import RunInputs

    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q1", "reference": "Ann", "judgments": {"d1": 2}}\n'
                    '{"id": "q2", "judgments": {"d9": 1}}\n')
    traces = spec(two_traces, field_map=(("id", "metadata.qid"),), references=str(refs))
    run = evaluate(traces, ["ndcg@3"])
    assert run.manifest["judgments"] == "qrels"
    assert "|j:qrels|" in run.summary["ndcg@3"].short_signature
    assert [r.scores["ndcg@3"] for r in run.records] == [1.0, 0.0]
    with pytest.raises(UsageError, match="a references file gives the qrels: give qrels or"):
        RunInputs(traces, qrels={"q1": {"d1": 1}}).windows()
