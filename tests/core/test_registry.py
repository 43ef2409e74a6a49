"""Metric registry: construction, validation, canonical names, immutability, signatures."""

from __future__ import annotations

import pytest

from rageval.core.errors import UsageError
from rageval.core.metric import ScoreOptions
from rageval.core.registry import create, metric_classes
from rageval.core.signature import Field, Signature


def test_create_and_canonical_name() -> None:
    assert str(create("p(rel=1)@5")) == "p@5"  # defaults are omitted
    assert str(create("p(rel=2)@5")) == "p(rel=2)@5"
    assert str(create("ndcg(gain=exp)@10")) == "ndcg(gain=exp)@10"
    assert str(create("err(gmax=4)@20")) == "err(gmax=4)@20"
    assert str(create("MRR")) == "mrr"


def test_aliases_resolve_to_canonical_names() -> None:
    assert str(create("success@10")) == "hit@10"
    assert str(create("recip_rank")) == "mrr"


def test_unknown_metric_suggests() -> None:
    with pytest.raises(UsageError, match="did you mean 'ndcg'"):
        create("ndgc@10")
    with pytest.raises(UsageError, match="unknown metric"):
        create("zzzzzz")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("p", "needs a cutoff"),
        ("rprec@5", "takes no cutoff"),
        ("p(rel=x)@5", "not a valid int"),
        ("p(rel=0)@5", "at least 1"),
        ("ndcg(gain=cubic)@5", "not one of"),
        ("ndcg(foo=1)", "unknown parameter"),
        ("mean_rank(missing=ignore)", "not one of"),
    ],
)
def test_bad_parameters(name: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        create(name)


def test_metric_is_immutable() -> None:
    metric = create("ndcg@10")
    with pytest.raises(AttributeError, match="immutable"):
        metric.cutoff = 5
    with pytest.raises(TypeError):
        metric.values["gain"] = "exp"  # type: ignore[index]


def test_equality_and_hash() -> None:
    assert create("p@5") == create("p(rel=1)@5")
    assert len({create("p@5"), create("p(rel=1)@5"), create("p@10")}) == 2


def test_signature_known_before_scoring() -> None:
    sig = create("ndcg(gain=exp)@10").signature()
    text = sig.format()
    assert text.startswith("metric:ndcg|cutoff:10|gain:exp|")
    assert "judgments:inline" in text and "undefined:skip" in text
    assert text.split("|")[-1].startswith("rageval:")  # versions last
    short = sig.format(short=True)
    assert short.startswith("m:ndcg|k:10|gain:exp|j:inline|u:skip")


def test_signature_reflects_options() -> None:
    options = ScoreOptions(trec_convention=True, judgments_source="qrels")
    text = create("map", options).signature().format()
    assert "judgments:qrels" in text and "undefined:zero" in text


def test_signature_versions_last_and_differences() -> None:
    sig = Signature.of([Field("v", "1", version=True), Field("metric", "x"), Field("k", "5")])
    assert sig.format() == "metric:x|k:5|v:1"
    other = Signature.of([Field("metric", "x"), Field("k", "10"), Field("v", "1", version=True)])
    assert sig.differences(other) == ["k"]
    with pytest.raises(ValueError, match="duplicate"):
        Signature.of([Field("a", "1"), Field("a", "2")])


def test_every_metric_documented() -> None:
    classes = metric_classes()
    for base in ("p", "recall", "f1", "hit", "mrr", "mean_rank", "map", "rprec", "bpref",
                 "dcg", "ndcg", "err", "auc"):
        assert base in classes
    for cls in classes.values():
        assert cls.summary and cls.__doc__, cls
