"""The metric-name grammar: parsing, canonical form and the round-trip property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rageval.core.errors import UsageError
from rageval.core.names import MetricName, parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p@5", MetricName("p", (), 5)),
        ("p(rel=2)@5", MetricName("p", (("rel", "2"),), 5)),
        ("ndcg@10", MetricName("ndcg", (), 10)),
        ("ndcg(gain=exp)@10", MetricName("ndcg", (("gain", "exp"),), 10)),
        ("err(gmax=3)@10", MetricName("err", (("gmax", "3"),), 10)),
        ("rouge2", MetricName("rouge2")),
        (
            "bertscore(model=roberta-large,layer=17)",
            MetricName("bertscore", (("layer", "17"), ("model", "roberta-large"))),
        ),
        ("judge:faithfulness", MetricName("judge:faithfulness")),
        ("judge:rubrics/my_rubric.toml", MetricName("judge:rubrics/my_rubric.toml")),
        ("NDCG@10", MetricName("NDCG", (), 10)),
        ("rougeLsum", MetricName("rougeLsum")),
        (" mrr ", MetricName("mrr")),
    ],
)
def test_parse_examples(text: str, expected: MetricName) -> None:
    assert parse(text) == expected


def test_canonical_form_sorts_parameters() -> None:
    assert str(parse("bertscore(model=roberta-large,layer=17)")) == (
        "bertscore(layer=17,model=roberta-large)"
    )
    assert parse("x(b=1,a=2)") == parse("x(a=2,b=1)")


def test_namespace() -> None:
    assert parse("judge:faithfulness").namespace == "judge"
    assert parse("ndcg@10").namespace is None
    assert parse("Judge:Faithfulness").base == "judge:Faithfulness"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "malformed"),
        ("p@", "malformed"),
        ("p@0", "at least 1"),
        ("p@-1", "malformed"),
        ("p()", "empty parameter"),
        ("p(rel)", "malformed parameter"),
        ("p(rel=1,rel=2)", "given twice"),
        ("p(rel=1)(x=2)", "malformed"),
        ("5p", "malformed"),
        ("p @5", "malformed"),
    ],
)
def test_malformed_names(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse(text)


def test_non_string_is_usage_error() -> None:
    with pytest.raises(UsageError):
        parse(5)  # type: ignore[arg-type]


_ident = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_value = st.from_regex(r"[A-Za-z0-9_.\-/]{1,12}", fullmatch=True)
_target = st.from_regex(r"[A-Za-z0-9_./-]{1,16}", fullmatch=True)


@st.composite
def metric_names(draw: st.DrawFn) -> MetricName:
    base = draw(_ident)
    if draw(st.booleans()):
        base = f"{base}:{draw(_target)}"
    params = draw(st.dictionaries(_ident, _value, max_size=4))
    cutoff = draw(st.none() | st.integers(min_value=1, max_value=10_000))
    return MetricName(base, tuple(params.items()), cutoff)


@given(metric_names())
def test_parse_str_round_trip(name: MetricName) -> None:
    assert parse(str(name)) == name
    assert str(parse(str(name))) == str(name)
