"""Traces grouped by OpenInference session.id into conversations (--trace-sessions): each
session's traces are its turns, in the order they started, wherever they lie in the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.inputs import InputSpec, load_inputs

pytest.importorskip("opentelemetry.exporter.otlp.json.file",
                    reason="the trace tests need the test extra's OpenTelemetry exporter")


def _write(path: Path, turns: list[tuple[str | None, str, str]]) -> None:
    """One trace per (session, question, answer), each span on its own line."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("tests")
    for session, question, answer in turns:
        root: dict[str, Any] = {"openinference.span.kind": "CHAIN", "input.value": question}
        if session is not None:
            root["session.id"] = session
        with tracer.start_as_current_span("chat", attributes=root):
            with tracer.start_as_current_span("retrieve", attributes={
                    "openinference.span.kind": "RETRIEVER",
                    "retrieval.documents.0.document.id": "d1",
                    "retrieval.documents.0.document.content": f"about {question}"}):
                pass
            with tracer.start_as_current_span("llm", attributes={
                    "openinference.span.kind": "LLM",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": answer}):
                pass
    provider.shutdown()


TURNS = [("s1", "Can I get a refund?", "Yes, within 30 days."),
         ("s2", "Where is my parcel?", "In Oslo."),
         (None, "What are your hours?", "9 to 5."),
         ("s1", "It has been 40 days.", "Then a manager decides."),
         ("s2", "When will it arrive?", "Tomorrow."),
         ("s1", "Who is the manager?", "Ms Berg.")]


def test_sessions_become_conversations_in_start_order(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    _write(path, TURNS)
    records = load_inputs(InputSpec(records=str(path), kind="openinference",
                                    sessions=True)).records
    alone, *turns = records
    assert alone.conversation is None and alone.query == "What are your hours?"
    assert [(r.conversation.id, r.turn, r.query) for r in turns] == [
        ("s1", 1, "Can I get a refund?"), ("s1", 2, "It has been 40 days."),
        ("s1", 3, "Who is the manager?"), ("s2", 1, "Where is my parcel?"),
        ("s2", 2, "When will it arrive?")]
    first = turns[0]
    assert first.id == f"s1#{first.extra['trace_id']}" and first.answer == "Yes, within 30 days."
    assert [c.id for c in first.contexts] == ["d1"]
    # Without sessions the same file is six records on their own.
    flat = load_inputs(InputSpec(records=str(path), kind="openinference")).records
    assert len(flat) == 6 and all(r.conversation is None for r in flat)
    results = evaluate(InputSpec(records=str(path), kind="openinference", sessions=True),
                       ["mrr"], bootstrap=10,
                       qrels={r.id: {"d1": 1} for r in records})
    assert results.manifest["conversations"]["count"] == 2
    assert json.loads(json.dumps(results.manifest["records"]["inputs"]))["sessions"] is True


def test_sessions_apply_to_traces_only(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="sessions"):
        load_inputs(InputSpec(records=str(tmp_path / "r.jsonl"), sessions=True))


def test_a_references_file_s_judgments_reach_the_turns_they_name(tmp_path: Path) -> None:
    """A session's turns are built from their conversation's object: the references file's
    judgments join them by turn id, as a trace's own record joins by its id."""
    path = tmp_path / "spans.jsonl"
    _write(path, TURNS)
    spec = InputSpec(records=str(path), kind="openinference", sessions=True)
    alone, turn = (record.id for record in load_inputs(spec).records[:3:2])
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": alone, "judgments": {"d1": 2}}) + "\n"
                    + json.dumps({"id": turn, "judgments": {"d1": 1}}) + "\n")
    records = load_inputs(InputSpec(records=str(path), kind="openinference", sessions=True,
                                    references=str(refs))).records
    judged = {r.id: dict(r.judgments) for r in records if r.judgments is not None}
    assert judged == {alone: {"d1": 2}, turn: {"d1": 1}}
