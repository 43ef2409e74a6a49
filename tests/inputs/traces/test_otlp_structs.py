"""A line read through the typed structs gives exactly the spans the general JSON reader gives,
or is left to it: checked on generated exports, well formed and not, and on the awkward values
(big integers, lone surrogates, invalid UTF-8 where the structs do not look). A key path inside
an attribute's JSON text reads what ``json`` reads too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.core.errors import InputError
from rageval.inputs.traces.otlp import _Bad, _line_spans, _struct_spans, otlp_traces
from rageval.inputs.traces.otlp_structs import span_fields
from rageval.inputs.traces.spans import Span, attribute

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "051581bf3cb55c13"


def _general(raw: bytes) -> list[Any] | str:
    """The general reader's spans of ``raw`` as tuples, or the text of its error."""
    try:
        spans = _line_spans(json.loads(raw.decode("utf-8")), "f", 3)
    except InputError as error:
        return str(error)
    except (ValueError, RecursionError, _Bad) as error:
        return type(error).__name__
    return [_fields(span) for span in spans]


def _fields(span: Any) -> tuple[Any, ...]:
    return (span.trace_id, span.span_id, span.parent_id, span.name, span.kind, span.start,
            span.end, list(span.attributes.items()), span.line)


def _same_or_left(raw: bytes) -> bool:
    """Whether the structs read ``raw`` (asserting they read it as the general reader does)."""
    spans = _struct_spans(raw, 3)
    if spans is None:
        return False
    assert [_fields(span) for span in spans] == _general(raw)
    for (*_, attributes), span in zip(span_fields(raw) or [], spans, strict=True):
        # The same types too: 1 == 1.0 == True would hide an int read as a float.
        assert _typed(attributes) == _typed(span.attributes)
    return True


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return [(key, _typed(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, repr(value))


# Values an exporter writes, and values it never would: the structs must read the first and
# may leave the second (never read them otherwise than the general reader).
_TEXT = st.text(max_size=8)
_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63, max_value=2**80),
    st.floats(allow_nan=False), _TEXT, st.just("12"), st.just(" 7 "), st.just("1_0"))
_WRITTEN = st.one_of(  # as an exporter writes an AnyValue
    st.builds(lambda v: {"stringValue": v}, _TEXT),
    st.builds(lambda v: {"boolValue": v}, st.booleans()),
    st.builds(lambda v: {"intValue": str(v)}, st.integers(min_value=-2**63, max_value=2**64)),
    st.builds(lambda v: {"doubleValue": v}, st.one_of(
        st.floats(allow_nan=False, allow_infinity=False), st.integers())),
    st.builds(lambda v: {"bytesValue": v}, _TEXT))
_ODD = st.one_of(  # what no exporter writes
    st.builds(lambda v: {"stringValue": v}, st.one_of(st.none(), st.integers())),
    st.builds(lambda v: {"boolValue": v}, st.one_of(st.none(), _TEXT)),
    st.builds(lambda v: {"intValue": v}, _SCALAR),
    st.builds(lambda v: {"doubleValue": v}, _SCALAR),
    st.dictionaries(st.sampled_from(["stringValue", "intValue", "doubleValue", "boolValue",
                                     "other"]), _SCALAR, max_size=3),
    st.none(), st.just(0), st.just(""), st.just([]))


def _values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """AnyValues with arrays and key/value lists of ``leaves`` inside."""
    return st.recursive(leaves, lambda inner: st.one_of(
        st.builds(lambda v: {"arrayValue": {"values": v}}, st.lists(inner, max_size=3)),
        st.builds(lambda v: {"kvlistValue": {"values": v}}, st.lists(st.builds(
            lambda k, v: {"key": k, "value": v}, _TEXT, inner), max_size=3)),
        st.builds(lambda v: {"arrayValue": v}, st.one_of(st.none(), st.just({})))),
        max_leaves=6)


_PAIRS = {
    True: st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(["a", "b", "c"]),
                    _values(_WRITTEN)),
    False: st.one_of(
        st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(["a", "b"]),
                  _values(st.one_of(_WRITTEN, _ODD))),
        st.builds(lambda k: {"key": k}, st.one_of(_TEXT, st.none(), st.integers())),
        st.just("not a pair")),
}
_IDS = {
    True: (st.sampled_from([TRACE, TRACE.upper(), "W47/95gDgQPSabYzgT/GDA=="]),
           st.sampled_from([SPAN, "BRWBvzy1XBM=", "a" * 16])),
    False: (st.one_of(st.just(TRACE), st.just(""), st.none(), st.integers(), _TEXT),) * 2,
}
_TIMES = {True: st.builds(str, st.integers(min_value=0, max_value=2**64)),
          False: st.one_of(st.integers(min_value=0), st.none(), st.just("x"),
                           st.floats(allow_nan=False, allow_infinity=False))}


@st.composite
def _spans(draw: st.DrawFn) -> dict[str, Any]:
    written = draw(st.integers(0, 3)) > 0  # mostly as an exporter writes a span
    trace_ids, span_ids = _IDS[written]
    span: dict[str, Any] = {"traceId": draw(trace_ids), "spanId": draw(span_ids)}
    for key, values in (("parentSpanId", span_ids), ("name", st.one_of(_TEXT, st.integers())),
                        ("startTimeUnixNano", _TIMES[written]),
                        ("endTimeUnixNano", _TIMES[written]),
                        ("status", st.one_of(st.just({}), _SCALAR))):
        if draw(st.booleans()):
            span[key] = draw(values)
    span["attributes"] = draw(st.one_of(st.lists(_PAIRS[written], max_size=5), st.none(),
                                        *([] if written else [st.just({})])))
    return span


@st.composite
def _exports(draw: st.DrawFn) -> bytes:
    spans = draw(st.lists(_spans(), max_size=3))
    scope_key = draw(st.sampled_from(["scopeSpans", "instrumentationLibrarySpans"]))
    export = {"resourceSpans": [{"resource": {"attributes": []},
                                 scope_key: [{"scope": {"name": "s"}, "spans": spans}]}]}
    return json.dumps(export, ensure_ascii=draw(st.booleans())).encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(_exports())
def test_a_line_read_through_the_structs_is_read_as_the_general_reader_reads_it(
        raw: bytes) -> None:
    _same_or_left(raw)


def _export(*attributes: dict[str, Any], **span: Any) -> bytes:
    fields = {"traceId": TRACE, "spanId": SPAN, "name": "n", "startTimeUnixNano": "1",
              "endTimeUnixNano": "2", "attributes": list(attributes), **span}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [fields]}]}]}).encode()


@pytest.mark.parametrize("value", [
    {"stringValue": "text"}, {"doubleValue": 0.5}, {"doubleValue": 5},
    {"intValue": "9007199254740993"}, {"intValue": 12345678901234567890123},
    {"boolValue": False}, {}, None, {"arrayValue": {"values": [{"stringValue": "a"}, None]}},
    {"kvlistValue": {"values": [{"key": "k", "value": {"doubleValue": 1.5}}]}},
    {"stringValue": "s", "doubleValue": 0.5}, {"stringValue": "é\U0001f600"},
])
def test_what_an_exporter_writes_is_read_through_the_structs(value: Any) -> None:
    assert _same_or_left(_export({"key": "v", "value": value}))


@pytest.mark.parametrize("raw", [
    _export({"key": "v", "value": {"stringValue": "\ud800"}}),  # a lone surrogate (escaped)
    _export({"key": "v", "value": {"doubleValue": float("nan")}}),  # NaN: not JSON
    _export({"key": "v", "value": {"doubleValue": 1}}).replace(b"1}", b"1e400}"),
    _export({"key": "v", "value": {"other": 1}}),  # no AnyValue field: an error
    _export({"key": "v", "value": {"intValue": "seven"}}),  # an error
    _export({"key": "v", "value": {"doubleValue": 1}}).replace(b"1}", b"1" + b"0" * 400 + b"}"),
    _export({"key": "v", "value": {"arrayValue": {"values": [{"doubleValue": -(10**400)}]}}}),
    _export(traceId="xyz"),  # an error
    _export(startTimeUnixNano=None),  # an error
])
def test_what_json_reads_otherwise_or_refuses_is_left_to_it(raw: bytes) -> None:
    assert not _same_or_left(raw)


def test_invalid_utf8_in_a_skipped_field_still_stops_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    good = _export({"key": "v", "value": {"stringValue": "x"}})
    bad = good.replace(b'"name": "n"', b'"status": {"message": "\xff"}, "name": "n"')
    path.write_bytes(good + b"\n" + bad + b"\n")
    with pytest.raises(InputError, match="invalid UTF-8") as caught:
        list(otlp_traces(str(path), 1 << 20))
    assert caught.value.line == 2


def _span_with(attributes: dict[str, Any]) -> Span:
    return Span(TRACE, SPAN, None, "s", None, 0, 0, attributes)


def _through_json(text: str, key: str) -> Any:
    """What a key path inside JSON text reads, as ``json`` reads the text."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value.get(key) if isinstance(value, dict) else None


@pytest.mark.parametrize("text", [
    '{"qid": "q1"}', '{"qid": 12345678901234567890123}', '{"qid": NaN}', '{"qid": 1e400}',
    '{"qid": "\\ud800"}', '{"qid": "\ud800"}', '{"qid": 1.5, "qid": 2}', "not json", "[1]",
    '{"qid": ' + "1" * 5000 + "}", '{"qid": "a"} trailing',
])
def test_a_key_inside_json_text_is_read_as_json_reads_it(text: str) -> None:
    found = attribute(_span_with({"metadata": text}), "metadata.qid")
    expected = _through_json(text, "qid")
    assert repr(found) == repr(expected)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _TEXT),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(_TEXT, inner, max_size=3)),
                    max_leaves=8))
def test_any_json_text_is_read_as_json_reads_it(value: Any) -> None:
    text = json.dumps({"qid": value})
    found = attribute(_span_with({"metadata": text}), "metadata.qid")
    assert repr(found) == repr(_through_json(text, "qid"))


def test_a_double_beyond_a_float_is_an_error_naming_its_attribute(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    big = _export({"key": "v", "value": {"stringValue": "x"}},
                  {"key": "d", "value": {"doubleValue": 10**400}})
    path.write_bytes(_export() + b"\n" + big + b"\n")
    with pytest.raises(InputError, match="too large to convert to float") as caught:
        list(otlp_traces(str(path), 1 << 20))
    assert (caught.value.line, caught.value.field) == (
        2, "resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value")


def test_json_text_in_a_str_subclass_is_read() -> None:
    class Text(str):
        pass

    span = _span_with({"metadata": Text('{"qid": 7}')})
    assert attribute(span, "metadata.qid") == 7
