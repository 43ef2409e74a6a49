"""Retrieval kernels: hand-computed cases, trec_eval conventions, and a naive reference."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from rageval.retrieval import kernels as K
from rageval.retrieval.ranking import Ranking


def one(
    docs: Sequence[str],
    judgments: Mapping[str, int] | None,
    scores: Sequence[float] | None = None,
) -> Ranking:
    score_lists = None if scores is None else [scores]
    return Ranking.from_lists(["q"], [list(docs)], [judgments], score_lists)


def graded(grades: Sequence[int], judged: Sequence[int] | None = None) -> Ranking:
    """A single query whose i-th document has grade ``grades[i]`` (all judged)."""
    docs = [f"d{i}" for i in range(len(grades))]
    judg = dict(zip(docs, grades, strict=True))
    for j, g in enumerate(judged or []):
        judg[f"extra{j}"] = g
    return one(docs, judg)


# ------------------------------------------------------------------------------------------
# The worked examples
# ------------------------------------------------------------------------------------------


def test_precision_at_5() -> None:
    assert K.precision_at(graded([1, 0, 0, 1, 1]), 5)[0] == pytest.approx(0.6)


def test_two_query_example() -> None:
    r = Ranking.from_lists(
        ["q1", "q2"],
        [["doc6", "doc2", "doc3", "doc4", "doc5"], ["doc5", "doc4", "doc3", "doc2", "doc1"]],
        [{"doc2": 1, "doc3": 1, "doc7": 1}, {"doc3": 1, "doc2": 1}],
    )
    assert K.precision_at(r, 5)[0] == pytest.approx(0.4)
    assert K.recall_at(r, 5)[0] == pytest.approx(2 / 3)
    assert K.f1_at(r, 5)[0] == pytest.approx(0.5)
    rr = K.reciprocal_rank(r)
    assert rr.tolist() == pytest.approx([1 / 2, 1 / 3])
    assert rr.mean() == pytest.approx(0.4167, abs=5e-5)
    assert K.first_relevant_rank(r).tolist() == [2.0, 3.0]


def test_average_precision_example() -> None:
    r = one(["doc1", "doc2", "doc3", "doc4", "doc5"], {"doc2": 1, "doc3": 1, "doc5": 1})
    assert K.average_precision(r)[0] == pytest.approx((1 / 2 + 2 / 3 + 3 / 5) / 3)
    assert K.average_precision(r)[0] == pytest.approx(0.589, abs=5e-4)


def test_dcg_ndcg_examples() -> None:
    r = graded([3, 2, 3, 1, 0])
    assert K.dcg_at(r, 3)[0] == pytest.approx(5.76, abs=5e-3)
    assert K.ndcg_at(r, 3)[0] == pytest.approx(0.978, abs=5e-4)
    r = graded([5, 3, 5, 0, 2])
    assert K.dcg_at(r, 3)[0] == pytest.approx(9.39, abs=5e-3)
    assert K.ideal_dcg_at(r, 3)[0] == pytest.approx(9.654, abs=1e-3)
    assert K.ndcg_at(r, 3)[0] == pytest.approx(0.973, abs=5e-4)
    assert K.ndcg_at(r, 5)[0] == pytest.approx(0.967, abs=5e-4)


def test_ndcg_ideal_uses_all_judgments() -> None:
    # An unretrieved grade-3 judgment raises the ideal DCG (trec_eval), negative grades do not.
    r = graded([2, 0], judged=[3, -1])
    assert K.ideal_dcg_at(r, 2)[0] == pytest.approx(3 + 2 / math.log2(3))
    assert K.ndcg_at(r, 2)[0] == pytest.approx(2 / (3 + 2 / math.log2(3)))


def test_exp_gain() -> None:
    r = graded([3, 1])
    assert K.dcg_at(r, 2, gain="exp")[0] == pytest.approx(7 + 1 / math.log2(3))
    assert K.ndcg_at(r, None, gain="exp")[0] == pytest.approx(1.0)
    r = graded([1, 3])
    want = (1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3))
    assert K.ndcg_at(r, 2, gain="exp")[0] == pytest.approx(want)


def test_err_hand_checked() -> None:
    # R = [(4-1)/4, 0, (2-1)/4]: ERR = 0.75 + 0 + (1/3) * 0.25 * 0.25
    r = graded([2, 0, 1])
    assert K.err_at(r, None, gmax=2)[0] == pytest.approx(0.75 + 0.25 * 0.25 / 3)
    assert K.err_at(r, 1, gmax=2)[0] == pytest.approx(0.75)
    assert K.err_at(one(["a", "b"], {"a": -1, "b": 1}), 2, gmax=1)[0] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="exceeds gmax"):
        K.err_at(r, 3, gmax=1)


def test_roc_auc_with_ties() -> None:
    r = one(["a", "b", "c", "d"], {"a": 1, "b": 1, "c": 0}, [0.9, 0.8, 0.8, 0.1])
    # pairs: (.9>.8) (.9>.1) (.8=.8 -> 1/2) (.8>.1): 3.5 / 4; the unjudged d is non-relevant
    assert K.roc_auc(r)[0] == pytest.approx(0.875)
    assert math.isnan(K.roc_auc(one(["a"], {"a": 1}, [1.0]))[0])  # no negative
    assert math.isnan(K.roc_auc(one(["a", "b"], {"a": 1}))[0])  # no scores


# ------------------------------------------------------------------------------------------
# trec_eval conventions
# ------------------------------------------------------------------------------------------


def test_no_relevant_gives_zero() -> None:
    r = graded([0, 0, -1])
    for value in (
        K.recall_at(r, 2),
        K.average_precision(r),
        K.reciprocal_rank(r),
        K.ndcg_at(r, 10),
        K.r_precision(r),
        K.bpref(r),
        K.f1_at(r, 2),
        K.relative_precision_at(r, 5),
    ):
        assert value[0] == 0.0
    assert math.isnan(K.first_relevant_rank(r)[0])


def test_precision_pads_with_nonrelevant() -> None:
    r = graded([1, 1, 0])
    assert K.precision_at(r, 10)[0] == pytest.approx(0.2)
    assert K.relative_precision_at(r, 10)[0] == pytest.approx(1.0)
    assert K.success_at(r, 1)[0] == 1.0 and K.hit_at(graded([0, 1]), 1)[0] == 0.0


def test_cutoff_variants() -> None:
    r = graded([0, 1, 0, 1])
    assert K.average_precision(r, k=2)[0] == pytest.approx(0.5 / 2)
    assert K.reciprocal_rank(r, k=1)[0] == 0.0
    assert K.reciprocal_rank(r, k=2)[0] == 0.5
    assert math.isnan(K.first_relevant_rank(r, k=1)[0])


def test_rel_level() -> None:
    r = graded([1, 2, 0, 2])
    assert K.num_rel(r, 2)[0] == 2 and K.num_rel_ret(r, 2)[0] == 2
    assert K.precision_at(r, 2, rel_level=2)[0] == 0.5
    assert K.num_nonrel_judged_ret(r, 2)[0] == 2


def test_r_precision_and_multiples() -> None:
    r = graded([1, 0, 1, 1], judged=[1])  # R = 4
    assert K.r_precision(r)[0] == pytest.approx(3 / 4)
    # cutoff (long)(0.5 * 4 + 0.9) = 2
    assert K.r_precision_mult(r, 0.5)[0] == pytest.approx(1 / 2)


def test_bpref_hand_example() -> None:
    docs = ["r1", "n1", "r2", "u", "n2", "r3"]
    judg = {"r1": 1, "r2": 1, "r3": 1, "r4": 1, "n1": 0, "n2": 0, "n3": 0}
    # terms 1, 1 - 1/3, 1 - 2/3 over R = 4
    assert K.bpref(one(docs, judg))[0] == pytest.approx(2 / 4)


def test_infap_hand_example() -> None:
    docs = ["r1", "pool", "n1", "r2"]
    judg = {"r1": 1, "pool": -1, "n1": 0, "r2": 1}
    eps = K.INFAP_EPSILON
    second = 1 / 4 + (3 / 4) * (3 / 3) * ((1 + eps) / (2 + 2 * eps))
    assert K.infap(one(docs, judg))[0] == pytest.approx((1 + second) / 2)


def test_interpolated_precision_uses_lround() -> None:
    # R = 5, relevant at ranks 1, 3 and 10: precisions 1, 2/3, 3/10.
    judg = {"a": 1, "c": 1, "j": 1, "x": 1, "y": 1}
    r = one(list("abcdefghij"), judg)
    # recall .5 -> lround(2.5) = 3 relevant; .3 -> lround(1.5) = 2; .1 -> lround(.5) = 1
    values = K.interpolated_precision_at_recall(r, [0.0, 0.1, 0.3, 0.5, 0.7])[0]
    assert values.tolist() == pytest.approx([1.0, 1.0, 2 / 3, 0.3, 0.0])
    # levels 0, .1, ..., 1 -> 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5 relevant documents
    want = (1 + 1 + 1 + 2 / 3 + 2 / 3 + 0.3 + 0.3) / 11
    assert K.eleven_point_average(r)[0] == pytest.approx(want)


def test_relstring_and_unjudged() -> None:
    r = one(["a", "b", "c", "d", "e"], {"a": 12, "b": 0, "c": -1, "e": 2})
    assert K.relstring(r, 10) == [">0.-2"]
    assert K.relstring(r, 2) == [">0"]
    assert K.unjudged_at(r, 5)[0] == pytest.approx(2 / 5)
    assert K.unjudged_at(r, 10)[0] == pytest.approx(2 / 10)


def test_rbp() -> None:
    r = graded([1, 0, 1])
    assert K.rbp(r, 0.5)[0] == pytest.approx(0.5 * (1 + 0.25))
    # Grades above 1 are rescaled into [0, 1] by the query's highest level.
    assert K.rbp(graded([2, 1]), 0.5)[0] == pytest.approx(0.5 * (1 + 0.5 * 0.5))
    unj = one(["a", "b"], {"a": 1})
    assert K.rbp_residual(unj, 0.5)[0] == pytest.approx(0.25 + 0.5 * 0.5)


def test_set_measures() -> None:
    r = graded([1, 0, 1, 0], judged=[1, 1])
    assert K.set_precision(r)[0] == 0.5
    assert K.set_recall(r)[0] == 0.5
    assert K.set_relative_precision(r)[0] == 0.5
    assert K.set_map(r)[0] == 0.25
    assert K.set_f(r)[0] == pytest.approx(0.5)
    assert K.utility(r)[0] == 0.0


# ------------------------------------------------------------------------------------------
# The Ranking structure
# ------------------------------------------------------------------------------------------


def test_from_lists_keeps_order_and_handles_missing_judgments() -> None:
    r = Ranking.from_lists(
        ["b", "a", "c"], [["x", "y"], [], ["z"]], [{"y": 2, "w": 0}, {"q": 1}, None]
    )
    assert r.qids == ("b", "a", "c")
    assert r.offsets.tolist() == [0, 2, 2, 3]
    assert r.grades.tolist() == [-1, 2, -1]
    assert r.judged_offsets.tolist() == [0, 2, 3, 3]
    assert r.judged_grades.tolist() == [2, 0, 1]
    assert r.num_rel().tolist() == [1, 1, 0]
    assert r.num_judged().tolist() == [2, 1, 0]
    assert r.num_ret().tolist() == [2, 0, 1]
    assert r.scores is None
    assert K.precision_at(r, 1).tolist() == [0.0, 0.0, 0.0]


def test_from_lists_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="more than once"):
        Ranking.from_lists(["q"], [["a", "a"]], [None])


# ------------------------------------------------------------------------------------------
# Against a naive per-query implementation of trec_eval's loops
# ------------------------------------------------------------------------------------------


def naive(rels: list[int], judged: list[int], level: int) -> dict[str, float]:
    num_rel = sum(1 for g in judged if g >= max(level, 0))
    out: dict[str, float] = {}
    found, ap, rr = 0, 0.0, 0.0
    for i, g in enumerate(rels):
        if g >= level:
            found += 1
            ap += found / (i + 1)
            if rr == 0.0:
                rr = 1 / (i + 1)
    out["map"] = ap / num_rel if found else 0.0
    out["recip_rank"] = rr
    out["P_10"] = sum(1 for g in rels[:10] if g >= level) / 10
    out["recall_5"] = sum(1 for g in rels[:5] if g >= level) / num_rel if num_rel else 0.0
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(rels[:10]) if g > 0)
    ideal = sorted((g for g in judged if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    out["ndcg_cut_10"] = dcg / idcg if idcg > 0 else dcg
    look = min(len(rels), num_rel)
    out["Rprec"] = sum(1 for g in rels[:look] if g >= level) / num_rel if look else 0.0
    n_nonrel = sum(1 for g in judged if 0 <= g < level)
    nonrel, bp = 0, 0.0
    for g in rels:
        if g < 0:
            continue
        if g < level:
            nonrel += 1
        else:
            bp += 1.0 - min(nonrel, num_rel) / min(n_nonrel, num_rel) if nonrel else 1.0
    out["bpref"] = bp / num_rel if num_rel else bp
    return out


def random_ranking(rng: np.random.Generator, nq: int) -> tuple[Ranking, list, list]:
    qids, docs_all, judg_all, rels_all, judged_all = [], [], [], [], []
    for q in range(nq):
        n = int(rng.choice([0, 1, 3, 12, 40]))
        pool = [f"d{i}" for i in range(n + 10)]
        docs = list(rng.permutation(pool)[:n])
        judg = {d: int(rng.integers(-1, 4)) for d in pool if rng.random() < 0.6}
        qids.append(f"q{q}")
        docs_all.append(docs)
        judg_all.append(judg)
        rels_all.append([judg.get(d, -1) if judg.get(d, -1) >= 0 else -1 for d in docs])
        judged_all.append(list(judg.values()))
    return Ranking.from_lists(qids, docs_all, judg_all), rels_all, judged_all


@pytest.mark.parametrize("level", [1, 2])
def test_kernels_match_naive_loops(level: int) -> None:
    rng = np.random.default_rng(7 + level)
    r, rels, judged = random_ranking(rng, 60)
    got = {
        "map": K.average_precision(r, level),
        "recip_rank": K.reciprocal_rank(r, level),
        "P_10": K.precision_at(r, 10, level),
        "recall_5": K.recall_at(r, 5, level),
        "ndcg_cut_10": K.ndcg_at(r, 10),
        "Rprec": K.r_precision(r, level),
        "bpref": K.bpref(r, level),
    }
    for q in range(r.num_queries):
        want = naive(rels[q], judged[q], level)
        for name, values in got.items():
            assert values[q] == pytest.approx(want[name], abs=1e-12), (name, q)


def test_sequential_sums_match_python_bit_for_bit() -> None:
    # Sums run in rank order, one addition at a time, like trec_eval's loops.
    rng = np.random.default_rng(1)
    r, rels, judged = random_ranking(rng, 40)
    ap = K.average_precision(r)
    for q in range(r.num_queries):
        found, total = 0, 0.0
        for i, g in enumerate(rels[q]):
            if g >= 1:
                found += 1
                total += found / (i + 1)
        num_rel = sum(1 for g in judged[q] if g >= 1)
        assert ap[q] == (total / num_rel if found else 0.0)


@pytest.mark.slow
def test_hot_kernels_are_fast() -> None:
    rng = np.random.default_rng(0)
    nq, length, judged = 10_000, 1_000, 20
    grades = np.full(nq * length, -1, dtype=np.int64)
    rows = (np.arange(nq)[:, None] * length + rng.integers(0, length, (nq, 16))).ravel()
    grades[rows] = rng.integers(0, 4, rows.size)
    jg = np.sort(rng.integers(0, 4, (nq, judged)), axis=1)[:, ::-1].ravel()
    r = Ranking(
        qids=tuple(str(i) for i in range(nq)),
        offsets=np.arange(nq + 1, dtype=np.int64) * length,
        grades=grades,
        scores=None,
        judged_offsets=np.arange(nq + 1, dtype=np.int64) * judged,
        judged_grades=jg.astype(np.int64),
    )
    start = time.perf_counter()
    K.average_precision(r)
    K.ndcg_at(r, 10)
    K.precision_at(r, 10)
    K.recall_at(r, 100)
    K.reciprocal_rank(r)
    assert time.perf_counter() - start < 1.0
