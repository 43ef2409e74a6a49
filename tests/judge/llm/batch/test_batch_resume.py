"""A batch paid for is a batch kept: a ``rageval score --judge-batch`` killed while its batch
is pending, run again, attaches to the batch recorded beside the cache (no second upload, no
second batch); ``--judge-batch-cancel`` cancels the recorded batches and leaves those of
another judge alone, and the next run stores what they answered and sends the rest again."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_server import BatchServer
from judge_server import TEST_KEY, TEST_KEY_ENV

from rageval.cli import main
from rageval.judge.llm.batch.state import BatchState, Recorded, state_path

ROOT = Path(__file__).resolve().parents[4]
METRICS = ["-m", "judge:faithfulness", "-m", "judge:correctness"]


def _records(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
        "answer": f"Fact {i}: blue.", "reference": "Blue."}) + "\n" for i in range(n)))
    return path


def _argv(records: Path, server: BatchServer, cache: Path, *more: str) -> list[str]:
    return ["score", str(records), *METRICS, "--judge-model", "judge-model",
            "--judge-base-url", server.base_url, "--judge-api-key-env", TEST_KEY_ENV,
            "--cache", str(cache), "--judge-batch", "--judge-batch-poll", "0.05",
            "--judge-max-retries", "1", "--bootstrap", "10", "--no-progress", *more]


def _killed_while_pending(records: Path, server: BatchServer, cache: Path) -> None:
    """Start a scoring run in a process of its own and kill it once its batch is polled."""
    server.hold = True
    command = "import sys; from rageval.cli import main; sys.exit(main())"
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY,
           "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    run = subprocess.Popen([sys.executable, "-c", command, *_argv(records, server, cache)],
                           env=env, text=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any(n >= 2 for n in server.looks.values()):
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the batch was never polled"
            time.sleep(0.02)
    finally:
        run.kill()
        run.wait()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)


@pytest.mark.slow
def test_a_run_killed_while_its_batch_is_pending_attaches_to_it_when_run_again(
        tmp_path: Path) -> None:
    records, cache = _records(tmp_path / "r.jsonl", 6), tmp_path / "c.sqlite"
    with BatchServer() as server:
        _killed_while_pending(records, server, cache)
        assert (server.uploads, server.created) == (1, 1)
        recorded = BatchState(state_path(str(cache))).load()
        assert [r.id for r in recorded] == list(server.batches)
        assert len(recorded[0].custom_ids) == 12
        server.release()
        out = io.StringIO()
        assert main(_argv(records, server, cache, "--out", str(tmp_path / "run")),
                    stdout=out) == 0
        assert (server.uploads, server.created, server.chats) == (1, 1, 0)
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert all(len(json.loads(line)["scores"]) == 2 for line in lines) and len(lines) == 6
    assert not state_path(str(cache)).exists()


@pytest.mark.slow
def test_cancel_cancels_the_recorded_batches_and_the_next_run_sends_the_rest_again(
        tmp_path: Path) -> None:
    records, cache = _records(tmp_path / "r.jsonl", 3), tmp_path / "c.sqlite"
    with BatchServer() as server:
        _killed_while_pending(records, server, cache)
        state = BatchState(state_path(str(cache)))
        other = Recorded("file-x", "batch_other", "http://elsewhere/v1", "judge-model",
                         "json_schema", ("0" * 64,))
        state.add(other)
        out = io.StringIO()
        assert main(_argv(records, server, cache, "--judge-batch-cancel"), stdout=out) == 0
        mine = [b for b in server.batches if b != "batch_other"]
        assert server.cancelled == mine
        assert f"batch {mine[0]}: cancelled" in out.getvalue()
        assert {r.id for r in state.load()} == {mine[0], "batch_other"}  # kept for a rerun
        assert server.created == 1 and not cache.exists()
        # Run again: the cancelled batch answered nothing; its requests go in a new batch.
        server.release()
        assert main(_argv(records, server, cache, "--out", str(tmp_path / "run")),
                    stdout=io.StringIO()) == 0
        assert (server.created, server.chats) == (2, 0)
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert all(len(json.loads(line)["scores"]) == 2 for line in lines) and len(lines) == 3
    assert [r.id for r in state.load()] == ["batch_other"]  # another endpoint's: left alone


def test_cancel_is_refused_with_a_dry_run_or_offline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records, cache = _records(tmp_path / "r.jsonl", 1), tmp_path / "c.sqlite"
    with BatchServer() as server:
        for more in (["--dry-run"], ["--offline"]):
            assert main(_argv(records, server, cache, "--judge-batch-cancel", *more),
                        stdout=io.StringIO()) == 2
            assert "cannot be used with --offline" in capsys.readouterr().err
        assert server.cancelled == [] and server.uploads == 0


@pytest.mark.slow
def test_a_rerun_asking_for_fewer_requests_keeps_the_rest_of_the_batch_for_later(
        tmp_path: Path) -> None:
    records, cache = _records(tmp_path / "r.jsonl", 3), tmp_path / "c.sqlite"
    with BatchServer() as server:
        _killed_while_pending(records, server, cache)  # both rubrics' requests in one batch
        server.release()
        one = _argv(records, server, cache)
        at = one.index("judge:correctness")
        del one[at - 1:at + 1]  # faithfulness alone
        assert main(one, stdout=io.StringIO()) == 0
        recorded = BatchState(state_path(str(cache))).load()
        assert len(recorded) == 1 and len(recorded[0].custom_ids) == 3  # correctness's, paid
        assert main(_argv(records, server, cache, "--out", str(tmp_path / "run")),
                    stdout=io.StringIO()) == 0
        assert (server.uploads, server.created, server.chats) == (1, 1, 0)
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert all(len(json.loads(line)["scores"]) == 2 for line in lines)
    assert not state_path(str(cache)).exists()
