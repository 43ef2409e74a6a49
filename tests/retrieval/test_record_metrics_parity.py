"""Parity of the retrieval metrics on records with pytrec_eval (trec_eval's C code).

A record's contexts are its ranking; here each is also written as a TREC run whose scores
decrease with the rank, so that trec_eval ranks the documents in the same order. Every record
metric that names a trec_eval measure must then give trec_eval's value for every query, with
``trec_convention=True`` (a query without relevant judgments scores 0, as in trec_eval).
"""

from __future__ import annotations

import numpy as np
import pytest

from rageval.api import evaluate
from rageval.core.records import records_from_dicts

pytestmark = pytest.mark.parity

pytrec_eval = pytest.importorskip("pytrec_eval")

# rageval's name -> pytrec_eval's measure argument and the key of its value.
PAIRS: dict[str, tuple[str, str]] = {
    "p@5": ("P.5", "P_5"),
    "recall@5": ("recall.5", "recall_5"),
    "recall": ("set_recall", "set_recall"),
    "f1": ("set_F", "set_F"),
    "hit@3": ("success.3", "success_3"),
    "mrr": ("recip_rank", "recip_rank"),
    "map": ("map", "map"),
    "map@5": ("map_cut.5", "map_cut_5"),
    "rprec": ("Rprec", "Rprec"),
    "bpref": ("bpref", "bpref"),
    "ndcg": ("ndcg", "ndcg"),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10"),
}


def _cases(seed: int, queries: int = 40) -> tuple[list[dict], dict, dict]:
    rng = np.random.default_rng(seed)
    items: list[dict] = []
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        docs = [f"d{q}_{i}" for i in range(20)]
        judged = {str(d): int(rng.integers(0, 4)) for d in rng.choice(docs, 8, replace=False)}
        if q % 7 == 0:  # judged, nothing relevant
            judged = {d: 0 for d in judged}
        ranked = [str(d) for d in rng.permutation(docs)[: int(rng.integers(1, 16))]]
        qid = f"q{q}"
        items.append({"id": qid, "query": f"query {q}", "judgments": judged,
                      "contexts": [{"id": d, "text": d} for d in ranked]})
        qrels[qid] = judged
        run[qid] = {d: float(100 - i) for i, d in enumerate(ranked)}
    return items, qrels, run


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_record_metrics_equal_pytrec_eval(seed: int) -> None:
    items, qrels, run = _cases(seed)
    theirs = pytrec_eval.RelevanceEvaluator(
        qrels, {measure for measure, _ in PAIRS.values()}).evaluate(run)
    results = evaluate(records_from_dicts(items), list(PAIRS), trec_convention=True,
                       bootstrap=1)
    for row in results.records:
        for name, (_, key) in PAIRS.items():
            assert row.scores[name] == pytest.approx(theirs[row.id][key], abs=1e-12), (
                name, row.id)
