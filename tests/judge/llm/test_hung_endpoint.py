"""An endpoint that accepts connections and never answers stops a run within the first-reply
deadline, with one line that says so; a slow first reply within it, and a later hang, keep
their usual handling."""

from __future__ import annotations

import io
import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from judge_server import JudgeServer

from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.transport.client import JudgeClient, JudgeError, JudgeRequest
from rageval.judge.llm.transport.first_reply import DEFAULT_FIRST_REPLY_S, first_reply_limit
from rageval.judge.llm.transport.formats import ReplySchema

SCHEMA = ReplySchema("grade", {"type": "object", "properties": {"score": {"type": "integer"}}})


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that accepts connections (the kernel completes them) and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        listener.close()


def requests(n: int) -> list[JudgeRequest]:
    return [JudgeRequest([{"role": "user", "content": f"Grade it. q{i}"}], SCHEMA)
            for i in range(n)]


def test_a_silent_endpoint_stops_the_run_at_the_deadline(silent_url: str) -> None:
    # Without the deadline: three probes, each 6 attempts of 2 s plus backoff, about 80 s.
    client = JudgeClient(JudgeConfig(model="m", base_url=silent_url, timeout=2.0, max_retries=5,
                         first_reply_timeout=1.5))
    started = time.monotonic()
    with pytest.raises(JudgeError) as caught:
        client.complete_many(requests(10), concurrency=4)
    assert time.monotonic() - started < 20
    message = str(caught.value)
    assert "no reply within 1.5 s of the first request (the last attempt: timed out)" in message
    assert "--judge-first-reply-timeout" in message and "\n" not in message


def test_the_text_format_is_bounded_too(silent_url: str) -> None:
    # No probe: every request goes at once, each bounded by the same deadline.
    client = JudgeClient(JudgeConfig(model="m", base_url=silent_url, timeout=5.0, max_retries=5,
                         response_format="text", first_reply_timeout=1.0))
    started = time.monotonic()
    with pytest.raises(JudgeError, match="no reply within 1 s"):
        client.complete_many(requests(8), concurrency=8)
    assert time.monotonic() - started < 20


def test_a_slow_first_reply_within_the_deadline_is_kept() -> None:
    with JudgeServer() as server:
        server.latency_s = 0.6
        client = JudgeClient(JudgeConfig(
            model="m", base_url=server.base_url, timeout=5.0, max_retries=1,
                             first_reply_timeout=3.0))
        out = client.complete_many(requests(4), concurrency=2)
    assert all(r.ok for r in out)


def test_after_a_reply_the_usual_retries_apply() -> None:
    # The first request is answered; a later one times out once and is retried by the SDK
    # (each attempt 1 s, beyond the 0.5 s deadline: which no longer applies).
    with JudgeServer() as server:
        server.hang_s = 1.5
        server.fail_next("ok", "timeout")
        client = JudgeClient(JudgeConfig(
            model="m", base_url=server.base_url, timeout=1.0, max_retries=2,
                             first_reply_timeout=0.5, response_format="text"))
        out = client.complete_many(requests(2), concurrency=1)
    assert all(r.ok for r in out)


def test_a_passing_fault_before_the_first_reply_is_retried_within_the_deadline() -> None:
    with JudgeServer() as server:
        server.fail_next("503", "503")
        client = JudgeClient(JudgeConfig(
            model="m", base_url=server.base_url, timeout=5.0, max_retries=3,
                             first_reply_timeout=20.0, response_format="text"))
        out = client.complete_many(requests(1))
    assert out[0].ok and server.requests == 3


def test_the_default_deadline() -> None:
    assert DEFAULT_FIRST_REPLY_S == 300
    assert first_reply_limit(None, 120.0) == 300
    assert first_reply_limit(None, 600.0) == 1200  # two full attempts of a slow endpoint
    assert first_reply_limit(45.0, 600.0) == 45
    assert JudgeClient(JudgeConfig(
        model="m", base_url="http://127.0.0.1:9/v1")).first_reply_timeout == 300


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_a_bad_deadline_is_a_usage_error(bad: float) -> None:
    with pytest.raises(UsageError, match="--judge-first-reply-timeout"):
        JudgeOptions(model="m", first_reply_timeout=bad).check()


def _records_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "query": f"Who wrote book {i}?",
                                        "contexts": [f"Book {i} is by author {i}."],
                                        "answer": f"Author {i}."}) + "\n" for i in range(3)))
    return path


def test_the_cli_says_it_in_one_line_with_exit_status(tmp_path: Path, silent_url: str,
                                                     capsys) -> None:
    out = tmp_path / "out"
    code = main(["score", str(_records_file(tmp_path)), "-m", "judge:faithfulness",
                 "--judge-model", "m", "--judge-base-url", silent_url, "--judge-timeout", "1",
                 "--judge-first-reply-timeout", "1.5", "--cache", str(tmp_path / "c.sqlite"),
                 "--out", str(out), "--no-progress", "--bootstrap", "10"],
                stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code != 0
    lines = [line for line in err.splitlines() if "no reply within 1.5 s" in line]
    assert len(lines) == 1
    assert not (out / "summary.json").exists()


def test_the_manifest_names_the_deadline(tmp_path: Path) -> None:
    with JudgeServer() as server:
        out = tmp_path / "out"
        assert main(["score", str(_records_file(tmp_path)), "-m", "judge:faithfulness",
                     "--judge-model", "m", "--judge-base-url", server.base_url,
                     "--judge-first-reply-timeout", "42", "--cache",
                     str(tmp_path / "c.sqlite"), "--out", str(out), "--no-progress",
                     "--bootstrap", "10"], stdout=io.StringIO()) == 0
    manifest = json.loads((out / "summary.json").read_text())["manifest"]
    assert manifest["judge"]["first_reply_timeout_s"] == 42


def test_a_fully_cached_run_does_not_wait_on_a_silent_endpoint(tmp_path: Path,
                                                              silent_url: str) -> None:
    """The served-model check of a cached run asks briefly, then leaves it unknown."""
    common = [str(_records_file(tmp_path)), "-m", "judge:faithfulness", "--judge-model", "m",
              "--cache", str(tmp_path / "c.sqlite"), "--no-progress", "--bootstrap", "10",
              "--judge-timeout", "1"]
    with JudgeServer() as server:
        assert main(["score", *common, "--judge-base-url", server.base_url,
                     "--out", str(tmp_path / "a")], stdout=io.StringIO()) == 0
    started = time.monotonic()
    assert main(["score", *common, "--judge-base-url", silent_url,
                 "--out", str(tmp_path / "b")], stdout=io.StringIO()) == 0
    assert time.monotonic() - started < 15  # two 1 s attempts, not six with backoff
    first = (tmp_path / "a" / "summary.json").read_text()
    assert json.loads(first)["metrics"] == json.loads(
        (tmp_path / "b" / "summary.json").read_text())["metrics"]


def test_a_wait_asked_for_before_the_first_reply_is_read_as_the_sdk_reads_it() -> None:
    import email.utils
    from types import SimpleNamespace

    from rageval.judge.llm.transport.first_reply import _retry_after

    def told(**headers: str) -> float | None:
        return _retry_after(SimpleNamespace(response=SimpleNamespace(headers=headers)))

    assert told(**{"retry-after-ms": "1500"}) == 1.5
    assert told(**{"retry-after": "2"}) == 2.0
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 < told(**{"retry-after": in_ten}) <= 10  # type: ignore[operator]
    assert told(**{"retry-after": "soon"}) is None
    assert told() is None
    assert _retry_after(ValueError("no response at all")) is None


def test_a_429_before_the_first_reply_waits_as_told() -> None:
    with JudgeServer() as server:
        server.fail_next("429:1")
        client = JudgeClient(JudgeConfig(
            model="m", base_url=server.base_url, timeout=5.0, max_retries=2,
                             first_reply_timeout=20.0, response_format="text"))
        started = time.monotonic()
        out = client.complete_many(requests(1))
        waited = time.monotonic() - started
    assert out[0].ok and server.requests == 2
    assert waited >= 0.95  # the endpoint's Retry-After, not the 0.5 s backoff
