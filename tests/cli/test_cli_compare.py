"""`rageval compare`, `rageval agree` and `rageval report`, run in-process on scored runs."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rageval.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
CACHE = ROOT / "fixtures" / "demo" / "judge_cache.jsonl"
JUDGE = ["--judge-model", "smollm2-135m-instruct",
         "--cache", str(CACHE), "--offline"]
METRICS = ["-m", "ndcg@3", "-m", "rouge1", "-m", "bleu"]


def _score(records: Path, out: Path, *extra: str) -> Path:
    code = main(["score", str(records), *METRICS, *extra, "--no-progress", "--out", str(out)],
                stdout=io.StringIO())
    assert code == 0
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory,
         server: JudgeServer) -> tuple[Path, Path, Path]:
    """Run A: the demo; run B: the demo with longer answers on every other record, judged with
    another seed (the scripted judge's scores then differ: a second judge)."""
    root = tmp_path_factory.mktemp("runs")
    judge = ["--judge-model", "m", "--judge-base-url", server.base_url,
             "--cache", str(root / "cache.sqlite")]
    items = [json.loads(line) for line in DEMO.read_text().splitlines()]
    for i, item in enumerate(items):
        if i % 2 == 0 and item.get("answer"):
            item["answer"] += " It also says a few more things that no reference mentions."
    other = root / "b.jsonl"
    other.write_text("".join(json.dumps(item) + "\n" for item in items))
    a = _score(DEMO, root / "a", "-m", "judge:correctness", *judge)
    b = _score(other, root / "b", "-m", "judge:correctness", *judge, "--judge-seed", "7")
    return a, b, other


def test_compare_prints_the_table_and_writes_json_rows(runs, tmp_path: Path) -> None:
    a, b, _ = runs
    out = io.StringIO()
    target = tmp_path / "cmp.json"
    code = main(["compare", str(a), str(b), "--json", str(target), "--resamples", "500",
                 "--permutations", "500"], stdout=out)
    assert code == 0
    text = out.getvalue()
    assert f"{b} vs baseline {a}" in " ".join(text.split())
    rows = json.loads(target.read_text())
    assert isinstance(rows, list)
    by_metric = {row["metric"]: row for row in rows}
    assert {"ndcg@3", "rouge1", "bleu", "judge:correctness"} <= set(by_metric)
    ndcg = by_metric["ndcg@3"]  # retrieval did not change: an identical metric
    assert ndcg["delta"] == 0 and ndcg["ci95"] == [0, 0] and ndcg["p_value"] == 1
    assert by_metric["rouge1"]["delta"] < 0  # padding the answers lowers ROUGE-1 F
    assert by_metric["bleu"]["aggregate"] == "corpus"


def test_compare_identical_runs(runs, tmp_path: Path) -> None:
    a, _, _ = runs
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    target = tmp_path / "same.json"
    assert main(["compare", str(copy), "--baseline", str(a), "--json", str(target),
                 "--components"], stdout=io.StringIO()) == 0
    rows = json.loads(target.read_text())
    assert rows and all(r["baseline"] == str(a) and r["system"] == str(copy) for r in rows)
    for row in rows:
        if row["n"]:
            assert row["delta"] == 0 and row["ci95"] == [0, 0] and row["p_value"] == 1, row


def test_compare_needs_two_runs(runs, capsys) -> None:
    a, _, _ = runs
    assert main(["compare", str(a)]) == 2
    assert "at least two runs" in capsys.readouterr().err


def test_compare_mismatched_ids_then_intersect(runs, tmp_path: Path, capsys) -> None:
    a, _, _ = runs
    items = [json.loads(line) for line in DEMO.read_text().splitlines()][:5]
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps(item) + "\n" for item in items))
    c = _score(short, tmp_path / "c")
    assert main(["compare", str(a), str(c)]) == 2
    assert "lacks 3 ids ('q6', 'q7', 'q8')" in capsys.readouterr().err
    out = io.StringIO()
    assert main(["compare", str(a), str(c), "--intersect"], stdout=out) == 0
    assert "dropped" in out.getvalue()


def test_agree_two_runs_and_json(runs, tmp_path: Path) -> None:
    a, b, _ = runs
    out = io.StringIO()
    target = tmp_path / "agree.json"
    assert main(["agree", str(a), str(b), "--json", str(target)], stdout=out) == 0
    data = json.loads(target.read_text())
    row = next(r for r in data["rows"] if r["metric_a"] == "judge:correctness")
    assert row["n"] == 8 and 0 <= row["exact"] <= 1
    assert "judge:correctness" in out.getvalue()


def test_agree_with_human_labels(tmp_path: Path) -> None:
    items = [json.loads(line) for line in DEMO.read_text().splitlines()]
    for i, item in enumerate(items):
        item["human"] = {"correctness": 1 + i % 5}
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(item) + "\n" for item in items))
    run = tmp_path / "run"
    assert main(["score", str(labelled), "-m", "judge:correctness", *JUDGE, "--no-progress",
                 "--out", str(run)], stdout=io.StringIO()) == 0
    out = io.StringIO()
    target = tmp_path / "h.json"
    assert main(["agree", str(run), "--human", "human", "--json", str(target)], stdout=out) == 0
    rows = json.loads(target.read_text())["rows"]
    assert any(r["metric_a"] == "judge:correctness" and r["n"] == 8 for r in rows)


def test_agree_with_a_labels_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["score", str(DEMO), "-m", "judge:correctness", *JUDGE, "--no-progress",
                 "--out", str(run)], stdout=io.StringIO()) == 0
    ids = [json.loads(line)["id"] for line in DEMO.read_text().splitlines()]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(
        json.dumps({"id": rid, "metric": "correctness", "label": 1 + i % 5, "annotator": who,
                    "time": "2026-11-29T08:00:00Z"}) + "\n"
        for i, rid in enumerate(ids) for who in ("ana", "bo")), encoding="utf-8")
    out = io.StringIO()
    target = tmp_path / "h.json"
    assert main(["agree", str(run), "--human-labels", str(labels), "--json", str(target)],
                stdout=out) == 0
    report = json.loads(target.read_text())
    assert any(r["metric_a"] == "judge:correctness" and r["n"] == len(ids)
               for r in report["rows"])
    assert report["raters"][-1] == {"label": "human", "source": str(labels),
                                    "labels_file": True}
    assert "labels file" in " ".join(out.getvalue().split())


def test_agree_needs_something_to_compare_with(runs, capsys) -> None:
    a, _, _ = runs
    assert main(["agree", str(a)]) == 2
    assert "--human" in capsys.readouterr().err


def test_report_writes_one_self_contained_page(runs, tmp_path: Path) -> None:
    a, b, _ = runs
    target = tmp_path / "report.html"
    out = io.StringIO()
    assert main(["report", str(a), str(b), "-o", str(target), "--resamples", "200",
                 "--permutations", "200", "--title", "A vs B"], stdout=out) == 0
    page = target.read_text()
    assert f"wrote {target}" in out.getvalue()
    assert "<title>A vs B</title>" in page and 'id="comparison-table"' in page
    assert 'id="records-table"' in page and 'id="plot-forest"' in page
    # Nothing fetched: no attribute or style points at a URL (signatures name the judge's
    # endpoint as text, which fetches nothing).
    fetching = (r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//"""
                r"""|url\(\s*["']?\s*(?:https?:)?//""")
    assert not re.search(fetching, page, re.IGNORECASE)
    assert "<script src" not in page and "<link" not in page


def test_report_of_one_run_has_no_comparison(runs, tmp_path: Path) -> None:
    a, _, _ = runs
    target = tmp_path / "one.html"
    assert main(["report", str(a), "-o", str(target)], stdout=io.StringIO()) == 0
    page = target.read_text()
    assert 'id="summary-0"' in page and 'id="comparison-table"' not in page


def test_report_missing_run_dir_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html")]) == 2
    assert "nope" in capsys.readouterr().err


def test_agree_with_a_labels_file_names_an_off_scale_line_and_counts_other_ids(
        tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(["score", str(DEMO), "-m", "judge:correctness", *JUDGE, "--no-progress",
                 "--out", str(run)], stdout=io.StringIO()) == 0
    ids = [json.loads(line)["id"] for line in DEMO.read_text().splitlines()]
    rows = [{"id": rid, "metric": "correctness", "label": 3, "annotator": "ana",
             "time": "2026-11-29T08:00:00Z"} for rid in [*ids, "not-in-the-run"]]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = io.StringIO()
    assert main(["agree", str(run), "--human-labels", str(labels)], stdout=out) == 0
    assert "left out 1 label of 1 record the compared runs do not have" in " ".join(
        out.getvalue().split())
    rows[1]["label"] = 9
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    capsys.readouterr()
    assert main(["agree", str(run), "--human-labels", str(labels)]) == 2
    err = capsys.readouterr().err
    assert f"{labels}, line 2" in err and "label" in err and "Traceback" not in err
