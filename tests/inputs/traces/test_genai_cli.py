"""``rageval score --input-format otel-genai`` in process: documents without content give the
retrieval metrics and leave the metrics reading the contexts' text unscored with the reason."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from genai_spans import IDS_ONLY, genai_traces, rag_trace, span_id, write
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


def judged(tmp_path: Path, spans: Path, metric: str, *more: str,
           capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], list[str]]:
    """The result rows of scoring ``spans`` with a judge metric, and the judge's requests."""
    out = tmp_path / "run"
    with JudgeServer() as judge:
        code, err = run(["score", str(spans), "--input-format", "otel-genai", "-m", metric,
                         *more, "--judge-model", "m", "--judge-base-url", judge.base_url,
                         "--judge-api-key-env", TEST_KEY_ENV, "--cache",
                         str(tmp_path / "cache.sqlite"), "--no-progress", "--out", str(out)],
                        capsys)
        asked = [json.dumps(body) for body in judge.bodies]
    assert code in (0, 1), err  # 1: a metric that scored no record at all
    return {row.id: row for row in Results.load(out).records}, asked


REASON = ("the contexts have no text: 2 of 2 retrieved documents carry no content "
          "(gen_ai.retrieval.documents recorded ids only)")


def test_claims_against_textless_contexts_ask_the_judge_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans = write(tmp_path / "s.jsonl", rag_trace("t2", "Where is Oslo?", IDS_ONLY,
                                                  "Oslo is in Norway."))
    rows, asked = judged(tmp_path, spans, "claims:faithfulness", capsys=capsys)
    (row,) = rows.values()
    assert row.errors["claims:faithfulness"] == REASON
    assert asked == []  # not even the claim extraction


@pytest.mark.parametrize(("metric", "reason"), [
    ("citations:recall", REASON), ("nuggets:vital(source=contexts)", REASON + " (source=contexts)"),
])
def test_citations_and_nuggets_from_textless_contexts_are_unscored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, reason: str) -> None:
    _, references = genai_traces(tmp_path)  # q2's reference and judgments
    trace = rag_trace("t2", "Where is Paris?", IDS_ONLY, "In France [1].")
    trace[0].attributes["metadata"] = json.dumps({"qid": "q2"})
    rows, asked = judged(tmp_path, write(tmp_path / "s.jsonl", trace), metric, "--map",
                         "id=metadata.qid", "--references", str(references), capsys=capsys)
    assert rows["q2"].errors[metric] == reason
    assert asked == []


def test_qrels_join_genai_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans, _ = genai_traces(tmp_path)
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q1 0 d2 1\nq2 0 d1 1\n")
    out = tmp_path / "run"
    code, err = run(["score", str(spans), "--input-format", "otel-genai", "--map",
                     "id=metadata.qid", "--qrels", str(qrels), "-m", "ndcg@3",
                     "--no-progress", "--out", str(out)], capsys)
    assert code == 0, err
    rows = {row.id: row.scores["ndcg@3"] for row in Results.load(out).records}
    assert rows["q2"] == 1.0 and 0 < rows["q1"] < 1.0  # d2 ranked second in q1


def test_phoenix_annotations_find_the_spans_of_genai_records(tmp_path: Path) -> None:
    from rageval.inputs import InputSpec
    from rageval.phoenix.annotations import record_spans

    spans, _ = genai_traces(tmp_path)
    spec = InputSpec(records=str(spans), kind="otel-genai", field_map=(("id", "metadata.qid"),))
    assert record_spans(spec) == {"q1": span_id("t1-root"), "q2": span_id("t2-root")}
