"""tools:precision, tools:recall and tools:f1: the worked examples of docs/tools.md, the edge
cases, and invariants over generated calls."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rageval
from rageval.core.errors import UsageError
from rageval.core.records import ToolCall, records_from_dicts
from rageval.core.registry import create
from rageval.tools.matching import json_equal, pair_calls


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def scores(calls, expected, *metrics: str) -> dict:
    record = {"id": "r", "tool_calls": calls, "reference_tool_calls": expected}
    result = rageval.evaluate(records_from_dicts([record]), metrics=list(metrics))
    return {**result.records[0].scores, "errors": result.records[0].errors,
            "details": result.records[0].details}


ALL = ("tools:precision", "tools:recall", "tools:f1")


def test_worked_example_extra_call():
    # The agent searched, then calculated, then searched again with another query; expected:
    # the search and the calculation.
    calls = [call("search", q="GDP France"), call("calc", expr="2.78/68"),
             call("search", q="population")]
    expected = [call("search", q="GDP France"), call("calc", expr="2.78/68")]
    got = scores(calls, expected, *ALL)
    assert got["tools:precision"] == pytest.approx(2 / 3)
    assert got["tools:recall"] == 1.0
    assert got["tools:f1"] == pytest.approx(0.8)
    assert got["details"]["tools"] == {"pairs": [[0, 0], [1, 1]], "unexpected": ["search"],
                                       "missed": []}


def test_worked_example_order_and_arguments():
    calls = [call("calc", expr="2+2"), call("search", q="weather", k=5)]
    expected = [call("search", q="weather"), call("calc", expr="2+2")]
    got = scores(calls, expected, "tools:f1", "tools:f1(match=args_subset)",
                 "tools:f1(match=args_subset,order=strict)", "tools:f1(match=name)")
    assert got["tools:f1"] == pytest.approx(0.5)  # the search has an extra argument
    assert got["tools:f1(match=args_subset)"] == 1.0
    assert got["tools:f1(match=args_subset,order=strict)"] == pytest.approx(0.5)
    assert got["tools:f1(match=name)"] == 1.0


def test_numbers_within_the_tolerance():
    calls, expected = [call("convert", amount=100.004)], [call("convert", amount=100)]
    got = scores(calls, expected, "tools:f1", "tools:f1(tol=0.01)")
    assert got["tools:f1"] == 0.0
    assert got["tools:f1(tol=0.01)"] == 1.0


def test_no_calls_expected_and_none_made_is_agreement():
    got = scores([], [], *ALL)
    assert [got[m] for m in ALL] == [1.0, 1.0, 1.0]


def test_undefined_precision_and_recall_are_unscored_with_the_reason():
    got = scores([], [call("search", q="x")], *ALL)
    assert got["tools:precision"] is None and "no tool call was made" in got["errors"][
        "tools:precision"]
    assert got["tools:recall"] == 0.0 and got["tools:f1"] == 0.0
    got = scores([call("search", q="x")], [], *ALL)
    assert got["tools:recall"] is None and "no tool call was expected" in got["errors"][
        "tools:recall"]
    assert got["tools:precision"] == 0.0 and got["tools:f1"] == 0.0


def test_a_record_without_its_calls_is_unscored_not_zero():
    result = rageval.evaluate(records_from_dicts([
        {"id": "a", "reference_tool_calls": [call("s")]},
        {"id": "b", "tool_calls": [call("s")]},
        {"id": "c", "tool_calls": [call("s")], "reference_tool_calls": [call("s")]}]),
        metrics=["tools:f1"])
    errors = {r.id: r.errors.get("tools:f1") for r in result.records}
    assert "no tool_calls" in errors["a"] and "no reference_tool_calls" in errors["b"]
    summary = result.summary["tools:f1"]
    assert (summary.value, summary.n, summary.unscored) == (1.0, 1, 2)


def test_duplicate_calls_count_once_each():
    got = scores([call("s", q="a"), call("s", q="a")], [call("s", q="a")], *ALL)
    assert got["tools:precision"] == 0.5 and got["tools:recall"] == 1.0


def test_openai_form_and_json_text_arguments_read_the_same():
    openai_form = [{"id": "call_1", "type": "function",
                    "function": {"name": "search", "arguments": '{"k": 3, "q": "x"}'}}]
    assert scores(openai_form, [call("search", q="x", k=3)], "tools:f1")["tools:f1"] == 1.0


@pytest.mark.parametrize("name, message", [
    ("tools:f2", "unknown metric 'tools:f2'"),
    ("tools:f1(match=fuzzy)", "match=fuzzy is not one of"),
    ("tools:f1(order=sorted)", "order=sorted is not one of"),
    ("tools:f1(tol=-1)", "tol=-1 must be at least 0"),
    ("tools:f1(tol=nan)", "tol must be a finite number"),
    ("tools:f1@3", "takes no cutoff"),
])
def test_bad_names_are_refused(name, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        create(name)


def test_signature_names_the_rules():
    metric = create("tools:recall(match=name,order=strict)")
    assert metric.signature().format().startswith(
        "metric:tools:recall|match:name|order:strict|tol:0.0|scope:turn|rageval:")


def test_json_equality():
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal(True, 1) and not json_equal(1, True) and not json_equal(0, False)
    assert not json_equal([1, 2], [2, 1]) and not json_equal("1", 1)
    assert json_equal({"x": 1, "y": 2}, {"y": 2, "x": 1})
    assert json_equal(1.0, 1.05, tol=0.1) and not json_equal(1.0, 1.2, tol=0.1)
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})


# -- invariants over generated calls ------------------------------------------------------------

_CALLS = st.lists(st.builds(lambda name, arguments: ToolCall(name, arguments),
                            st.sampled_from("abc"),
                            st.dictionaries(st.sampled_from("xyz"), st.integers(0, 2),
                                            max_size=2)), max_size=5)


@settings(max_examples=300, deadline=None)
@given(_CALLS, _CALLS)
def test_pairing_invariants(calls, expected):
    count = {(match, order): len(pair_calls(calls, expected, match=match, order=order))
             for match, order in itertools.product(("exact", "args_subset", "name"),
                                                   ("strict", "any"))}
    for match in ("exact", "args_subset", "name"):
        assert count[match, "strict"] <= count[match, "any"] <= min(len(calls), len(expected))
    for order in ("strict", "any"):
        assert count["exact", order] <= count["args_subset", order] <= count["name", order]
    # "any" is blind to order; strict on identical lists pairs everything.
    reversed_count = len(pair_calls(calls[::-1], expected, match="exact", order="any"))
    assert reversed_count == count["exact", "any"]
    assert len(pair_calls(calls, calls, match="exact", order="strict")) == len(calls)


@settings(max_examples=200, deadline=None)
@given(_CALLS, _CALLS)
def test_f1_is_the_harmonic_mean_of_precision_and_recall(calls, expected):
    got = scores([c.to_dict() for c in calls], [c.to_dict() for c in expected], *ALL)
    precision, recall, f1 = (got[m] for m in ALL)
    assert all(v is None or 0.0 <= v <= 1.0 for v in (precision, recall, f1))
    if precision is not None and recall is not None and precision + recall > 0:
        assert math.isclose(f1, 2 * precision * recall / (precision + recall))
