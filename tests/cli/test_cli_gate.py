"""The gate on the command line: thresholds and a baseline checked before scoring, a table of
checks after it, and exit status 3 when one fails."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"
BASE = ["score", str(DEMO), "-m", "ndcg@3", "-m", "rouge1", "--no-progress", "--bootstrap", "50"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_passing_thresholds_exit_0_with_a_table(capsys) -> None:
    code, out, err = run([*BASE, "--fail-under", "ndcg@3=0.5", "--fail-over", "rouge1=0.9"],
                         capsys)
    assert code == 0, err
    assert "gate: passed" in out and ">= 0.5 (mean)" in out and "<= 0.9 (mean)" in out


def test_failing_threshold_exit_3_names_the_metric(tmp_path: Path, capsys) -> None:
    code, out, _ = run([*BASE, "--fail-under", "rouge1=0.9", "--out", str(tmp_path)], capsys)
    assert code == 3
    assert "FAIL" in out and "rouge1" in out
    assert (tmp_path / "summary.json").is_file()  # the run is written before the gate says no


def test_gate_on_the_ci_bound(capsys) -> None:
    # ndcg@3's mean is 0.7984 with a CI reaching below 0.7: passes on the mean, not on the bound.
    code, _, _ = run([*BASE, "--fail-under", "ndcg@3=0.7"], capsys)
    assert code == 0
    code, out, _ = run([*BASE, "--fail-under", "ndcg@3=0.7", "--gate-on", "ci"], capsys)
    assert code == 3 and "CI lower bound" in out


@pytest.mark.parametrize(("flags", "message"), [
    (["--fail-under", "ndcg@10=0.4"], "did you mean 'ndcg@3'"),
    (["--fail-under", "ndcg@3"], "ndcg@3"),
    (["--max-drop", "0.02"], "--baseline"),
    (["--baseline", "nowhere"], "not a run directory"),
])
def test_bad_gate_options_exit_2_before_scoring(flags: list[str], message: str, tmp_path: Path,
                                                capsys) -> None:
    code, out, err = run([*BASE, *flags, "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and message in err
    assert out == "" and not (tmp_path / "o").exists()


def _write_run(tmp_path: Path, name: str, answers: dict[str, str]) -> Path:
    lines = []
    for line in DEMO.read_text().splitlines():
        record = json.loads(line)
        record["answer"] = answers.get(record["id"], record["answer"])
        lines.append(json.dumps(record))
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_baseline_regression_fails_on_a_real_drop(tmp_path: Path, capsys) -> None:
    base = ["-m", "rouge1", "--no-progress", "--bootstrap", "20"]
    code, _, err = run(["score", str(DEMO), *base, "--out", str(tmp_path / "main")], capsys)
    assert code == 0, err
    same = ["score", str(DEMO), *base, "--baseline", str(tmp_path / "main"), "--max-drop", "0.02"]
    code, out, _ = run(same, capsys)
    assert code == 0 and "drop <= 0.02 vs baseline" in out
    ids = [json.loads(line)["id"] for line in DEMO.read_text().splitlines()]
    worse = _write_run(tmp_path, "worse", dict.fromkeys(ids, "nothing useful here at all"))
    code, out, _ = run(["score", str(worse), *base, "--baseline", str(tmp_path / "main"),
                        "--max-drop", "0.02"], capsys)
    assert code == 3 and "FAIL" in out


def test_eval_file_gate(tmp_path: Path, capsys) -> None:
    shutil.copy(DEMO, tmp_path / "records.jsonl")
    path = tmp_path / "eval.toml"
    path.write_text('metrics = ["ndcg@3", "rouge1"]\n[inputs]\nrecords = "records.jsonl"\n'
                    '[gate]\nfail_under = {"rouge1" = 0.9}\non = "mean"\n')
    code, out, _ = run(["run", str(path), "--no-progress"], capsys)
    assert code == 3 and "rouge1" in out
    code, _, _ = run(["run", str(path), "--no-progress", "--fail-under", "rouge1=0.1"], capsys)
    assert code == 0  # the flag replaces the file's thresholds of that side
