"""rageval compare --human FIELD: judge-metric differences calibrated by human labels (PPI on
the paired differences), equal to ppi_py's on the runs' own scores and labels."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_server import JudgeServer, keyed_options

from rageval.api import evaluate
from rageval.cli import main
from rageval.compare.runs.compare import compare_runs
from rageval.core.errors import UsageError
from rageval.core.results import Results

METRICS = ["judge:faithfulness", "judge:correctness"]



def write(path: Path, system: str, labelled: int, shift: int, n: int = 50) -> Path:
    rows = []
    for i in range(n):
        row = {"id": f"q{i}", "query": f"What is fact {i}?",
               "contexts": [f"Fact {i} is that the sky is blue."],
               "answer": f"{system} says fact {i}: the sky is blue.", "reference": "Blue."}
        if i < labelled:
            row["human"] = {"faithfulness": min(5, 1 + (i + shift) % 5),
                            "correctness": min(5, 1 + (2 * i + shift) % 5)}
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def score(keyed_judge: JudgeServer, records: Path, out: Path) -> Path:
    judge = keyed_options(keyed_judge, out.parent / "cache.sqlite")
    evaluate(records, METRICS, judge=judge, bootstrap=50, out=out)
    return out


@pytest.fixture
def runs(tmp_path: Path, keyed_judge: JudgeServer) -> tuple[Path, Path]:
    a = score(keyed_judge, write(tmp_path / "a.jsonl", "alpha", 20, 0), tmp_path / "a")
    b = score(keyed_judge, write(tmp_path / "b.jsonl", "beta", 20, 2), tmp_path / "b")
    return a, b


@pytest.mark.parity
@pytest.mark.parametrize("ci", ["records", "poisson"])  # every value held, or running sums
def test_the_calibrated_difference_is_ppi_py_s(runs: tuple[Path, Path], ci: str) -> None:
    ppi_py = pytest.importorskip("ppi_py")
    a, b = runs
    comparison = compare_runs([a, b], human="human", resamples=200, permutations=200, ci=ci)
    rows = {r["metric"]: r for r in comparison.rows}
    for metric, key in (("judge:faithfulness", "faithfulness"),
                        ("judge:correctness", "correctness")):
        runs_ = [Results.load(path) for path in (a, b)]
        labels = [{json.loads(line)["id"]: json.loads(line).get("human") for line in
                   Path(r.manifest["records"]["source"]).read_text().splitlines()}
                  for r in runs_]
        scores = [{rec.id: rec.scores[metric] for rec in r.records} for r in runs_]
        y, f, f_unlabelled = [], [], []
        for record_id in scores[0]:
            diff = scores[1][record_id] - scores[0][record_id]
            la, lb = (labels[k][record_id] for k in (0, 1))
            if la is not None and lb is not None:
                y.append(lb[key] - la[key])
                f.append(diff)
            else:
                f_unlabelled.append(diff)
        args = (np.array(y, float), np.array(f, float), np.array(f_unlabelled, float))
        low, high = ppi_py.ppi_mean_ci(*args, alpha=0.05, lam=1)
        c = rows[metric]["calibrated"]
        assert (c["labelled"], c["unlabelled"], c["method"]) == (20, 30, "ppi")
        assert (c["delta"], *c["ci95"]) == pytest.approx(
            (float(np.squeeze(ppi_py.ppi_mean_pointestimate(*args, lam=1))),
             float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9)
        assert c["crosses_zero"] == (c["ci95"][0] <= 0 <= c["ci95"][1])
        assert c["human"]["delta"] == pytest.approx(float(np.mean(y)))
    assert "calibrated" in comparison.settings


def test_the_calibrated_estimates_are_the_same_held_or_streamed(runs: tuple[Path, Path]) -> None:
    # Their means are correctly rounded: the order the pairs come in does not reach them.
    held, streamed = (compare_runs(list(runs), human="human", resamples=50, permutations=50,
                                   ci=ci) for ci in ("records", "poisson"))
    pairs = [(a["calibrated"], b["calibrated"])
             for a, b in zip(held.rows, streamed.rows, strict=True) if "calibrated" in a]
    assert len(pairs) == 2
    for ours, theirs in pairs:
        assert (ours["delta"], ours["human"]["delta"]) == (theirs["delta"],
                                                           theirs["human"]["delta"])
        assert (ours["labelled"], ours["unlabelled"]) == (theirs["labelled"],
                                                          theirs["unlabelled"])
        assert ours["ci95"] == pytest.approx(theirs["ci95"], abs=1e-12)


def test_the_command_line_says_whether_the_interval_holds_zero(
        runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    out = io.StringIO()
    argv = ["compare", str(a), str(b), "--human", "human", "--resamples", "200",
            "--permutations", "200", "--json", str(tmp_path / "c.json")]
    assert main(argv, stdout=out) == 0
    text = " ".join(out.getvalue().split())
    assert ("judge:faithfulness: calibrated by 20 labelled pairs (PPI, 30 unlabelled): delta"
            in text)
    assert ("the interval holds 0: no difference is established" in text
            or "the interval excludes 0" in text)
    rows = json.loads((tmp_path / "c.json").read_text())  # --json writes the rows
    assert {r["metric"] for r in rows if "calibrated" in r} == set(METRICS)


def test_few_labelled_pairs_is_a_refusal(tmp_path: Path, keyed_judge: JudgeServer) -> None:
    a = score(keyed_judge, write(tmp_path / "a.jsonl", "alpha", 8, 0), tmp_path / "a")
    b = score(keyed_judge, write(tmp_path / "b.jsonl", "beta", 20, 2), tmp_path / "b")
    for ci in ("records", "poisson"):
        rows = compare_runs([a, b], human="human", resamples=50, permutations=50, ci=ci).rows
        c = next(r for r in rows if r["metric"] == "judge:faithfulness")["calibrated"]
        assert c == {"labelled": 8, "unlabelled": 42,
                     "refused": "8 pairs carry a human label for both answers; a calibrated "
                                "difference needs at least 10"}


def test_runs_without_labels_or_records_are_usage_errors(runs: tuple[Path, Path]) -> None:
    a, b = runs
    with pytest.raises(UsageError, match="has a field 'verdict'"):
        compare_runs([a, b], human="verdict", resamples=50, permutations=50)
    held = Results.load(a)
    held.manifest["records"]["source"] = "<memory>"
    with pytest.raises(UsageError, match="cannot be read again"):
        compare_runs([held, b], human="human", resamples=50, permutations=50)
