"""The report and the terminal say what a judge value rests on: the mean calibrated by human
labels beside the raw one, the judge's flips between samples, a panel's agreement."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from rageval.api import evaluate
from rageval.core.results import MetricSummary, Results
from rageval.judge.llm.options import JudgeOptions
from rageval.report.html.page import build_report
from rageval.report.tables import print_summary

CALIBRATION = Path(__file__).resolve().parents[2] / "fixtures" / "calibration"


def _calibrated() -> Results:
    judge = JudgeOptions(model="smollm2-135m-instruct", offline=True,
                         cache=str(CALIBRATION / "judge_cache.jsonl"))
    return evaluate(CALIBRATION / "records.jsonl", ["judge:faithfulness"], judge=judge,
                    human="human", bootstrap=20)


def _figured() -> Results:
    figures = {
        "stability": {"samples": 5, "items": 8, "flip_rate": 0.75, "mean_sd": 1.16},
        "panel": {"rule": "median", "members": {"a": {"mean": 4.0, "abstained": 0},
                                                "b": {"mean": 3.5, "abstained": 2}},
                  "krippendorff_alpha": 0.42, "alpha_level": "interval",
                  "items_rated_twice": 6},
    }
    item = MetricSummary(4.1, 8, 0, (3.9, 4.3), "metric:judge:faithfulness", figures=figures,
                         ci_method="judge-noise")
    return Results([], {"judge:faithfulness": item}, {"metrics": ["judge:faithfulness"]})


def test_the_report_shows_the_calibrated_mean_flips_and_panel() -> None:
    page = build_report([("calibrated", _calibrated()), ("figured", _figured())])
    assert "judge:faithfulness calibrated by 20 human labels (PPI, 20 unlabelled): 2.5000" in page
    assert "the judge alone: 4.1250; the labels alone: 3.5500" in page
    assert ("judge:faithfulness: 5 samples per item; 75.0% of 8 items flip between samples "
            "(mean SD 1.1600); its CI holds the judge&#x27;s noise") in page
    assert ("judge:faithfulness: panel of 2 (median): Krippendorff&#x27;s alpha 0.4200 "
            "(interval, 6 records rated twice or more); members: a 4.0000, b 3.5000 "
            "(2 abstained)") in page


def test_the_terminal_says_the_same() -> None:
    out = io.StringIO()
    print_summary(_figured(), Console(file=out, width=300))
    text = out.getvalue()
    assert "75.0% of 8 items flip between samples" in text
    assert "panel of 2 (median): Krippendorff's alpha 0.4200" in text
