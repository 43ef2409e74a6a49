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
  ``gen_ai.retrieval.query.text``. The older forms, as span attributes, are read where the
  messages are missing: ``gen_ai.prompt`` (a JSON list of messages, or the prompt's text) and
  OpenLLMetry's ``gen_ai.prompt.<i>.role`` / ``.content`` (span events are not read);
* ``answer``: the first message, whatever its role, of ``gen_ai.output.messages`` of the last
  inference span to end (the root span when the unit has no inference span), else of the unit
  root's ``gen_ai.output.messages``, else the older ``gen_ai.completion`` (a JSON list of
  messages, or text) or ``gen_ai.completion.0.content`` of those spans;
* a message's text is its ``text`` parts' ``content`` joined by newlines (other parts, tool
  calls or images, are not text; ``finish_reason`` is not read); a message of the older form
  with a ``content`` string is that text. Messages are JSON text (as instrumentations write
  attributes), an OTLP array of key-value lists, or an OTLP array of strings each the JSON
  text of one message: all read the same;
* ``contexts``: the documents of the unit's ``retrieval`` spans (``gen_ai.retrieval.documents``,
  ``[{"id", "score", "content"?}]``, as messages are given), span after span in start order,
  each span's in order; ids, repeats and scores as for OpenInference, but that a document
  recorded once without its content and once with it takes the content (at its first rank). A
  ``content`` that is not a string is its JSON text. Documents that no copy records with a
  content keep their ids (the retrieval metrics read them) and the record says so
  (:data:`~rageval.core.records.model.CONTEXTS_WITHOUT_TEXT`): the metrics reading the
  contexts' text leave it unscored, with the count of documents without content;
* ``tool_calls``: the unit's ``execute_tool`` spans in start order, each ``{"name":
  gen_ai.tool.name, "id": gen_ai.tool.call.id, "arguments": gen_ai.tool.call.arguments,
  "result": gen_ai.tool.call.result}`` (a result written as JSON text of an object or a list
  is read as that value); none when the unit has no such span (the calls not recorded).

A field map reads dotted attributes as for OpenInference. Bad JSON in a messages or documents
attribute, or an item of one that is not an object, is an error naming the trace, the span's
line, the attribute and the item's index.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rageval.core.errors import InputError
from rageval.core.records.checks import describe
from rageval.core.records.lines import DEEP_JSON
from rageval.core.records.model import CONTEXTS_WITHOUT_TEXT, TraceNote
from rageval.inputs.traces.openinference import (
    Unit,
    apply_field_map,
    retrieved_contexts,
    unit_item,
)
from rageval.inputs.traces.spans import Span
from rageval.inputs.traces.tree import unit_spans

if TYPE_CHECKING:
    from rageval.core.records.model import Record

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
    "create_agent", "invoke_agent", "invoke_workflow", "plan", "search_memory", "create_memory",
    "update_memory", "upsert_memory", "delete_memory", "create_memory_store",
    "delete_memory_store",
)
_INFERENCE = frozenset({"chat", "text_completion", "generate_content"})
_INPUT, _OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
_DOCUMENTS = "gen_ai.retrieval.documents"
_NO_CONTENT = TraceNote(f"{_DOCUMENTS} recorded ids only")


class MessagesError(ValueError):
    """A messages or documents attribute that is not a list of objects."""


def message_texts(value: Any) -> list[tuple[str | None, str | None]]:
    """``(role, text)`` of each message of a messages attribute (see :func:`json_objects`):
    the text its ``text`` parts hold, joined by newlines (None: no text part), or the older
    form's ``content`` string."""
    out: list[tuple[str | None, str | None]] = []
    for message in json_objects(value, "message"):
        role = message.get("role")
        out.append((role if isinstance(role, str) else None, _message_text(message)))
    return out


def json_objects(value: Any, what: str) -> list[dict[str, Any]]:
    """The objects of an attribute holding a list of them: JSON text of the list, or an OTLP
    array whose items are key-value lists or strings each the JSON text of one object. A value
    that is not JSON or not a list, or an item that is not an object, raises
    :class:`MessagesError` (naming the item's index); JSON nested too deeply raises
    :class:`RecursionError`."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise MessagesError(f"not JSON ({error})") from None
    if not isinstance(value, list):
        raise MessagesError(f"expected a list of {what}s, found {type(value).__name__}")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError as error:
                raise MessagesError(f"item {index}: not the JSON text of a {what} ({error})"
                                    ) from None
        if not isinstance(item, dict):
            raise MessagesError(f"item {index}: expected a {what} object, found "
                                f"{describe(item)}")
        out.append(item)
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

    def record(self, judgments: Mapping[str, int] | None = None) -> Record | None:
        if "tool_calls" in self.item or CONTEXTS_WITHOUT_TEXT in self.item:
            return None
        return super().record(judgments)


def units(spans: list[Span], unit: str, field_map: Mapping[str, str],
          source: str) -> Iterator[GenaiUnit]:
    """What each unit of one trace's spans gives its record (``unit``: ``trace`` or an
    operation); the line is that of the unit's root span."""
    for root, members, scope in unit_spans([_as_operation(span) for span in spans], unit):
        yield _unit(root, members, scope, field_map, source)


def _as_operation(span: Span) -> Span:
    """The span, its kind its GenAI operation (the tree walks spans by kind)."""
    operation = span.attributes.get(OPERATION)
    return Span(span.trace_id, span.span_id, span.parent_id, span.name,
                operation if isinstance(operation, str) and operation else None, span.start,
                span.end, span.attributes, span.line)


def _unit(root: Span, spans: list[Span], unit: str, field_map: Mapping[str, str],
          source: str) -> GenaiUnit:
    where, item = unit_item(root, unit)
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
    apply_field_map(item, root, spans, field_map, where, source)
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
        """The first output message's text of the last inference span to end, else of the
        root span, else the same of their older completion forms."""
        inference = [span for span in spans if span.kind in _INFERENCE]
        # the last to end: of equal end times, the first to start
        last = max(reversed(inference), key=lambda span: span.end) if inference else root
        sources = (last,) if last is root else (last, root)
        for span in sources:
            messages = self.messages(span, _OUTPUT)
            if messages:
                return messages[0][1]
        for span in sources:
            messages = _older(span, "gen_ai.completion", "assistant")
            if messages:
                return messages[0][1]
        return None

    def contexts(self, retrievals: list[Span],
                 item: dict[str, Any]) -> list[tuple[str, str, float | None]] | None:
        """The contexts of the unit's retrieval spans; ``item`` is told when some documents
        have no content in any of their copies (:data:`CONTEXTS_WITHOUT_TEXT`)."""
        if not retrievals:
            return None
        found = [(span, self.documents(span)) for span in retrievals]
        known: dict[str, str] = {}  # document id -> the first content a copy of it holds
        for _, documents in found:
            for doc in documents:
                key = _document_key(doc.get("id"))
                if key is not None and "content" in doc:
                    known.setdefault(key, doc["content"])
        read, textless = [], False
        for span, documents in found:
            for doc in documents:
                if "content" not in doc:  # a copy without content matches any text
                    key = _document_key(doc.get("id"))
                    if key in known:
                        doc["content"] = known[key]
                    else:
                        textless = True
            read.append(Span(span.trace_id, span.span_id, span.parent_id, span.name, span.kind,
                             span.start, span.end, {"retrieval.documents": documents},
                             span.line))
        contexts = retrieved_contexts(read, self.where, self.source, attribute=_DOCUMENTS)
        if textless and contexts:
            item[CONTEXTS_WITHOUT_TEXT] = _NO_CONTENT
        return contexts

    def documents(self, span: Span) -> list[dict[str, Any]]:
        """A retrieval span's documents: ``id``, ``score`` and ``content`` (text; left out
        when none is recorded) where present."""
        value = span.attributes.get(_DOCUMENTS)
        if value is None:
            return []
        try:
            out = []
            for doc in json_objects(value, "document"):
                kept = {key: doc[key] for key in ("id", "score") if key in doc}
                content = _content(doc.get("content"))
                if content is not None:
                    kept["content"] = content
                out.append(kept)
            return out
        except MessagesError as error:
            raise self.error(span, _DOCUMENTS, str(error)) from None
        except RecursionError:
            raise self.error(span, _DOCUMENTS, DEEP_JSON) from None


def _content(value: Any) -> str | None:
    """A document's content as text: a string as it is, another value as its JSON text, None
    (or none) as no content."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _document_key(doc_id: Any) -> str | None:
    """The id a document's copies share, as the contexts read it (None: no id, placed by its
    rank)."""
    if doc_id is None or doc_id == "":
        return None
    return doc_id if type(doc_id) is str else str(doc_id)


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
