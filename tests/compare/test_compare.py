"""Comparing runs: pairing, paired statistics (also for corpus BLEU), Holm, signatures, output."""

from __future__ import annotations

import io
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.api import evaluate
from rageval.compare.runs.compare import (
    Draws,
    compare_runs,
    mismatch_kind,
    render_comparison,
    run_compare,
    signature_diff,
    significance_mark,
)
from rageval.compare.runs.corpus import corpus_resampler
from rageval.core.errors import InputError, UsageError
from rageval.core.records import records_from_dicts
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.stats.resampling import bootstrap_ci, bootstrap_weights, paired_randomization_test

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"
REQUIRED = {"metric", "baseline", "system", "baseline_value", "system_value", "delta", "ci95",
            "p_value", "p_adjusted", "wins", "ties", "losses", "n"}
SIG = "metric:{name}|tok:13a|rageval:0.1.0"

REFERENCES = [
    "the cat sat on the mat near the door",
    "revenue grew by eleven percent to four billion dollars",
    "the main risks are competition and currency exposure",
    "subscriptions are the largest source of revenue",
    "the company was founded in a small garage in ohio",
    "cash and equivalents were one billion at year end",
    "the board approved a new share buyback program",
]
ANSWERS_A = [
    "the cat sat on the mat by the door",
    "revenue grew eleven percent to four billion dollars",
    "main risks are competition and exposure to currency",
    "subscriptions are the biggest source of revenue",
    "the company was founded in a garage in ohio",
    "cash and equivalents were one billion at the end of the year",
    "the board approved a share buyback program",
]
ANSWERS_B = [
    "a cat sat on a mat",
    "revenue grew by eleven percent to four billion dollars",
    "the risks are competition and currency",
    "subscriptions are the largest source of revenue",
    "it was founded in ohio",
    "cash was one billion",
    "the board approved a new share buyback program today",
]


def _write(path: Path, ids: Sequence[str], columns: dict[str, Sequence[float | None]], *,
           signatures: dict[str, str] | None = None, components: Sequence[str] = (),
           corpus: Sequence[str] = ()) -> Path:
    """A run directory from per-record values (None: unscored), summary values as means."""
    records = [
        RecordResult(i, {name: col[k] for name, col in columns.items()},
                     {name: "unscored" for name, col in columns.items() if col[k] is None}, {})
        for k, i in enumerate(ids)
    ]
    summary = {}
    for name, col in columns.items():
        scored = [v for v in col if v is not None]
        signature = (signatures or {}).get(name, SIG.format(name=name))
        summary[name] = MetricSummary(float(np.mean(scored)) if scored else None, len(scored),
                                      len(col) - len(scored), None, signature,
                                      aggregate="corpus" if name in corpus else "mean",
                                      in_table=name not in components)
    return Results(records, summary, {"rageval": "0.1.0"}).write(path)


def _generated(seed: int, n: int, shift: float) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    system = np.clip(base + shift + rng.normal(0, 0.15, n), 0, 1)
    return base.tolist(), system.tolist()


def _lexical_run(path: Path, answers: Sequence[str], metrics: Sequence[str]) -> Path:
    items = [{"id": f"r{i}", "answer": a, "reference": ref}
             for i, (a, ref) in enumerate(zip(answers, REFERENCES, strict=True))]
    return evaluate(records_from_dicts(items), metrics, bootstrap=50).write(path)


def _rows(comparison: Any, system: str | None = None) -> dict[str, dict[str, Any]]:
    return {r["metric"]: r for r in comparison.rows if system is None or r["system"] == system}


# ---- identical runs, values, output contract -------------------------------------------


def test_identical_runs_have_zero_delta_and_p_one(tmp_path: Path) -> None:
    results = evaluate(DEMO, ["bleu", "rouge2", "ndcg@3", "mrr"], bootstrap=50)
    a, b = results.write(tmp_path / "a"), results.write(tmp_path / "b")
    comparison = compare_runs([a, b], resamples=500, permutations=500)
    assert comparison.rows
    for row in comparison.rows:
        assert row["delta"] == 0.0 and row["ci95"] == [0.0, 0.0], row["metric"]
        assert row["p_value"] == 1.0 and row["p_adjusted"] == 1.0
        assert (row["wins"], row["losses"], row["ties"]) == (0, 0, row["n"])
        assert row["baseline_value"] == row["system_value"]
        assert row["signature_mismatch"] is None


def test_values_are_the_run_summaries_when_nothing_is_dropped(tmp_path: Path) -> None:
    a = _lexical_run(tmp_path / "a", ANSWERS_A, ["bleu", "rouge1"])
    b = _lexical_run(tmp_path / "b", ANSWERS_B, ["bleu", "rouge1"])
    comparison = compare_runs([a, b], resamples=200, permutations=200)
    sa, sb = Results.load(a).summary, Results.load(b).summary
    rows = _rows(comparison)
    assert set(rows) == set(sa)
    for name, row in rows.items():
        assert row["baseline_value"] == pytest.approx(sa[name].value, rel=1e-12)
        assert row["system_value"] == pytest.approx(sb[name].value, rel=1e-12)
        assert row["delta"] == pytest.approx(sb[name].value - sa[name].value, abs=1e-12)
    assert rows["bleu"]["aggregate"] == "corpus"
    assert rows["bleu"]["baseline_value"] == pytest.approx(
        sacrebleu.corpus_bleu(ANSWERS_A, [REFERENCES]).score)
    # Headline flags come from the summary (in_table): bleu and bleu.sentence, not bleu.p1.
    assert rows["bleu"]["headline"] and rows["bleu.sentence"]["headline"]
    assert not rows["bleu.p1"]["headline"] and not rows["rouge1.precision"]["headline"]


def test_rows_and_json_follow_the_contract(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(6)]
    a = _write(tmp_path / "a", ids, {"m": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
                                     "empty": [None] * 6})
    b = _write(tmp_path / "b", ids, {"m": [0.2, 0.2, 0.5, 0.3, 0.9, 0.7],
                                     "empty": [1.0] * 6})
    out = io.StringIO()
    target = tmp_path / "cmp.json"
    code = run_compare([str(a), str(b)], draws=Draws(300, 300, 0), out=out,
                       json_path=str(target))
    assert code == 0

    def no_nan(token: str) -> None:
        raise AssertionError(f"JSON holds {token}")

    data = json.loads(target.read_text(), parse_constant=no_nan)
    assert isinstance(data, list)
    rows = {r["metric"]: r for r in data}
    for row in rows.values():
        assert set(row) >= REQUIRED
        assert row["baseline"] == str(a) and row["system"] == str(b)
        assert (row["resamples"], row["permutations"], row["seed"]) == (300, 300, 0)
        assert row["records_paired"] == 6
    assert rows["m"]["wins"] == 4 and rows["m"]["ties"] == 1 and rows["m"]["losses"] == 1
    assert rows["m"]["n"] == 6 and rows["m"]["p_method"] == "exact"
    empty = rows["empty"]  # no record scored in both runs: every number is null
    assert empty["n"] == 0 and empty["n_dropped"] == 6
    assert empty["delta"] is None and empty["ci95"] is None and empty["p_value"] is None
    assert empty["p_adjusted"] is None
    text = " ".join(out.getvalue().split())  # long titles wrap
    assert f"{b} vs baseline {a}" in text and f"wrote {target}" in text
    assert "empty: no record is scored in both runs" in text
    assert not list(tmp_path.glob(".cmp.json.*"))  # the temporary file was renamed


def test_run_compare_refuses_an_unwritable_json_path(tmp_path: Path) -> None:
    ids = ["q1", "q2"]
    a = _write(tmp_path / "a", ids, {"m": [0.1, 0.2]})
    b = _write(tmp_path / "b", ids, {"m": [0.3, 0.2]})
    with pytest.raises(UsageError, match="cannot write"):
        run_compare([str(a), str(b)], draws=Draws(10, 10, 0), out=io.StringIO(),
                    json_path=str(tmp_path / "no" / "x.json"))


# ---- statistics of mean metrics --------------------------------------------------------


def test_mean_metric_statistics_match_the_stats_module(tmp_path: Path) -> None:
    base, system = _generated(3, 150, 0.03)
    ids = [f"q{i}" for i in range(150)]
    a = _write(tmp_path / "a", ids, {"m": base})
    b = _write(tmp_path / "b", ids, {"m": system})
    row = _rows(compare_runs([a, b], resamples=2000, permutations=3000, seed=5))["m"]
    d = np.array(system) - np.array(base)
    assert row["delta"] == pytest.approx(d.mean())
    assert row["ci95"] == pytest.approx(list(bootstrap_ci(d, resamples=2000, seed=5)),
                                        abs=1e-12)
    p, exact = paired_randomization_test(d, permutations=3000, seed=5)
    assert row["p_value"] == p and row["p_method"] == "monte-carlo" and not exact


def test_unscored_records_are_left_out_pairwise(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(10)]
    base = [0.1, 0.5, None, 0.3, 0.9, 0.2, 0.4, None, 0.6, 0.7]
    system = [0.3, 0.5, 0.8, None, 1.0, 0.1, 0.6, None, 0.9, 0.9]
    a = _write(tmp_path / "a", ids, {"m": base, "full": [0.5] * 10})
    b = _write(tmp_path / "b", ids, {"m": system, "full": [0.6] * 10})
    row = _rows(compare_runs([a, b], resamples=500, permutations=5000))["m"]
    pairs = [(x, y) for x, y in zip(base, system, strict=True)
             if x is not None and y is not None]
    assert row["n"] == 7 and row["n_dropped"] == 3
    assert row["baseline_value"] == pytest.approx(np.mean([x for x, _ in pairs]))
    assert row["system_value"] == pytest.approx(np.mean([y for _, y in pairs]))
    assert (row["wins"], row["ties"], row["losses"]) == (5, 1, 1)
    # Relabellings of the 10 paired records, enumerated: exact for the 7 scored ones too.
    d = np.array([y - x for x, y in pairs])
    assert row["p_method"] == "exact"
    assert row["p_value"] == pytest.approx(paired_randomization_test(d, permutations=5000)[0])
    lo, hi = row["ci95"]
    assert lo <= row["delta"] <= hi


# ---- corpus BLEU -----------------------------------------------------------------------


@pytest.mark.parity
def test_corpus_bleu_randomization_matches_sacrebleu_enumeration(tmp_path: Path) -> None:
    a = _lexical_run(tmp_path / "a", ANSWERS_A, ["bleu"])
    b = _lexical_run(tmp_path / "b", ANSWERS_B, ["bleu"])
    row = _rows(compare_runs([a, b], resamples=200, permutations=1000))["bleu"]
    observed = (sacrebleu.corpus_bleu(ANSWERS_B, [REFERENCES]).score
                - sacrebleu.corpus_bleu(ANSWERS_A, [REFERENCES]).score)
    assert row["delta"] == pytest.approx(observed, abs=1e-9)
    hits = 0
    for swaps in itertools.product((False, True), repeat=len(REFERENCES)):
        new_a = [y if s else x for x, y, s in zip(ANSWERS_A, ANSWERS_B, swaps, strict=True)]
        new_b = [x if s else y for x, y, s in zip(ANSWERS_A, ANSWERS_B, swaps, strict=True)]
        value = (sacrebleu.corpus_bleu(new_b, [REFERENCES]).score
                 - sacrebleu.corpus_bleu(new_a, [REFERENCES]).score)
        hits += abs(value) >= abs(observed) * (1 - 1e-9)
    assert row["p_method"] == "exact"
    assert row["p_value"] == pytest.approx(hits / 2 ** len(REFERENCES))


@pytest.mark.parity
def test_corpus_bleu_bootstrap_matches_sacrebleu_on_each_resample(tmp_path: Path) -> None:
    a = _lexical_run(tmp_path / "a", ANSWERS_A, ["bleu"])
    b = _lexical_run(tmp_path / "b", ANSWERS_B, ["bleu"])
    row = _rows(compare_runs([a, b], resamples=150, permutations=100, seed=4))["bleu"]
    n = len(REFERENCES)
    deltas = []
    for weights in np.concatenate(list(bootstrap_weights(n, resamples=150, seed=4))):
        picks = [i for i in range(n) for _ in range(int(weights[i]))]
        refs = [[REFERENCES[i] for i in picks]]
        deltas.append(sacrebleu.corpus_bleu([ANSWERS_B[i] for i in picks], refs).score
                      - sacrebleu.corpus_bleu([ANSWERS_A[i] for i in picks], refs).score)
    assert row["ci95"] == pytest.approx(list(np.quantile(deltas, [0.025, 0.975])), abs=1e-9)
    # Wins/ties/losses compare sentence BLEU, record by record.
    sentence_a = [sacrebleu.sentence_bleu(x, [r]).score for x, r in zip(ANSWERS_A, REFERENCES,
                                                                        strict=True)]
    sentence_b = [sacrebleu.sentence_bleu(x, [r]).score for x, r in zip(ANSWERS_B, REFERENCES,
                                                                        strict=True)]
    assert row["wins"] == sum(y > x for x, y in zip(sentence_a, sentence_b, strict=True))
    assert row["losses"] == sum(y < x for x, y in zip(sentence_a, sentence_b, strict=True))


def test_corpus_resampler_recomputes_bleu_from_details(tmp_path: Path) -> None:
    a = Results.load(_lexical_run(tmp_path / "a", ANSWERS_A, ["bleu", "bleu(smooth=floor)"]))
    details = [r.details["bleu"] for r in a.records]
    score = corpus_resampler("bleu", details)
    assert score(None)[0] == pytest.approx(sacrebleu.corpus_bleu(ANSWERS_A, [REFERENCES]).score)
    weights = np.array([[1, 0, 0, 0, 0, 0, 0], [2, 0, 1, 0, 0, 0, 1], [0] * 6 + [1]])
    for row, value in zip(weights, score(weights), strict=True):
        picks = [i for i in range(len(row)) for _ in range(row[i])]
        expected = sacrebleu.corpus_bleu([ANSWERS_A[i] for i in picks],
                                         [[REFERENCES[i] for i in picks]])
        assert value == pytest.approx(expected.score)
    floor = [r.details["bleu(smooth=floor)"] for r in a.records]
    assert corpus_resampler("bleu(smooth=floor)", floor)(None)[0] == pytest.approx(
        a.summary["bleu(smooth=floor)"].value)
    assert corpus_resampler("bleu", [None, *details])(None)[0] == score(None)[0]  # None: nothing
    with pytest.raises(ValueError, match="shape"):
        score(np.ones((1, 3)))
    with pytest.raises(UsageError, match="rouge1 has no corpus figure to recompute"):
        corpus_resampler("rouge1", details)


@pytest.mark.parametrize("ci", ["records", "poisson"])
def test_corpus_metric_without_details_is_an_input_error(tmp_path: Path, ci: str) -> None:
    ids = ["q1", "q2"]
    a = _write(tmp_path / "a", ids, {"bleu": [10.0, 20.0]}, corpus=["bleu"])
    b = _write(tmp_path / "b", ids, {"bleu": [15.0, 20.0]}, corpus=["bleu"])
    with pytest.raises(InputError, match="'q1' has a bleu value but no details"):
        compare_runs([a, b], ci=ci)


# ---- pairing ---------------------------------------------------------------------------


@pytest.mark.parametrize("ci", ["records", "poisson"])
def test_mismatched_ids_are_an_error_naming_them(tmp_path: Path, ci: str) -> None:
    a = _write(tmp_path / "a", [f"q{i}" for i in range(10)], {"m": [0.5] * 10})
    b = _write(tmp_path / "b", [f"q{i}" for i in range(3)] + ["extra"], {"m": [0.5] * 4})
    with pytest.raises(InputError) as error:
        compare_runs([a, b], ci=ci)
    message = str(error.value)
    assert "lacks 7 ids ('q3', 'q4', 'q5', 'q6', 'q7' and 2 more)" in message
    assert "lacks 1 id ('extra')" in message and "--intersect" in message
    assert error.value.exit_code == 2


@pytest.mark.parametrize("ci", ["records", "poisson"])
def test_intersect_compares_common_ids_and_counts_the_dropped(tmp_path: Path, ci: str) -> None:
    a = _write(tmp_path / "a", ["q1", "q2", "q3", "q4"], {"m": [0.1, 0.2, 0.3, 0.4]})
    b = _write(tmp_path / "b", ["q4", "q2", "q9", "q3"], {"m": [0.5, 0.1, 0.9, 0.3]})
    comparison = compare_runs([a, b], intersect=True, resamples=100, permutations=100, ci=ci)
    assert comparison.dropped == {str(a): 1, str(b): 1}
    assert comparison.n_records == 3
    row = _rows(comparison)["m"]  # q2, q3, q4 paired by id, not by position
    assert (row["wins"], row["ties"], row["losses"]) == (1, 1, 1)
    assert row["delta"] == pytest.approx((0.1 - 0.2 + 0.0 + 0.1) / 3)
    text = io.StringIO()
    render_comparison(comparison, _console(text))
    assert "records dropped by --intersect" in text.getvalue()


@pytest.mark.parametrize("ci", ["records", "poisson"])
def test_repeated_ids_are_an_error(tmp_path: Path, ci: str) -> None:
    a = _write(tmp_path / "a", ["q1", "q1"], {"m": [0.1, 0.2]})
    b = _write(tmp_path / "b", ["q1", "q2"], {"m": [0.1, 0.2]})
    with pytest.raises(InputError, match="repeated: 1 id \\('q1'\\)"):
        compare_runs([a, b], ci=ci)


def test_baseline_choice(tmp_path: Path) -> None:
    ids = ["q1", "q2", "q3"]
    a = _write(tmp_path / "a", ids, {"m": [0.1, 0.2, 0.3]})
    b = _write(tmp_path / "b", ids, {"m": [0.2, 0.2, 0.3]})
    c = _write(tmp_path / "c", ids, {"m": [0.3, 0.4, 0.5]})
    default = compare_runs([a, b, c], resamples=50, permutations=50)
    assert default.baseline == str(a) and default.systems == (str(b), str(c))
    # The same directory written another way is recognised.
    chosen = compare_runs([a, b, c], baseline=str(tmp_path / "x" / ".." / "b"),
                          resamples=50, permutations=50)
    assert chosen.baseline == str(b) and chosen.systems == (str(a), str(c))
    extra = compare_runs([a, b], baseline=c, resamples=50, permutations=50)
    assert extra.baseline == str(c) and extra.systems == (str(a), str(b))
    with pytest.raises(UsageError, match="at least two runs"):
        compare_runs([a])
    with pytest.raises(UsageError, match="given twice"):
        compare_runs([a, a])
    with pytest.raises(UsageError, match="resamples"):
        compare_runs([a, b], resamples=0)


def test_loaded_results_can_be_compared(tmp_path: Path) -> None:
    results = evaluate(DEMO, ["mrr"], bootstrap=20)
    comparison = compare_runs([results, results], names=["x", "y"], resamples=50,
                              permutations=50)
    assert comparison.baseline == "x" and _rows(comparison)["mrr"]["delta"] == 0.0


def test_metrics_in_one_run_only_are_listed(tmp_path: Path) -> None:
    ids = ["q1", "q2"]
    a = _write(tmp_path / "a", ids, {"m": [0.1, 0.2], "old": [0.1, 0.1]})
    b = _write(tmp_path / "b", ids, {"m": [0.3, 0.2], "new": [0.5, 0.5]})
    comparison = compare_runs([a, b], resamples=20, permutations=20)
    assert [r["metric"] for r in comparison.rows] == ["m"]
    assert comparison.not_compared == {str(b): {"baseline_only": ["old"],
                                                "system_only": ["new"]}}


# ---- swapping baseline and system ------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5) | st.none()), min_size=2,
                max_size=20), st.integers(0, 1000))
def test_swapping_baseline_and_system_negates(
    tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[int, int | None]], seed: int
) -> None:
    tmp = tmp_path_factory.mktemp("swap")
    ids = [f"q{i}" for i in range(len(pairs))]
    a = _write(tmp / "a", ids, {"m": [float(x) for x, _ in pairs]})
    b = _write(tmp / "b", ids, {"m": [None if y is None else float(y) for _, y in pairs]})
    forward = _rows(compare_runs([a, b], resamples=200, permutations=300, seed=seed))["m"]
    backward = _rows(compare_runs([b, a], resamples=200, permutations=300, seed=seed))["m"]
    assert forward["n"] == backward["n"]
    assert (forward["wins"], forward["losses"]) == (backward["losses"], backward["wins"])
    if forward["n"] == 0:
        assert forward["delta"] is None and backward["delta"] is None
        return
    assert backward["delta"] == pytest.approx(-forward["delta"], abs=1e-12)
    lo, hi = forward["ci95"]
    assert backward["ci95"] == pytest.approx([-hi, -lo], abs=1e-12)
    assert backward["p_value"] == forward["p_value"]


# ---- Holm ------------------------------------------------------------------------------


def _holm_reference(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def test_holm_adjusts_headlines_and_components_as_separate_families(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(60)]
    columns_a, columns_b = {}, {}
    for k, (name, shift) in enumerate([("h1", 0.08), ("h2", 0.02), ("h3", 0.0),
                                       ("c1", 0.05), ("c2", 0.01)]):
        columns_a[name], columns_b[name] = _generated(k, 60, shift)
    a = _write(tmp_path / "a", ids, columns_a, components=["c1", "c2"])
    b = _write(tmp_path / "b", ids, columns_b, components=["c1", "c2"])
    rows = _rows(compare_runs([a, b], resamples=100, permutations=2000))
    for family, names in (("headline", ["h1", "h2", "h3"]), ("components", ["c1", "c2"])):
        expected = _holm_reference([rows[n]["p_value"] for n in names])
        assert [rows[n]["p_adjusted"] for n in names] == pytest.approx(expected)
        assert all(rows[n]["holm_family"] == family for n in names)
    # Without the components, the headline adjustment is unchanged.
    a2 = _write(tmp_path / "a2", ids, {n: columns_a[n] for n in ("h1", "h2", "h3")})
    b2 = _write(tmp_path / "b2", ids, {n: columns_b[n] for n in ("h1", "h2", "h3")})
    alone = _rows(compare_runs([a2, b2], resamples=100, permutations=2000))
    assert [alone[n]["p_adjusted"] for n in ("h1", "h2", "h3")] == \
        [rows[n]["p_adjusted"] for n in ("h1", "h2", "h3")]


# ---- signatures ------------------------------------------------------------------------


def test_signature_differences_are_classified() -> None:
    base = "metric:bleu|tok:13a|sacrebleu:2.6.0|rageval:0.1.0"
    assert signature_diff(base, base) == {} and mismatch_kind({}) is None
    only_version = signature_diff(base, base.replace("rageval:0.1.0", "rageval:0.2.0"))
    assert only_version == {"rageval": ["0.1.0", "0.2.0"]}
    assert mismatch_kind(only_version) == "rageval-version"
    config = signature_diff(base, "metric:bleu|tok:intl|sacrebleu:2.6.0|rageval:0.2.0|x:1")
    assert config == {"tok": ["13a", "intl"], "rageval": ["0.1.0", "0.2.0"], "x": [None, "1"]}
    assert mismatch_kind(config) == "config"
    library = signature_diff(base, base.replace("sacrebleu:2.6.0", "sacrebleu:2.5.1"))
    assert mismatch_kind(library) == "config"


def test_signature_mismatch_is_flagged_on_rows_and_in_the_table(tmp_path: Path) -> None:
    ids = ["q1", "q2", "q3"]
    columns = {"tokd": [0.1, 0.2, 0.3], "versioned": [0.4, 0.5, 0.6], "same": [0.1, 0.1, 0.1]}
    a = _write(tmp_path / "a", ids, columns)
    b = _write(tmp_path / "b", ids, columns, signatures={
        "tokd": "metric:tokd|tok:intl|rageval:0.1.0",
        "versioned": "metric:versioned|tok:13a|rageval:0.2.0",
    })
    comparison = compare_runs([a, b], resamples=50, permutations=50)
    rows = _rows(comparison)
    assert rows["tokd"]["signature_mismatch"] == "config"
    assert rows["tokd"]["signature_diff"] == {"tok": ["13a", "intl"]}
    assert rows["versioned"]["signature_mismatch"] == "rageval-version"
    assert rows["same"]["signature_mismatch"] is None
    out = io.StringIO()
    render_comparison(comparison, _console(out))
    text = out.getvalue()
    assert "DIFFERS" in text and "rageval version differs" in text
    assert "tokd: signatures differ (tok 13a -> intl)" in text
    assert "versioned: only the rageval version differs (rageval 0.1.0 -> 0.2.0)" in text


# ---- rendering -------------------------------------------------------------------------


def _console(out: io.StringIO) -> Any:
    from rich.console import Console

    return Console(file=out, width=200, no_color=True, highlight=False)


def test_table_shows_headlines_by_default_and_marks_significance(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(40)]
    base, system = _generated(11, 40, 0.3)
    a = _write(tmp_path / "a", ids, {"big": base, "big.part": base}, components=["big.part"])
    b = _write(tmp_path / "b", ids, {"big": system, "big.part": system},
               components=["big.part"])
    comparison = compare_runs([a, b], resamples=200, permutations=2000)
    out = io.StringIO()
    render_comparison(comparison, _console(out))
    text = out.getvalue()
    assert "big.part" not in text and "**" in text
    assert "p_adj < 0.05" in text  # the legend
    out = io.StringIO()
    render_comparison(comparison, _console(out), components=True)
    assert "big.part" in out.getvalue()


def test_significance_marks() -> None:
    assert significance_mark(None) == ""
    assert significance_mark(0.2) == ""
    assert significance_mark(0.049) == "*"
    assert significance_mark(0.0099) == "**"


def test_no_nan_reaches_json(tmp_path: Path) -> None:
    ids = ["q1", "q2", "q3"]
    a = _write(tmp_path / "a", ids, {"m": [None, None, 0.5]})
    b = _write(tmp_path / "b", ids, {"m": [0.1, None, 0.7]})
    comparison = compare_runs([a, b], resamples=50, permutations=50)
    text = json.dumps(comparison.to_json(), allow_nan=False)
    row = json.loads(text)["rows"][0]
    assert row["n"] == 1 and row["ci95"] == [pytest.approx(0.2)] * 2
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in row.values())


def test_one_directory_spelled_twice_is_refused(tmp_path: Path) -> None:
    ids = ["q0", "q1"]
    a = _write(tmp_path / "a", ids, {"m": [0.1, 0.2]})
    with pytest.raises(UsageError, match="given twice"):
        compare_runs([str(a), str(a) + "/"])
