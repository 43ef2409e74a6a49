"""Judge agreement (rageval.compare.agree.agreement): statistics, parity with scipy/sklearn, run and
human pairing."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.compare.agree.agreement import (
    agree_runs,
    agreement,
    kendall_tau_b,
    parse_pair,
    quadratic_kappa,
    run_agree,
    spearman_rho,
)
from rageval.core.errors import InputError, UsageError
from rageval.core.results import MetricSummary, RecordResult, Results

scipy_stats = pytest.importorskip("scipy.stats")

FAITH = "judge:faithfulness"
CORR = "judge:correctness"


# -- helpers ---------------------------------------------------------------------------------


def reference_kappa(a: list[int], b: list[int], lo: int, hi: int) -> float:
    """Quadratic-weighted kappa written out from its definition, loop by loop:
    kappa = 1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij, w_ij = (i - j)^2, E_ij = row_i col_j / n."""
    grades = range(lo, hi + 1)
    n = len(a)
    observed = {(i, j): 0 for i in grades for j in grades}
    for x, y in zip(a, b, strict=True):
        observed[(x, y)] += 1
    rows = {i: sum(observed[(i, j)] for j in grades) for i in grades}
    cols = {j: sum(observed[(i, j)] for i in grades) for j in grades}
    num = sum((i - j) ** 2 * observed[(i, j)] for i in grades for j in grades)
    den = sum((i - j) ** 2 * rows[i] * cols[j] / n for i in grades for j in grades)
    return 1 - num / den


def write_run(directory: Path, scores: Mapping[str, Mapping[str, float | None]], *,
              source: str = "<memory>", model: str = "judge-model") -> Path:
    """A run directory as `rageval score --out DIR` writes it, with judge-like scores."""
    records = []
    for rid, values in scores.items():
        in_memory = {k: math.nan if v is None else float(v) for k, v in values.items()}
        errors = {k: "judge reply not usable: no score" for k, v in values.items() if v is None}
        records.append(RecordResult(rid, in_memory, errors, {}))  # type: ignore[arg-type]
    names = list(dict.fromkeys(k for values in scores.values() for k in values))
    summary = {}
    for name in names:
        scored = [v[name] for v in scores.values() if v.get(name) is not None]
        summary[name] = MetricSummary(
            value=float(np.mean(scored)) if scored else None, n=len(scored),
            unscored=len(scores) - len(scored), ci95=None,
            signature=f"{name}|judge:{model}|rubric:{name[6:]}")
    manifest = {"records": {"source": source, "count": len(scores)},
                "judge": {"model": model, "prompts": {}}}
    return Results(records, summary, manifest).write(directory)


def write_records(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# -- statistics: worked examples -------------------------------------------------------------


def test_worked_example_three_point_scale() -> None:
    # O = [[1,1,0],[0,1,0],[0,0,1]]; rows (2,1,1), columns (1,2,1), n = 4.
    # sum w*O = (1-2)^2 * 1 = 1; E = outer(rows, cols) / 4 and sum w*E = 20/4 = 5.
    # kappa = 1 - 1/5 = 0.8.
    result = agreement([1, 1, 2, 3], [1, 2, 2, 3], (1, 3))
    assert result.n == 4
    assert result.confusion == ((1, 1, 0), (0, 1, 0), (0, 0, 1))
    assert result.kappa == pytest.approx(0.8)
    assert result.exact == 0.75 and result.adjacent == 1.0
    assert result.mean_a == 1.75 and result.mean_b == 2.0 and result.mean_diff == -0.25
    # Ranks a: (1.5, 1.5, 3, 4); b: (1, 2.5, 2.5, 4): rho = 4.5 / sqrt(4.5 * 4.5) ... by hand:
    # deviations a (-1, -1, 0.5, 1.5), b (-1.5, 0, 0, 1.5): sum = 1.5 + 2.25 = 3.75;
    # |a|^2 = 4.5, |b|^2 = 4.5, so rho = 3.75 / 4.5.
    assert result.spearman == pytest.approx(3.75 / 4.5)
    # Pairs (6): concordant 4, discordant 0, tied only in a 1, tied only in b 1:
    # tau-b = 4 / sqrt(5 * 5) = 0.8.
    assert result.kendall == pytest.approx(0.8)
    assert result.undefined == {}


def test_worked_example_five_point_confusion_matrix() -> None:
    a = [1, 2, 3, 4, 5, 5, 3, 2]
    b = [1, 3, 3, 4, 4, 5, 1, 2]
    result = agreement(a, b, (1, 5))
    assert result.confusion == (
        (1, 0, 0, 0, 0),
        (0, 1, 1, 0, 0),
        (1, 0, 1, 0, 0),
        (0, 0, 0, 1, 0),
        (0, 0, 0, 1, 1),
    )
    assert sum(map(sum, result.confusion)) == 8
    assert result.exact == pytest.approx(5 / 8)
    assert result.adjacent == pytest.approx(7 / 8)  # only (3, 1) is 2 apart
    assert result.kappa == pytest.approx(reference_kappa(a, b, 1, 5))
    assert result.to_json()["confusion"]["labels"] == [1, 2, 3, 4, 5]


def test_full_scale_categories_even_when_unused() -> None:
    # Only grades 3 and 4 occur, but the matrix and kappa span the whole 1-5 scale.
    result = agreement([3, 4, 4, 3], [3, 4, 3, 3], (1, 5))
    assert len(result.confusion) == 5 and all(len(r) == 5 for r in result.confusion)
    assert result.confusion[2][2] == 2 and result.confusion[3][3] == 1
    assert result.confusion[3][2] == 1


def test_context_relevance_scale_starts_at_zero() -> None:
    result = agreement([0, 1, 2, 3, 3], [0, 1, 3, 3, 2], (0, 3))
    assert result.confusion[0][0] == 1 and result.confusion[2][3] == 1
    assert result.kappa == pytest.approx(reference_kappa([0, 1, 2, 3, 3], [0, 1, 3, 3, 2], 0, 3))


# -- statistics: degenerate cases ------------------------------------------------------------


def test_no_records() -> None:
    result = agreement([], [], (1, 5))
    assert result.n == 0
    assert (result.exact, result.kappa, result.spearman, result.kendall) == (None,) * 4
    assert result.mean_a is None and result.mean_diff is None
    assert set(result.undefined) >= {"exact", "kappa", "spearman", "kendall"}
    assert sum(map(sum, result.confusion)) == 0


def test_one_record() -> None:
    result = agreement([4], [4], (1, 5))
    assert result.n == 1 and result.exact == 1.0
    assert result.kappa is None and "same grade" in result.undefined["kappa"]
    assert result.spearman is None and result.kendall is None
    assert "at least 2" in result.undefined["spearman"]


@pytest.mark.parametrize("b", [[3, 3, 3], [5, 5, 5]])
def test_both_raters_constant_kappa_undefined(b: list[int]) -> None:
    result = agreement([3, 3, 3], b, (1, 5))
    assert result.kappa is None  # neither 0 nor 1
    assert "kappa" in result.undefined
    assert result.spearman is None and result.kendall is None


def test_one_constant_rater() -> None:
    result = agreement([3, 3, 3, 3], [1, 2, 4, 5], (1, 5))
    # Observed equals expected: the constant rater carries no information beyond chance.
    assert result.kappa == pytest.approx(0.0)
    assert result.spearman is None and result.kendall is None
    assert result.undefined["spearman"] == "the first rater gave every record the same score"


def test_non_integer_means_are_rounded_half_up() -> None:
    # 2.5 -> 3 and 3.5 -> 4 (numpy's rint would give 2 and 4).
    result = agreement([2.5, 3.5, 1.0], [3, 4, 1], (1, 5))
    assert result.exact == 1.0 and result.rounded == 2
    assert result.mean_a == pytest.approx(7 / 3)  # raw values
    assert result.spearman == pytest.approx(scipy_stats.spearmanr([2.5, 3.5, 1], [3, 4, 1])[0])


def test_bad_inputs() -> None:
    with pytest.raises(UsageError, match="outside the scale"):
        agreement([1, 6], [1, 2], (1, 5))
    with pytest.raises(UsageError, match="finite"):
        agreement([1, math.nan], [1, 2], (1, 5))
    with pytest.raises(UsageError, match="equal length"):
        agreement([1, 2], [1], (1, 5))
    for scale in ((5, 1), (1.5, 3), ("a", 3), (1,)):
        with pytest.raises(UsageError, match="scale"):
            agreement([1], [1], scale)  # type: ignore[arg-type]


# -- parity with scipy and sklearn -----------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [2, 3, 7, 50, 400, 5000])
def test_correlation_parity_with_scipy_on_tied_grades(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed * 1000 + n)
    a = rng.integers(1, 6, n).astype(float)
    b = np.clip(a + rng.integers(-2, 3, n), 1, 5)
    if n > 10:  # a few averaged samples: non-integer values among the ties
        b[: n // 5] = rng.integers(2, 11, n // 5) / 2.0
    expected_rho = scipy_stats.spearmanr(a, b).statistic
    expected_tau = scipy_stats.kendalltau(a, b).statistic  # tau-b by default
    for got, expected in ((spearman_rho(a, b), expected_rho), (kendall_tau_b(a, b), expected_tau)):
        if math.isnan(expected):
            assert got is None
        else:
            assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parity
def test_correlation_parity_with_scipy_on_continuous_values() -> None:
    rng = np.random.default_rng(7)
    a = rng.normal(size=3000)
    b = a + rng.normal(size=3000)
    assert spearman_rho(a, b) == pytest.approx(scipy_stats.spearmanr(a, b).statistic, abs=1e-12)
    assert kendall_tau_b(a, b) == pytest.approx(scipy_stats.kendalltau(a, b).statistic,
                                                abs=1e-12)


@pytest.mark.parity
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=40))
def test_correlation_parity_with_scipy_property(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    for got, expected in ((spearman_rho(a, b), scipy_stats.spearmanr(a, b).statistic),
                          (kendall_tau_b(a, b), scipy_stats.kendalltau(a, b).statistic)):
        if math.isnan(expected):
            assert got is None
        else:
            assert got == pytest.approx(expected, abs=1e-9)


@pytest.mark.parity
def test_kappa_parity_with_sklearn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.integers(1, 6, 200)
        b = np.clip(a + rng.integers(-1, 2, 200), 1, 5)
        expected = metrics.cohen_kappa_score(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5])
        assert quadratic_kappa(a, b, (1, 5)) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=1, max_size=40))
def test_kappa_matches_the_definition(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    kappa = quadratic_kappa(a, b, (1, 5))
    if len(set(a)) == 1 and len(set(b)) == 1:
        assert kappa is None
    else:
        assert kappa == pytest.approx(reference_kappa(a, b, 1, 5), abs=1e-12)


# -- properties ------------------------------------------------------------------------------

grades = st.lists(st.integers(1, 5), min_size=1, max_size=50)


@settings(max_examples=80, deadline=None)
@given(grades)
def test_identical_ratings_agree_perfectly(a: list[int]) -> None:
    result = agreement(a, a, (1, 5))
    assert result.exact == 1.0 and result.mean_diff == 0.0
    if len(set(a)) > 1:
        assert result.kappa == pytest.approx(1.0)
        assert result.spearman == pytest.approx(1.0) and result.kendall == pytest.approx(1.0)
    else:
        assert result.kappa is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=0, max_size=50))
def test_symmetric_and_counts_add_up(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    ab, ba = agreement(a, b, (1, 5)), agreement(b, a, (1, 5))
    assert sum(map(sum, ab.confusion)) == ab.n == len(pairs)
    assert ab.confusion == tuple(zip(*ba.confusion, strict=True))
    for x, y in ((ab.kappa, ba.kappa), (ab.spearman, ba.spearman), (ab.kendall, ba.kendall),
                 (ab.exact, ba.exact)):
        assert (x is None) == (y is None)
        if x is not None:
            assert x == pytest.approx(y, abs=1e-12)
    if ab.kappa is not None:
        assert -1.0 - 1e-12 <= ab.kappa <= 1.0 + 1e-12


# -- two runs --------------------------------------------------------------------------------


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    run_a = write_run(tmp_path / "a", {
        "q1": {FAITH: 5, CORR: 4},
        "q2": {FAITH: 4, CORR: None},
        "q3": {FAITH: 2, CORR: 2},
        "q4": {FAITH: 1, CORR: 3},
        "q5": {FAITH: None, CORR: 5},
    }, model="model-a")
    run_b = write_run(tmp_path / "b", {
        "q1": {FAITH: 5, CORR: 5},
        "q2": {FAITH: 3, CORR: 3},
        "q3": {FAITH: 2, CORR: 1},
        "q4": {FAITH: 2, CORR: 3},
        "q5": {FAITH: 4, CORR: None},
    }, model="model-b")
    return run_a, run_b


def test_two_runs_compare_each_common_judge_metric(tmp_path: Path) -> None:
    run_a, run_b = two_runs(tmp_path)
    report = agree_runs(run_a, run_b)
    assert [(r.metric, r.rater_a, r.rater_b) for r in report.rows] == [
        (FAITH, "A", "B"), (CORR, "A", "B")]
    faith, corr = report.rows
    assert faith.total == 5 and faith.stats.n == 4 and dict(faith.left_out) == {"unscored in A": 1}
    assert faith.stats.confusion[4][4] == 1 and faith.stats.confusion[0][1] == 1
    assert faith.stats.kappa == pytest.approx(
        reference_kappa([5, 4, 2, 1], [5, 3, 2, 2], 1, 5))
    assert dict(corr.left_out) == {"unscored in A": 1, "unscored in B": 1}
    assert corr.stats.n == 3
    assert faith.signature_a is not None and "model-a" in faith.signature_a
    assert [r.judge_model for r in report.raters] == ["model-a", "model-b"]
    json.dumps(report.to_json(), allow_nan=False)


def test_mismatched_ids_error_or_intersect(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}, "q3": {FAITH: 1}})
    run_b = write_run(tmp_path / "b", {"q1": {FAITH: 5}, "q2": {FAITH: 3}, "q9": {FAITH: 2}})
    with pytest.raises(UsageError, match=r"1 only in A \(q3\); 1 only in B \(q9\).*--intersect"):
        agree_runs(run_a, run_b)
    report = agree_runs(run_a, run_b, intersect=True)
    assert report.rows[0].stats.n == 2
    assert report.records["only_in_A"] == 1 and report.records["only_in_B"] == 1
    assert any("--intersect" in note for note in report.notes)


def test_explicit_metric_pairs(tmp_path: Path) -> None:
    v2 = "judge:faithfulness_v2"
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5, CORR: 3}, "q2": {FAITH: 2, CORR: 4}})
    run_b = write_run(tmp_path / "b", {"q1": {v2: 4, CORR: 3}, "q2": {v2: 2, CORR: 4}})
    report = agree_runs(run_a, run_b)  # only the common name
    assert [r.metric for r in report.rows] == [CORR]
    report = agree_runs(run_a, run_b, metric_pairs=[("faithfulness", v2)])
    assert [r.metric for r in report.rows] == [f"{FAITH} = {v2}", CORR]
    assert report.rows[0].stats.scale == (1, 5)  # from the built-in rubric faithfulness
    with pytest.raises(UsageError, match=r"run B .* has no judge:nope"):
        agree_runs(run_a, run_b, metric_pairs=[(FAITH, "judge:nope")])


def test_no_judge_metric_in_common(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}})
    run_b = write_run(tmp_path / "b", {"q1": {CORR: 5}})
    with pytest.raises(UsageError, match=r"no judge metric in common.*--pair"):
        agree_runs(run_a, run_b)
    plain = write_run(tmp_path / "c", {"q1": {"ndcg@10": 0.5}})
    with pytest.raises(UsageError, match="no judge metric"):
        agree_runs(plain, run_b)
    with pytest.raises(UsageError, match="second run directory or --human"):
        agree_runs(run_a)


def test_scale_of_builtin_zero_based_rubric_and_unknown_rubric(tmp_path: Path) -> None:
    rel = "judge:context_relevance"
    mine = "judge:./gone/mine.toml"
    run_a = write_run(tmp_path / "a", {"q1": {rel: 0, mine: 7}, "q2": {rel: 3, mine: 9}})
    run_b = write_run(tmp_path / "b", {"q1": {rel: 1, mine: 8}, "q2": {rel: 3, mine: 9}})
    report = agree_runs(run_a, run_b)
    by_metric = {r.metric: r for r in report.rows}
    assert by_metric[rel].stats.scale == (0, 3) and len(by_metric[rel].stats.confusion) == 4
    assert by_metric[mine].stats.scale == (7, 9)
    assert any("observed range 7-9" in note for note in report.notes)


def test_averaged_samples_are_rounded_and_reported(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 4.5}, "q2": {FAITH: 2.0}, "q3": {FAITH: 1}})
    run_b = write_run(tmp_path / "b", {"q1": {FAITH: 5}, "q2": {FAITH: 1.5}, "q3": {FAITH: 1}})
    report = agree_runs(run_a, run_b)
    assert report.rows[0].stats.rounded == 2 and report.rows[0].stats.exact == 1.0
    out = io.StringIO()
    run_agree(str(run_a), str(run_b), None, None, None, False, None, out)
    assert "rounded half up" in out.getvalue()


# -- human labels ----------------------------------------------------------------------------


def test_one_run_against_human_label_objects(tmp_path: Path) -> None:
    records = write_records(tmp_path / "records.jsonl", [
        {"id": "q1", "answer": "x", "human": {"faithfulness": 5, "judge:correctness": 4}},
        {"id": "q2", "answer": "x", "human": {"faithfulness": 3}},
        {"id": "q3", "answer": "x", "human": {"faithfulness": 2, "correctness": 2}},
        {"id": "q4", "answer": "x"},
        {"id": "q5", "answer": "x", "human": {"faithfulness": 4, "correctness": None}},
    ])
    run_a, _ = two_runs(tmp_path)
    # The run's manifest names the records file it scored.
    write_run(run_a, {
        "q1": {FAITH: 5, CORR: 4}, "q2": {FAITH: 4, CORR: None}, "q3": {FAITH: 2, CORR: 2},
        "q4": {FAITH: 1, CORR: 3}, "q5": {FAITH: None, CORR: 5},
    }, source=str(records))
    report = agree_runs(run_a, human="human")
    faith, corr = report.rows
    assert (faith.rater_a, faith.rater_b) == ("A", "human")
    assert faith.metric_b == "human.faithfulness"
    assert corr.metric_b == "human.judge:correctness, human.correctness"  # keys as found
    assert faith.stats.n == 3 and dict(faith.left_out) == {"no human label": 1,
                                                          "unscored in A": 1}
    assert faith.stats.confusion[3][2] == 1  # q2: judge 4, human 3
    assert corr.stats.n == 2 and corr.stats.exact == 1.0
    assert report.raters[-1].field == "human"


def test_two_runs_and_humans(tmp_path: Path) -> None:
    records = write_records(tmp_path / "records.jsonl", [
        {"id": f"q{i}", "label": v} for i, v in enumerate([5, 3, 2, 1, 4], 1)])
    run_a, run_b = two_runs(tmp_path)
    with pytest.raises(UsageError, match=r"single number but 2 judge metrics.*--metric"):
        agree_runs(run_a, run_b, human="label", records_path=records)
    report = agree_runs(run_a, run_b, human="label", records_path=records, metric=FAITH)
    assert [(r.rater_a, r.rater_b) for r in report.rows] == [
        ("A", "human"), ("B", "human"), ("A", "B")]
    a_human, b_human, a_b = report.rows
    assert a_human.stats.n == 4 and b_human.stats.n == 5 and a_b.stats.n == 4
    assert b_human.stats.exact == pytest.approx(4 / 5)
    assert a_human.metric_b == "label"


def test_human_label_errors(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 3}})
    bad = write_records(tmp_path / "bad.jsonl", [
        {"id": "q1", "human": 4}, {"id": "q2", "human": "great"}])
    with pytest.raises(InputError, match=r"field 'human'.*record 'q2'.*finite number"):
        agree_runs(run_a, human="human", records_path=bad)
    nested = write_records(tmp_path / "nested.jsonl", [{"id": "q1", "human": {"faith": [4]}}])
    with pytest.raises(InputError, match=r"field 'human.faith'.*record 'q1'"):
        agree_runs(run_a, human="human", records_path=nested)
    outside = write_records(tmp_path / "outside.jsonl", [{"id": "q1", "human": 9}])
    with pytest.raises(InputError, match=r"field 'human'.*record 'q1'.*outside the scale 1-5"):
        agree_runs(run_a, human="human", records_path=outside)
    outside = write_records(tmp_path / "outside2.jsonl", [{"id": "q2", "human": {FAITH: 0}}])
    with pytest.raises(InputError, match=r"field 'human.judge:faithfulness'.*record 'q2'"):
        agree_runs(run_a, human="human", records_path=outside)
    fine = write_records(tmp_path / "fine.jsonl", [{"id": "q1", "rating": 4}])
    with pytest.raises(UsageError, match=r"no record of .* has a field 'human'.*rating"):
        agree_runs(run_a, human="human", records_path=fine)
    other_ids = write_records(tmp_path / "other.jsonl", [{"id": "z1", "human": 4}])
    with pytest.raises(UsageError, match="none of the 2 compared records has a label"):
        agree_runs(run_a, human="human", records_path=other_ids)
    with pytest.raises(UsageError, match="--records FILE"):
        agree_runs(run_a, human="human")  # scored in memory: no records file to read


def test_human_labels_from_csv_strings(tmp_path: Path) -> None:
    path = tmp_path / "records.csv"
    path.write_text("id,answer,human\nq1,x,5\nq2,x,\nq3,x,2.0\n", encoding="utf-8")
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 3}, "q3": {FAITH: 3}})
    row = agree_runs(run_a, human="human", records_path=path).rows[0]
    assert row.stats.n == 2 and dict(row.left_out) == {"no human label": 1}
    assert row.stats.exact == 0.5


# -- the command -----------------------------------------------------------------------------


def test_run_agree_prints_and_writes_json(tmp_path: Path) -> None:
    run_a, run_b = two_runs(tmp_path)
    out = io.StringIO()
    json_path = tmp_path / "agree.json"
    assert run_agree(str(run_a), str(run_b), None, None, None, False, str(json_path), out) == 0
    text = out.getvalue()
    assert "rageval agreement" in text and "kappa" in text
    assert "rows A, columns B" in text  # a confusion matrix per pair
    assert "unscored in A" in text
    data = json.loads(json_path.read_text())
    assert [row["metric_a"] for row in data["rows"]] == [FAITH, CORR]
    assert len(data["rows"][0]["confusion"]["counts"]) == 5
    assert data["raters"][0]["judge_model"] == "model-a"
    assert not list(tmp_path.glob(".agree.json.*"))  # no temporary file left behind


def test_parse_pair() -> None:
    assert parse_pair("judge:a=judge:b") == ("judge:a", "judge:b")
    assert parse_pair("judge:f(samples=3)=judge:g") == ("judge:f(samples=3)", "judge:g")
    for bad in ("judge:a", "=judge:b", "a=b=c"):
        with pytest.raises(UsageError, match="--pair"):
            parse_pair(bad)


def test_pairwise_outcomes_are_not_treated_as_grades(tmp_path: Path) -> None:
    """judge:pairwise values are win/tie/loss (1, 0.5, 0): rounding would make a tie a win."""
    scores = {f"q{i}": {"judge:fluency": 1 + i % 5, "judge:pairwise": 0.5,
                        "judge:pairwise.consistent": 0.0} for i in range(6)}
    run_a = write_run(tmp_path / "a", scores)
    run_b = write_run(tmp_path / "b", scores)
    report = agree_runs(run_a, run_b)
    assert [row.metric for row in report.rows] == ["judge:fluency"]


def write_labels_file(path: Path, lines: list[tuple[str, str, float | None, str]],
                      undo: tuple[str, str, str] | None = None) -> Path:
    """A labels file as rageval annotate writes it: (id, metric, label, annotator) lines."""
    rows = [{"id": rid, "metric": metric, "label": label, "annotator": who,
             "time": "2026-11-29T08:00:00Z", "shown_judge": False, "selection": "uniform"}
            for rid, metric, label, who in lines]
    if undo is not None:
        rid, metric, who = undo
        rows.append({"id": rid, "metric": metric, "label": None, "annotator": who,
                     "time": "2026-11-29T08:01:00Z", "undo": True})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_one_run_against_a_labels_file_averaged_across_annotators(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}, "q3": {FAITH: 2},
                                       "q4": {FAITH: 1}})
    labels = write_labels_file(tmp_path / "labels.jsonl", [
        ("q1", FAITH, 5, "ana"), ("q1", "faithfulness", 3, "bo"),  # mean 4
        ("q2", FAITH, 4, "ana"), ("q3", FAITH, 1, "ana"), ("q3", FAITH, 2, "bo"),
        ("q4", FAITH, 5, "bo"), ("elsewhere", FAITH, 3, "ana")],
        undo=("q4", FAITH, "bo"))  # q4's only label taken back
    report = agree_runs(run_a, human_labels=labels)
    (row,) = report.rows
    assert (row.rater_a, row.rater_b) == ("A", "human")
    assert row.stats.n == 3 and dict(row.left_out) == {"no human label": 1}
    # q1: judge 5, human 4; q2: 4, 4; q3: 2, 1.5 (rounded half up to 2)
    assert row.stats.exact == pytest.approx(2 / 3)
    assert row.stats.mean_b == pytest.approx((4 + 4 + 1.5) / 3)
    assert report.raters[-1].labels_file and "labels file" in report.raters[-1].describe()
    assert report.to_json()["raters"][-1]["labels_file"] is True


def test_a_labels_file_and_a_field_together_or_matching_nothing_are_errors(
        tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}})
    labels = write_labels_file(tmp_path / "labels.jsonl", [("x9", FAITH, 3, "ana")])
    with pytest.raises(UsageError, match="both give human labels"):
        agree_runs(run_a, human="human", human_labels=labels)
    with pytest.raises(UsageError, match="none of the 2 compared records has a label there"):
        agree_runs(run_a, human_labels=labels)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1"}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        agree_runs(run_a, human_labels=bad)
    assert (caught.value.path, caught.value.line) == (str(bad), 1)


def write_label_rows(path: Path, rows: list[dict]) -> Path:
    """A labels file of the given lines, each with its time filled in."""
    path.write_text("".join(json.dumps({"time": "2026-11-29T08:00:00Z", **row}) + "\n"
                            for row in rows), encoding="utf-8")
    return path


def test_a_labels_file_label_off_the_scale_names_its_line(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}})
    labels = write_labels_file(tmp_path / "labels.jsonl", [
        ("q1", FAITH, 5, "ana"), ("q2", FAITH, 4, "ana"), ("q2", "faithfulness", 7, "bo")])
    with pytest.raises(InputError) as caught:
        agree_runs(run_a, human_labels=labels)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(labels), 3,
                                                                           "label")
    assert "outside its scale 1-5" in str(caught.value)


def test_a_labels_file_off_scale_label_counts_even_when_the_mean_is_on_it(
        tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}})
    # 0 and 6 average to 3, on the 1-5 scale: each label is checked, not their mean.
    labels = write_labels_file(tmp_path / "labels.jsonl", [
        ("q1", FAITH, 0, "ana"), ("q1", FAITH, 6, "bo"), ("q2", FAITH, 4, "ana")])
    with pytest.raises(InputError) as caught:
        agree_runs(run_a, human_labels=labels)
    assert (caught.value.line, caught.value.field) == (1, "label")


def test_labels_of_records_the_run_lacks_are_counted_in_the_notes(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}})
    labels = write_labels_file(tmp_path / "labels.jsonl", [
        ("q1", FAITH, 5, "ana"), ("q2", FAITH, 4, "ana"), ("x1", FAITH, 3, "ana"),
        ("x1", FAITH, 2, "bo"), ("x2", FAITH, 1, "ana"), ("q1", "judge:other", 2, "ana")])
    report = agree_runs(run_a, human_labels=labels)
    assert report.rows[0].stats.n == 2
    assert report.records["labels_of_other_records"] == 3
    assert any("left out 3 labels of 2 records the compared runs do not have" in note
               for note in report.notes)
    assert any("left out 1 label for judge:other, not a compared metric" in note
               for note in report.notes)
    out = io.StringIO()
    run_agree(str(run_a), None, None, None, None, False, None, out,
              human_labels=str(labels))
    assert "the compared runs do not have" in " ".join(out.getvalue().split())


def test_two_names_of_one_metric_from_one_annotator_count_once(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}})
    labels = write_labels_file(tmp_path / "labels.jsonl", [
        ("q1", FAITH, 1, "ana"), ("q1", "faithfulness", 5, "ana"),  # ana's later line wins
        ("q1", FAITH, 2, "bo"), ("q2", FAITH, 4, "ana")])
    report = agree_runs(run_a, human_labels=labels)
    (row,) = report.rows
    # q1: ana 5 (not 1 and 5), bo 2: mean 3.5; q2: 4.
    assert row.stats.mean_b == pytest.approx((3.5 + 4) / 2)


def test_actively_selected_labels_are_said_to_be_compared_unweighted(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", {"q1": {FAITH: 5}, "q2": {FAITH: 4}, "q3": {FAITH: 2}})
    labels = write_label_rows(tmp_path / "labels.jsonl", [
        {"id": "q1", "metric": FAITH, "label": 5, "annotator": "ana", "selection": "active",
         "probability": 0.5, "seed": 0, "position": 0},
        {"id": "q2", "metric": FAITH, "label": None, "annotator": "ana", "selection": "active",
         "probability": 0.2, "passed": True, "seed": 0, "position": 1},
        {"id": "q3", "metric": FAITH, "label": 1, "annotator": "ana", "selection": "active",
         "probability": 0.9, "seed": 0, "position": 2}])
    report = agree_runs(run_a, human_labels=labels)
    (row,) = report.rows
    assert row.stats.n == 2 and row.stats.mean_b == pytest.approx(3.0)  # unweighted
    assert any(note.startswith(f"{FAITH}: its labels were chosen by active selection; agree "
                               "compares the labelled records unweighted") for note in report.notes)
    uniform = write_labels_file(tmp_path / "uniform.jsonl", [("q1", FAITH, 5, "ana")])
    assert not any("active" in note for note in agree_runs(run_a, human_labels=uniform).notes)
