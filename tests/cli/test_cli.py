"""The `rageval` command, run in-process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_score_writes_contract_and_table(tmp_path: Path, capsys) -> None:
    code, out, err = run(["score", str(DEMO), "-m", "ndcg@3", "-m", "mrr", "--out",
                          str(tmp_path), "--no-progress"], capsys)
    assert code == 0, err
    assert "ndcg@3" in out and "mrr" in out and "signature" in out
    assert "unscored" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["metrics"]) == {"ndcg@3", "mrr"}
    assert summary["manifest"]["records"]["source"] == str(DEMO)
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 8


def test_score_with_qrels(tmp_path: Path, capsys) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"id": "q1", "contexts": ["a", "b"]}) + "\n")
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 2 1\n")
    code, out, err = run(["score", str(records), "-m", "mrr", "--qrels", str(qrels)], capsys)
    assert code == 0, err
    assert "0.5000" in out


def test_unknown_metric_exit_2(capsys) -> None:
    code, _, err = run(["score", str(DEMO), "-m", "ndgc@10"], capsys)
    assert code == 2
    assert "did you mean 'ndcg'" in err


def test_bad_records_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n{"id": \n')
    code, _, err = run(["score", str(bad), "-m", "mrr"], capsys)
    assert code == 2
    assert str(bad) in err and "line 2" in err


def test_missing_metric_argument_exit_2(capsys) -> None:
    code, _, err = run(["score", str(DEMO)], capsys)
    assert code == 2 and "-m" in err


def test_metrics_lists_everything(capsys) -> None:
    code, out, _ = run(["metrics"], capsys)
    assert code == 0
    for name in ("ndcg", "mean_rank", "err", "auc", "bpref", "gmax"):
        assert name in out


def test_trec_eval_subcommand(capsys) -> None:
    from trec_eval_paths import TEST_DIR as data
    from trec_eval_paths import missing

    if not data.is_dir():
        pytest.skip(missing("trec_eval 10.0 test data", data))
    code, out, err = run(["trec-eval", str(data / "qrels.test"), str(data / "results.test")],
                         capsys)
    assert code == 0, err
    assert out == (data / "out.test").read_text()


def test_no_command_prints_help(capsys) -> None:
    code, out, _ = run([], capsys)
    assert code == 2 and "score" in out


def test_fuse_writes_a_trec_run(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.run").write_text("1 Q0 a 1 3.0 x\n1 Q0 b 2 2.0 x\n1 Q0 c 3 1.0 x\n")
    (tmp_path / "b.run").write_text("1 Q0 c 1 5.0 y\n1 Q0 a 2 4.0 y\n")
    code, out, err = run(["fuse", str(tmp_path / "a.run"), str(tmp_path / "b.run")], capsys)
    assert code == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert [(q, d, r, tag) for q, _, d, r, _, tag in lines] == [
        ("1", "a", "1", "rrf"), ("1", "c", "2", "rrf"), ("1", "b", "3", "rrf")]
    assert float(lines[0][4]) == 1 / 61 + 1 / 62  # written so that it reads back exactly


def test_fuse_needs_two_runs(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.run").write_text("1 Q0 a 1 3.0 x\n")
    code, _, err = run(["fuse", str(tmp_path / "a.run")], capsys)
    assert code == 2 and "at least two" in err


def test_score_bertscore_with_embedding_cache(tmp_path: Path, capsys, monkeypatch) -> None:
    from rageval.generation import bertscore

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # An earlier test in this process may hold the demo's embeddings in memory, and a memory
    # hit never reaches the disk cache.
    bertscore.clear_memory_cache()
    cache = tmp_path / "emb"
    argv = ["score", str(DEMO), "-m", "bertscore", "--embedding-cache", str(cache),
            "--out", str(tmp_path / "out"), "--no-progress"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "bertscore" in out
    assert any(cache.rglob("*")), "embeddings were not written to --embedding-cache"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert 0.0 < summary["metrics"]["bertscore"]["value"] <= 1.0
    assert "bertscore.precision" in summary["metrics"]


def test_unwritable_out_fails_before_scoring(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, _, err = run(["score", str(DEMO), "-m", "mrr", "--out", str(blocker)], capsys)
    assert code == 2 and "cannot write the results there" in err and "is not a directory" in err


def test_fuse_rejects_duplicate_documents(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.run").write_text("1 Q0 d1 1 3.0 x\n1 Q0 d2 2 2.0 x\n1 Q0 d1 3 1.0 x\n")
    (tmp_path / "b.run").write_text("1 Q0 d1 1 5.0 y\n")
    code, _, err = run(["fuse", str(tmp_path / "a.run"), str(tmp_path / "b.run")], capsys)
    assert code == 2 and "more than once" in err and "a.run" in err
