"""One scale of significance marks: rageval compare's table and legend and the HTML report
mark the same p-value alike."""

from __future__ import annotations

import pytest

from rageval.compare.runs.output import significance_mark as compare_mark
from rageval.core.outputs.significance import SIGNIFICANCE_LEGEND, significance_mark
from rageval.report.html.comparison import comparison_section


@pytest.mark.parametrize(("p", "mark"), [(None, ""), (float("nan"), ""), (0.2, ""),
                                          (0.05, ""), (0.049, "*"), (0.0099, "**"),
                                          (0.0009, "***")])
def test_one_scale(p: float | None, mark: str) -> None:
    assert significance_mark(p) == mark
    assert compare_mark(p) == mark


def test_the_legend_names_every_mark() -> None:
    assert SIGNIFICANCE_LEGEND == "* p < 0.05, ** p < 0.01, *** p < 0.001"


def test_compare_and_the_report_mark_p_0_0009_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from rageval.compare.runs.output import _legend

    # The two fields the legend reads, as a comparison holds them.
    settings = SimpleNamespace(settings={"permutations": 100, "resamples": 100, "seed": 0},
                               rows=[])
    legend = _legend(settings)  # type: ignore[arg-type]
    assert legend[0].startswith("* p_adj < 0.05, ** p_adj < 0.01, *** p_adj < 0.001")
    row = {"metric": "ndcg@3", "baseline": "a", "system": "b", "baseline_value": 0.5,
           "system_value": 0.6, "delta": 0.1, "ci95": [0.05, 0.15], "p_value": 0.0009,
           "p_adjusted": 0.0009, "wins": 5, "ties": 0, "losses": 0, "n": 5}
    from rageval.report.html import comparison

    monkeypatch.setattr(comparison, "_forest_figure", lambda runs, rows: "")  # no plot here
    html = comparison_section([], [row])
    assert '<span class="stars">***</span>' in html
    assert "*** p &lt; 0.001" in html


def test_one_p_value_text_in_compare_the_report_and_the_markdown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``0.0009 ***`` everywhere: not ``9.0e-04**`` in the terminal and ``0.0009`` in the
    report, nor ``0.00090`` in the Markdown."""
    from rageval.compare.runs.output import _cells
    from rageval.core.outputs.significance import marked_p_value
    from rageval.report.html import comparison

    row = {"metric": "ndcg@3", "aggregate": "mean", "baseline_value": 0.5,
           "system_value": 0.6, "delta": 0.1, "ci95": [0.05, 0.15], "p_value": 0.0009,
           "p_adjusted": 0.0009, "wins": 5, "ties": 0, "losses": 0, "n": 5, "n_dropped": 0}
    assert _cells(row)[5] == "0.0009 ***"
    assert marked_p_value(0.0009) == "0.0009 ***"  # the Markdown's p-value column
    assert marked_p_value(0.2182) == "0.2182" and marked_p_value(None) == "—"
    monkeypatch.setattr(comparison, "_forest_figure", lambda runs, rows: "")
    html = comparison.comparison_section([], [{**row, "baseline": "a", "system": "b"}])
    assert '0.0009 <span class="stars">***</span>' in html
    assert _cells({**row, "p_adjusted": 0.00001})[5] == "<0.0001 ***"
