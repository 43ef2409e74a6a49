"""Keeps bench/bench_trec.py from rotting: a tiny end-to-end run must time both tools (and the
parse floor) and find that their values agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from bench_scripts import load_bench

from rageval.judge.llm.cache.store import JudgeCache

pytest.importorskip("pytrec_eval")

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "bench_trec.py"


def _load_bench() -> ModuleType:
    return load_bench("bench_trec")


@pytest.mark.parity
def test_tiny_benchmark_runs_both_sides_and_agrees(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--queries", "20",
            "--docs", "50",
            "--judged", "8",
            "--repeats", "1",
            "--data-dir", str(tmp_path / "data"),
            "--json", str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "values agree" in proc.stdout
    result = json.loads(out.read_text())
    assert set(result["sides"]) == {"pytrec_eval", "rageval", "parse_floor"}
    assert result["ratio_time_rageval_over_parse_floor"] > 0
    assert result["ratio_cpu_rageval_over_parse_floor"] > 0
    assert "rageval / parse floor" in proc.stdout and "x CPU time" in proc.stdout
    for side in result["sides"].values():
        assert len(side["times_s"]) == 1 and len(side["cpu_times_s"]) == 1
        assert side["median_s"] > 0
        assert side["median_cpu_s"] > 0  # user and system time of the whole process
        assert side["peak_mb"] > 0
    assert result["agree"] is True
    printed = result["printed_check"]
    assert printed["same_keys"] and printed["lines"] == 20 * 5 + 5
    full = result["full_check"]
    assert full["topics_equal"] and full["topics"] == 20
    assert full["compared"] == 20 * 5 + 5 and full["mismatch_count"] == 0
    assert full["max_abs_diff"] <= 1e-9


def test_generated_data_is_cached_and_exact_in_single_precision(tmp_path: Path) -> None:
    bench = _load_bench()
    qrels, run = bench.generate(tmp_path, 5, 30, 6, seed=3, quiet=True)
    stamp = (qrels.stat().st_mtime_ns, run.stat().st_mtime_ns)
    assert bench.generate(tmp_path, 5, 30, 6, seed=3, quiet=True) == (qrels, run)
    assert (qrels.stat().st_mtime_ns, run.stat().st_mtime_ns) == stamp

    run_lines = run.read_text().splitlines()
    assert len(run_lines) == 5 * 30
    scores = np.array([float(line.split()[4]) for line in run_lines])
    assert all(len(line.split()[4].split(".")[1]) == 6 for line in run_lines)
    assert np.array_equal(scores.astype(np.float32).astype(np.float64), scores)
    assert all(line.split()[2].startswith("doc") for line in run_lines)

    qrels_lines = qrels.read_text().splitlines()
    assert len(qrels_lines) == 5 * 6
    labels = {int(line.split()[3]) for line in qrels_lines}
    assert labels <= {0, 1, 2, 3}
    retrieved = {(ln.split()[0], ln.split()[2]) for ln in run_lines}
    judged = [(ln.split()[0], ln.split()[2]) for ln in qrels_lines]
    overlap = sum(1 for pair in judged if pair in retrieved)
    assert overlap > len(judged) // 2  # mostly judgments of retrieved documents


def run_bench(name: str, *args: str) -> list[str]:
    """``bench/<name>.py ARGS`` in a child process: the lines it printed (it must succeed)."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_judge_benchmark_runs_both_sides() -> None:
    """bench/bench_judge.py on a tiny configuration: both sides run and print their figures."""
    lines = run_bench("bench_judge", "--latency-ms", "5", "--concurrency", "2", "--rounds", "2",
                      "--min-judgments", "4", "--replay", "50", "--repeats", "1")
    row = next(line.split() for line in lines if line.strip().startswith("2 "))
    assert len(row) == 7 and float(row[3]) > 0 and float(row[4]) > 0  # anchor and rageval
    assert any("Offline replay of 50 judgments" in line for line in lines)


def test_bootstrap_benchmark_compares_both_methods() -> None:
    """bench/bench_bootstrap.py on a tiny configuration: a row per size and one for BLEU."""
    lines = run_bench("bench_bootstrap", "--runs", "4", "--sizes", "30", "--seeds", "2",
                      "--resamples", "60", "--bleu-runs", "2", "--bleu-size", "20")
    rows = [line.split() for line in lines[2:]]
    assert [row[:3] for row in rows] == [["mean,", "n=30", "4"], ["BLEU,", "n=20", "2"]]
    for row in rows:
        assert len(row) == 10 and row[-1].endswith("%")
        assert 0.5 < float(row[4]) < 2  # the width ratio of the two methods


def test_compare_benchmark_measures_both_methods(tmp_path: Path) -> None:
    """bench/bench_compare.py on a tiny configuration: runs built by repeating a scored
    template, compared exactly and streamed."""
    lines = run_bench("bench_compare", "--records", "130", "--template", "40", "--repeats", "1",
                      "--draws", "20", "--data-dir", str(tmp_path))
    rows = [line.split() for line in lines if line.split()[0] == "130"]
    assert [row[:2] for row in rows] == [["130", "records"], ["130", "poisson"]]
    assert all(float(row[3]) > 0 for row in rows)  # peak RSS
    records = (tmp_path / "compare-130-t40-a" / "records.jsonl").read_text().splitlines()
    assert len(records) == 130 and '"id": "q3~2"' in records[83]


def test_judge_replay_benchmark_fills_a_cache_and_replays_it(tmp_path: Path) -> None:
    """bench/bench_judge_replay.py on 60 records: the cache is filled with each record's two
    rubric requests, and the offline run scores every record from it (the script checks)."""
    data, out = tmp_path / "data", tmp_path / "replay.json"
    lines = run_bench("bench_judge_replay", "--records", "60", "--repeats", "1",
                      "--data-dir", str(data), "--json", str(out))
    assert any(line.startswith("wrote") and "judge-60-seed0.sqlite" in line for line in lines)
    assert "peak RSS MiB" in "\n".join(lines)
    rows = json.loads(out.read_text())["rows"]
    assert [row["records"] for row in rows] == [60]
    assert rows[0]["rss_mib"] > 0 and rows[0]["wall_s"] > 0
    with JudgeCache(data / "judge-60-seed0.sqlite") as cache:
        assert len(cache) == 120


def test_judge_replay_benchmark_measures_a_base_beside(tmp_path: Path) -> None:
    """With --base, each side replays a cache filled by its own code, and the table shows
    both sides' CPU per judgment and their ratio (here the base is this checkout too)."""
    data, out = tmp_path / "data", tmp_path / "replay.json"
    lines = run_bench("bench_judge_replay", "--records", "40", "--repeats", "1",
                      "--data-dir", str(data), "--source", str(ROOT), "--base", str(ROOT),
                      "--json", str(out))
    text = "\n".join(lines)
    assert "CPU us/judgment" in text and "ratio" in text
    result = json.loads(out.read_text())
    assert [(r["side"], r["judgments"]) for r in result["base_rows"] + result["rows"]] == \
        [("base", 80), ("this", 80)]
    assert all(r["cpu_us_per_judgment"] > 0 for r in result["rows"])
    for name in ("judge-40-seed0.sqlite", "judge-40-seed0-base.sqlite"):
        with JudgeCache(data / name) as cache:
            assert len(cache) == 80


def test_active_labels_benchmark_compares_both_selections() -> None:
    """bench/bench_active_labels.py on a tiny configuration: a row per number of labels, both
    selections' widths and coverages, and the summary line."""
    lines = run_bench("bench_active_labels", "--trials", "20", "--pool", "300",
                      "--labels", "20,60", "--mixes", "0.1")
    rows = [line.split("|")[1:-1] for line in lines if line.startswith("| 20 ")
            or line.startswith("| 60 ")]
    assert [row[0].strip() for row in rows] == ["20", "60"]
    for row in rows:
        assert len(row) == 9 and float(row[1]) > 0 and float(row[2]) > 0
        assert row[3].strip().endswith("x") and row[5].strip().endswith("%")
    assert any(line.startswith("active / uniform width at most") for line in lines)
    assert any(line.startswith("mix 0.10: width ratio") for line in lines)
