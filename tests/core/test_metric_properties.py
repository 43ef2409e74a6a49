"""Metric invariants on generated rankings (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.api import evaluate
from rageval.core.records import records_from_dicts

RATIOS = ["p@5", "recall@5", "f1@5", "hit@5", "mrr", "map", "rprec", "bpref", "ndcg@5",
          "ndcg(gain=exp)@5", "ndcg", "map@5", "err@5", "auc"]


@st.composite
def ranked_records(draw: st.DrawFn) -> list[dict]:
    items = []
    for q in range(draw(st.integers(1, 6))):
        pool = [f"d{i}" for i in range(draw(st.integers(1, 12)))]
        ranked = draw(st.permutations(pool))[: draw(st.integers(0, len(pool)))]
        judged = draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
        grades = {d: draw(st.integers(0, 3)) for d in judged}
        scores = [draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) for _ in ranked]
        contexts = [{"id": d, "text": d, "score": s} for d, s in zip(ranked, scores, strict=True)]
        items.append({"id": f"q{q}", "contexts": contexts, "judgments": grades})
    if not any(item["contexts"] for item in items):
        # A run where no record retrieved anything stops before scoring; keep one context.
        items[0]["contexts"] = [{"id": "d0", "text": "d0", "score": 1.0}]
    return items


def _scores(items: list[dict], metrics: list[str], **kwargs) -> dict[str, list[float | None]]:
    results = evaluate(records_from_dicts(items), metrics, bootstrap=1, **kwargs)
    return {m: [r.scores[m] for r in results.records] for m in metrics}


def _has_relevant(item: dict) -> bool:
    return any(g >= 1 for g in item["judgments"].values())


@settings(max_examples=60, deadline=None)
@given(ranked_records())
def test_ratios_in_unit_interval_and_unscored_only_when_undefined(items: list[dict]) -> None:
    values = _scores(items, RATIOS)
    for name, column in values.items():
        for item, value in zip(items, column, strict=True):
            if value is None:
                assert name in ("auc",) or not _has_relevant(item) or name == "err@5", name
            else:
                assert 0.0 <= value <= 1.0 + 1e-12, (name, value)


@settings(max_examples=60, deadline=None)
@given(ranked_records())
def test_ideal_ranking_scores_one(items: list[dict]) -> None:
    ideal = []
    for item in items:
        grades = item["judgments"]
        order = sorted(grades, key=lambda d: -grades[d])
        contexts = [{"id": d, "text": d} for d in order]
        ideal.append({"id": item["id"], "contexts": contexts, "judgments": grades})
    if not any(item["contexts"] for item in ideal):
        return  # nothing judged anywhere: no ideal ranking to score
    values = _scores(ideal, ["ndcg", "ndcg@5", "ndcg(gain=exp)@5", "map", "mrr", "rprec"])
    for item, *row in zip(ideal, *values.values(), strict=True):
        if _has_relevant(item):
            assert all(math.isclose(v, 1.0) for v in row), row


@settings(max_examples=60, deadline=None)
@given(ranked_records(), st.integers(1, 8))
def test_cutoff_monotonicity(items: list[dict], k: int) -> None:
    values = _scores(items, [f"recall@{k}", f"recall@{k + 1}", f"hit@{k}", f"hit@{k + 1}",
                             f"dcg@{k}", f"dcg@{k + 1}"])
    for a, b in ((f"recall@{k}", f"recall@{k + 1}"), (f"hit@{k}", f"hit@{k + 1}"),
                 (f"dcg@{k}", f"dcg@{k + 1}")):
        for low, high in zip(values[a], values[b], strict=True):
            if low is not None:
                assert low <= high + 1e-12


@settings(max_examples=60, deadline=None)
@given(ranked_records())
def test_mrr_and_mean_rank_agree(items: list[dict]) -> None:
    values = _scores(items, ["mrr", "mean_rank"])
    for rr, rank in zip(values["mrr"], values["mean_rank"], strict=True):
        if rank is not None:
            assert math.isclose(rr, 1.0 / rank)
        elif rr is not None:
            assert rr == 0.0


@settings(max_examples=60, deadline=None)
@given(ranked_records())
def test_trec_convention_only_fills_undefined(items: list[dict]) -> None:
    names = ["map", "ndcg@5", "recall@5", "mrr"]
    skip = _scores(items, names)
    zero = _scores(items, names, trec_convention=True)
    for name in names:
        for item, a, b in zip(items, skip[name], zero[name], strict=True):
            if a is None:
                assert not _has_relevant(item) and b == 0.0
            else:
                assert a == b
