"""Keeps bench/bench_stream.py, bench/sim_scale.py and bench/bench_score.py from rotting: tiny
runs that must finish and print what they promise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_stream_benchmark_measures_each_size(tmp_path: Path) -> None:
    out = tmp_path / "stream.json"
    printed = run("bench_stream.py", "--records", "200,400", "--repeats", "1",
                  "--metrics", "map", "rouge1", "--data-dir", str(tmp_path / "data"),
                  "--json", str(out), "--rss-curve", "--turns", "5")
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [row["records"] for row in rows] == [200, 400]
    assert all(row["rss_mib"] > 0 and row["wall_s"] > 0 for row in rows)
    assert "peak RSS MiB" in printed
    assert [row["records"] for row in result["conversation_rows"]] == [200, 400]
    assert "as conversations of 5 turns" in printed
    grouped = tmp_path / "data" / "stream-400-seed0-turns5.jsonl"
    assert len(grouped.read_text().splitlines()) == 80


def test_the_simulation_holds_the_shared_cap(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    run("sim_scale.py", "--requests", "400", "--workers", "10,40", "--json", str(out))
    tables = json.loads(out.read_text())["tables"]
    cap = 16  # the default --concurrency
    assert all(row["in_flight_cap"] == cap for row in tables["shared"])
    assert all(0.9 <= row["vs_ideal"] <= 1.0 for row in tables["shared"])
    assert all(row["in_flight_cap"] == 10 * cap for row in tables["naive"][:1])


def test_the_end_to_end_score_benchmark_times_both_sides(tmp_path: Path) -> None:
    """bench/bench_score.py on a few pairs: both tasks run, and every value is identical."""
    out = tmp_path / "score.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_score.py"), "--pairs", "40", "--repeats", "1",
         "--data-dir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["mismatches"] for row in rows] == [0, 0]
    assert all(row["anchor_s"] > 0 and row["rageval_s"] > 0 for row in rows)


def test_the_traces_benchmark_reads_and_scores_both_ways(tmp_path: Path) -> None:
    """bench/bench_traces.py on 200 traces: the same records.jsonl both ways, four rows."""
    out = tmp_path / "traces.json"
    printed = run("bench_traces.py", "--traces", "200", "--repeats", "1", "--metrics", "ndcg@10",
                  "rouge1", "--data-dir", str(tmp_path / "data"), "--json", str(out))
    assert "identical records.jsonl both ways" in printed
    result = json.loads(out.read_text())
    assert result["spans"] == 600
    assert set(result["rows"]) == {"read traces", "read JSONL", "score traces", "score JSONL"}
    assert all(row["wall_s"] > 0 and row["rss_mib"] > 0 for row in result["rows"].values())
