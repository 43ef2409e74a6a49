"""A trace's spans as records, by the OpenTelemetry GenAI semantic conventions.

The conventions are in Development status; rageval reads them as open-telemetry/
semantic-conventions-genai has them at commit :data:`CONVENTIONS_COMMIT` (schema
:data:`SCHEMA_URL`), the commit its evaluation events follow. A span's operation is its
``gen_ai.operation.name`` (``chat``, ``text_completion`` and ``generate_content`` are
*inference* spans; ``retrieval``, ``execute_tool``, ``invoke_agent``, ...).

A record comes from one *unit*: the whole trace (its root span stands for it), or each span of
a chosen operation without an ancestor of that operation (``unit="invoke_agent"``: one record
per top-level agent invocation), with the spans below it. From the unit:

* ``query``: the last ``user`` message of the root span's ``gen_ai.input.messages``, else of
  the first inference span to start, else the first retrieval span's
  ``gen_ai.retrieval.query.text``. The older forms are read where the messages are missing:
  ``gen_ai.prompt`` (a JSON list of messages, or the prompt's text) and OpenLLMetry's
  ``gen_ai.prompt.<i>.role`` / ``.content``;
* ``answer``: the first ``assistant`` message of ``gen_ai.output.messages`` of the last
  inference span to end (the root span's when the unit has no inference span), else the older
  ``gen_ai.completion`` (a JSON list of messages, or text) or ``gen_ai.completion.0.content``;
* a message's text is its ``text`` parts' ``content`` joined by newlines (other parts, tool
  calls or images, are not text; ``finish_reason`` is not read); a message of the older form
  with a ``content`` string is that text. Messages are JSON text (as instrumentations write
  attributes) or an OTLP array of key-value lists: both read the same;
* ``contexts``: the documents of the unit's ``retrieval`` spans (``gen_ai.retrieval.documents``,
  ``[{"id", "score", "content"?}]``), span after span in start order, each span's in order;
  ids, repeats and scores as for OpenInference. Documents recorded without ``content`` keep
  their ids (the retrieval metrics read them) and the record says its contexts have no text
  (:data:`~rageval.core.metric.CONTEXTS_WITHOUT_TEXT`): the metrics reading the contexts'
  text leave it unscored with that reason;
* ``tool_calls``: the unit's ``execute_tool`` spans in start order, each ``{"name":
  gen_ai.tool.name, "id": gen_ai.tool.call.id, "arguments": gen_ai.tool.call.arguments,
  "result": gen_ai.tool.call.result}`` (a result written as JSON text of an object or a list
  is read as that value); none when the unit has no such span (the calls not recorded).

A field map reads dotted attributes as for OpenInference. Bad JSON in a messages or documents
attribute is an error naming the trace, the span's line and the attribute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from rageval.core.errors import InputError
from rageval.core.metric import CONTEXTS_WITHOUT_TEXT
from rageval.core.records.lines import DEEP_JSON
from rageval.inputs.traces.openinference import Unit, _contexts, _mapped
from rageval.inputs.traces.spans import Span
from rageval.inputs.traces.tree import _below_kind, _root, _start, _subtree

__all__ = ["CONVENTIONS_COMMIT", "CONVERSATION_ID", "OPERATIONS", "SCHEMA_URL", "GenaiUnit",
           "MessagesError", "message_texts", "units"]

#: The commit of open-telemetry/semantic-conventions-genai whose span attributes are read: the
#: same as rageval.otel.events pins for the evaluation events (inputs may not import rageval.otel;
#: a test checks that the two agree).
CONVENTIONS_COMMIT = "997a19cc9be3bcd54fe4f45213df8c274f4776f0"
#: The schema URL of that commit (its model/manifest.yaml).
SCHEMA_URL = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
#: The attribute naming a span's operation.
OPERATION = "gen_ai.operation.name"
#: The attribute naming a span's conversation (``--trace-sessions`` groups by it).
CONVERSATION_ID = "gen_ai.conversation.id"
#: The operations the conventions name (``--trace-unit`` takes one of them).
OPERATIONS: tuple[str, ...] = (
    "chat", "text_completion", "generate_content", "embeddings", "retrieval", "execute_tool",
    "create_agent", "invoke_agent", "invoke_workflow",
)
_INFERENCE = frozenset({"chat", "text_completion", "generate_content"})
_INPUT, _OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
_DOCUMENTS = "gen_ai.retrieval.documents"
_NO_CONTENT = ("the trace's retrieval documents carry ids only (no content in "
               f"{_DOCUMENTS})")


class MessagesError(ValueError):
    """A messages attribute that is not a list of messages."""


def message_texts(value: Any) -> list[tuple[str | None, str | None]]:
    """``(role, text)`` of each message of a messages attribute (JSON text or an OTLP array):
    the text its ``text`` parts hold, joined by newlines (None: no text part), or the older
    form's ``content`` string. An item that is not an object is skipped; a value that is not
    JSON, or not a list, raises :class:`MessagesError`."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise MessagesError(f"not JSON ({error})") from None
    if not isinstance(value, list):
        raise MessagesError(f"expected a list of messages, found {type(value).__name__}")
    out: list[tuple[str | None, str | None]] = []
    for message in value:
        if isinstance(message, dict):
            role = message.get("role")
            out.append((role if isinstance(role, str) else None, _message_text(message)))
    return out


def _message_text(message: dict[str, Any]) -> str | None:
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [part["content"] for part in parts
                 if isinstance(part, dict) and part.get("type") == "text"
                 and isinstance(part.get("content"), str)]
        return "\n".join(texts) if texts else None
    content = message.get("content")
    return content if isinstance(content, str) else None


class GenaiUnit(Unit):
    """A :class:`~rageval.inputs.traces.openinference.Unit` that may also carry tool calls
    and say that its contexts have no text: those records are built from their object."""

    __slots__ = ()

    def record(self) -> Any:
        if "tool_calls" in self.item or CONTEXTS_WITHOUT_TEXT in self.item:
            return None
        return super().record()


def units(spans: list[Span], unit: str, field_map: Mapping[str, str],
          source: str) -> Iterator[GenaiUnit]:
    """What each unit of one trace's spans gives its record (``unit``: ``trace`` or an
    operation); the line is that of the unit's root span."""
    ordered = sorted((_as_operation(span) for span in spans), key=_start)
    if unit == "trace":
        yield _unit(_root(ordered), ordered, "trace", field_map, source)
        return
    children: dict[str, list[Span]] = {}
    by_id = {span.span_id: span for span in ordered}
    for span in ordered:
        if span.parent_id is not None and span.parent_id in by_id:
            children.setdefault(span.parent_id, []).append(span)
    below = _below_kind(ordered, by_id, unit)
    for span in ordered:
        if span.kind == unit and not below[span.span_id]:
            yield _unit(span, _subtree(span, children), "span", field_map, source)


def _as_operation(span: Span) -> Span:
    """The span, its kind its GenAI operation (the tree walks spans by kind)."""
    operation = span.attributes.get(OPERATION)
    return Span(span.trace_id, span.span_id, span.parent_id, span.name,
                operation if isinstance(operation, str) and operation else None, span.start,
                span.end, span.attributes, span.line)


def _unit(root: Span, spans: list[Span], unit: str, field_map: Mapping[str, str],
          source: str) -> GenaiUnit:
    where = f"trace {root.trace_id}" if unit == "trace" else (
        f"trace {root.trace_id}, span {root.span_id}")
    item: dict[str, Any] = {"id": root.trace_id if unit == "trace" else root.span_id,
                            "trace_id": root.trace_id, "span_id": root.span_id}
    read = _Reader(where, source)
    query, answer = read.query(root, spans), read.answer(root, spans)
    if query is not None:
        item["query"] = query
    if answer is not None:
        item["answer"] = answer
    contexts = read.contexts([span for span in spans if span.kind == "retrieval"], item)
    calls = [_tool_call(span, read) for span in spans if span.kind == "execute_tool"]
    if calls:
        item["tool_calls"] = calls
    for field, name in field_map.items():
        try:
            value = _mapped(root, spans, name)
        except RecursionError:  # an attribute's JSON text nested too deeply to open
            raise InputError(f"{where}: attribute {name!r} (--map {field}={name}): "
                             f"{DEEP_JSON}", path=source, line=root.line, field=field) from None
        if value is None:
            if field == "id":
                raise InputError(f"{where}: no attribute {name!r} to read the record id from "
                                 f"(--map id={name})", path=source, line=root.line)
            item.pop(field, None)
            continue
        item[field] = str(value) if field in ("id", "query", "answer") and not isinstance(
            value, str) else value
    return GenaiUnit(root.line or 0, item, contexts)


class _Reader:
    """Reads a unit's fields from its spans, errors naming the unit and the attribute."""

    def __init__(self, where: str, source: str) -> None:
        self.where, self.source = where, source

    def error(self, span: Span, name: str, message: str) -> InputError:
        return InputError(f"{self.where}: span {span.span_id}, attribute {name!r}: {message}",
                          path=self.source, line=span.line, field=name)

    def messages(self, span: Span, name: str) -> list[tuple[str | None, str | None]] | None:
        value = span.attributes.get(name)
        if value is None:
            return None
        try:
            return message_texts(value)
        except MessagesError as error:
            raise self.error(span, name, str(error)) from None
        except RecursionError:
            raise self.error(span, name, DEEP_JSON) from None

    def query(self, root: Span, spans: list[Span]) -> str | None:
        found = self.user_text(root)
        if found is not None:
            return found
        first = next((span for span in spans if span.kind in _INFERENCE), None)
        if first is not None and first is not root:
            found = self.user_text(first)
            if found is not None:
                return found
        for span in spans:
            if span.kind == "retrieval":
                text = span.attributes.get("gen_ai.retrieval.query.text")
                if isinstance(text, str):
                    return text
        return None

    def user_text(self, span: Span) -> str | None:
        """The last user message's text of the span's input (or older prompt) messages."""
        messages = self.messages(span, _INPUT)
        if messages is None:
            messages = _older(span, "gen_ai.prompt", "user")
        found = None
        for role, text in messages or ():
            if role == "user" and text is not None:
                found = text
        return found

    def answer(self, root: Span, spans: list[Span]) -> str | None:
        inference = [span for span in spans if span.kind in _INFERENCE]
        # the last to end: of equal end times, the first to start
        last = max(reversed(inference), key=lambda span: span.end) if inference else root
        messages = self.messages(last, _OUTPUT)
        if messages is None:
            messages = _older(last, "gen_ai.completion", "assistant")
        for role, text in messages or ():
            if role == "assistant":
                return text
        return None

    def contexts(self, retrievals: list[Span],
                 item: dict[str, Any]) -> list[tuple[str, str, float | None]] | None:
        if not retrievals:
            return None
        read, textless = [], 0
        for span in retrievals:
            documents = self.documents(span)
            textless += sum(not isinstance(doc.get("content"), str) for doc in documents)
            read.append(Span(span.trace_id, span.span_id, span.parent_id, span.name, span.kind,
                             span.start, span.end, {"retrieval.documents": documents},
                             span.line))
        try:
            contexts = _contexts(read, self.where, self.source)
        except InputError as error:
            raise InputError(error.message.replace("retrieval.documents.", f"{_DOCUMENTS}."),
                             path=error.path, line=error.line, field=_DOCUMENTS) from None
        if textless and contexts:
            item[CONTEXTS_WITHOUT_TEXT] = _NO_CONTENT
        return contexts

    def documents(self, span: Span) -> list[dict[str, Any]]:
        value = span.attributes.get(_DOCUMENTS)
        if value is None:
            return []
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as error:
                raise self.error(span, _DOCUMENTS, f"not JSON ({error})") from None
            except RecursionError:
                raise self.error(span, _DOCUMENTS, DEEP_JSON) from None
        if not isinstance(value, list):
            raise self.error(span, _DOCUMENTS, "expected a list of documents, found "
                             f"{type(value).__name__}")
        return [{key: doc.get(key) for key in ("id", "content", "score") if key in doc}
                for doc in value if isinstance(doc, dict)]


def _older(span: Span, name: str, role: str) -> list[tuple[str | None, str | None]] | None:
    """The older form of a span's prompt or completion: ``name`` as a JSON list of messages
    (or its text, taken as one message of ``role``), else OpenLLMetry's ``name.<i>.role`` /
    ``.content``."""
    attributes = span.attributes
    value = attributes.get(name)
    if isinstance(value, str):
        try:
            return message_texts(value)
        except (MessagesError, RecursionError):
            return [(role, value)]
    if isinstance(value, list):
        try:
            return message_texts(value)
        except MessagesError:
            return None
    found, index = [], 0
    while f"{name}.{index}.content" in attributes or f"{name}.{index}.role" in attributes:
        given, content = attributes.get(f"{name}.{index}.role"), attributes.get(
            f"{name}.{index}.content")
        found.append((given if isinstance(given, str) else role,
                      content if isinstance(content, str) else None))
        index += 1
    return found or None


def _tool_call(span: Span, read: _Reader) -> dict[str, Any]:
    attributes = span.attributes
    name = attributes.get("gen_ai.tool.name")
    if not isinstance(name, str) or not name:
        name = span.name.removeprefix("execute_tool").strip()
    if not name:
        raise read.error(span, "gen_ai.tool.name", "an execute_tool span names no tool")
    call: dict[str, Any] = {"name": name}
    call_id = attributes.get("gen_ai.tool.call.id")
    if isinstance(call_id, str) and call_id:
        call["id"] = call_id
    arguments = attributes.get("gen_ai.tool.call.arguments")
    if arguments is not None:
        call["arguments"] = arguments
    if "gen_ai.tool.call.result" in attributes:
        call["result"] = _result(attributes["gen_ai.tool.call.result"])
    return call


def _result(value: Any) -> Any:
    """A tool's result: JSON text of an object or a list read as that value, else as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        return parsed if isinstance(parsed, dict | list) else value
    return value
