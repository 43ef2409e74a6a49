"""The small helpers every layer shares: one integer check, one did-you-mean, one answer to
whether a record has a field."""

from __future__ import annotations

import numpy as np
import pytest

from rageval.core.errors import UsageError, check_int, close_matches, did_you_mean
from rageval.core.records import records_from_dicts


@pytest.mark.parametrize("value", [3, np.int64(3), 10**12])
def test_check_int_takes_integers(value: object) -> None:
    check_int("n", value, 1)


@pytest.mark.parametrize("value", [True, 0, 2.0, "3", None, np.float64(3)])
def test_check_int_refuses_the_rest(value: object) -> None:
    with pytest.raises(UsageError, match=r"^n must be an integer of at least 1, got "):
        check_int("n", value, 1)


def test_check_int_raises_the_error_asked_for() -> None:
    with pytest.raises(ValueError, match="seed must be an integer of at least 0, got -1"):
        check_int("seed", -1, 0, ValueError)


def test_did_you_mean() -> None:
    assert did_you_mean("ndgc@10", ["ndcg@10", "mrr"]) == "did you mean 'ndcg@10'?"
    assert did_you_mean("bleu", ["bleu2", "blue", "mrr"], n=2) == \
        "did you mean 'bleu2' or 'blue'?"
    assert did_you_mean("zzz", ["ndcg@10"]) == ""
    assert close_matches("answr", ["answer", "query"]) == ["answer"]


def test_a_record_has_a_field_as_metrics_need_it() -> None:
    full, bare = records_from_dicts([
        {"id": "a", "query": "q", "contexts": ["c"], "answer": "", "reference": "r",
         "judgments": {}},
        {"id": "b", "contexts": [], "references": []}])
    assert all(full.has(f) for f in ("query", "contexts", "answer", "reference", "judgments"))
    assert not any(bare.has(f) for f in ("query", "contexts", "answer", "reference",
                                         "judgments"))
    with pytest.raises(ValueError, match="unknown record field 'score'"):
        full.has("score")


def test_the_records_section_of_a_manifest_is_read_in_one_place() -> None:
    from rageval.core.results import RecordsInfo

    info = RecordsInfo.of({"records": {"source": "run.jsonl", "count": 8,
                                       "inputs": {"format": "ragas"}}})
    assert info == RecordsInfo("run.jsonl", 8, {"format": "ragas"})
    assert RecordsInfo.of({}) == RecordsInfo()
    assert RecordsInfo.of({"records": ["not", "a", "table"]}) == RecordsInfo()
    assert RecordsInfo.of({"records": {"source": 3, "count": True, "inputs": "x"}}) == \
        RecordsInfo()


def test_a_name_prefixed_metric_is_named_as_it_is_made() -> None:
    import numpy as np

    from rageval.core.metric import Batch, Metric, MetricResult

    class Family(Metric):
        family = "judge"
        summary = "a family whose metrics are named when they are made"

        def __init__(self, target: str) -> None:
            super().__init__(name=f"fam:{target}", needs=("answer",))

        def score(self, batch: Batch) -> MetricResult:
            return MetricResult({str(self.name): np.zeros(len(batch))}, [None] * len(batch))

    one, two = Family("a"), Family("b")
    assert (str(one.name), str(two.name)) == ("fam:a", "fam:b")
    assert one.needs == frozenset({"answer"}) and Metric.needs == frozenset()
    with pytest.raises(UsageError, match="fam:a takes no cutoff"):
        Metric.__init__(Family.__new__(Family), cutoff=3, name="fam:a")
