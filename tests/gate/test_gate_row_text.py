"""Every channel says a gate row from one description: the value, the baseline's value, the
difference and the rule, each labelled; a regression check never shows its drop as the value."""

from __future__ import annotations

import html
import io
import math
import xml.etree.ElementTree as ET

import numpy as np
from rich.console import Console

from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.gate import GateReport, check_regression, check_thresholds, gate_table
from rageval.gate.describe import describe
from rageval.gate.github import annotations, summary_markdown
from rageval.gate.junit import junit_xml
from rageval.gate.model import parse_threshold


def _run(values: list[float]) -> Results:
    records = [RecordResult(f"q{i}", {"ndcg@3": v}, {}, {}) for i, v in enumerate(values)]
    mean = float(np.mean(values))
    summary = {"ndcg@3": MetricSummary(mean, len(values), 0, (mean - 0.05, mean + 0.05),
                                       "metric:ndcg|k:3")}
    return Results(records, summary, {})


def _regression() -> tuple[Results, GateReport]:
    """A run whose ndcg@3 (about 0.48) dropped by about 0.45 from its baseline's."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.8, 1.0, 30)
    current = base - 0.45 + rng.normal(0, 0.01, 30)
    results, baseline = _run(list(current)), _run(list(base))
    return results, GateReport(check_regression(results, baseline, max_drop=0.02))


def test_a_regression_row_labels_the_value_the_baseline_and_the_drop() -> None:
    results, report = _regression()
    (row,) = report.rows
    value = results.summary["ndcg@3"].value
    text = describe(row)
    labels = dict(text.figures)
    assert list(labels) == ["value", "baseline", "difference", "drop"]
    assert labels["value"] == repr(round(value, 4))
    assert labels["difference"].startswith("-") and labels["drop"] == repr(round(row.observed, 4))
    assert text.sentence.startswith(f"ndcg@3: value {round(value, 4)}, baseline ")
    assert text.sentence.endswith("; rule drop <= 0.02 vs baseline")


def test_junit_shows_the_value_as_the_value_and_the_drop_as_the_drop() -> None:
    results, report = _regression()
    (row,) = report.rows
    value, drop = round(results.summary["ndcg@3"].value, 4), round(row.observed, 4)
    failure = ET.fromstring(junit_xml(results, report, "run")).find(".//failure")
    assert failure is not None
    message = failure.get("message", "")
    assert f"ndcg@3 = {drop}" not in message  # the old message gave the drop as the value
    assert f"value {value}," in message and f"drop {drop}; rule drop <= 0.02" in message
    assert "the value's 95% CI [" in message


def test_every_channel_renders_the_same_description() -> None:
    results, report = _regression()
    sentence = describe(report.rows[0]).sentence
    figures = describe(report.rows[0]).figures_text
    (command,) = annotations(results, report)
    assert command.startswith(f"::error title=rageval gate::{sentence}; ")
    markdown = html.unescape(summary_markdown(results, report, "run"))
    assert f"- `ndcg@3`: {figures}; rule drop <= 0.02 vs baseline" in markdown
    console = Console(file=io.StringIO(), width=400, no_color=True)
    console.print(gate_table(report))
    assert figures in console.file.getvalue()


def test_a_threshold_on_the_ci_labels_the_bound_beside_the_value() -> None:
    results = _run([0.5, 0.6, 0.7])
    (row,) = check_thresholds(results, [parse_threshold("ndcg@3=0.9", "under")], on="ci")
    assert dict(describe(row).figures) == {"value": "0.6", "CI lower bound": "0.55"}
    (mean_row,) = check_thresholds(results, [parse_threshold("ndcg@3=0.9", "under")])
    assert describe(mean_row).figures == (("mean", "0.6"),)
    assert math.isclose(mean_row.observed or 0, 0.6)
