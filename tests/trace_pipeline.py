"""A small RAG pipeline, instrumented as a team would instrument theirs, whose traces are the
test fixtures of the trace readers.

The generator is the openai SDK, instrumented by ``openinference-instrumentation-openai``,
asking an OpenAI-compatible server (the local SmolLM2 judge server, or any other); the
retriever is a word-overlap ranker over a tiny corpus, its spans made with the OpenInference
semantic conventions; the root span is a CHAIN holding the question and, in its metadata, the
question's id. Spans go out through ``opentelemetry-sdk`` to the OTLP/JSON file exporter and,
when given, to an OTLP/HTTP endpoint (a Phoenix server). Beside the traces, the pipeline writes
what it knew as rageval's native records (the same query, contexts, answer) and the references
and qrels of the questions: the parity tests score both and compare.

``python tests/trace_pipeline.py URL MODEL OUT_DIR`` writes ``fixtures/traces``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CORPUS = {
    "d1": "The Kell ferry runs between Ostby and Varn every two hours.",
    "d2": "Ferries to Varn stop in winter when the strait freezes.",
    "d3": "The Lumen water filter removes lead and chlorine.",
    "d4": "A Lumen filter cartridge lasts three months.",
    "d5": "Ostby harbour opened in 1911.",
    "d6": "Tickets for the Kell ferry are sold at Ostby harbour.",
    "d7": "Lumen filters are made in Tarn since 2004.",
    "d8": "The strait between Ostby and Varn is nine kilometres wide.",
}
QUESTIONS = [
    ("q1", "How often does the Kell ferry run?", "Every two hours.", {"d1": 2}),
    ("q2", "When do ferries to Varn stop?", "In winter, when the strait freezes.",
     {"d2": 2, "d8": 1}),
    ("q3", "What does the Lumen filter remove?", "Lead and chlorine.", {"d3": 2}),
    ("q4", "How long does a Lumen cartridge last?", "Three months.", {"d4": 2}),
    ("q5", "When did Ostby harbour open?", "In 1911.", {"d5": 2}),
    ("q6", "Where are Kell ferry tickets sold?", "At Ostby harbour.", {"d6": 2, "d1": 1}),
    ("q7", "Where are Lumen filters made?", "In Tarn.", {"d7": 2}),
    ("q8", "How wide is the strait to Varn?", "Nine kilometres.", {"d8": 2}),
]
# Questions answered with two retrieval hops (the second for the words the first missed).
MULTI_HOP = {"q2", "q6"}
# A question the pipeline answers without retrieving (no RETRIEVER span in its trace).
NO_RETRIEVAL = {"q5"}
DEPTH = 3


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def retrieve(query: str, exclude: Sequence[str] = ()) -> list[tuple[str, float]]:
    """The top documents by word overlap (ties by id), with their overlap as the score."""
    asked = words(query)
    scored = [(doc, float(len(asked & words(text)))) for doc, text in CORPUS.items()
              if doc not in exclude]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:DEPTH]


def _retriever_span(tracer: Any, query: str, found: list[tuple[str, float]]) -> None:
    from openinference.semconv.trace import (
        DocumentAttributes,
        OpenInferenceSpanKindValues,
        SpanAttributes,
    )

    kind = OpenInferenceSpanKindValues.RETRIEVER.value
    with tracer.start_as_current_span("retrieve", attributes={
            SpanAttributes.OPENINFERENCE_SPAN_KIND: kind,
            SpanAttributes.INPUT_VALUE: query}) as span:
        for i, (doc, score) in enumerate(found):
            prefix = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.{i}"
            span.set_attribute(f"{prefix}.{DocumentAttributes.DOCUMENT_ID}", doc)
            span.set_attribute(f"{prefix}.{DocumentAttributes.DOCUMENT_CONTENT}", CORPUS[doc])
            span.set_attribute(f"{prefix}.{DocumentAttributes.DOCUMENT_SCORE}", score)


def answer_questions(base_url: str, model: str, spans_path: Path, *,
                     otlp_endpoint: str | None = None, project: str = "rag-demo",
                     questions: Sequence[tuple[str, str, str, dict[str, int]]] = QUESTIONS,
                     ) -> list[dict[str, Any]]:
    """Run the pipeline on ``questions``: traces to ``spans_path`` (and to ``otlp_endpoint``);
    returns the native records, as the application saw them."""
    from openai import OpenAI
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(spans_path),
                                                   max_export_batch_size=4))
    if otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(otlp_endpoint)))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    tracer = provider.get_tracer("rag-pipeline")
    client = OpenAI(base_url=base_url, api_key="not-needed", max_retries=0)
    records = []
    try:
        for qid, question, _, _ in questions:
            chain = OpenInferenceSpanKindValues.CHAIN.value
            with tracer.start_as_current_span("rag", attributes={
                    SpanAttributes.OPENINFERENCE_SPAN_KIND: chain,
                    SpanAttributes.INPUT_VALUE: question,
                    SpanAttributes.METADATA: json.dumps({"qid": qid})}) as root:
                contexts: list[dict[str, Any]] = []
                if qid not in NO_RETRIEVAL:
                    found = retrieve(question)
                    _retriever_span(tracer, question, found)
                    if qid in MULTI_HOP:
                        hop = retrieve(" ".join(CORPUS[d] for d, _ in found[:1]),
                                       exclude=[d for d, _ in found])
                        _retriever_span(tracer, question, hop)
                        found += hop
                    contexts = [{"id": d, "text": CORPUS[d], "score": s} for d, s in found]
                prompt = "\n".join(c["text"] for c in contexts)
                reply = client.chat.completions.create(
                    model=model, temperature=0, max_tokens=40, messages=[
                        {"role": "system", "content": "Answer the question in one sentence."},
                        {"role": "user", "content": f"{prompt}\nQuestion: {question}"}])
                answer = reply.choices[0].message.content or ""
                root.set_attribute(SpanAttributes.OUTPUT_VALUE, answer)
            record: dict[str, Any] = {"id": qid, "query": question, "answer": answer}
            if qid not in NO_RETRIEVAL:
                record["contexts"] = contexts
            records.append(record)
    finally:
        provider.shutdown()
        instrumentor.uninstrument()
    return records


def write_references(path: Path,
                     questions: Sequence[tuple[str, str, str, dict[str, int]]] = QUESTIONS,
                     ) -> None:
    """The questions' reference answers and qrels, as a records file of id, reference and
    judgments (what ``--references`` joins)."""
    path.write_text("".join(json.dumps({"id": qid, "reference": reference,
                                        "judgments": judgments}) + "\n"
                            for qid, _, reference, judgments in questions), encoding="utf-8")


def write_native(path: Path, records: list[dict[str, Any]],
                 questions: Sequence[tuple[str, str, str, dict[str, int]]] = QUESTIONS,
                 ) -> None:
    """The records the application saw, with the references joined: rageval's own format."""
    known = {qid: (reference, judgments) for qid, _, reference, judgments in questions}
    rows = [dict(r, reference=known[r["id"]][0], judgments=known[r["id"]][1]) for r in records]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def write_fixtures(answer: Callable[[str, str, Path], list[dict[str, Any]]],
                   argv: Sequence[str]) -> None:
    """``URL MODEL OUT_DIR``: the pipeline ``answer`` asks the server at URL, its spans,
    references and native records written in OUT_DIR."""
    url, model, out = argv[0], argv[1], Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    (out / "spans.otlp.jsonl").unlink(missing_ok=True)
    native = answer(url, model, out / "spans.otlp.jsonl")
    write_references(out / "references.jsonl")
    write_native(out / "records.jsonl", native)


if __name__ == "__main__":
    write_fixtures(answer_questions, sys.argv[1:])
