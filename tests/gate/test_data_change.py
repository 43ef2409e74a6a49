"""A regression gate against a baseline that scored other data refuses (exit status 3, one
failing ``data`` row saying what changed) unless ``--allow-data-change``; the same data, or
other data for metrics that do not read it, compares as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rageval.cli import main
from rageval.core.results import Results

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DEMO.read_text().splitlines()]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    out = tmp_path / "base"
    assert main(["score", str(DEMO), "-m", "ndcg@3", "-m", "rouge1", "--no-progress",
                 "--out", str(out)]) == 0
    return out


@pytest.fixture
def gate(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(records: Path, baseline: Path, *more: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["score", str(records), "-m", "ndcg@3", "-m", "rouge1", "--no-progress",
                     "--baseline", str(baseline), *more])
        return code, " ".join(capsys.readouterr().out.replace("│", " ").split())
    return run


def test_dropped_records_refuse_naming_them(gate: Any, baseline: Path, tmp_path: Path) -> None:
    code, text = gate(_write(tmp_path / "r.jsonl", _rows()[:6]), baseline)
    assert code == 3
    assert "the baseline scored other data for ndcg@3, rouge1: 2 records dropped ('q7', " \
           "'q8')" in text and "--allow-data-change" in text
    assert "paired randomization" not in text  # nothing compared


def test_a_changed_reference_refuses_the_metrics_that_read_it(gate: Any, baseline: Path,
                                                              tmp_path: Path) -> None:
    rows = _rows()
    rows[0]["reference"] = "something else entirely"
    code, text = gate(_write(tmp_path / "r.jsonl", rows), baseline)
    assert code == 3 and "other data for rouge1: the same record ids, with other reference" in text
    code, text = gate(_write(tmp_path / "r.jsonl", rows), baseline, "--allow-data-change")
    assert "data changed for rouge1 (allowed by --allow-data-change)" in text
    assert "paired randomization" in text


def test_another_system_s_answers_and_contexts_are_compared(gate: Any, baseline: Path,
                                                           tmp_path: Path) -> None:
    rows = _rows()
    rows[0]["answer"] = "something else entirely"
    rows[1]["contexts"] = rows[1]["contexts"][::-1]
    _, text = gate(_write(tmp_path / "r.jsonl", rows), baseline)
    assert "same data as the baseline" not in text and "paired randomization" in text


def test_the_same_data_compares_without_a_data_row(gate: Any, baseline: Path,
                                                  tmp_path: Path) -> None:
    rows = list(reversed(_rows()))  # another order: the same data
    code, text = gate(_write(tmp_path / "r.jsonl", rows), baseline)
    assert code == 0 and "same data as the baseline" not in text


def test_a_baseline_without_a_digest_is_compared_with_a_note(gate: Any, baseline: Path) -> None:
    summary = baseline / "summary.json"
    data = json.loads(summary.read_text())
    del data["manifest"]["data"]
    summary.write_text(json.dumps(data))
    code, text = gate(DEMO, baseline)
    assert code == 0 and "the baseline has no data digest" in text


def test_export_checks_the_data_too(gate: Any, baseline: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["score", str(_write(tmp_path / "r.jsonl", _rows()[:6])), "-m", "ndcg@3",
                 "-m", "rouge1", "--no-progress", "--out", str(run)]) == 0
    args = ["export", str(run), "--format", "json", "--baseline", str(baseline)]
    assert main([*args, "-o", str(tmp_path / "g.json")]) == 3
    assert main([*args, "--allow-data-change", "-o", str(tmp_path / "g2.json")]) == 0
    assert Results.load(run).manifest["data"]["records"] == 6


def test_allow_data_change_needs_a_baseline(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", str(DEMO), "-m", "ndcg@3", "--allow-data-change"]) == 2
    assert "give --baseline DIR" in capsys.readouterr().err


def test_an_allowed_change_is_said_in_the_markdown_table(baseline: Path, tmp_path: Path) -> None:
    records = _write(tmp_path / "r.jsonl", _rows()[:6])
    table = tmp_path / "table.md"
    assert main(["score", str(records), "-m", "ndcg@3", "-m", "rouge1", "--no-progress",
                 "--baseline", str(baseline), "--allow-data-change", "--markdown",
                 str(table)]) == 0
    assert "Data: data changed for ndcg@3, rouge1 (allowed by --allow-data-change): 2 records " \
           "dropped ('q7', 'q8')" in table.read_text()


def test_assert_rag_quality_takes_allow_data_change(baseline: Path, tmp_path: Path) -> None:
    from rageval.api import evaluate
    from rageval.gate.assertion import assert_rag_quality

    run = evaluate(str(_write(tmp_path / "r.jsonl", _rows()[:6])), ["ndcg@3", "rouge1"])
    with pytest.raises(AssertionError, match="allow_data_change=True"):
        assert_rag_quality(run, baseline=baseline)
    assert_rag_quality(run, baseline=baseline, allow_data_change=True)


def test_where_a_judge_is_reached_is_not_its_configuration() -> None:
    from rageval.core.metric import ScoreOptions
    from rageval.core.registry import create
    from rageval.judge.llm.options import JudgeOptions

    def grading(url: str) -> str:
        options = ScoreOptions(judge=JudgeOptions(model="m", base_url=url))
        return create("judge:faithfulness", options).grading()

    here, there = grading("http://127.0.0.1:8011/v1"), grading("http://localhost:9/v1")
    assert here == there and "judge:m|" in here and "endpoint" not in here
    assert create("ndcg@3", ScoreOptions()).grading() == ""
