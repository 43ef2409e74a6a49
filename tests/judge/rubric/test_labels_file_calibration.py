"""Judge means calibrated by a labels file (--human-labels FILE, as rageval annotate writes it):
labels joined by record id and metric, averaged across annotators, PPI equal to ppi_py's under
uniform selection and the active-inference estimator computed by hand under active selection;
the annotators' counts and agreement in the manifest and on the terminal; errors naming the
labels file, the line and the id."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import TEST_KEY_ENV, JudgeServer, keyed_options

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.calibration import Calibration
from rageval.core.errors import InputError, UsageError
from rageval.core.results import Results
from rageval.judge.llm.options import JudgeOptions
from rageval.report.tables import labels_lines

METRIC = "judge:faithfulness"
N = 60


def write_records(path: Path, n: int = N) -> Path:
    rows = [json.dumps({"id": f"q{i}", "query": f"What is fact {i}?",
                        "contexts": [f"Fact {i} is that the sky is blue."],
                        "answer": f"Fact {i}: the sky is blue.",
                        "reference": "The sky is blue."}) for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def line(record_id: str, label: float | None, annotator: str = "ana", *,
         metric: str = METRIC, **extra: Any) -> dict[str, Any]:
    if extra.get("selection") == "active":  # the walk's seed, and the record's place in it
        extra = {"seed": 0, "position": int(record_id.lstrip("q")), **extra}
    return {"id": record_id, "metric": metric, "label": label, "annotator": annotator,
            "time": "2026-11-29T08:00:00Z", "shown_judge": False, **extra}


def write_labels(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in lines), encoding="utf-8")
    return path


def ana(i: int) -> int:
    return 1 + i % 5


def bo(i: int) -> int:
    return min(5, ana(i) + i % 2)


def uniform_lines() -> list[dict[str, Any]]:
    """ana labels q0..q23, bo q0..q11 (bo's label of q0 taken back by an undo: ana's alone
    stands), under the short name the label keys accept."""
    lines = [line(f"q{i}", ana(i), metric="faithfulness", selection="uniform")
             for i in range(24)]
    lines += [line(f"q{i}", bo(i), "bo", selection="uniform") for i in range(12)]
    lines.append(line("q0", None, "bo", undo=True, selection="uniform"))
    return lines


def judge(keyed_judge: JudgeServer, tmp_path: Path) -> JudgeOptions:
    return keyed_options(keyed_judge, tmp_path / "c.sqlite")


def averaged_uniform() -> dict[str, float]:
    out = {f"q{i}": float(ana(i)) for i in range(24)}
    out.update({f"q{i}": (ana(i) + bo(i)) / 2 for i in range(1, 12)})
    return out


@pytest.mark.parity
def test_uniform_labels_give_ppi_py_s_figures_and_the_annotators_agreement(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    ppi_py = pytest.importorskip("ppi_py")
    krippendorff = pytest.importorskip("krippendorff")
    metrics = pytest.importorskip("sklearn.metrics")
    records = write_records(tmp_path / "r.jsonl")
    labels = write_labels(tmp_path / "labels.jsonl", uniform_lines())
    results = evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path),
                       human_labels=labels, bootstrap=50)
    c = results.summary[METRIC].calibrated
    assert c is not None and c.method == "ppi" and (c.labelled, c.unlabelled) == (24, 36)
    averaged = averaged_uniform()
    y = np.array([averaged[r.id] for r in results.records if r.id in averaged])
    f = np.array([r.scores[METRIC] for r in results.records if r.id in averaged])
    f_rest = np.array([r.scores[METRIC] for r in results.records if r.id not in averaged])
    for lam, (mean, ci) in ((1, (c.mean, c.ci95)), (None, (c.tuned_mean, c.tuned_ci95))):
        low, high = ppi_py.ppi_mean_ci(y, f, f_rest, alpha=0.05, lam=lam)
        point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, f_rest, lam=lam)))
        assert (mean, *ci) == pytest.approx(
            (point, float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9)

    about = results.manifest["human_labels"]
    assert about["file"] == str(labels) and about["records"] == 24
    item = about["metrics"][METRIC]
    assert item["selection"] == "uniform" and item["labelled"] == 24
    assert item["annotators"] == {"ana": 24, "bo": 11}
    common = [f"q{i}" for i in range(1, 12)]
    expected_alpha = krippendorff.alpha(
        reliability_data=[[ana(i) for i in range(24)],
                          [bo(i) if 1 <= i < 12 else np.nan for i in range(24)]],
        level_of_measurement="interval")
    kappa = metrics.cohen_kappa_score([ana(int(i[1:])) for i in common],
                                      [bo(int(i[1:])) for i in common], weights="quadratic",
                                      labels=[1, 2, 3, 4, 5])
    agreement = item["agreement"]
    assert agreement["records"] == 11 and agreement["level"] == "interval"
    assert agreement["krippendorff_alpha"] == pytest.approx(expected_alpha, abs=1e-12)
    assert agreement["cohen_kappa_quadratic"] == pytest.approx(kappa, abs=1e-12)
    # Read window by window, the run gives the same numbers.
    streamed = evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path),
                        human_labels=labels, bootstrap=50, window=7)
    assert streamed.summary[METRIC].calibrated == c
    assert streamed.manifest["human_labels"] == about


def active_lines(results_scores: dict[str, float] | None = None,
                 ) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, float]]:
    """An active walk over q0..q39: every third record passed over, the others labelled by
    ana (and the first ten by bo too), each with its probability; q40.. outside the pool."""
    lines, chances, labels = [], {}, {}
    for i in range(40):
        pi = 0.2 + 0.02 * i
        chances[f"q{i}"] = pi
        if i % 3 == 0:
            lines.append(line(f"q{i}", None, passed=True, selection="active", probability=pi))
            continue
        lines.append(line(f"q{i}", ana(i), selection="active", probability=pi))
        labels[f"q{i}"] = float(ana(i))
        if i < 10:
            lines.append(line(f"q{i}", bo(i), "bo", selection="active", probability=pi))
            labels[f"q{i}"] = (ana(i) + bo(i)) / 2
    return lines, chances, labels


def test_active_labels_give_the_paper_s_estimator(tmp_path: Path,
                                                  keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl")
    lines, chances, labels = active_lines()
    path = write_labels(tmp_path / "labels.jsonl", lines)
    results = evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path),
                       human_labels=path, bootstrap=50)
    c = results.summary[METRIC].calibrated
    assert c is not None and c.method == "active"
    scores = {r.id: r.scores[METRIC] for r in results.records}
    terms = []
    for record_id, pi in chances.items():  # the pool: labelled or passed over
        f = scores[record_id]
        y = labels.get(record_id)
        terms.append(f + ((y - f) / pi if y is not None else 0.0))
    mean = sum(terms) / len(terms)
    se = float(np.std(terms)) / math.sqrt(len(terms))
    z = NormalDist().inv_cdf(0.975)
    assert (c.labelled, c.unlabelled) == (len(labels), len(chances) - len(labels))
    assert (c.mean, *c.ci95) == pytest.approx((mean, mean - z * se, mean + z * se), abs=1e-9)
    assert c.tuned_mean is None
    alone = [(labels[k] / pi if k in labels else 0.0) for k, pi in chances.items()]
    assert c.human_mean == pytest.approx(sum(alone) / len(alone), abs=1e-9)
    item = results.manifest["human_labels"]["metrics"][METRIC]
    assert item["selection"] == "active" and item["pool"] == 40
    assert item["annotators"] == {"ana": len(labels), "bo": 6}
    assert item["agreement"]["records"] == 6
    saved = results.summary_json()["metrics"][METRIC]["calibrated"]
    assert saved["method"] == "active" and "ppi++" not in saved
    assert Calibration.from_json(saved) == c  # read back from summary.json as written


def test_an_active_walk_is_calibrated_up_to_its_first_selected_record_without_a_label(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    lines, chances, labels = active_lines()
    # q31 (selected) labelled, then undone: the walk is complete up to position 31 only.
    lines.append(line("q31", None, undo=True, selection="active", probability=chances["q31"]))
    path = write_labels(tmp_path / "labels.jsonl", lines)
    results = evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                       judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50)
    c = results.summary[METRIC].calibrated
    pool = {k: pi for k, pi in chances.items() if int(k[1:]) < 31}
    scores = {r.id: r.scores[METRIC] for r in results.records}
    terms = [scores[k] + ((labels[k] - scores[k]) / pi if k in labels else 0.0)
             for k, pi in pool.items()]
    assert c is not None and (c.labelled, c.unlabelled) == (
        sum(k in labels for k in pool), sum(k not in labels for k in pool))
    assert c.mean == pytest.approx(sum(terms) / len(terms), abs=1e-9)
    item = results.manifest["human_labels"]["metrics"][METRIC]
    waiting = sum(1 for i in range(32, 40) if i % 3)  # ana's labels past q31 (bo's stop at q9)
    assert item["waiting"] == {"labels": waiting, "position": 31, "record": "q31"}
    assert item["pool"] == 31 and item["walked_to"] == 31
    text = "\n".join(labels_lines(results))
    assert "complete up to position 31; record 'q31' there, selected, has no label" in text


def test_a_pool_drawn_under_two_budgets_is_said_to_be_sound_only_once_complete(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    lines, _, _ = active_lines()
    lines = [{**x, "budget": 20 if int(x["id"][1:]) < 15 else 60} for x in lines]
    path = write_labels(tmp_path / "labels.jsonl", lines)
    results = evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                       judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50)
    assert results.manifest["human_labels"]["metrics"][METRIC]["budgets"] == [20.0, 60.0]
    assert ("drawn under 2 budgets (20, 60); its estimate is unbiased once the walk is "
            "labelled to its end") in "\n".join(labels_lines(results))


@pytest.mark.parametrize(("extra", "field"), [
    ({"seed": 5}, "seed"), ({"probability": 0.9}, "probability"), ({"position": 2}, "position")])
def test_an_active_walk_that_contradicts_itself_is_an_error(tmp_path: Path,
                                                           keyed_judge: JudgeServer,
                                                           extra: dict, field: str) -> None:
    lines, chances, _ = active_lines()
    lines.append(line("q4", 2, "cy", selection="active",
                      **{"probability": chances["q4"], **extra}))
    path = write_labels(tmp_path / "labels.jsonl", lines)
    with pytest.raises(InputError) as caught:
        evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                 judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50)
    assert (caught.value.path, caught.value.line, caught.value.field) == (
        str(path), len(lines), field)


def test_a_metric_labelled_under_both_selections_is_an_error(tmp_path: Path,
                                                            keyed_judge: JudgeServer) -> None:
    lines = [line("q1", 3, selection="uniform"), line("q2", 4, "bo", selection="active",
                                                        probability=0.5)]
    path = write_labels(tmp_path / "labels.jsonl", lines)
    with pytest.raises(InputError, match="both uniform and active selection") as caught:
        evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                 judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50)
    assert (caught.value.path, caught.value.line, caught.value.field) == (
        str(path), 2, "selection")
    assert keyed_judge.requests == 0


def test_a_label_of_an_unknown_record_is_an_error_naming_file_line_and_id(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    lines = [line(f"q{i}", ana(i)) for i in range(12)] + [line("q999", 3), line("q999", 4, "bo")]
    path = write_labels(tmp_path / "labels.jsonl", lines)
    records = write_records(tmp_path / "r.jsonl")
    with pytest.raises(InputError) as caught:
        evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path), human_labels=path,
                 bootstrap=50)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), 13, "id")
    assert "'q999'" in str(error) and "(and 1 more)" in str(error)
    assert "--allow-unknown-labels" in str(error)
    assert keyed_judge.requests == 0  # found before anything was asked
    results = evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path),
                       human_labels=path, allow_unknown_labels=True, bootstrap=50)
    assert results.manifest["human_labels"]["unknown_ignored"] == 2  # each annotator's label
    assert results.summary[METRIC].calibrated.labelled == 12  # type: ignore[union-attr]


def test_a_label_off_the_scale_names_the_line(tmp_path: Path, keyed_judge: JudgeServer) -> None:
    path = write_labels(tmp_path / "labels.jsonl", [line("q0", 3), line("q1", 9)])
    with pytest.raises(InputError, match="human label 9 for judge:faithfulness is outside") as e:
        evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                 judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50)
    assert (e.value.path, e.value.line, e.value.field) == (str(path), 2, "label")


def test_a_field_and_a_file_together_and_labels_of_no_metric_are_usage_errors(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl")
    path = write_labels(tmp_path / "labels.jsonl", [line("q0", 3, metric="judge:tone")])
    with pytest.raises(UsageError, match=r"--human human and --human-labels .* give one"):
        evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path), human="human",
                 human_labels=path, bootstrap=50)
    with pytest.raises(UsageError, match=r"no label of .* is for a metric the run scores"):
        evaluate(records, [METRIC], judge=judge(keyed_judge, tmp_path), human_labels=path,
                 bootstrap=50)
    assert keyed_judge.requests == 0


def score_argv(records: Path, keyed_judge: JudgeServer, tmp_path: Path,
               *extra: str) -> list[str]:
    return ["score", str(records), "-m", METRIC, "--judge-model", "judge-model",
            "--judge-base-url", keyed_judge.base_url, "--judge-api-key-env", TEST_KEY_ENV,
            "--cache", str(tmp_path / "c.sqlite"), "--bootstrap", "50", "--no-progress",
            *extra]


def test_the_command_line_prints_and_writes_the_labels_calibration(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = write_records(tmp_path / "r.jsonl")
    path = write_labels(tmp_path / "labels.jsonl", uniform_lines())
    out = io.StringIO()
    argv = score_argv(records, keyed_judge, tmp_path, "--human-labels", str(path), "--out",
                      str(tmp_path / "run"))
    assert main(argv, stdout=out) == 0
    text = " ".join(out.getvalue().split())
    assert f"{METRIC} calibrated by 24 human labels (PPI, 36 unlabelled):" in text
    assert (f"{METRIC} labels from {path}: 24 records labelled (ana 24, bo 11), uniform "
            "selection; agreement over 11 common records: Krippendorff's alpha (interval) "
            in text)
    assert "Cohen's kappa (quadratic)" in text
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["manifest"]["human_labels"]["metrics"][METRIC]["annotators"] == {
        "ana": 24, "bo": 11}
    assert summary["metrics"][METRIC]["calibrated"]["labelled"] == 24
    loaded = Results.load(tmp_path / "run")
    assert loaded.summary[METRIC].calibrated is not None


def test_the_command_line_errors_and_allows_unknown_labels(tmp_path: Path,
                                                           keyed_judge: JudgeServer,
                                                           capsys: pytest.CaptureFixture[str],
                                                           ) -> None:
    records = write_records(tmp_path / "r.jsonl")
    path = write_labels(tmp_path / "labels.jsonl",
                        [line(f"q{i}", ana(i)) for i in range(12)] + [line("nope", 2)])
    argv = score_argv(records, keyed_judge, tmp_path, "--human-labels", str(path))
    assert main(argv, stdout=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "13" in err and "'nope'" in err and "Traceback" not in err
    out = io.StringIO()
    assert main([*argv, "--allow-unknown-labels"], stdout=out) == 0
    text = " ".join(out.getvalue().split())
    assert "ignored 1 label of record ids the run does not have" in text
    assert main([*argv, "--human", "human"], stdout=io.StringIO()) == 2
    assert "--human-labels" in capsys.readouterr().err


def test_an_evaluation_file_names_the_labels_file(tmp_path: Path,
                                                  keyed_judge: JudgeServer) -> None:
    write_records(tmp_path / "r.jsonl")
    write_labels(tmp_path / "labels.jsonl",
                 [line(f"q{i}", ana(i)) for i in range(12)] + [line("nope", 2)])
    eval_file = tmp_path / "eval.toml"
    eval_file.write_text(
        f'metrics = ["{METRIC}"]\n[inputs]\nrecords = "r.jsonl"\n'
        f'[scoring]\nbootstrap = 50\nhuman_labels = "labels.jsonl"\n'
        f'allow_unknown_labels = true\n'
        f'[judge]\nmodel = "judge-model"\nbase_url = "{keyed_judge.base_url}"\n'
        f'api_key_env = "{TEST_KEY_ENV}"\ncache = "{tmp_path / "c.sqlite"}"\n',
        encoding="utf-8")
    out = io.StringIO()
    assert main(["run", str(eval_file), "--no-progress", "--out", str(tmp_path / "run")],
                stdout=out) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    about = summary["manifest"]["human_labels"]
    assert about["file"] == str(tmp_path / "labels.jsonl") and about["unknown_ignored"] == 1


def test_read_window_by_window_an_unknown_id_is_found_at_the_end(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    path = write_labels(tmp_path / "labels.jsonl",
                        [line(f"q{i}", ana(i)) for i in range(12)] + [line("gone", 2)])
    with pytest.raises(InputError, match="'gone', which the run does not have") as caught:
        evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                 judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50,
                 window=7)
    assert (caught.value.path, caught.value.line) == (str(path), 13)


def test_fewer_than_ten_active_labels_is_a_refusal(tmp_path: Path,
                                                  keyed_judge: JudgeServer) -> None:
    lines = [line(f"q{i}", ana(i), selection="active", probability=0.5) for i in range(9)]
    lines.append(line("q9", None, passed=True, selection="active", probability=0.5))
    path = write_labels(tmp_path / "labels.jsonl", lines)
    results = evaluate(write_records(tmp_path / "r.jsonl"), [METRIC],
                       judge=judge(keyed_judge, tmp_path), human_labels=path, bootstrap=50)
    c = results.summary[METRIC].calibrated
    assert c is not None and c.mean is None and c.method == "active"
    assert (c.labelled, c.unlabelled) == (9, 1)
    assert results.summary_json()["metrics"][METRIC]["calibrated"] == {
        "labelled": 9, "unlabelled": 1, "method": "active", "refused": c.refused}
