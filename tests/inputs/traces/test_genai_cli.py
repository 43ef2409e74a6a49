"""``rageval score --input-format otel-genai`` in process: documents without content give the
retrieval metrics and leave the metrics reading the contexts' text unscored with the reason."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from genai_spans import genai_traces
from judge_server import TEST_KEY_ENV, JudgeServer

from rageval.cli import main
from rageval.core.results import Results


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv, stdout=io.StringIO())
    return code, capsys.readouterr().err


def test_ids_only_give_retrieval_scores_and_leave_context_text_metrics_unscored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans, references = genai_traces(tmp_path)
    out = tmp_path / "run"
    with JudgeServer() as judge:
        code, err = run(["score", str(spans), "--input-format", "otel-genai", "--map",
                         "id=metadata.qid", "--references", str(references), "-m", "ndcg@3",
                         "-m", "judge:faithfulness", "-m", "rouge1", "--judge-model", "m",
                         "--judge-base-url", judge.base_url, "--judge-api-key-env",
                         TEST_KEY_ENV, "--cache", str(tmp_path / "cache.sqlite"),
                         "--no-progress", "--out", str(out)], capsys)
        asked = [json.dumps(body) for body in judge.bodies]
    assert code == 0, err
    rows = {row.id: row for row in Results.load(out).records}
    assert rows["q1"].scores["ndcg@3"] == rows["q2"].scores["ndcg@3"] == 1.0
    assert rows["q2"].scores["rouge1"] == rows["q1"].scores["rouge1"]
    assert not math.isnan(rows["q1"].scores["judge:faithfulness"])
    value = rows["q2"].scores["judge:faithfulness"]
    assert value is None or math.isnan(value)
    reason = rows["q2"].errors["judge:faithfulness"]
    assert reason == ("the contexts have no text: 2 of 2 retrieved documents carry no content "
                      "(gen_ai.retrieval.documents recorded ids only)")
    # The judge was shown the passages of q1 alone: never an empty one.
    assert asked and all("Oslo is in Norway." in body for body in asked)


def test_a_phoenix_source_stays_openinference(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["score", "--phoenix", "http://localhost:1", "--project", "p",
                     "--input-format", "otel-genai", "-m", "ndcg@3"], capsys)
    assert code == 2 and "OpenInference" in err


def test_claims_are_checked_against_no_empty_passage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metric = "claims:faithfulness"
    spans, references = genai_traces(tmp_path)
    out = tmp_path / "run"
    with JudgeServer() as judge:
        code, err = run(["score", str(spans), "--input-format", "otel-genai", "--map",
                         "id=metadata.qid", "--references", str(references), "-m", metric,
                         "--judge-model", "m", "--judge-base-url", judge.base_url,
                         "--judge-api-key-env", TEST_KEY_ENV, "--cache",
                         str(tmp_path / "cache.sqlite"), "--no-progress", "--out", str(out)],
                        capsys)
    assert code == 0, err
    rows = {row.id: row for row in Results.load(out).records}
    assert rows["q2"].errors[metric].startswith("the contexts have no text:")
    assert rows["q1"].scores[metric] is not None and metric not in rows["q1"].errors


def test_an_eval_file_reads_genai_traces(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    spans, references = genai_traces(tmp_path)
    eval_file = tmp_path / "eval.toml"
    eval_file.write_text(f'metrics = ["ndcg@3"]\n[inputs]\nrecords = "{spans}"\n'
                         f'kind = "otel-genai"\nmap = {{id = "metadata.qid"}}\n'
                         f'references = "{references}"\ntrace_unit = "invoke_agent"\n'
                         f'[output]\ndir = "{tmp_path / "out"}"\n')
    code, err = run(["run", str(eval_file), "--no-progress"], capsys)
    assert code == 0, err
    rows = Results.load(tmp_path / "out").records
    assert sorted(row.id for row in rows) == ["q1", "q2"]
    assert all(row.scores["ndcg@3"] == 1.0 for row in rows)
