"""Hand-built OTLP/JSON traces following the OpenTelemetry GenAI conventions, for the tests:
spans as an exporter writes them (``resourceSpans[].scopeSpans[].spans[]``, typed attribute
values), messages as JSON text (as instrumentations write them) or as OTLP arrays."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def any_value(value: Any) -> dict[str, Any]:
    """``value`` as an OTLP/JSON ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(v)}
                                           for k, v in value.items()]}}
    raise TypeError(f"no OTLP value for {value!r}")


@dataclass
class GenaiSpan:
    """One span: ids as hex (a trace id's 32 digits are made from ``trace``)."""

    trace: str
    span: str
    parent: str | None
    name: str
    start: int
    end: int
    attributes: dict[str, Any] = field(default_factory=dict)

    def otlp(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "traceId": trace_id(self.trace), "spanId": span_id(self.span), "name": self.name,
            "startTimeUnixNano": str(self.start), "endTimeUnixNano": str(self.end),
            "attributes": [{"key": k, "value": any_value(v)}
                           for k, v in self.attributes.items()]}
        if self.parent is not None:
            out["parentSpanId"] = span_id(self.parent)
        return out


def trace_id(name: str) -> str:
    """The 16-byte trace id made from ``name``."""
    return hashlib.sha256(b"trace:" + name.encode()).hexdigest()[:32]


def span_id(name: str) -> str:
    """The 8-byte span id made from ``name``."""
    return hashlib.sha256(b"span:" + name.encode()).hexdigest()[:16]


def messages(*items: tuple[str, str], as_json: bool = True) -> Any:
    """Messages of ``(role, text)``, one text part each, as JSON text or a structured value."""
    value = [{"role": role, "parts": [{"type": "text", "content": text}]}
             for role, text in items]
    return json.dumps(value) if as_json else value


def write(path: Path, spans: Iterable[GenaiSpan], per_line: int = 1000) -> Path:
    """The spans as OTLP/JSON lines of ``per_line`` spans each."""
    spans = list(spans)
    lines = []
    for start in range(0, len(spans), per_line):
        chunk = [span.otlp() for span in spans[start:start + per_line]]
        lines.append(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                    "scopeSpans": [{"scope": {"name": "t"},
                                                                    "spans": chunk}]}]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def rag_trace(trace: str, question: str, documents: list[dict[str, Any]], answer: str, *,
              t0: int = 0, as_json: bool = True, conversation: str | None = None,
              tools: list[dict[str, Any]] | None = None) -> list[GenaiSpan]:
    """An agent invocation: a retrieval span, ``execute_tool`` spans, then a chat span whose
    input holds a system message, the context and the question, and whose output the answer."""
    root_attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                       "gen_ai.agent.name": "rag"}
    if conversation is not None:
        root_attributes["gen_ai.conversation.id"] = conversation
    spans = [GenaiSpan(trace, f"{trace}-root", None, "invoke_agent rag", t0, t0 + 100,
                       root_attributes),
             GenaiSpan(trace, f"{trace}-ret", f"{trace}-root", "retrieval index", t0 + 1,
                       t0 + 10, {"gen_ai.operation.name": "retrieval",
                                 "gen_ai.retrieval.query.text": question,
                                 "gen_ai.retrieval.documents": json.dumps(documents)
                                 if as_json else documents})]
    for n, tool in enumerate(tools or []):
        spans.append(GenaiSpan(trace, f"{trace}-t{n}", f"{trace}-root",
                               f"execute_tool {tool['gen_ai.tool.name']}", t0 + 11 + n,
                               t0 + 12 + n, {"gen_ai.operation.name": "execute_tool", **tool}))
    spans.append(GenaiSpan(trace, f"{trace}-chat", f"{trace}-root", "chat model", t0 + 20,
                           t0 + 90, {
                               "gen_ai.operation.name": "chat",
                               "gen_ai.input.messages": messages(
                                   ("system", "Answer from the context."),
                                   ("user", question), as_json=as_json),
                               "gen_ai.output.messages": json.dumps(
                                   [{"role": "assistant",
                                     "parts": [{"type": "text", "content": answer}],
                                     "finish_reason": "stop"}]) if as_json else
                               [{"role": "assistant",
                                 "parts": [{"type": "text", "content": answer}],
                                 "finish_reason": "stop"}]}))
    return spans


WITH_TEXT = [{"id": "d1", "score": 0.9, "content": "Paris is in France."},
             {"id": "d2", "score": 0.4, "content": "Oslo is in Norway."}]
IDS_ONLY = [{"id": "d1", "score": 0.9}, {"id": "d2", "score": 0.4}]


def genai_traces(tmp_path: Path) -> tuple[Path, Path]:
    """Two traces of one question, q1 with its documents' texts, q2 with their ids only,
    and a references file for both (``--map id=metadata.qid``)."""
    spans = rag_trace("t1", "Where is Paris?", WITH_TEXT, "In France.")
    spans += rag_trace("t2", "Where is Paris?", IDS_ONLY, "In France.", t0=500)
    for spans_of, qid in ((spans[:3], "q1"), (spans[3:], "q2")):
        spans_of[0].attributes["metadata"] = json.dumps({"qid": qid})
    references = tmp_path / "refs.jsonl"
    references.write_text("".join(json.dumps({"id": q, "reference": "France.",
                                              "judgments": {"d1": 1}}) + "\n"
                                  for q in ("q1", "q2")))
    return write(tmp_path / "spans.jsonl", spans), references
