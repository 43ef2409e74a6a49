"""The gate's thresholds: parsing, mean and CI bounds, unscored values, run figures from the
manifest, unknown names, the report and its table."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from rageval.core.errors import UsageError
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.gate import (
    GATE_FAILED_EXIT,
    GateReport,
    GateRow,
    Threshold,
    check_thresholds,
    format_number,
    gate_table,
    parse_threshold,
    run_figure,
    unknown_threshold_names,
)
from rageval.judge.llm.checks import judge_section
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import RunStats


def _item(value: float, ci: tuple[float, float] | None = None, *, n: int = 8, unscored: int = 0,
          reasons: dict[str, int] | None = None, aggregate: str = "mean") -> MetricSummary:
    return MetricSummary(value, n, unscored, ci, "metric:x|rageval:0.1.0", reasons or {},
                         aggregate)


def _results(summary: dict[str, MetricSummary], manifest: dict[str, Any] | None = None
             ) -> Results:
    records = [RecordResult(f"q{i}", {}, {}, {}) for i in range(8)]
    return Results(records, summary, manifest or {})


RUN = _results({
    "ndcg@10": _item(0.5, (0.41, 0.6)),
    "judge:faithfulness": _item(3.625, (3.25, 4.0)),
    "claims:hallucination": _item(0.08, (0.02, 0.15)),
    "p(rel=2)@5": _item(0.3, (0.2, 0.4)),
})


def under(metric: str, limit: float) -> Threshold:
    return Threshold(metric, limit, "under")


def over(metric: str, limit: float) -> Threshold:
    return Threshold(metric, limit, "over")


# ---- parse_threshold ---------------------------------------------------------------------


def test_parse_splits_on_the_last_equals_sign() -> None:
    assert parse_threshold("p(rel=2)@5=0.3", "under") == under("p(rel=2)@5", 0.3)
    assert parse_threshold("ndcg@10=0.45", "over") == over("ndcg@10", 0.45)
    assert parse_threshold(" judge:faithfulness = 4 ", "under") == under("judge:faithfulness", 4)


@pytest.mark.parametrize("text", ["ndcg@10", "ndcg@10=", "ndcg@10=abc", "ndcg@10=nan",
                                  "ndcg@10=inf", "=0.3", " =0.3", "p(rel=2)@5"])
def test_parse_rejects_bad_text_naming_it(text: str) -> None:
    with pytest.raises(UsageError, match="bad threshold") as caught:
        parse_threshold(text, "under")
    assert repr(text) in str(caught.value)


def test_threshold_checks_its_fields() -> None:
    with pytest.raises(UsageError, match="'under' or 'over'"):
        Threshold("ndcg@10", 0.4, "below")
    with pytest.raises(UsageError, match="finite"):
        Threshold("ndcg@10", math.inf, "under")
    with pytest.raises(UsageError, match="finite"):
        Threshold("ndcg@10", True, "under")
    assert Threshold("n", 1, "under").limit == 1.0 and isinstance(Threshold("n", 1, "under").limit,
                                                                   float)


_NAMES = st.text(min_size=1, max_size=30).filter(lambda s: s.strip() == s and s != "")


@given(name=_NAMES, value=st.floats(allow_nan=False, allow_infinity=False),
       direction=st.sampled_from(["under", "over"]))
def test_parse_round_trips_any_name_and_number(name: str, value: float, direction: str) -> None:
    parsed = parse_threshold(f"{name}={value!r}", direction)
    assert parsed == Threshold(name, value, direction)


@given(text=st.text(max_size=30).filter(lambda s: "=" not in s))
def test_parse_without_equals_always_fails_naming_the_text(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_threshold(text, "under")
    assert repr(text) in str(caught.value)


# ---- thresholds on the mean and on the CI ----------------------------------------------


def test_minimums_and_maximums_on_the_mean() -> None:
    rows = check_thresholds(RUN, [under("ndcg@10", 0.45), under("judge:faithfulness", 4.0),
                                  over("claims:hallucination", 0.1),
                                  over("claims:hallucination", 0.05), under("ndcg@10", 0.5)])
    assert [r.passed for r in rows] == [True, False, True, False, True]  # the limit passes
    faithfulness = rows[1]
    assert faithfulness.check == "threshold"
    assert faithfulness.rule == ">= 4.0 (mean)"
    assert faithfulness.observed == 3.625
    assert faithfulness.note == "95% CI [3.25, 4.0], n=8"
    assert rows[2].rule == "<= 0.1 (mean)"


def test_on_ci_compares_the_bound_on_the_failing_side() -> None:
    rows = check_thresholds(RUN, [under("ndcg@10", 0.45), over("claims:hallucination", 0.1),
                                  under("ndcg@10", 0.4)], on="ci")
    assert [r.passed for r in rows] == [False, False, True]
    assert rows[0].observed == 0.41 and rows[0].rule == ">= 0.45 (CI lower bound)"
    assert rows[1].observed == 0.15 and rows[1].rule == "<= 0.1 (CI upper bound)"
    assert rows[0].note == "mean 0.5, 95% CI [0.41, 0.6], n=8"


def test_on_ci_without_an_interval_fails() -> None:
    run = _results({"bleu": _item(31.2, None, n=1, aggregate="corpus")})
    (row,) = check_thresholds(run, [under("bleu", 20)], on="ci")
    assert not row.passed and row.observed is None
    assert "no 95% CI" in row.note
    (row,) = check_thresholds(run, [under("bleu", 20)])
    assert row.passed and row.rule == ">= 20.0 (corpus)"


def test_unscored_everywhere_fails_with_the_reason() -> None:
    run = _results({"rouge1": _item(math.nan, None, n=0, unscored=8,
                                    reasons={"no reference": 6, "no answer": 2})})
    for on in ("mean", "ci"):
        (row,) = check_thresholds(run, [under("rouge1", 0.1)], on=on)
        assert not row.passed and row.observed is None
        assert row.note == "unscored on every record (6 x no reference)"
    (row,) = check_thresholds(run, [over("rouge1", 0.9)])  # a maximum cannot pass unseen either
    assert not row.passed


def test_unscored_records_are_counted_in_the_note() -> None:
    run = _results({"mrr": _item(0.7, (0.5, 0.9), n=6, unscored=2)})
    (row,) = check_thresholds(run, [under("mrr", 0.5)])
    assert row.passed and row.note == "95% CI [0.5, 0.9], n=6, 2 unscored"


def test_bad_gate_on_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="'mean' or 'ci'"):
        check_thresholds(RUN, [under("ndcg@10", 0.4)], on="median")


# ---- unknown names -----------------------------------------------------------------------


def test_unknown_names_suggest_close_matches() -> None:
    thresholds = [under("ndcg@11", 0.4), under("judge:faithfulnes", 4), over("cost_usd", 1),
                  over("tokens", 10), under("ndcg@10", 0.1), under("zzz", 1)]
    messages = unknown_threshold_names(thresholds, RUN.summary)
    assert len(messages) == 3
    assert messages[0].startswith("threshold ndcg@11: not an output of this run")
    assert "'ndcg@10'" in messages[0]
    assert "'judge:faithfulness'" in messages[1]
    assert "did you mean" not in messages[2]
    assert unknown_threshold_names([over("cost_usd", 1)], []) == []


def test_unknown_name_fails_its_row() -> None:
    (row,) = check_thresholds(RUN, [under("ndgc@10", 0.4)], on="ci")
    assert not row.passed and row.observed is None
    assert "did you mean 'ndcg@10'" in row.note and row.rule == ">= 0.4 (CI lower bound)"
    (row,) = check_thresholds(RUN, [over("cost", 0.1)])
    assert "'cost_usd'" in row.note


# ---- run figures -------------------------------------------------------------------------


def _section(requests: int, failed: int, asked: tuple[int, int], replayed: tuple[int, int],
             prices: tuple[float, float] | None) -> dict[str, Any]:
    """A manifest section as the judge family writes it (its own function, so the keys the
    gate reads cannot drift from those written)."""
    stats = RunStats(requests=requests, failed=failed)
    stats.add_usage({"prompt_tokens": asked[0], "completion_tokens": asked[1],
                     "total_tokens": sum(asked)}, cached=False)
    stats.add_usage({"prompt_tokens": replayed[0], "completion_tokens": replayed[1],
                     "total_tokens": sum(replayed)}, cached=True)
    price_in, price_out = prices if prices is not None else (None, None)
    judge = JudgeOptions(model="m", price_in=price_in, price_out=price_out)
    return judge_section(judge, stats, {}, "2")


def test_run_figures_sum_every_section_of_judge_work() -> None:
    manifest = {
        "rageval": "0.1.0", "records": {"count": 8}, "judgments": "inline",
        "judge": _section(10, 1, (1_000_000, 100_000), (2_000_000, 0), (1.0, 10.0)),
        "claims": _section(4, 2, (500_000, 0), (0, 0), (2.0, 0.0)),
    }
    run = _results(dict(RUN.summary), manifest)
    # judge: 1.0 + 1.0 asked, 2.0 replayed; claims: 1.0 asked
    assert run_figure(manifest, "cost_usd").value == pytest.approx(5.0)
    assert run_figure(manifest, "tokens").value == 3_600_000
    assert run_figure(manifest, "requests").value == 14
    assert run_figure(manifest, "failed_requests").value == 3
    rows = check_thresholds(run, [over("cost_usd", 5.0), over("cost_usd", 4.99),
                                  over("requests", 0), over("failed_requests", 3),
                                  over("tokens", 1e6)], on="ci")
    assert [r.passed for r in rows] == [True, False, False, True, False]
    assert rows[0].rule == "<= 5.0 (this run + replayed from cache)"
    assert rows[2].rule == "<= 0.0 (sent this run)"
    assert "judge, claims" in rows[2].note
    assert rows[4].note == "1600000 asked, 2000000 replayed (judge, claims)"


def test_cost_without_prices_is_unknown_and_fails() -> None:
    manifest = {"judge": _section(3, 0, (100, 10), (0, 0), None)}
    figure = run_figure(manifest, "cost_usd")
    assert figure.value is None and "--judge-price-in" in figure.note
    (row,) = check_thresholds(_results({}, manifest), [over("cost_usd", 100)])
    assert not row.passed and row.observed is None
    # Tokens are still known.
    assert run_figure(manifest, "tokens").value == 110


def test_a_run_without_judge_work_costs_nothing() -> None:
    manifest = {"judge": _section(0, 0, (0, 0), (0, 0), None), "records": {"count": 8}}
    rows = check_thresholds(_results({}, manifest),
                            [over("cost_usd", 0), over("tokens", 0), over("requests", 0)])
    assert all(r.passed and r.observed == 0 for r in rows)
    assert run_figure({}, "cost_usd").note == "no judge work in this run"


# ---- the report and its table ------------------------------------------------------------


def test_report_passes_when_every_row_passes() -> None:
    ok = GateRow("threshold", "a", ">= 1.0 (mean)", 1.0, True, "")
    bad = GateRow("threshold", "b", ">= 1.0 (mean)", 0.5, False, "")
    assert GateReport([]).passed and GateReport([ok]).passed
    report = GateReport([ok, bad])
    assert not report.passed and report.failures == [bad]
    assert GATE_FAILED_EXIT == 3


def test_table_shows_every_row_and_styles_failures_red() -> None:
    rows = check_thresholds(RUN, [under("p(rel=2)@5", 0.2), under("judge:faithfulness", 4.0)],
                            on="ci")
    table = gate_table(GateReport(rows))
    assert [r.style for r in table.rows] == ["", "red"]
    console = Console(record=True, width=200)
    console.print(table)
    text = console.export_text()
    assert "gate: FAILED (1 of 2 checks)" in text
    assert "p(rel=2)@5" in text and "[3.25, 4.0]" in text  # brackets kept, not read as markup
    assert "PASS" in text and "FAIL" in text and ">= 0.2 (CI lower bound)" in text


@pytest.mark.parametrize(("value", "text"), [(3.625, "3.625"), (4.0, "4.0"), (0.41666, "0.4167"),
                                             (0.0, "0.0"), (1.2e-05, "1.2e-05"), (None, "-"),
                                             (math.nan, "-"), (3_600_000.0, "3.6e+06")])
def test_format_number(value: float | None, text: str) -> None:
    assert format_number(value) == text
