"""Reciprocal rank fusion."""

from __future__ import annotations

import polars as pl
import pytest

from rageval.core.errors import UsageError
from rageval.retrieval.fusion import reciprocal_rank_fusion


def _run(qid: str, docs: list[str], scores: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"qid": [qid] * len(docs), "docno": docs, "score": scores})


def test_rrf_scores_and_order() -> None:
    bm25 = _run("1", ["a", "b", "c"], [3.0, 2.0, 1.0])
    dense = _run("1", ["c", "a"], [5.0, 4.0])
    fused = reciprocal_rank_fusion([bm25, dense], k=60)
    assert fused["docno"].to_list() == ["a", "c", "b"]
    assert fused["rank"].to_list() == [1, 2, 3]
    assert fused["score"].to_list() == pytest.approx([1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62])
    assert set(fused["runid"].to_list()) == {"rrf"}


def test_ranks_come_from_scores_not_file_order() -> None:
    # Ties in score are broken by document id descending, as trec_eval reads a run.
    run = _run("1", ["a", "b", "c"], [1.0, 1.0, 2.0])
    fused = reciprocal_rank_fusion([run], k=0)
    assert fused["docno"].to_list() == ["c", "b", "a"]
    assert fused["score"].to_list() == pytest.approx([1.0, 1 / 2, 1 / 3])


def test_queries_kept_apart_and_depth() -> None:
    runs = [
        pl.concat([_run("1", ["a", "b"], [2.0, 1.0]), _run("2", ["a", "x", "y"], [3.0, 2.0, 1.0])]),
        _run("2", ["y", "a"], [2.0, 1.0]),
    ]
    fused = reciprocal_rank_fusion(runs, k=60, depth=2)
    assert fused.filter(pl.col("qid") == "1")["docno"].to_list() == ["a", "b"]
    q2 = fused.filter(pl.col("qid") == "2")
    assert q2["docno"].to_list() == ["a", "y"]  # a: 1/61+1/62 > y: 1/63+1/61
    assert q2.height == 2


def test_bad_arguments() -> None:
    with pytest.raises(UsageError):
        reciprocal_rank_fusion([], k=60)
    with pytest.raises(UsageError):
        reciprocal_rank_fusion([_run("1", ["a"], [1.0])], k=-1)
