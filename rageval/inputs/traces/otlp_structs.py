"""One OTLP/JSON line decoded straight into the fields rageval reads of its spans.

The general reader (:mod:`rageval.inputs.traces.otlp`) decodes a line with ``json`` into dicts
and lists and then walks them. An exporter's lines are well formed, and most of what they hold
is attributes written as ``{"key": ..., "value": {"stringValue": ...}}``: decoded by msgspec
into a few typed structs that name only the fields read (a span's resource, scope, status,
events and links are skipped unread), a line becomes spans in about 0.6 of the time.

:func:`span_fields` gives exactly what the general reader would read from the line, or None:
a line that msgspec reads otherwise than ``json`` does (a lone surrogate, a number beyond a
float's range, NaN) or that does not fit the structs (a value of another type, an unknown
``AnyValue`` field, malformed JSON) is left to the general reader, which reads it as it always
has and says what is wrong where. The structs are therefore strict where the general reader
is lenient: they never accept what it would read differently. Two differences are left, both
about lines no exporter writes, where ``json`` refuses what it could read: a field the
structs skip is checked as JSON but not converted, so an integer of more than 4,300 digits
there (beyond Python's limit on converting text to an integer) does not stop the line; and
both stop at Python's recursion limit, msgspec a few levels deeper than ``json`` (989 levels
of nesting against 986, called from the same place), so a line nested that deep is read.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

__all__ = ["SpanFields", "span_fields"]

#: What the general reader takes of a span, in this order: its trace id, span id and parent
#: id as given, its name, start and end as given, and its attributes as a flat dict.
SpanFields = tuple[Any, Any, Any, Any, Any, Any, dict[str, Any]]


# gc=False: a line decodes into tens of thousands of these, none in a reference cycle.
class _Array(Struct, forbid_unknown_fields=True, gc=False):
    values: list[_Value | None] | None = None


class _KeyValue(Struct, forbid_unknown_fields=True, gc=False):
    key: str
    value: _Value | None = None


class _KeyValueList(Struct, forbid_unknown_fields=True, gc=False):
    values: list[_KeyValue] | None = None


class _Value(Struct, forbid_unknown_fields=True, gc=False):
    """An ``AnyValue``: at most one field is set by an exporter; where several are, the first
    in this order is read, as the general reader does."""

    stringValue: str | UnsetType | None = UNSET  # OTLP's own names
    boolValue: bool | UnsetType | None = UNSET
    intValue: int | str | UnsetType | None = UNSET  # 64-bit: written as text
    doubleValue: float | int | UnsetType | None = UNSET
    arrayValue: _Array | UnsetType | None = UNSET
    kvlistValue: _KeyValueList | UnsetType | None = UNSET
    bytesValue: str | UnsetType | None = UNSET


class _Span(Struct, gc=False):
    # Any: ids, names and times are checked (or read leniently) by the general reader's rules.
    traceId: Any = None
    spanId: Any = None
    parentSpanId: Any = None
    name: Any = None
    startTimeUnixNano: Any = 0
    endTimeUnixNano: Any = 0
    attributes: list[_KeyValue] | None = None


class _Scope(Struct, gc=False):
    spans: list[_Span] | None = None


class _Resource(Struct, gc=False):
    scopeSpans: list[_Scope] | None = None
    instrumentationLibrarySpans: list[_Scope] | None = None  # OTLP before 0.15


class _Request(Struct, gc=False):
    resourceSpans: list[_Resource]


_DECODER = msgspec.json.Decoder(_Request)


def span_fields(line: bytes) -> list[SpanFields] | None:
    """The fields of every span of the export on ``line`` (see :data:`SpanFields`), in file
    order; None where the general reader must read the line (see the module's docstring)."""
    try:
        if not line.isascii():
            line.decode("utf-8")  # msgspec checks only the text it decodes, not what it skips
        request = _DECODER.decode(line)
        out: list[SpanFields] = []
        add = out.append
        for resource in request.resourceSpans:
            scopes = resource.scopeSpans
            if scopes is None:
                scopes = resource.instrumentationLibrarySpans
            for scope in scopes or ():
                for span in scope.spans or ():
                    add((span.traceId, span.spanId, span.parentSpanId, span.name,
                         span.startTimeUnixNano, span.endTimeUnixNano,
                         _attributes(span.attributes)))
        return out
    # ValueError: invalid UTF-8, an intValue int() refuses; OverflowError: a doubleValue
    # integer beyond a float; RecursionError: nested too deep.
    except (msgspec.MsgspecError, ValueError, OverflowError, RecursionError):
        return None


def _attributes(items: list[_KeyValue] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or ():
        value = item.value
        if value is not None:
            text = value.stringValue  # most attributes are strings
            out[item.key] = text if text is not UNSET else _value(value)
        else:
            out[item.key] = None
    return out


def _value(value: _Value | None) -> Any:
    """An ``AnyValue`` as the general reader reads it (64-bit integers arrive as text)."""
    if value is None:
        return None
    if value.stringValue is not UNSET:
        return value.stringValue
    if value.boolValue is not UNSET:
        return value.boolValue
    if value.intValue is not UNSET:
        number = value.intValue
        return None if number is None else int(number)
    if value.doubleValue is not UNSET:
        number = value.doubleValue
        return None if number is None else float(number)
    if value.arrayValue is not UNSET:
        array = value.arrayValue
        return [_value(item) for item in (array.values or ())] if array is not None else []
    if value.kvlistValue is not UNSET:
        pairs = value.kvlistValue
        return {pair.key: _value(pair.value)
                for pair in (pairs.values or ())} if pairs is not None else {}
    if value.bytesValue is not UNSET:
        return value.bytesValue
    return None  # {}: no value
