"""GenAI traces and native records give the same numbers: the pipeline of ``genai_pipeline.py``
(the openai SDK under opentelemetry-instrumentation-openai-v2, message content on the spans;
retrieval, tool and agent spans made with opentelemetry-util-genai; exported by the OTLP/JSON
file exporter) writes its traces and, beside them, the records it saw in rageval's own format.
Scored through ``rageval score --input-format otel-genai``, the traces give the same
records.jsonl, value for value, and the same summary as the native records: the committed
fixtures (``fixtures/genai_traces``) always, a live run of the pipeline against the local
SmolLM2 server with the real-model tests.

The documents in the spans carry ids and scores only (the conventions' document model), so the
metrics compared are those reading ids, judgments, answers and references."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from genai_pipeline import CONVERSATION, QUESTION_ID, TOOL_QUESTION, answer_questions
from local_model import need_local_extra
from trace_pipeline import MULTI_HOP, NO_RETRIEVAL, write_native, write_references

from rageval.cli import main
from rageval.inputs import InputSpec, load_inputs

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "genai_traces"
METRICS = ["recall@3", "precision@3", "ndcg@3", "map", "mrr", "rouge1", "rougeL", "bleu"]


def _score(args: list[str], out: Path) -> dict[str, Any]:
    flags = [a for m in METRICS for a in ("-m", m)]
    assert main(["score", *args, *flags, "--no-progress", "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())


def _assert_traces_score_as_records(folder: Path, out: Path) -> None:
    traced = _score([str(folder / "spans.otlp.jsonl"), "--input-format", "otel-genai",
                     "--map", f"id={QUESTION_ID}",
                     "--references", str(folder / "references.jsonl")], out / "traced")
    native = _score([str(folder / "records.jsonl")], out / "native")
    assert (out / "traced" / "records.jsonl").read_text() == \
        (out / "native" / "records.jsonl").read_text()
    assert set(traced["metrics"]) == set(native["metrics"])
    for name, figures in native["metrics"].items():
        mine = traced["metrics"][name]
        assert (mine["value"], mine["n"], mine["ci95"]) == (
            figures["value"], figures["n"], figures["ci95"]), name


def _traced(folder: Path, *, sessions: bool = False) -> list[Any]:
    return load_inputs(InputSpec(
        records=str(folder / "spans.otlp.jsonl"), kind="otel-genai", sessions=sessions,
        field_map=(("id", QUESTION_ID),), references=str(folder / "references.jsonl"))).records


def _assert_same_records(folder: Path) -> None:
    """The reader builds from the traces the records the pipeline saw, field by field, but for
    the documents' texts (the spans hold ids and scores); the conversation's traces become the
    turns of one conversation with ``--trace-sessions``."""
    native = load_inputs(InputSpec(records=str(folder / "records.jsonl"))).records

    def seen(record: Any) -> tuple[Any, ...]:
        return (record.id, record.query, record.answer, record.references,
                dict(record.judgments), [(c.id, c.score) for c in record.contexts],
                record.tool_calls)

    traced = _traced(folder)
    assert [seen(r) for r in traced] == [seen(r) for r in native]
    assert all(c.text == "" for r in traced for c in r.contexts)
    conversation, together = CONVERSATION
    turns = [r.id for r in _traced(folder, sessions=True) if r.id.startswith(conversation)]
    assert turns == [f"{conversation}#{qid}" for qid in together]


def _spans(path: Path) -> list[dict[str, Any]]:
    """Every span of an OTLP/JSON file, with its attributes as a plain dict."""
    spans = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {a["key"]: next(iter(a["value"].values()))
                                  for a in span.get("attributes", [])}
                    spans.append(dict(span, attributes=attributes))
    return spans


def _assert_fixture_shape(folder: Path) -> None:
    """The traces hold what the reader must handle: the instrumentation's chat spans with the
    messages, several retrieval hops, a trace without retrieval but with a tool call, a
    conversation, and every answer given."""
    spans = _spans(folder / "spans.otlp.jsonl")
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["traceId"], []).append(span)
    ids = {}
    for trace in by_trace.values():
        roots = [s for s in trace if not s.get("parentSpanId")]
        assert [r["attributes"]["gen_ai.operation.name"] for r in roots] == ["invoke_agent"]
        ids[roots[0]["attributes"][QUESTION_ID]] = trace
    operations = {qid: sorted(s["attributes"]["gen_ai.operation.name"] for s in trace)
                  for qid, trace in ids.items()}
    for qid, names in operations.items():
        hops = 0 if qid in NO_RETRIEVAL else 2 if qid in MULTI_HOP else 1
        tools = ["execute_tool"] if qid == TOOL_QUESTION else []
        assert names == sorted(["chat", "invoke_agent", *["retrieval"] * hops, *tools]), qid
    chats = [s["attributes"] for s in spans if s["attributes"]["gen_ai.operation.name"] == "chat"]
    assert all("gen_ai.input.messages" in c and "gen_ai.output.messages" in c for c in chats)
    conversation, together = CONVERSATION
    assert {qid for qid, trace in ids.items() for s in trace
            if s["attributes"].get("gen_ai.conversation.id") == conversation} == set(together)
    rows = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(r["id"] for r in rows)
    assert all(r["answer"] for r in rows)  # the model answered every question


def test_committed_genai_traces_score_exactly_as_their_records(tmp_path: Path) -> None:
    _assert_fixture_shape(FIXTURES)
    _assert_same_records(FIXTURES)
    _assert_traces_score_as_records(FIXTURES, tmp_path)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    pytest.importorskip("opentelemetry.instrumentation.openai_v2",
                        reason="the GenAI trace fixtures need the test extra's instrumentation")
    need_local_extra()
    from rageval.judge.local import LocalJudge

    out = tmp_path_factory.mktemp("genai_pipeline")
    with LocalJudge(port=0) as server:
        native = answer_questions(server.base_url, server.name, out / "spans.otlp.jsonl")
    write_native(out / "records.jsonl", native)
    write_references(out / "references.jsonl")
    yield out


@pytest.mark.real_model
def test_live_genai_traces_score_exactly_as_the_records_the_pipeline_saw(
        pipeline_run: Path, tmp_path: Path) -> None:
    _assert_fixture_shape(pipeline_run)
    _assert_same_records(pipeline_run)
    _assert_traces_score_as_records(pipeline_run, tmp_path)
