"""``--otel-events`` for records read by the OpenTelemetry GenAI conventions (``--input-format
otel-genai``): each event goes back to the span its record came from."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from genai_spans import genai_traces, span_id, trace_id
from otel_read import file_events

from rageval.cli import main

pytest.importorskip("opentelemetry.exporter.otlp.json.common",
                    reason="the evaluation events need the otel extra")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv, stdout=io.StringIO())
    return code, capsys.readouterr().err


def test_events_go_to_each_records_span(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    spans, references = genai_traces(tmp_path)
    events_file = tmp_path / "events.jsonl"
    code, err = run(["score", str(spans), "--input-format", "otel-genai", "--references",
                     str(references), "--map", "id=metadata.qid", "-m", "ndcg@3",
                     "-m", "rouge1", "--no-progress", "--otel-events", str(events_file)],
                    capsys)
    assert code == 0, err
    events = file_events(events_file)
    roots = {"q1": (trace_id("t1"), span_id("t1-root")),
             "q2": (trace_id("t2"), span_id("t2-root"))}
    assert len(events) == 4 and "4 on their records' spans" in err
    for event in events:
        assert (event.trace_id, event.span_id) == roots[event.attributes["rageval.record.id"]]
