"""A judge asked several times per item: the summary's stability figures (flip rate, spread)
and --ci judge-noise, the two-level bootstrap of records and then samples within a record."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import TEST_KEY_ENV, JudgeServer, keyed_options

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.rubric.stability import noise_samples, sample_stats, stability
from rageval.stats.resampling import bootstrap_ci, two_level_bootstrap_ci


def test_items_flip_when_their_rounded_samples_differ() -> None:
    details = [{"samples": [2.6, 3.4, 3.0]},  # all round to 3: steady
               {"samples": [2.4, 2.5]},       # 2 and 3 (half up): a flip
               {"samples": [4.0]},            # one usable sample: not counted
               None]                          # unscored
    stats = sample_stats(details, 3, per_context=False)
    figures = stability(stats, 3)
    assert figures == {"samples": 3, "items": 2, "flip_rate": 0.5,
                       "mean_sd": pytest.approx((np.std([2.6, 3.4, 3.0], ddof=1)
                                                 + np.std([2.4, 2.5], ddof=1)) / 2)}
    assert np.isnan(noise_samples(stats, np.array([3.0, 2.45, 4.0, np.nan]))[1, 2])


def test_a_per_context_rubric_counts_contexts_and_resamples_each_sample_s_mean() -> None:
    details = [{"contexts": [{"samples": [0.0, 1.0]}, {"samples": [2.0, 2.0]}]},
               {"contexts": [{"samples": [1.0, 3.0]}, {"samples": [3.0]}]}]
    stats = sample_stats(details, 2, per_context=True)
    assert stability(stats, 2)["items"] == 3 and stability(stats, 2)["flip_rate"] == 2 / 3
    within = noise_samples(stats, np.array([1.25, 2.5]))
    assert within[0].tolist() == [1.0, 1.5]  # sample i's mean grade over the contexts
    assert within[1, 0] == 2.5 and np.isnan(within[1, 1])  # uneven: the record once


def test_the_two_level_bootstrap_of_a_steady_judge_is_the_ordinary_one() -> None:
    rng = np.random.default_rng(4)
    means = rng.normal(3, 1, 150)
    steady = np.repeat(means[:, None], 4, axis=1)
    assert two_level_bootstrap_ci(steady, resamples=300, seed=9) == bootstrap_ci(
        means, resamples=300, seed=9)
    noisy = means[:, None] + rng.normal(0, 1.5, (150, 4))
    wide = two_level_bootstrap_ci(noisy, resamples=300, seed=9)
    narrow = bootstrap_ci(noisy.mean(axis=1), resamples=300, seed=9)
    assert wide is not None and narrow is not None
    assert wide[1] - wide[0] > narrow[1] - narrow[0]
    with pytest.raises(ValueError, match="at least one sample"):
        two_level_bootstrap_ci(np.array([[1.0, np.nan], [np.nan, np.nan]]))



def _records(path: Path, n: int = 30) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
        "answer": f"Fact {i}: blue.", "reference": "Blue."}) + "\n" for i in range(n)))
    return path


def _judge(keyed_judge: JudgeServer, cache: Path, samples: int) -> JudgeOptions:
    return keyed_options(keyed_judge, cache, samples=samples, temperature=0.7, seed=1)


def test_a_run_reports_stability_and_judge_noise_widens_its_interval(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl")
    judge = _judge(keyed_judge, tmp_path / "c.sqlite", samples=4)
    plain = evaluate(records, ["judge:faithfulness"], judge=judge, bootstrap=400,
                     out=tmp_path / "plain")
    noisy = evaluate(records, ["judge:faithfulness"], judge=judge, bootstrap=400,
                     ci="judge-noise")
    item = plain.summary["judge:faithfulness"]
    details = [r.details["judge:faithfulness"] for r in plain.records]
    flips = [len({math.floor(v + 0.5) for v in d["samples"]}) > 1 for d in details]
    assert item.figures["stability"] == {
        "samples": 4, "items": 30, "flip_rate": pytest.approx(sum(flips) / 30),
        "mean_sd": pytest.approx(np.mean([d["sd"] for d in details]))}
    assert item.ci_method == "records" and noisy.summary["judge:faithfulness"].ci_method == (
        "judge-noise")
    assert noisy.summary["judge:faithfulness"].value == item.value
    low, high = noisy.summary["judge:faithfulness"].ci95
    assert high - low > item.ci95[1] - item.ci95[0]
    assert noisy.manifest["bootstrap"]["ci"] == "judge-noise"
    saved = json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert saved["metrics"]["judge:faithfulness"]["stability"]["items"] == 30
    assert keyed_judge.requests == 120  # the second run replayed every sample from the cache


def test_one_sample_has_no_stability_and_keeps_the_ordinary_interval(
        tmp_path: Path, keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl", 12)
    results = evaluate(records, ["judge:faithfulness"],
                       judge=_judge(keyed_judge, tmp_path / "c.sqlite", samples=1), bootstrap=100,
                       ci="judge-noise")
    item = results.summary["judge:faithfulness"]
    assert item.figures == {} and item.ci_method == "records"
    assert "stability" not in results.summary_json()["metrics"]["judge:faithfulness"]


def test_the_command_line_prints_stability_and_checks_ci(tmp_path: Path,
                                                        keyed_judge: JudgeServer) -> None:
    records = _records(tmp_path / "r.jsonl", 12)
    out = io.StringIO()
    argv = ["score", str(records), "-m", "judge:faithfulness", "--judge-model", "judge-model",
            "--judge-base-url", keyed_judge.base_url, "--judge-api-key-env", TEST_KEY_ENV,
            "--cache", str(tmp_path / "c.sqlite"), "--judge-samples", "3",
            "--judge-temperature", "0.7", "--bootstrap", "100", "--no-progress", "--ci",
            "judge-noise"]
    assert main(argv, stdout=out) == 0
    text = " ".join(out.getvalue().split())
    assert "judge:faithfulness: 3 samples per item;" in text
    assert "its CI holds the judge's noise" in text
    with pytest.raises(UsageError, match="unknown ci 'judge'"):
        evaluate(records, ["rouge1"], ci="judge")
