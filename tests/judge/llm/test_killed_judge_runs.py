"""A reply paid for is a reply kept: a judge run killed (``kill -9``) at any point has stored
every reply it received, so the run started again asks again at most the requests that were in
flight, never more than ``--judge-concurrency``."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer

ROOT = Path(__file__).resolve().parents[3]
CONCURRENCY = 8


def judge_run(records: Path, server: JudgeServer, cache: Path) -> subprocess.Popen[str]:
    command = "import sys; from rageval.cli import main; sys.exit(main())"
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY,
           "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    return subprocess.Popen(
        [sys.executable, "-c", command, "score", str(records), "-m", "judge:fluency",
         "--judge-model", "m", "--judge-base-url", server.base_url, "--judge-api-key-env",
         TEST_KEY_ENV, "--judge-concurrency", str(CONCURRENCY), "--cache", str(cache),
         "--bootstrap", "10", "--no-progress"],
        env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def prompt(body: dict[str, object]) -> str:
    return json.dumps(body.get("messages"), sort_keys=True)


def test_a_killed_judge_run_asks_again_at_most_what_was_in_flight(tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text("".join(
        json.dumps({"id": f"q{i}", "query": f"question {i}", "answer": f"answer number {i}",
                    "contexts": ["c"]}) + "\n" for i in range(80)))
    cache = tmp_path / "c.sqlite"
    asked: list[set[str]] = []
    with JudgeServer(latency_s=0.3) as server:
        for kill_after in (10, 25):  # requests that reach the server before the kill
            start = server.requests
            run = judge_run(records, server, cache)
            while server.requests < start + kill_after:
                assert run.poll() is None, run.communicate()
                time.sleep(0.01)
            time.sleep(0.15)  # replies arriving meanwhile: half the requests in flight
            run.kill()
            run.wait()
            asked.append({prompt(b) for b in server.bodies[start:]})
        start = server.requests
        last = judge_run(records, server, cache)
        assert last.wait() == 0, last.communicate()
        asked.append({prompt(b) for b in server.bodies[start:]})
    assert sum(len(a) for a in asked) >= 80
    for killed, after in itertools.pairwise(asked):
        again = killed & after
        assert len(again) <= CONCURRENCY, (len(killed), len(again))
