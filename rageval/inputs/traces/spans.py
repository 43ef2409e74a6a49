"""One span of a trace, as every trace source hands it over (:class:`Span`), and reading its
attributes by the dotted names of the OpenInference conventions.

OTLP files hold a span's attributes as a flat list of ``key``/``value`` pairs; Phoenix's API
hands them flat too, but with a JSON-string attribute such as ``metadata`` already spread into
``metadata.<key>`` entries. :func:`attribute` reads both the same way: a dotted name is looked
up whole first, then as a key path inside the JSON text of a shorter attribute, so that
``metadata.qid`` finds ``{"qid": ...}`` in a ``metadata`` attribute wherever the trace came from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import msgspec

__all__ = ["KIND_KEY", "SPAN_KINDS", "Span", "attribute", "document_values", "documents",
           "span_kind"]

#: The span kinds of the OpenInference conventions (``openinference.span.kind``).
SPAN_KINDS: tuple[str, ...] = (
    "AGENT", "CHAIN", "DECISION", "EMBEDDING", "EVALUATOR", "GUARDRAIL", "LLM", "PROMPT",
    "RERANKER", "RETRIEVER", "TOOL", "UNKNOWN",
)
#: The attribute naming a span's OpenInference kind.
KIND_KEY = "openinference.span.kind"
_MISSING = object()
_JSON = msgspec.json.Decoder()


# Not frozen: a frozen dataclass sets each field through object.__setattr__, five times the
# cost of a span made for each of a file's spans. A span is made once and never changed.
@dataclass(slots=True)
class Span:
    """What rageval reads of one span: its place in its trace, its kind, its times (any
    unit that orders them; nanoseconds from OTLP, microseconds from Phoenix) and its flat
    attributes. ``line`` is the line of the file it was read from (None from a server)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str | None
    start: int
    end: int
    attributes: dict[str, Any]
    line: int | None = None


def span_kind(attributes: dict[str, Any], given: str | None = None) -> str | None:
    """The OpenInference kind of a span: ``given`` (a server's own field) or the
    ``openinference.span.kind`` attribute, upper-cased; None when neither says."""
    kind = given if given else attributes.get(KIND_KEY)
    return kind.upper() if isinstance(kind, str) and kind else None


def attribute(span: Span, name: str) -> Any:
    """The value of the dotted attribute ``name``, or None when the span has none.

    ``name`` is looked up whole; failing that, each shorter prefix that names an attribute
    holding a JSON object (as text) is opened and the rest of the name looked up in it, key by
    key (a list index is a number). A prefix whose text is not JSON has no keys.
    """
    attributes = span.attributes
    if name in attributes:
        return attributes[name]
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head not in attributes:
            continue
        found = _inside(attributes[head], parts[cut:])
        if found is not _MISSING:
            return found
    return None


def _inside(value: Any, keys: list[str]) -> Any:
    if isinstance(value, str):
        # msgspec reads a small object in a sixth of json's time, and reads what json reads
        # or refuses it (otlp_structs says where the two differ: nothing a writer makes).
        try:
            value = _JSON.decode(value)
        # TypeError: a str subclass, which msgspec does not take.
        except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
            try:  # what json reads that msgspec refuses (NaN, a lone surrogate), or an error
                value = json.loads(value)
            except ValueError:
                return _MISSING
            # A RecursionError (JSON nested about 1,000 levels deep) goes up to the record's
            # reader, which names the trace and the field.
    for key in keys:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def documents(span: Span, prefix: str = "retrieval.documents") -> list[dict[str, Any]]:
    """The documents of a retriever span (``<prefix>.<i>.document.<field>``), in the order of
    their index ``i`` (the rank the retriever gave them), each as its fields by name
    (``id``, ``content``, ``score``, ``metadata``). Indices may skip numbers; a list value
    (some exporters write the documents as one list attribute) is read as is."""
    listed = span.attributes.get(prefix)
    if isinstance(listed, list):
        return [_document_fields(item) for item in listed if isinstance(item, dict)]
    start = prefix + "."
    keys = _DOCUMENT_KEYS.get(start)
    if keys is None or len(keys) > _KEYS_KEPT:
        keys = _DOCUMENT_KEYS[start] = {}
    found: dict[int, dict[str, Any]] = {}  # index -> the document's fields
    for key, value in span.attributes.items():
        parsed = keys.get(key)
        if parsed is None:
            parsed = keys[key] = _document_key(key, start)
        if parsed:
            index, field = parsed
            fields = found.get(index)
            if fields is None:
                if index < 0:  # an index written oddly
                    return _documents_by_number(span.attributes, start)
                fields = found[index] = {}
            fields[field] = value
    if len(found) < 2:
        return list(found.values())
    return [found[index] for index in sorted(found)]


def document_values(span: Span, names: tuple[str, ...],
                    prefix: str = "retrieval.documents") -> list[list[Any]]:
    """:func:`documents`, each document as the values of its fields ``names`` in that order
    (None where it has none): without a dict made for each document, for a reader that reads
    the same few fields of every one."""
    attributes = span.attributes
    start = prefix + "."
    if len(names) > 1:  # an exporter's retriever spans share a few layouts of their keys
        getters = _layout(tuple(attributes), start, names)
        if getters is not None:
            values = [*attributes.values(), None]  # None: a field the document lacks
            return [list(get(values)) for get in getters]
    slots = _DOCUMENT_SLOTS.get((start, names))
    if slots is None or len(slots) > _KEYS_KEPT or isinstance(attributes.get(prefix), list):
        if slots is None or len(slots) > _KEYS_KEPT:
            _DOCUMENT_SLOTS[(start, names)] = {}
        return [[fields.get(name) for name in names] for fields in documents(span, prefix)]
    found: dict[int, list[Any]] = {}  # index -> the document's values
    width = len(names)
    for key, value in attributes.items():
        parsed = slots.get(key)
        if parsed is None:
            index_field = _document_key(key, start)
            parsed = slots[key] = () if not index_field else (
                index_field[0], names.index(index_field[1]) if index_field[1] in names
                else -1)  # a field not read: its document is one all the same
        if parsed:
            index, slot = parsed
            values = found.get(index)
            if values is None:
                if index < 0:  # an index written oddly
                    return [[fields.get(name) for name in names]
                            for fields in _documents_by_number(attributes, start)]
                values = found[index] = [None] * width
            if slot >= 0:
                values[slot] = value
    if len(found) < 2:
        return list(found.values())
    return [found[index] for index in sorted(found)]


def _layout(keys: tuple[str, ...], start: str,
            names: tuple[str, ...]) -> list[itemgetter[Any]] | None:
    """For a span whose attributes are ``keys`` in this order, what :func:`document_values`
    gives as a getter per document, in index order, of the places of its values ``names``
    among the attribute values (the place past the last: None); None where the documents
    must be read value by value (a list value under the prefix, an index written oddly).
    Found once per layout of keys, then looked up; past :data:`_LAYOUTS_KEPT` layouts (keys
    that vary from span to span) a new layout is read value by value instead (None)."""
    layouts = _LAYOUTS.setdefault((start, names), {})
    found = layouts.get(keys, _MISSING)
    if found is _MISSING:
        if len(layouts) >= _LAYOUTS_KEPT:
            return None
        found = layouts[keys] = _getters(keys, start, names)
    return found


def _getters(keys: tuple[str, ...], start: str,
             names: tuple[str, ...]) -> list[itemgetter[Any]] | None:
    if start[:-1] in keys:  # the documents may be one list value
        return None
    places: dict[int, list[int]] = {}  # index -> the places of its values
    for place, key in enumerate(keys):
        parsed = _document_key(key, start)
        if parsed:
            index, field = parsed
            if index < 0:
                return None
            at = places.setdefault(index, [len(keys)] * len(names))
            if field in names:
                at[names.index(field)] = place
    return [itemgetter(*places[index]) for index in sorted(places)]


# Every retriever span of a trace file names the same few keys: each is parsed once, the
# answers kept by prefix (a few thousand at most: then they are parsed anew).
_DOCUMENT_KEYS: dict[str, dict[str, tuple[int, str] | tuple[()]]] = {}
# The same by the fields read (document_values): key -> (index, the field's slot).
_DOCUMENT_SLOTS: dict[tuple[str, tuple[str, ...]], dict[str, tuple[int, int] | tuple[()]]] = {}
# The getters of document_values by layout of a span's keys (see _layout): a pure memo, a few
# layouts at most (each holds every key of a span), so that it stays small between runs.
_LAYOUTS: dict[tuple[str, tuple[str, ...]],
               dict[tuple[str, ...], list[itemgetter[Any]] | None]] = {}
_LAYOUTS_KEPT = 64
_KEYS_KEPT = 4096


def _document_key(key: str, start: str) -> tuple[int, str] | tuple[()]:
    """``(index, field)`` of an attribute ``<start><index>.document.<field>``, the index -1
    when it is not written as :func:`_canonical` says; ``()`` for any other key."""
    if not key.startswith(start):
        return ()
    index, sep, field = key[len(start):].partition(".document.")
    if not sep:
        return ()
    return (int(index) if _canonical(index) else -1), field


def _canonical(index: str) -> bool:
    """Whether ``index`` is a number written as ``str(int(index))`` would write it (so that
    two such indices are never the same number)."""
    return index.isdigit() and index.isascii() and (index[0] != "0" or index == "0")


def _documents_by_number(attributes: dict[str, Any], start: str) -> list[dict[str, Any]]:
    """:func:`documents` where some index is written oddly ("01", a non-ASCII digit): indices
    that are the same number are one document, a field read last overriding."""
    cut = len(start)
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(start):
            index, sep, field = key[cut:].partition(".document.")
            if sep and index.isdigit():
                found.setdefault(int(index), {})[field] = value
    return [found[index] for index in sorted(found)]


def _document_fields(item: dict[str, Any]) -> dict[str, Any]:
    """A document given as a nested object (``{"document": {"id": ...}}`` or its fields)."""
    inner = item.get("document", item)
    return dict(inner) if isinstance(inner, dict) else {}
