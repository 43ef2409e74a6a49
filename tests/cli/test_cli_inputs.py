"""Inputs in other formats on the command line and in evaluation files: ragas-style columns with
field maps, TREC RAG runs, TREC runs joined with a BEIR dataset."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from trec_inputs import beir_dir, run_file

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[2]
TREC_RAG = ROOT / "tests" / "data" / "inputs" / "trec_rag_2024_sample.jsonl"
RAGAS = [
    {"question": "What is the capital of France?", "answer": "Paris.",
     "contexts": ["Paris is the capital of France.", "Lyon is a city."],
     "ground_truth": "Paris is the capital."},
    {"question": "Who wrote Hamlet?", "answer": "Shakespeare wrote it.",
     "contexts": ["Hamlet is a play by Shakespeare."], "ground_truth": "William Shakespeare"},
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ragas_columns_score_and_report(tmp_path: Path, capsys) -> None:
    path = _jsonl(tmp_path / "ragas.jsonl", RAGAS)
    code, out, err = run(["score", str(path), "--input-format", "ragas", "-m", "rouge1",
                          "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert code == 0, err
    assert "(2 records)" in out
    manifest = json.loads((tmp_path / "o" / "summary.json").read_text())["manifest"]
    assert manifest["records"]["inputs"]["kind"] == "ragas"
    code, _, err = run(["report", str(tmp_path / "o"), "-o", str(tmp_path / "r.html")], capsys)
    assert code == 0, err
    assert "What is the capital of France?" in (tmp_path / "r.html").read_text()


def test_field_map_reads_other_names(tmp_path: Path, capsys) -> None:
    rows = [{"id": f"r{i}", "q": row["question"], "gen": row["answer"],
             "gold": row["ground_truth"]} for i, row in enumerate(RAGAS)]
    path = _jsonl(tmp_path / "mine.jsonl", rows)
    code, _, err = run(["score", str(path), "-m", "rouge1", "--no-progress"], capsys)
    assert code == 2 and "needs 'answer'" in err
    code, out, err = run(["score", str(path), "-m", "rouge1", "--map", "answer=gen",
                          "--map", "reference=gold", "--map", "query=q", "--no-progress"], capsys)
    assert code == 0, err
    assert "(2 records)" in out
    code, _, err = run(["score", str(path), "-m", "rouge1", "--map", "anwser=gen"], capsys)
    assert code == 2 and "did you mean 'answer'" in err


def test_trec_rag_run_with_qrels(tmp_path: Path, capsys) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("2024-105741 0 msmarco_v2.1_doc_10_1#1_2 2\n", encoding="utf-8")
    code, _, err = run(["score", str(TREC_RAG), "--input-format", "trec-rag", "-m", "mrr",
                        "-m", "rouge1", "--qrels", str(qrels), "--out", str(tmp_path / "o"),
                        "--no-progress"], capsys)
    assert code == 2 and "needs 'reference'" in err  # a TREC RAG run has no references
    code, _, err = run(["score", str(TREC_RAG), "--input-format", "trec-rag", "-m", "mrr",
                        "--qrels", str(qrels), "--out", str(tmp_path / "o"), "--no-progress"],
                       capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "o" / "records.jsonl").open()]
    assert rows[0]["id"] == "2024-105741" and rows[0]["scores"]["mrr"] == 0.5


def test_beir_run_joined(tmp_path: Path, capsys) -> None:
    beir = beir_dir(tmp_path / "beir")
    run_path = run_file(tmp_path)
    code, _, err = run(["score", "--run", run_path, "--beir", str(beir), "-m", "mrr",
                          "-m", "recall@3", "--out", str(tmp_path / "o"), "--no-progress"],
                         capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert "|judgments:qrels|" in summary["metrics"]["mrr"]["signature"]
    assert summary["manifest"]["records"]["inputs"]["beir"] == str(beir)


@pytest.mark.parametrize(("argv", "message"), [
    (["score", "-m", "mrr"], "no records"),
    (["score", "x.jsonl", "--run", "r.trec", "-m", "mrr"], "not both"),
    (["score", "x.jsonl", "--queries", "q.tsv", "-m", "mrr"], "--queries goes with --run"),
    (["score", "--run", "r.trec", "--map", "query=q", "-m", "mrr"], "--map"),
    (["score", "--run", "r.trec", "--beir", "b", "--qrels", "q", "-m", "mrr"], "--beir DIR"),
    (["score", "--run", "r.trec", "--depth", "0", "-m", "mrr"], "--depth"),
])
def test_input_option_errors_exit_2(argv: list[str], message: str, capsys) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2 and message in err


def test_eval_file_inputs_table(tmp_path: Path, capsys) -> None:
    _jsonl(tmp_path / "ragas.jsonl", RAGAS)
    path = tmp_path / "eval.toml"
    path.write_text('metrics = ["rouge1", "bleu"]\n[inputs]\nrecords = "ragas.jsonl"\n'
                    'kind = "ragas"\nmap = {reference = "ground_truth"}\n', encoding="utf-8")
    code, out, err = run(["run", str(path), "--no-progress"], capsys)
    assert code == 0, err
    assert "(2 records)" in out


def test_evaluate_with_a_spec_keeps_its_own_line_limit(tmp_path: Path) -> None:
    import rageval
    from rageval.core.errors import InputError

    path = _jsonl(tmp_path / "ragas.jsonl", RAGAS)
    spec = rageval.InputSpec(records=str(path), kind="ragas", max_line_bytes=100)
    with pytest.raises(InputError, match="longer than"):
        rageval.evaluate(spec, ["rouge1"], bootstrap=10)
    wide = rageval.InputSpec(records=str(path), kind="ragas")
    results = rageval.evaluate(wide, ["rouge1"], bootstrap=10, max_line_bytes=10_000)
    assert results.manifest["records"]["inputs"]["max_line_bytes"] == 10_000


def test_plain_spec_is_recorded_in_the_manifest(tmp_path: Path) -> None:
    import rageval

    demo = ROOT / "fixtures" / "demo" / "records.jsonl"
    results = rageval.evaluate(rageval.InputSpec(records=str(demo)), ["mrr"], bootstrap=10)
    assert results.manifest["records"]["source"] == str(demo)
    assert results.manifest["records"]["inputs"]["kind"] == "records"


def test_arrow_file_needs_no_format_flag(tmp_path: Path, capsys) -> None:
    import polars as pl

    frame = pl.DataFrame({"id": ["a", "b"], "answer": ["x y", "z"], "reference": ["x", "z"]})
    frame.write_ipc_stream(tmp_path / "recs.arrow")
    code, out, err = run(["score", str(tmp_path / "recs.arrow"), "-m", "rouge1",
                          "--no-progress"], capsys)
    assert code == 0, err
    assert "(2 records)" in out


def test_assert_rag_quality_needs_no_pytest() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['pytest'] = None\n"
            "import rageval\n"
            "from rageval.core.records import records_from_dicts\n"
            "r = rageval.evaluate(records_from_dicts([{'id': 'a', 'answer': 'x', "
            "'reference': 'x'}]), ['rouge1'], bootstrap=5)\n"
            "rageval.assert_rag_quality(r, {'rouge1': 0.5})\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr
