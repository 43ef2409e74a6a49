"""GitHub Actions output: the summary table appended to a fake $GITHUB_STEP_SUMMARY (and
written by --markdown for a pull-request comment), and the annotations as workflow commands."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from rageval.cli import main
from rageval.core.results import MetricSummary, Results
from rageval.gate.github import annotations, summary_markdown
from rageval.gate.model import GateReport, GateRow

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "records.jsonl"
SCORE = ["score", str(DEMO), "-m", "ndcg@3", "-m", "rouge1", "--bootstrap", "50",
         "--no-progress"]


@pytest.fixture
def step_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "step_summary.md"
    path.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    return path


def test_a_job_gets_the_table_and_an_annotation_per_failed_check(
        tmp_path: Path, step_summary: Path) -> None:
    baseline = tmp_path / "base"
    assert main([*SCORE, "--out", str(baseline)], stdout=io.StringIO()) == 0
    out = io.StringIO()
    argv = [*SCORE, "--fail-under", "ndcg@3=0.9", "--baseline", str(baseline)]
    assert main(argv, stdout=out) == 3
    text = step_summary.read_text()
    assert text.startswith("earlier step\n### rageval: ")  # appended, never replaced
    assert "— gate failed (1 check)" in text
    assert "| metric | value | scale | 95% CI | baseline | delta | p-value | gate |" in text
    # The same records scored again: the baseline's value, no change, p = 1; each value with
    # its scale, as the terminal and the report show it.
    assert ("| `rouge1` | 0.571 | 0–1 | [0.5004, 0.6446] | 0.571 | +0.0 | 1.0000 | ✅ pass |"
            in text)
    assert "| `ndcg@3` | 0.7984 |" in text and "❌ fail" in text
    commands = [line for line in out.getvalue().splitlines() if line.startswith("::")]
    assert commands == ["::error title=rageval gate::ndcg@3: mean 0.7984; rule >= 0.9 (mean); "
                        "95%25 CI [0.6469, 0.9304], n=7, 1 unscored"]


def test_markdown_is_written_for_a_comment_and_no_github_turns_the_job_output_off(
        tmp_path: Path, step_summary: Path) -> None:
    out = io.StringIO()
    comment = tmp_path / "comment.md"
    assert main([*SCORE, "--markdown", str(comment), "--no-github"], stdout=out) == 0
    assert step_summary.read_text() == "earlier step\n"
    assert "::" not in out.getvalue()
    assert comment.read_text().startswith("### rageval: ")
    assert ("| `ndcg@3` | 0.7984 | 0–1 | [0.6469, 0.9304] | — | — | — | — |"
            in comment.read_text())


def test_outside_a_job_nothing_is_written(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    summary = tmp_path / "s.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = io.StringIO()
    assert main([*SCORE, "--fail-under", "ndcg@3=0.9"], stdout=out) == 3
    assert not summary.exists() and "::error" not in out.getvalue()


def test_judge_failures_are_warnings_and_messages_are_escaped() -> None:
    item = MetricSummary(0.5, 4, 0, (0.4, 0.6), "metric:x")
    results = Results([], {"judge:faithfulness": item},
                      {"judge": {"failed": 3}, "claims": {"failed": 0}})
    row = GateRow("threshold", "judge:faithfulness", ">= 0.9 (mean)", 0.5, False,
                  "100% sure\nsecond line")
    commands = annotations(results, GateReport([row]))
    assert commands == [
        "::error title=rageval gate::judge:faithfulness: value 0.5; rule >= 0.9 (mean); "
        "100%25 sure%0Asecond line",
        "::warning title=rageval judge::3 requests to the judge failed; their records are "
        "unscored with the reason"]
    table = summary_markdown(results, GateReport([row]), "a|b")
    assert table.startswith("### rageval: a\\|b (0 records) — gate failed (1 check)")
    assert "- `judge:faithfulness`: value 0.5; rule &gt;= 0.9 (mean): 100% sure\\\\nsecond line" \
        in table
