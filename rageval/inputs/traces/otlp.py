"""Spans from an OTLP/JSON file, handed over one whole trace at a time.

The file holds ``ExportTraceServiceRequest`` objects in OTLP's JSON encoding, as the
OpenTelemetry file exporters and the collector's file exporter write them: one per line (JSON
Lines), or a single one filling the file (pretty-printed or not). Each holds
``resourceSpans[].scopeSpans[].spans[]``; ids are hex (OTLP/JSON), or base64 as protobuf's
generic JSON mapping writes them, and read either way.

An exporter writes spans in batches as they end, so one trace's spans can be spread over many
lines. To hand over each trace whole while holding only the traces not yet complete, the file
is read twice: a first pass finds, for every trace id, the last line that names it (a byte scan,
no JSON decoding), and the second decodes the spans and hands a trace over once its last line
is read. A line is decoded into only the fields read (:mod:`~rageval.inputs.traces.
otlp_structs`) where it is well formed, and read as JSON otherwise.
"""

from __future__ import annotations

import base64
import binascii
import gc
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from rageval.core.errors import InputError
from rageval.core.progress import LoadProgress
from rageval.core.records.lines import binary_lines, decode_line, parse_json
from rageval.inputs.traces.otlp_structs import span_fields
from rageval.inputs.traces.spans import KIND_KEY, Span

__all__ = ["otlp_traces"]

_TRACE_ID = re.compile(rb'"traceId"\s*:\s*"([^"]*)"')
_LOWER_HEX_DIGITS = "0123456789abcdef"  # a string of them alone strips to nothing
_HEX_DIGITS = _LOWER_HEX_DIGITS + "ABCDEF"
_LOWER_HEX = _LOWER_HEX_DIGITS.encode("ascii")  # the same, for the first pass's raw bytes
T = TypeVar("T")
_SCOPES = ("scopeSpans", "instrumentationLibrarySpans")  # the latter: OTLP before 0.15
# An exporter's line holds hundreds of spans (half a megabyte or more): read in big pieces.
_BUFFER = 1 << 20


def otlp_traces(path: str, limit: int,
                progress: LoadProgress | None = None) -> Iterator[list[Span]]:
    """Every trace of the OTLP/JSON file at ``path``, its spans in file order, traces in the
    order they complete (the line of their last span) and, within a line, in the order of
    their last mention. ``limit`` is the longest line read (see ``--max-line-bytes``)."""
    closing = _closing_lines(path, limit)
    pending: dict[str, list[Span]] = {}
    done: set[str] = set()
    for line, spans in _spans_by_line(path, limit, progress):
        for span in spans:
            held = pending.get(span.trace_id)
            if held is not None:  # a trace still pending is not done
                held.append(span)
                continue
            if span.trace_id in done:
                raise InputError(f"trace {span.trace_id} has a span after its last one was "
                                 "read: the file changed while it was read", path=path,
                                 line=line)
            pending[span.trace_id] = [span]
        for trace_id in closing.pop(line, ()):
            spans = pending.pop(trace_id, None)
            if spans is not None:  # None: an id named only by a link
                done.add(trace_id)
                yield spans
    for spans in pending.values():  # a file read whole as one document
        yield spans


def _closing_lines(path: str, limit: int) -> dict[int, list[str]]:
    """For each line, the trace ids last named on it (a link's trace id counts too: that only
    holds its trace a little longer)."""
    last: dict[str, int] = {}
    for number, named in _named_trace_ids(path, limit):
        # A trace's spans mostly share a line: each id once, in the order of its last mention.
        for found in reversed(dict.fromkeys(reversed(named)) if len(named) > 1 else named):
            if len(found) == 32 and not found.strip(_LOWER_HEX):  # as an exporter writes it
                trace_id = found.decode("ascii")
            else:
                if b"\\" in found:  # an escaped character (base64's "\/"): read as JSON does
                    try:
                        found = json.loads(b'"' + found + b'"').encode("utf-8")
                    except ValueError:
                        continue
                trace_id = _hex_id(found.decode("ascii", "replace"), 16)
                if trace_id is None:
                    continue
            last.pop(trace_id, None)  # re-insert: ids in order of their last mention
            last[trace_id] = number
    closing: dict[int, list[str]] = {}
    for trace_id, number in last.items():
        closing.setdefault(number, []).append(trace_id)
    return closing


def _named_trace_ids(path: str, limit: int) -> Iterator[tuple[int, list[bytes]]]:
    """``(line, the raw trace ids it names)`` for every line of the file."""
    for number, raw in binary_lines(path, path, limit, buffer=_BUFFER):
        yield number, _TRACE_ID.findall(raw)


def _spans_by_line(path: str, limit: int,
                   progress: LoadProgress | None) -> Iterator[tuple[int, list[Span]]]:
    """``(line, its spans)`` of each non-blank line; a file whose first line is not JSON but
    which holds one JSON object as a whole is that object's, at line 1."""
    first = True
    for number, raw in binary_lines(path, path, limit, progress, buffer=_BUFFER):
        if not raw or raw.isspace():
            continue
        spans = _paused(_struct_spans, raw, number)
        if spans is None:  # read as JSON, which says what is wrong and where
            text = decode_line(raw, path, number)
            if first:
                try:
                    document = json.loads(text)
                except (ValueError, RecursionError):
                    yield 1, _paused(_line_spans, _whole_file(path, number, text), path, 1)
                    return
            else:
                document = _paused(parse_json, text, path, number)
            spans = _paused(_line_spans, document, path, number)
        first = False
        yield number, spans


def _struct_spans(raw: bytes, line: int) -> list[Span] | None:
    """The spans of the line ``raw`` read through :func:`span_fields`; None where the line
    must be read as JSON (a span the reader refuses among them: that reading names it)."""
    found = span_fields(raw)
    if found is None:
        return None
    ids: dict[Any, str] = {}
    spans = []
    add = spans.append
    try:
        for given, given_span, parent, name, start, end, attributes in found:
            trace_id, span_id, parent_id = _ids(given, given_span, parent, ids)
            add(_span(trace_id, span_id, parent_id, name, start, end, attributes, line))
    except _Bad:
        return None
    return spans


def _paused(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` with the cyclic garbage collector paused. A line decodes into tens of
    thousands of objects, and its spans as many, none of them in a reference cycle: the
    collector's repeated scans of them, as they are made, find nothing to free."""
    if not gc.isenabled():
        return call(*args)
    gc.disable()
    try:
        return call(*args)
    finally:
        gc.enable()


def _whole_file(path: str, number: int, text: str) -> Any:
    """The file read as one JSON value, when its first line opens an object that the line does
    not close; the first line's own error otherwise."""
    if not text.lstrip().startswith("{"):
        return parse_json(text, path, number)  # raises, naming the first line
    try:
        with open(path, "rb") as handle:
            whole = handle.read().decode("utf-8-sig")
        return json.loads(whole)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return parse_json(text, path, number)  # raises, naming the first line


def _line_spans(document: Any, path: str, line: int) -> list[Span]:
    """The spans of a line's decoded export, in file order."""
    if not isinstance(document, dict) or not isinstance(document.get("resourceSpans"), list):
        found = type(document).__name__ if not isinstance(document, dict) else "an object " \
            f"with keys {sorted(document)[:5]}"
        raise InputError(f"expected an OTLP/JSON trace export (an object with resourceSpans), "
                         f"found {found}", path=path, line=line)
    ids: dict[Any, str] = {}  # the ids already read on this line: a trace's spans share one
    out: list[Span] = []
    add = out.append
    for r, resource in enumerate(document["resourceSpans"]):
        where = f"resourceSpans[{r}]"
        scopes = _list(resource, _SCOPES, where, path, line)
        for s, scope in enumerate(scopes):
            spans = _list(scope, ("spans",), f"{where}.scopeSpans[{s}]", path, line)
            before = len(out)
            try:
                for raw in spans:
                    add(_read_span(raw, ids, line))
            except _Bad as bad:  # the span's place, told only in an error
                place = f"{where}.scopeSpans[{s}].spans[{len(out) - before}]"
                raise InputError(bad.message, path=path, line=line,
                                 field=f"{place}.{bad.field}" if bad.field else place) from None
    return out


def _list(obj: Any, keys: tuple[str, ...], where: str, path: str, line: int) -> list[Any]:
    if not isinstance(obj, dict):
        raise InputError(f"expected an object, found {type(obj).__name__}", path=path,
                         line=line, field=where)
    for key in keys:
        value = obj.get(key)
        if value is not None:
            if not isinstance(value, list):
                raise InputError(f"expected a list, found {type(value).__name__}", path=path,
                                 line=line, field=f"{where}.{key}")
            return value
    return []


class _Bad(Exception):
    """A problem of one span: its message, and the field under the span's path."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message, self.field = message, field


def _read_span(raw: Any, ids: dict[Any, str], line: int) -> Span:
    """The span ``raw``, its problems raised as :class:`_Bad`; ``ids`` holds the ids already
    read (raw id -> hex)."""
    if type(raw) is not dict:
        raise _Bad(f"expected a span object, found {type(raw).__name__}")
    get = raw.get
    trace_id, span_id, parent_id = _ids(get("traceId"), get("spanId"), get("parentSpanId"), ids)
    return _span(trace_id, span_id, parent_id, get("name"), get("startTimeUnixNano", 0),
                 get("endTimeUnixNano", 0), _attributes(get("attributes")), line)


def _ids(given: Any, given_span: Any, parent: Any,
         ids: dict[Any, str]) -> tuple[str, str, str | None]:
    """A span's trace id, span id and parent id as lower-case hex, :class:`_Bad` for one that
    is not an id."""
    # The ids of a line's spans repeat (a trace's spans share one, a parent is a span of the
    # line): each is read once, then looked up (a string is an id of one size at most: one
    # read before as the other size is read again, and refused).
    trace_id = ids.get(given) if type(given) is str else None
    if trace_id is None or len(trace_id) != 32:
        trace_id = _hex_id(given, 16)
        if trace_id is None:
            raise _Bad(f"expected a 16-byte trace id (32 hex digits), found {given!r}",
                       "traceId")
        ids[given] = trace_id
    span_id = ids.get(given_span) if type(given_span) is str else None
    if span_id is None or len(span_id) != 16:
        span_id = _hex_id(given_span, 8)
        if span_id is None:
            raise _Bad(f"expected an 8-byte span id (16 hex digits), found {given_span!r}",
                       "spanId")
        ids[given_span] = span_id
    parent = parent or None
    parent_id = None if parent is None else (ids.get(parent) if type(parent) is str else None)
    if parent is not None and (parent_id is None or len(parent_id) != 16):
        parent_id = _hex_id(parent, 8)
        if parent_id is None:
            raise _Bad(f"expected an 8-byte span id (16 hex digits), found {parent!r}",
                       "parentSpanId")
        ids[parent] = parent_id
    return trace_id, span_id, parent_id


def _span(trace_id: str, span_id: str, parent_id: str | None, name: Any, start: Any,
          end: Any, attributes: dict[str, Any], line: int) -> Span:
    kind = attributes.get(KIND_KEY)  # as span_kind reads it
    try:
        start, end = int(start), int(end)  # OTLP/JSON writes nanoseconds as strings
    except (TypeError, ValueError, OverflowError):
        _time(start, "startTimeUnixNano")  # raises, naming the field
        _time(end, "endTimeUnixNano")
    return Span(trace_id, span_id, parent_id, name if type(name) is str else "",
                kind.upper() if type(kind) is str and kind else None, start, end, attributes,
                line)


def _time(value: Any, key: str) -> int:
    """The time ``value`` at ``key`` (nanoseconds, written as a string); :class:`_Bad` when
    not one."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _Bad(f"expected nanoseconds since the epoch, found {value!r}"[:160], key) from None


def _attributes(items: Any) -> dict[str, Any]:
    if items is None:
        return {}
    if type(items) is not list:
        raise _Bad(f"expected a list of key/value pairs, found {type(items).__name__}",
                   "attributes")
    out: dict[str, Any] = {}
    for item in items:
        # Most attributes are strings: read here, the rest (and any problem) by _attribute.
        if type(item) is dict and "key" in item and "value" in item:
            key, value = item["key"], item["value"]
            if type(key) is str and type(value) is dict:
                if "stringValue" in value:
                    text = value["stringValue"]
                    if type(text) is str:
                        out[key] = text
                        continue
                elif len(value) == 1 and "doubleValue" in value:  # a retriever's scores
                    number = value["doubleValue"]
                    if type(number) is float:
                        out[key] = number
                        continue
        _attribute(out, items, item)
    return out


def _attribute(out: dict[str, Any], items: list[Any], item: Any) -> None:
    """Read one attribute of ``items`` into ``out`` by its value's type."""
    key = item.get("key") if type(item) is dict else None
    if type(key) is not str:
        raise _Bad("expected an object with a string key", f"attributes[{_index(items, item)}]")
    try:
        out[key] = _value(item.get("value"))
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as error:
        raise _Bad(f"attribute {key!r}: {error}"[:200],
                   f"attributes[{_index(items, item)}].value") from None


def _index(items: list[Any], item: Any) -> int:
    """The place of ``item`` in ``items`` (found only for an error)."""
    return next(i for i, candidate in enumerate(items) if candidate is item)


def _value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value (64-bit integers arrive as JSON strings)."""
    if not value:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"expected an AnyValue object, found {type(value).__name__}")
    if "stringValue" in value:
        return _typed(value["stringValue"], str, "stringValue")
    if "boolValue" in value:
        return _typed(value["boolValue"], bool, "boolValue")
    if "intValue" in value:
        number = value["intValue"]
        if isinstance(number, (bool, float)):
            raise TypeError(f"intValue: expected an integer, found {number!r}")
        return None if number is None else int(number)
    if "doubleValue" in value:
        number = value["doubleValue"]
        return None if number is None else float(number)
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        return [_value(v) for v in _typed(items, list, "arrayValue.values")]
    if "kvlistValue" in value:
        pairs = (value["kvlistValue"] or {}).get("values") or []
        return {_typed(pair["key"], str, "kvlistValue key"): _value(pair.get("value"))
                for pair in _typed(pairs, list, "kvlistValue.values")}
    if "bytesValue" in value:
        return _typed(value["bytesValue"], str, "bytesValue")
    raise ValueError(f"unknown value type {sorted(value)}")


def _typed(value: Any, kind: type, what: str) -> Any:
    """``value`` when it is of ``kind`` (or null); a TypeError naming ``what`` otherwise."""
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"{what}: expected {kind.__name__}, found {type(value).__name__}")


def _hex_id(value: Any, size: int) -> str | None:
    """A trace or span id of ``size`` bytes as lower-case hex: given as hex (OTLP/JSON) or as
    base64 (protobuf's JSON mapping); None when it is neither."""
    if type(value) is not str:
        return None
    if len(value) == 2 * size and not value.strip(_LOWER_HEX_DIGITS):  # as exporters write it
        return value
    if len(value) == 2 * size and value.isascii() and not value.strip(_HEX_DIGITS):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == size else None
