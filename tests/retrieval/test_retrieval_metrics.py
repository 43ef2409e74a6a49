"""Retrieval metrics on records: the seeds' worked examples and the unscored policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.core.errors import UsageError
from rageval.core.records import records_from_dicts


def _record(rid: str, ranked: list[str], judgments: dict[str, int] | None,
            scores: list[float] | None = None) -> dict:
    contexts = [
        {"id": d, "text": f"text of {d}", **({"score": scores[i]} if scores else {})}
        for i, d in enumerate(ranked)
    ]
    out: dict = {"id": rid, "query": f"query {rid}", "contexts": contexts}
    if judgments is not None:
        out["judgments"] = judgments
    return out


def _scores(items: list[dict], metrics: list[str], **kwargs) -> dict[str, list[float | None]]:
    results = evaluate(records_from_dicts(items), metrics, bootstrap=50, **kwargs)
    return {m: [r.scores[m] for r in results.records] for m in results.summary}


def _value(items: list[dict], metric: str, **kwargs) -> float:
    results = evaluate(records_from_dicts(items), [metric], bootstrap=50, **kwargs)
    return results.summary[metric].value


# Retrieved [doc6, doc2, doc3, doc4, doc5]; relevant {doc2, doc3, doc7} (the seeds' example).
KIRCHHOFF = _record("k1", ["doc6", "doc2", "doc3", "doc4", "doc5"],
                    {"doc2": 1, "doc3": 1, "doc7": 1})
KIRCHHOFF_2 = _record("k2", ["doc5", "doc4", "doc3", "doc2", "doc1"], {"doc3": 1, "doc2": 1})


def test_precision_at_5_revenue_example() -> None:
    # Revenue streams (rel), profiles, market analysis, recognition policies (rel), statements (rel)
    item = _record("r", ["a", "b", "c", "d", "e"], {"a": 1, "b": 0, "c": 0, "d": 1, "e": 1})
    assert _value([item], "p@5") == pytest.approx(0.6)


def test_kirchhoff_binary_examples() -> None:
    assert _value([KIRCHHOFF], "p@5") == pytest.approx(0.4)
    assert _value([KIRCHHOFF], "recall@5") == pytest.approx(2 / 3)
    assert _value([KIRCHHOFF], "f1@5") == pytest.approx(0.5)
    assert _value([KIRCHHOFF, KIRCHHOFF_2], "mrr") == pytest.approx(0.4167, abs=5e-5)


def test_protopapas_mrr_example() -> None:
    first = _record("a", ["x", "y"], {"x": 1})
    second = _record("b", ["x", "y"], {"y": 1})
    assert _value([first, second], "mrr") == pytest.approx(0.75)


def test_average_precision_example() -> None:
    item = _record("ap", ["doc1", "doc2", "doc3", "doc4", "doc5"],
                   {"doc2": 1, "doc3": 1, "doc5": 1})
    assert _value([item], "map") == pytest.approx(0.589, abs=5e-4)


def test_dcg_and_ndcg_examples() -> None:
    grades = [3, 2, 3, 1, 0]
    item = _record("g", [f"d{i}" for i in range(5)], {f"d{i}": g for i, g in enumerate(grades)})
    assert _value([item], "dcg@3") == pytest.approx(5.76, abs=5e-3)
    assert _value([item], "ndcg@3") == pytest.approx(0.978, abs=5e-4)
    grades = [5, 3, 5, 0, 2]
    item = _record("h", [f"d{i}" for i in range(5)], {f"d{i}": g for i, g in enumerate(grades)})
    assert _value([item], "ndcg@3") == pytest.approx(0.973, abs=5e-4)
    assert _value([item], "ndcg@5") == pytest.approx(0.967, abs=5e-4)


def test_exponential_gain() -> None:
    grades = [3, 2, 3]
    item = _record("g", ["a", "b", "c"], dict(zip("abc", grades, strict=True)))
    dcg = 7 + 3 / math.log2(3) + 7 / 2
    ideal = 7 + 7 / math.log2(3) + 3 / 2
    assert _value([item], "dcg(gain=exp)@3") == pytest.approx(dcg)
    assert _value([item], "ndcg(gain=exp)@3") == pytest.approx(dcg / ideal)


def test_mean_rank_and_hit_rate_examples() -> None:
    # First relevant at ranks 3, 2 and 5: mean rank 3.33.
    items = [
        _record("a", ["x1", "x2", "r", "x4", "x5"], {"r": 1}),
        _record("b", ["x1", "r", "x3", "x4", "x5"], {"r": 1}),
        _record("c", ["x1", "x2", "x3", "x4", "r"], {"r": 1}),
    ]
    assert _value(items, "mean_rank") == pytest.approx(10 / 3)
    # 15 of 20 queries with a relevant document in the top 5: HR@5 = 0.75.
    hits = [_record(f"h{i}", ["r", "x"], {"r": 1}) for i in range(15)]
    misses = [_record(f"m{i}", ["x1", "x2", "x3", "x4", "x5", "r"], {"r": 1}) for i in range(5)]
    assert _value(hits + misses, "hit@5") == pytest.approx(0.75)


def test_mean_rank_missing_policy() -> None:
    found = _record("a", ["x", "r"], {"r": 1})
    missing = _record("b", ["x", "y", "z"], {"r": 1})
    results = evaluate(records_from_dicts([found, missing]), ["mean_rank"], bootstrap=10)
    assert results.records[1].scores["mean_rank"] is None
    assert "no relevant context retrieved" in results.records[1].errors["mean_rank"]
    assert results.summary["mean_rank"].value == 2.0
    assert results.summary["mean_rank"].unscored == 1
    penal = _scores([found, missing], ["mean_rank(missing=penalize)@2"])
    assert penal["mean_rank(missing=penalize)@2"] == [2.0, 3.0]  # k + 1
    with pytest.raises(UsageError, match="needs a cutoff"):
        evaluate(records_from_dicts([found]), ["mean_rank(missing=penalize)"])


def test_err_hand_computed() -> None:
    item = _record("e", ["a", "b", "c"], {"a": 1, "b": 2, "c": 3})
    r = [(2**g - 1) / 8 for g in (1, 2, 3)]
    expected = r[0] + (1 - r[0]) * r[1] / 2 + (1 - r[0]) * (1 - r[1]) * r[2] / 3
    assert _value([item], "err@3") == pytest.approx(expected)  # gmax=3 is the default
    over = _record("o", ["a"], {"a": 5})
    results = evaluate(records_from_dicts([item, over]), ["err@10"], bootstrap=10)
    assert results.records[1].scores["err@10"] is None
    assert "exceeds gmax=3" in results.records[1].errors["err@10"]


def test_auc_with_ties() -> None:
    item = _record("a", ["r1", "n1", "r2", "n2"], {"r1": 1, "r2": 1},
                   scores=[0.9, 0.5, 0.5, 0.1])
    # Pairs: (r1,n1)=1, (r1,n2)=1, (r2,n1)=0.5 tie, (r2,n2)=1 -> 3.5/4.
    assert _value([item], "auc") == pytest.approx(0.875)
    no_scores = _record("b", ["r1", "n1"], {"r1": 1})
    results = evaluate(records_from_dicts([item, no_scores]), ["auc"], bootstrap=10)
    assert "needs a 'score'" in results.records[1].errors["auc"]


def test_unscored_never_zero() -> None:
    judged_none = _record("a", ["x", "y"], None)
    no_relevant = _record("b", ["x", "y"], {"x": 0})
    normal = _record("c", ["x", "y"], {"y": 1})
    results = evaluate(records_from_dicts([judged_none, no_relevant, normal]),
                       ["map", "p@2", "ndcg@2"], bootstrap=10)
    a, b, _ = results.records
    assert a.scores == {"map": None, "p@2": None, "ndcg@2": None}
    assert "no relevance judgments" in a.errors["map"]
    assert b.scores["map"] is None and b.scores["ndcg@2"] is None
    assert b.scores["p@2"] == 0.0  # precision is defined without relevant documents
    assert results.summary["map"].n == 1 and results.summary["map"].unscored == 2
    assert results.summary["map"].value == pytest.approx(0.5)


def test_trec_convention_scores_zero() -> None:
    no_relevant = _record("b", ["x", "y"], {"x": 0})
    normal = _record("c", ["x", "y"], {"y": 1})
    results = evaluate(records_from_dicts([no_relevant, normal]), ["map"], bootstrap=10,
                       trec_convention=True)
    assert [r.scores["map"] for r in results.records] == [0.0, 0.5]
    assert "undefined:zero" in results.summary["map"].signature


def test_relevance_threshold() -> None:
    item = _record("a", ["x", "y", "z"], {"x": 1, "y": 2, "z": 0})
    assert _value([item], "p@3") == pytest.approx(2 / 3)
    assert _value([item], "p(rel=2)@3") == pytest.approx(1 / 3)
    assert _value([item], "mrr(rel=2)") == pytest.approx(0.5)


def test_empty_ranking_is_zero_not_unscored() -> None:
    # The retriever returned nothing for "a": that is a ranking, scored 0, not a missing value.
    items = [_record("a", [], {"x": 1}), _record("b", ["x"], {"x": 1})]
    values = _scores(items, ["recall@5", "mrr", "p@5"])
    assert values == {"recall@5": [0.0, 1.0], "mrr": [0.0, 1.0], "p@5": [0.0, 0.2]}


def test_no_contexts_anywhere_stops_before_scoring() -> None:
    with pytest.raises(UsageError, match="needs 'contexts'"):
        evaluate(records_from_dicts([_record("a", [], {"x": 1})]), ["mrr"])


def test_records_and_trec_files_agree(tmp_path) -> None:
    from rageval.retrieval.trec_eval import evaluate_files

    rng = np.random.default_rng(7)
    items, qrels, run = [], [], []
    for q in range(30):
        docs = [f"d{q}_{i}" for i in range(20)]
        judged = {d: int(rng.integers(0, 4)) for d in rng.choice(docs, 8, replace=False)}
        ranked = list(rng.permutation(docs)[:12])
        items.append(_record(f"q{q}", ranked, judged))
        qrels += [f"q{q} 0 {d} {g}" for d, g in judged.items()]
        run += [f"q{q} Q0 {d} {i + 1} {100 - i} r" for i, d in enumerate(ranked)]
    (tmp_path / "qrels").write_text("\n".join(qrels) + "\n")
    (tmp_path / "run").write_text("\n".join(run) + "\n")
    trec = evaluate_files(tmp_path / "qrels", tmp_path / "run",
                          ["map", "ndcg_cut.10", "P.5", "recip_rank", "recall.10"])
    ours = _scores(items, ["map", "ndcg@10", "p@5", "mrr", "recall@10"], trec_convention=True)
    pairs = {"map": "map", "ndcg@10": "ndcg_cut_10", "p@5": "P_5", "mrr": "recip_rank",
             "recall@10": "recall_10"}
    for ours_name, trec_name in pairs.items():
        for i, value in enumerate(ours[ours_name]):
            assert value == pytest.approx(trec[f"q{i}"][trec_name], abs=1e-12), (ours_name, i)
