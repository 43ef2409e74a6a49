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


def test_a_record_whose_contexts_have_no_text_gets_an_unscored_event_saying_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from judge_server import TEST_KEY_ENV, JudgeServer

    spans, references = genai_traces(tmp_path)
    events_file = tmp_path / "events.jsonl"
    with JudgeServer() as judge:
        code, err = run(["score", str(spans), "--input-format", "otel-genai", "--references",
                         str(references), "--map", "id=metadata.qid", "-m",
                         "judge:faithfulness", "--judge-model", "m", "--judge-base-url",
                         judge.base_url, "--judge-api-key-env", TEST_KEY_ENV, "--cache",
                         str(tmp_path / "cache.sqlite"), "--no-progress", "--otel-events",
                         str(events_file)], capsys)
    assert code == 0, err
    by_record = {e.attributes["rageval.record.id"]: e for e in file_events(events_file)}
    textless = by_record["q2"].attributes
    assert (by_record["q2"].trace_id, by_record["q2"].span_id) == (trace_id("t2"),
                                                                    span_id("t2-root"))
    assert textless["gen_ai.evaluation.name"] == "judge:faithfulness"
    assert textless["gen_ai.evaluation.score.label"] == "unscored"
    assert "gen_ai.evaluation.score.value" not in textless
    assert textless["gen_ai.evaluation.explanation"] == (
        "the contexts have no text: 2 of 2 retrieved documents carry no content "
        "(gen_ai.retrieval.documents recorded ids only)")
    assert "gen_ai.evaluation.score.value" in by_record["q1"].attributes
