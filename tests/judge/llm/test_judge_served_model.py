"""The model behind a name: an online run stops when the endpoint now serves another model
under the judge's name than the cached replies it would reuse came from (llama-server answers
any name with the GGUF it loaded, and names that file in each reply), unless asked to ask again
(``--refresh``) or to reuse them knowingly (``any_served_model``); the manifest records the
served models."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.transport.client import JudgeError

KEY = "sk-test-served-0123456789"
ENV = "RAGEVAL_TEST_SERVED_KEY"
METRICS = ["judge:faithfulness"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(ENV, KEY)
    with JudgeServer(expected_key=KEY) as s:
        yield s


def _records(path: Path, n: int = 3) -> str:
    rows = [{"id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
             "answer": f"Fact {i} is blue."} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _options(server: JudgeServer, tmp_path: Path, **kw: object) -> JudgeOptions:
    return JudgeOptions(model="smollm2", base_url=server.base_url, api_key_env=ENV,
                        cache=str(tmp_path / "c.sqlite"), max_retries=0, **kw)  # type: ignore[arg-type]


def test_a_swapped_model_behind_the_name_stops_an_online_run(server: JudgeServer,
                                                            tmp_path: Path) -> None:
    records = _records(tmp_path / "r.jsonl")
    judge = _options(server, tmp_path)
    server.served_as = "/models/first.gguf"
    first = evaluate(records, METRICS, judge=judge, bootstrap=10)
    assert first.manifest["judge"]["served_models"] == {"/models/first.gguf": 3}
    sent = server.requests

    # Every reply is cached: one one-token request asks what is served now.
    server.served_as = "/models/second.gguf"
    with pytest.raises(JudgeError) as info:
        evaluate(records, METRICS, judge=judge, bootstrap=10)
    message = str(info.value)
    assert "now serves '/models/second.gguf' under the name 'smollm2'" in message
    assert "'/models/first.gguf' (3 replies)" in message and "--refresh" in message
    assert server.requests == sent + 1 and server.bodies[-1]["max_tokens"] == 1

    # Reused knowingly: no request; the manifest says what served them.
    again = evaluate(records, METRICS, judge=replace(judge, any_served_model=True),
                     bootstrap=10)
    assert again.manifest["judge"]["requests"] == 0
    assert again.manifest["judge"]["served_models"] == {"/models/first.gguf": 3}
    # Asked again: the new model's replies replace the old.
    fresh = evaluate(records, METRICS, judge=replace(judge, refresh=True), bootstrap=10)
    assert fresh.manifest["judge"]["served_models"] == {"/models/second.gguf": 3}
    # Offline replay never asks, and replays what is cached.
    offline = evaluate(records, METRICS, judge=replace(judge, offline=True, base_url=None),
                       bootstrap=10)
    assert offline.manifest["judge"]["served_models"] == {"/models/second.gguf": 3}


def test_the_first_fresh_reply_is_checked_before_it_joins_cached_ones(
        server: JudgeServer, tmp_path: Path) -> None:
    judge = _options(server, tmp_path, concurrency=1)
    server.served_as = "/models/first.gguf"
    evaluate(_records(tmp_path / "r.jsonl", 2), METRICS, judge=judge, bootstrap=10)
    server.served_as = "/models/second.gguf"
    sent = server.requests
    more = _records(tmp_path / "more.jsonl", 4)
    with pytest.raises(JudgeError, match=r"now serves '/models/second\.gguf'"):
        evaluate(more, METRICS, judge=judge, bootstrap=10)
    # No probe: the first new reply told (one more may have been in flight by then).
    assert sent + 1 <= server.requests <= sent + 2
    # And no reply of the new model joined the cache.
    offline = replace(judge, offline=True, base_url=None, allow_missing=True)
    replay = evaluate(more, METRICS, judge=offline, bootstrap=10)
    assert replay.manifest["judge"]["served_models"] == {"/models/first.gguf": 2}


def test_an_endpoint_that_echoes_the_name_is_not_asked(server: JudgeServer,
                                                       tmp_path: Path) -> None:
    """Its served model says nothing a swap would change: no probe, no extra request."""
    records = _records(tmp_path / "r.jsonl")
    judge = _options(server, tmp_path)
    evaluate(records, METRICS, judge=judge, bootstrap=10)
    sent = server.requests
    again = evaluate(records, METRICS, judge=judge, bootstrap=10)
    assert server.requests == sent and again.manifest["judge"]["served_models"] == {
        "smollm2": 3}


def test_the_command_line_reuses_knowingly(server: JudgeServer, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    records = _records(tmp_path / "r.jsonl")
    args = ["score", records, "-m", "judge:faithfulness", "--judge-model", "smollm2",
            "--judge-base-url", server.base_url, "--judge-api-key-env", ENV, "--cache",
            str(tmp_path / "c.sqlite"), "--no-progress", "--bootstrap", "10"]
    server.served_as = "a.gguf"
    assert main([*args, "--out", str(tmp_path / "a")], stdout=io.StringIO()) == 0
    server.served_as = "b.gguf"
    assert main([*args, "--out", str(tmp_path / "b")], stdout=io.StringIO()) != 0
    assert "--judge-any-served-model" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "c"), "--judge-any-served-model"],
                stdout=io.StringIO()) == 0


def test_an_endpoint_that_now_echoes_the_name_tells_nothing(server: JudgeServer,
                                                            tmp_path: Path) -> None:
    """The same GGUF moved behind a server that echoes the name: nothing to compare."""
    judge = _options(server, tmp_path, concurrency=1)
    server.served_as = "/models/first.gguf"
    evaluate(_records(tmp_path / "r.jsonl", 2), METRICS, judge=judge, bootstrap=10)
    server.served_as = None
    more = evaluate(_records(tmp_path / "more.jsonl", 4), METRICS, judge=judge, bootstrap=10)
    assert more.manifest["judge"]["served_models"] == {"/models/first.gguf": 2, "smollm2": 2}
