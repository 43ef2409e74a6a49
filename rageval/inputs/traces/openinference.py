"""A trace's spans as records, by the OpenInference conventions.

A record comes from one *unit*: the whole trace (its root span, the one without a parent in
the trace, stands for it), or each span of a chosen kind that has no ancestor of that kind
(``unit="CHAIN"``: one record per top-level chain), with the spans below it. From the unit:

* ``query``: the root span's ``input.value`` when it is text (not ``application/json``), else
  the last ``user`` message of the unit's first LLM span (``llm.input_messages``);
* ``contexts``: the documents of the unit's RETRIEVER spans (``retrieval.documents.<i>.
  document.{id, content, score}``), span after span in the order they started (multi-hop
  retrieval keeps its order), each span's in rank order. A document without an id takes its
  1-based place among the record's contexts; the same document retrieved again keeps its first
  rank, and two different texts under one id are an error;
* ``answer``: the output message of the unit's last LLM span to end
  (``llm.output_messages.0.message.content``, else its ``output.value`` when text).

A field map (``--map query=input.value.question``) reads a field from a dotted attribute of the
root span instead (then of the other spans, in the order they started), looking inside JSON
text (see :func:`~rageval.inputs.traces.spans.attribute`). A unit without the span a field comes
from leaves that field out: the metrics needing it leave the record unscored, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records.lines import DEEP_JSON
from rageval.core.records.model import Record, checked_record
from rageval.inputs.traces.spans import Span, attribute, document_values
from rageval.inputs.traces.tree import unit_spans

__all__ = ["TRACE_MAP_FIELDS", "Unit", "apply_field_map", "retrieved_contexts", "unit_item",
           "unit_records", "units"]

#: The fields a map may read from span attributes (contexts come from retriever spans).
TRACE_MAP_FIELDS: tuple[str, ...] = ("id", "query", "answer", "reference")
_DOCUMENT = ("id", "content", "score")  # the fields of a retrieved document a context holds


def unit_records(spans: list[Span], unit: str, field_map: Mapping[str, str],
                 source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, record object)`` for each unit of one trace's spans (``unit`` is ``trace`` or
    a span kind); the line is that of the unit's root span (0 for a server's spans)."""
    for found in units(spans, unit, field_map, source):
        yield found.line, found.object()


def units(spans: list[Span], unit: str, field_map: Mapping[str, str],
          source: str) -> Iterator[Unit]:
    """What each unit of one trace's spans gives its record (see :func:`unit_records`)."""
    for root, members, scope in unit_spans(spans, unit):
        yield _unit(root, members, scope, field_map, source)


class Unit:
    """What one unit of a trace gives its record: ``item``, the record object's fields but its
    contexts (``id``, ``trace_id``, ``span_id``, and ``query``, ``answer``, ``reference`` when
    found), which a references file fills in place; ``contexts``, ``(id, text, score)`` each
    (None: no retriever span); and the line of the unit's root span (0 for a server's)."""

    __slots__ = ("contexts", "item", "line")

    def __init__(self, line: int, item: dict[str, Any],
                 contexts: list[tuple[str, str, float | None]] | None) -> None:
        self.line, self.item, self.contexts = line, item, contexts

    def object(self) -> dict[str, Any]:
        """The record object, as a records file would give it."""
        if self.contexts is None:
            return dict(self.item)
        contexts = [{"id": doc, "text": text} if score is None else
                    {"id": doc, "text": text, "score": score}
                    for doc, text, score in self.contexts]
        return {**self.item, "contexts": contexts}

    def record(self, judgments: Mapping[str, int] | None = None) -> Record | None:
        """The record, built from the fields as they are, with ``judgments`` (checked grades,
        read-only); None when one needs the checks of a record object (:meth:`object`), which
        then say what is wrong with it."""
        item = self.item
        reference = item.get("reference")
        if reference is None:
            references: tuple[str, ...] = ()
        elif type(reference) is str:
            references = (reference,)
        elif (type(reference) is list and reference
              and all(type(text) is str for text in reference)):
            references = tuple(reference)
        else:
            return None
        return checked_record(item["id"], item.get("query"), self.contexts or (),
                              item.get("answer"), references,
                              {"trace_id": item["trace_id"], "span_id": item["span_id"]},
                              judgments)


def unit_item(root: Span, unit: str) -> tuple[str, dict[str, Any]]:
    """How messages name a unit rooted at ``root`` (``unit``: ``trace`` or ``span``), and its
    record object's first fields: its id (the trace's, or the span's) and where it came from."""
    where = f"trace {root.trace_id}" if unit == "trace" else (
        f"trace {root.trace_id}, span {root.span_id}")
    return where, {"id": root.trace_id if unit == "trace" else root.span_id,
                   "trace_id": root.trace_id, "span_id": root.span_id}


def _unit(root: Span, spans: list[Span], unit: str, field_map: Mapping[str, str],
          source: str) -> Unit:
    where, item = unit_item(root, unit)
    query, answer = _query(root, spans), _answer(spans)
    if query is not None:
        item["query"] = query
    if answer is not None:
        item["answer"] = answer
    retrievers = [span for span in spans if span.kind == "RETRIEVER"]
    contexts = retrieved_contexts(retrievers, where, source) if retrievers else None
    apply_field_map(item, root, spans, field_map, where, source)
    return Unit(root.line or 0, item, contexts)


def apply_field_map(item: dict[str, Any], root: Span, spans: list[Span],
                    field_map: Mapping[str, str], where: str, source: str) -> None:
    """Set each field of ``field_map`` in ``item`` from its attribute (:func:`_mapped`): a
    field whose attribute the unit lacks is left out, an id is an error."""
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


def _mapped(root: Span, spans: list[Span], name: str) -> Any:
    value = attribute(root, name)
    if value is not None:
        return value
    for span in spans:
        if span is not root:
            value = attribute(span, name)
            if value is not None:
                return value
    return None


def _text(span: Span, key: str, mime_key: str) -> str | None:
    """The text attribute ``key``, unless its ``mime_key`` says it is JSON."""
    value = span.attributes.get(key)
    if not isinstance(value, str) or span.attributes.get(mime_key) == "application/json":
        return None
    return value


def _query(root: Span, spans: list[Span]) -> str | None:
    text = _text(root, "input.value", "input.mime_type")
    if text is not None:
        return text
    for span in spans:
        if span.kind == "LLM":
            return _last_user_message(span)
    return None


def _last_user_message(span: Span) -> str | None:
    found, index = None, 0
    while f"llm.input_messages.{index}.message.role" in span.attributes:
        if span.attributes[f"llm.input_messages.{index}.message.role"] == "user":
            content = span.attributes.get(f"llm.input_messages.{index}.message.content")
            found = content if isinstance(content, str) else found
        index += 1
    return found


def _answer(spans: list[Span]) -> str | None:
    llms = [span for span in spans if span.kind == "LLM"]
    if not llms:
        return None
    last = max(reversed(llms), key=lambda span: span.end)  # the first of equal end times
    content = last.attributes.get("llm.output_messages.0.message.content")
    return content if isinstance(content, str) else _text(last, "output.value",
                                                          "output.mime_type")


def retrieved_contexts(
        retrievers: list[Span], where: str, source: str, *,
        attribute: str = "retrieval.documents") -> list[tuple[str, str, float | None]]:
    """The contexts of the documents of ``retrievers``; ``attribute`` names them in errors."""
    contexts: list[tuple[str, str, float | None]] = []
    seen: dict[str, str] = {}
    for span in retrievers:
        for rank, (doc_id, text, score) in enumerate(document_values(span, _DOCUMENT)):
            if type(text) is not str:
                text = "" if text is None else str(text)
            if type(doc_id) is not str or not doc_id:
                doc_id = str(len(contexts) + 1) if doc_id in (None, "") else str(doc_id)
            if doc_id in seen:
                if seen[doc_id] != text:
                    raise InputError(
                        f"{where}: document id {doc_id!r} holds two different texts (span "
                        f"{span.span_id}, {attribute}.{rank})", path=source,
                        line=span.line)
                continue  # retrieved again: its first rank stands
            seen[doc_id] = text
            if type(score) is float:
                score = score if math.isfinite(score) else None
            elif (isinstance(score, (int, float)) and not isinstance(score, bool)
                    and _finite(score)):
                score = float(score)
            else:  # a NaN score, or none, ranks nothing: left out
                score = None
            contexts.append((doc_id, text, score))
    return contexts


def _finite(score: int | float) -> bool:
    """Whether a document's score is a finite number as a float: an integer too large for a
    float (``{"intValue": "1000…"}``) is not, and is left out as a NaN is."""
    try:
        return math.isfinite(score)
    except OverflowError:
        return False
