"""The pipeline of ``trace_pipeline.py`` instrumented with the OpenTelemetry GenAI semantic
conventions alone: its traces are the test fixtures of the ``otel-genai`` reader.

The same corpus, questions and word-overlap retriever; the generator is the openai SDK under
``opentelemetry-instrumentation-openai-v2`` (message content captured on the spans), asking an
OpenAI-compatible server (the local SmolLM2 judge server, or any other). The other spans are
made with ``opentelemetry-util-genai``'s own handler: an ``invoke_agent`` root per question
(the question's id in ``app.question.id``), a ``retrieval`` span per retrieval hop (documents
as the conventions' model has them: id and score, no content), one ``execute_tool`` span (the
question answered from a registry lookup instead of the retriever), and a conversation of two
questions sharing a ``gen_ai.conversation.id``. Spans go to the OTLP/JSON file exporter;
beside them the pipeline writes what it knew as rageval's native records.

``python tests/genai_pipeline.py URL MODEL OUT_DIR`` writes ``fixtures/genai_traces``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trace_pipeline import (
    CORPUS,
    MULTI_HOP,
    NO_RETRIEVAL,
    QUESTIONS,
    retrieve,
    write_fixtures,
)

# The attribute of the invoke_agent root that holds the question's id (``--map id=...``).
QUESTION_ID = "app.question.id"
# Two questions asked in one conversation: the second sees the first exchange as history.
CONVERSATION = ("lumen-chat", ("q3", "q4"))
# The question answered from a tool (an execute_tool span) rather than the retriever.
TOOL_QUESTION = "q5"
TOOL_CALL = {"name": "harbour_registry", "arguments": {"harbour": "Ostby"},
             "result": "Ostby harbour: opened 1911, operated by the Kell ferry company."}
# The instrumentation's settings for message content on the chat span (read when it starts).
CAPTURE = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
           "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


@contextmanager
def _content_capture() -> Iterator[None]:
    """Turn message content capture on for the run, and put the environment back after."""
    before = {name: os.environ.get(name) for name in CAPTURE}
    os.environ.update(CAPTURE)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _retrieval_span(handler: Any, query: str, found: list[tuple[str, float]]) -> None:
    with handler.retrieval(data_source_id="corpus") as retrieval:
        retrieval.query_text = query
        retrieval.top_k = len(found)
        # The conventions' document model holds an id and a score: the text stays out.
        retrieval.documents = [{"id": doc, "score": score} for doc, score in found]


def _retrieve(handler: Any, qid: str, question: str) -> list[dict[str, Any]]:
    """The contexts of ``question`` (one or two hops), each hop recorded as a retrieval span."""
    found = retrieve(question)
    _retrieval_span(handler, question, found)
    if qid in MULTI_HOP:
        second = " ".join(CORPUS[d] for d, _ in found[:1])
        hop = retrieve(second, exclude=[d for d, _ in found])
        _retrieval_span(handler, second, hop)
        found += hop
    return [{"id": d, "text": CORPUS[d], "score": s} for d, s in found]


def _call_tool(handler: Any) -> dict[str, Any]:
    """The registry lookup, recorded as an execute_tool span (its result is made up)."""
    with handler.tool(TOOL_CALL["name"], tool_call_id="call_0", tool_type="function") as tool:
        tool.arguments = TOOL_CALL["arguments"]
        tool.tool_result = TOOL_CALL["result"]
    return dict(TOOL_CALL)


def _ask(client: Any, model: str, grounds: str, history: list[dict[str, str]],
         question: str) -> str:
    system = f"Answer the question in one sentence, using these passages:\n{grounds}"
    reply = client.chat.completions.create(
        model=model, temperature=0, max_tokens=40, messages=[
            {"role": "system", "content": system}, *history,
            {"role": "user", "content": question}])
    return reply.choices[0].message.content or ""


def _answer_one(handler: Any, client: Any, model: str, qid: str, question: str,
                history: list[dict[str, str]], conversation: str | None) -> dict[str, Any]:
    """One question, one trace: the invoke_agent root, retrieval or tool spans, the chat."""
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

    with handler.invoke_local_agent(agent_name="rag-demo", request_model=model) as agent:
        agent.attributes[QUESTION_ID] = qid
        agent.conversation_id = conversation
        agent.input_messages = [InputMessage(role="user", parts=[Text(content=question)])]
        record: dict[str, Any] = {"id": qid, "query": question}
        if qid == TOOL_QUESTION:
            record["tool_calls"] = [_call_tool(handler)]
            grounds = TOOL_CALL["result"]
        elif qid not in NO_RETRIEVAL:
            record["contexts"] = _retrieve(handler, qid, question)
            grounds = "\n".join(c["text"] for c in record["contexts"])
        else:
            grounds = ""
        record["answer"] = _ask(client, model, grounds, history, question)
        agent.output_messages = [OutputMessage(
            role="assistant", parts=[Text(content=record["answer"])], finish_reason="stop")]
    return record


def answer_questions(base_url: str, model: str, spans_path: Path, *,
                     questions: Sequence[tuple[str, str, str, dict[str, int]]] = QUESTIONS,
                     ) -> list[dict[str, Any]]:
    """Run the pipeline on ``questions``: traces to ``spans_path``; returns the native records,
    as the application saw them."""
    from openai import OpenAI
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.util.genai.handler import TelemetryHandler

    provider = TracerProvider(resource=Resource.create({"service.name": "rag-demo"}))
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(spans_path),
                                                   max_export_batch_size=4))
    conversation, asked_together = CONVERSATION
    client = OpenAI(base_url=base_url, api_key="not-needed", max_retries=0)
    instrumentor = OpenAIInstrumentor()
    records: list[dict[str, Any]] = []
    history: list[dict[str, str]] = []
    with _content_capture():
        instrumentor.instrument(tracer_provider=provider)
        handler = TelemetryHandler(tracer_provider=provider)
        try:
            for qid, question, _, _ in questions:
                together = qid in asked_together
                records.append(_answer_one(handler, client, model, qid, question,
                                           history if together else [],
                                           conversation if together else None))
                if together:
                    history += [{"role": "user", "content": question},
                                {"role": "assistant", "content": records[-1]["answer"]}]
        finally:
            provider.shutdown()
            instrumentor.uninstrument()
    return records


if __name__ == "__main__":
    write_fixtures(answer_questions, sys.argv[1:])
