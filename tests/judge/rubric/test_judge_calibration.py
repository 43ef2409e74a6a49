"""Judge means calibrated by human labels (--human FIELD): the summary's PPI++ mean, end to end
against the loopback judge server, equals ppi_py's on the run's own scores and labels."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import TEST_KEY_ENV, JudgeServer, keyed_options

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import InputError, UsageError
from rageval.core.results import Results
from rageval.judge.llm.options import JudgeOptions

METRICS = ["judge:faithfulness", "judge:correctness"]



def write_records(path: Path, labelled: int, n: int = 60, label: object = None) -> Path:
    """``n`` records; the first ``labelled`` carry human labels for both rubrics."""
    rows = []
    for i in range(n):
        row = {"id": f"q{i}", "query": f"What is fact {i}?",
               "contexts": [f"Fact {i} is that the sky is blue."],
               "answer": f"Fact {i}: the sky is blue.", "reference": "The sky is blue."}
        if i < labelled:
            row["human"] = label if label is not None else {"faithfulness": 1 + i % 5,
                                                            "judge:correctness": 5 - i % 3}
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def judge(keyed_judge: JudgeServer, cache: Path) -> JudgeOptions:
    return keyed_options(keyed_judge, cache)


def expected(results: Results, metric: str, key: str,
             lam: float | None) -> tuple[float, float, float]:
    """ppi_py's PPI (``lam`` 1) or PPI++ (None) mean and interval from the run's per-record
    scores and the labels."""
    ppi_py = pytest.importorskip("ppi_py")
    records = {json.loads(line)["id"]: json.loads(line) for line in
               Path(results.manifest["records"]["source"]).read_text().splitlines()}
    y, f, f_unlabelled = [], [], []
    for record in results.records:
        label = (records[record.id].get("human") or {}).get(key)
        (f if label is not None else f_unlabelled).append(record.scores[metric])
        if label is not None:
            y.append(float(label))
    args = (np.array(y), np.array(f), np.array(f_unlabelled))
    low, high = ppi_py.ppi_mean_ci(*args, alpha=0.05, lam=lam)
    return (float(np.squeeze(ppi_py.ppi_mean_pointestimate(*args, lam=lam))),
            float(np.squeeze(low)), float(np.squeeze(high)))


@pytest.mark.parity
def test_the_calibrated_mean_is_ppi_py_s_on_the_run_s_scores(tmp_path: Path,
                                                            keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", labelled=24)
    results = evaluate(records, METRICS, judge=judge(keyed_judge, tmp_path / "c.sqlite"),
                       human="human", bootstrap=50)
    for metric, key in (("judge:faithfulness", "faithfulness"),
                        ("judge:correctness", "judge:correctness")):
        c = results.summary[metric].calibrated
        assert c is not None and c.mean is not None and c.ci95 is not None
        assert c.tuned_mean is not None and c.tuned_ci95 is not None
        assert (c.labelled, c.unlabelled) == (24, 36)
        mean, low, high = expected(results, metric, key, lam=1)
        assert (c.mean, *c.ci95) == pytest.approx((mean, low, high), abs=1e-9)
        mean, low, high = expected(results, metric, key, lam=None)
        assert (c.tuned_mean, *c.tuned_ci95) == pytest.approx((mean, low, high), abs=1e-9)
        assert c.human_mean == pytest.approx(np.mean([
            1 + i % 5 if key == "faithfulness" else 5 - i % 3 for i in range(24)]))
    assert results.manifest["human_labels"] == {"field": "human", "records": 24,
                                                "metrics": METRICS}
    # Read window by window, the run gives the same numbers.
    streamed = evaluate(records, METRICS, judge=judge(keyed_judge, tmp_path / "c.sqlite"),
                        human="human", bootstrap=50, window=7)
    assert ({m: s.calibrated for m, s in streamed.summary.items()}
            == {m: s.calibrated for m, s in results.summary.items()})


def test_fewer_than_ten_labels_is_a_refusal_not_a_number(tmp_path: Path,
                                                        keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", labelled=9)
    results = evaluate(records, METRICS, judge=judge(keyed_judge, tmp_path / "c.sqlite"),
                       human="human", bootstrap=50)
    c = results.summary["judge:faithfulness"].calibrated
    assert c is not None and c.mean is None and c.human_mean is None
    assert c.refused == "9 scored records carry a human label; calibration needs at least 10"
    assert results.summary_json()["metrics"]["judge:faithfulness"]["calibrated"] == {
        "labelled": 9, "unlabelled": 51, "refused": c.refused}


def test_every_record_labelled_gives_the_labels_mean(tmp_path: Path,
                                                     keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", labelled=12, n=12)
    results = evaluate(records, METRICS, judge=judge(keyed_judge, tmp_path / "c.sqlite"),
                       human="human", bootstrap=50)
    c = results.summary["judge:faithfulness"].calibrated
    assert c is not None and c.mean is None and c.refused is not None
    assert c.human_mean == pytest.approx(np.mean([1 + i % 5 for i in range(12)]))


@pytest.mark.parametrize(("label", "error", "says"), [
    ({"faithfulness": 7}, InputError, "human label 7 for judge:faithfulness is outside its "
                                      "scale 1-5"),
    ({"faithfulness": "good"}, InputError, "human label must be a finite number, found 'good'"),
    (4, UsageError, "holds a single number, but 2 judge metrics are scored"),
])
def test_bad_labels_are_errors_naming_the_record_and_field(tmp_path: Path, keyed_judge: JudgeServer,
                                                           label: object, error: type,
                                                           says: str) -> None:
    records = write_records(tmp_path / "r.jsonl", labelled=12, label=label)
    with pytest.raises(error) as caught:
        evaluate(records, METRICS, judge=judge(keyed_judge, tmp_path / "c.sqlite"), human="human",
                 bootstrap=50)
    assert says in str(caught.value) and "record 'q0'" in str(caught.value)
    if error is InputError:
        assert caught.value.path == str(records)
        assert caught.value.line == 1  # record q0, the file's first line
        assert caught.value.field.startswith("human.faithfulness")
    assert keyed_judge.requests == 0  # found before anything was asked


def test_a_field_no_record_has_and_a_run_without_judge_metrics_are_usage_errors(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", labelled=0)
    with pytest.raises(UsageError, match=r"no record of .* has a field 'human'"):
        evaluate(records, METRICS, judge=judge(keyed_judge, tmp_path / "c.sqlite"), human="human",
                 bootstrap=50)
    with pytest.raises(UsageError, match="calibrate metrics scored on a fixed scale"):
        evaluate(records, ["rouge1"], human="human", bootstrap=50)
    assert keyed_judge.requests == 0


def test_the_command_line_prints_and_writes_the_calibrated_mean(tmp_path: Path,
                                                                keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl", labelled=20)
    out = io.StringIO()
    argv = ["score", str(records), "-m", "judge:faithfulness", "--judge-model", "judge-model",
            "--judge-base-url", keyed_judge.base_url, "--judge-api-key-env", TEST_KEY_ENV,
            "--cache", str(tmp_path / "c.sqlite"), "--human", "human", "--bootstrap", "50",
            "--no-progress", "--out", str(tmp_path / "run")]
    assert main(argv, stdout=out) == 0
    text = " ".join(out.getvalue().split())
    assert "judge:faithfulness calibrated by 20 human labels (PPI, 40 unlabelled):" in text
    assert "; PPI++ " in text
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    calibrated = summary["metrics"]["judge:faithfulness"]["calibrated"]
    assert calibrated["method"] == "ppi" and calibrated["labelled"] == 20
    assert set(calibrated) == {"method", "mean", "ci95", "ppi++", "human", "labelled",
                               "unlabelled"}
    assert set(calibrated["ppi++"]) == {"mean", "ci95", "lam"}
    loaded = Results.load(tmp_path / "run")
    assert loaded.summary["judge:faithfulness"].calibrated is not None
    assert loaded.summary["judge:faithfulness"].calibrated.mean == calibrated["mean"]
