"""The lines of a batch: split at the provider's limits on requests and bytes, and the outcome
of each line read from an output or error file in the shapes OpenAI writes; and the progress a
pending batch reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batch_server import BatchServer
from judge_server import TEST_KEY, TEST_KEY_ENV, keyed_options

from rageval.api import evaluate
from rageval.judge.llm.batch.lines import read_outcomes, request_line, split
from rageval.judge.llm.options import JudgeProgress


def test_lines_are_split_at_the_request_and_byte_limits() -> None:
    lines = [(str(i), request_line(str(i), {"model": "m", "n": "x" * i})) for i in range(6)]
    assert [len(b) for b in split(lines, max_requests=4)] == [4, 2]
    size = len(lines[0][1]) + len(lines[1][1])
    parts = split(lines, max_bytes=size)
    assert [[c for c, _ in part] for part in parts] == [["0", "1"], ["2"], ["3"], ["4"], ["5"]]
    assert all(sum(len(line) for _, line in part) <= size or len(part) == 1 for part in parts)
    assert request_line("k", {"model": "m"}).endswith(b"\n")


def test_outcomes_are_read_in_the_shapes_the_provider_writes() -> None:
    reply = {"choices": [{"message": {"role": "assistant", "content": "{}"}}]}
    output = "\n".join(json.dumps(line) for line in [
        {"id": "1", "custom_id": "a", "error": None,
         "response": {"status_code": 200, "request_id": "r", "body": reply}},
        {"id": "2", "custom_id": "b", "error": None,
         "response": {"status_code": 429, "body": {"error": {"message": "slow down"}}}},
        "not a line",
    ]) + "\nnot json\n"
    errors = json.dumps({"id": "3", "custom_id": "c", "response": None,
                         "error": {"code": "batch_expired", "message": "not run in time"}})
    outcomes = read_outcomes([output, errors])
    assert outcomes["a"].ok and outcomes["a"].body == reply
    assert (outcomes["b"].ok, outcomes["b"].status, outcomes["b"].error) == (
        False, 429, "slow down")
    assert (outcomes["c"].status, outcomes["c"].error) == (None,
                                                           "batch_expired: not run in time")


def test_a_pending_batch_reports_its_status_counts_and_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps({"id": f"q{i}", "query": f"q {i}", "answer": f"a {i}",
                                           "contexts": ["c"]}) + "\n" for i in range(3)))
    seen: list[JudgeProgress] = []
    with BatchServer() as server:
        server.slow_polls = 2
        evaluate(records, ["judge:faithfulness"], bootstrap=1, judge=keyed_options(
            server, tmp_path / "c.sqlite", batch=True, batch_poll=0.05, progress=seen.append))
    notes = [p.note for p in seen if p.note]
    assert notes[0].startswith("batch batch_") and ": in_progress, 0/3 done, 0 failed" in notes[0]
    assert ": completed, 3/3 done, 0 failed" in notes[-1] and notes[-1].endswith(" s")
