"""``rageval score`` against a reasoning model, an endpoint that refuses ``max_tokens`` and any
temperature but 1 as OpenAI does: every record is scored, the signature says the temperature was
the model's default, an ``--offline`` replay scores the same with no request, and
``--judge-reasoning-effort`` is sent, keys the cache and is signed."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import TEST_KEY, TEST_KEY_ENV, JudgeServer, fact_records

from rageval.cli import main
from rageval.judge.llm.cache.store import JudgeCache

N = 6
RUBRICS = ("judge:faithfulness", "judge:correctness")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    with JudgeServer(reasoning=True, expected_key=TEST_KEY) as s:
        yield s


def _score(tmp_path: Path, out: str, *flags: str, metrics: tuple[str, ...] = RUBRICS) -> int:
    fact_records(tmp_path / "r.jsonl", N, reference=True)
    chosen = [arg for name in metrics for arg in ("-m", name)]
    return main(["score", str(tmp_path / "r.jsonl"), *chosen, "--judge-model", "o-judge",
                 "--judge-api-key-env", TEST_KEY_ENV, "--cache", str(tmp_path / "c.sqlite"),
                 "--out", str(tmp_path / out), "--no-progress", "--bootstrap", "10", *flags],
                stdout=io.StringIO())


def _scores(tmp_path: Path, out: str) -> list[dict[str, Any]]:
    lines = (tmp_path / out / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["scores"] for line in lines]


def _signatures(tmp_path: Path, out: str) -> dict[str, str]:
    summary = json.loads((tmp_path / out / "summary.json").read_text(encoding="utf-8"))
    return {name: m["signature"] for name, m in summary["metrics"].items()}


def test_a_reasoning_model_scores_every_record_and_replays_offline(server: JudgeServer,
                                                                   tmp_path: Path) -> None:
    assert _score(tmp_path, "online", "--judge-base-url", server.base_url,
                  "--judge-max-tokens", "512") == 0
    assert server.requests == 2 * N + 2  # max_tokens and temperature refused once each
    scores = _scores(tmp_path, "online")
    assert len(scores) == N and all(len(s) == 2 and None not in s.values() for s in scores)
    signatures = _signatures(tmp_path, "online")
    assert all("|temperature:default|" in s and "|max_tokens:512|" in s
               for s in signatures.values())
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        metas = [entry.meta for entry in cache.entries()]
    assert len(metas) == 2 * N
    assert all(m["sent"] == {"max_completion_tokens": 512, "temperature": "default"}
               for m in metas)
    summary = json.loads((tmp_path / "online" / "summary.json").read_text(encoding="utf-8"))
    manifest = summary["manifest"]
    refused = manifest["judge"]["refused_parameters"]
    assert set(refused) == {"max_tokens", "temperature"}
    assert "max_completion_tokens" in refused["max_tokens"]

    assert _score(tmp_path, "replay", "--offline", "--judge-max-tokens", "512") == 0
    assert server.requests == 2 * N + 2  # none
    assert _scores(tmp_path, "replay") == scores
    assert _signatures(tmp_path, "replay") == signatures


def test_the_signature_tells_a_default_temperature_from_the_configured_one(
        server: JudgeServer, tmp_path: Path) -> None:
    assert _score(tmp_path, "reasoning", "--judge-base-url", server.base_url) == 0
    server.reasoning = False  # the same model name, served by an endpoint taking temperature 0
    assert _score(tmp_path, "plain", "--judge-base-url", server.base_url, "--refresh") == 0
    reasoning, plain = _signatures(tmp_path, "reasoning"), _signatures(tmp_path, "plain")
    for name in RUBRICS:
        assert "|temperature:default|" in reasoning[name]
        assert "|temperature:0|" in plain[name]
        assert reasoning[name].replace("temperature:default", "temperature:0") == plain[name]


def test_reasoning_effort_is_sent_keyed_and_signed(server: JudgeServer, tmp_path: Path) -> None:
    metrics = ("judge:faithfulness", "claims:claim_recall")
    assert _score(tmp_path, "high", "--judge-base-url", server.base_url,
                  "--judge-reasoning-effort", "high", metrics=metrics) == 0
    assert server.bodies and all(b["reasoning_effort"] == "high" for b in server.bodies)
    assert all("|reasoning_effort:high|" in s and "|temperature:default|" in s
               for s in _signatures(tmp_path, "high").values())
    sent = server.requests
    assert _score(tmp_path, "replay", "--offline", "--judge-reasoning-effort", "high",
                  metrics=metrics) == 0
    assert server.requests == sent
    # Another effort is another request: not in the cache.
    assert _score(tmp_path, "low", "--offline", "--judge-reasoning-effort", "low",
                  metrics=metrics) == 2


def test_an_endpoint_refusing_reasoning_effort_stops_the_run_saying_so(
        server: JudgeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.reasoning = False
    server.param_refusals = {"reasoning_effort": (400, {"error": {
        "message": "Unrecognized request argument supplied: reasoning_effort",
        "type": "invalid_request_error", "param": None, "code": None}})}
    assert _score(tmp_path, "o", "--judge-base-url", server.base_url,
                  "--judge-reasoning-effort", "low") == 2
    err = capsys.readouterr().err
    assert "refuses 'reasoning_effort'" in err
    assert "choose another --judge-reasoning-effort, or leave it out" in err
    assert "Traceback" not in err


def test_a_bad_reasoning_effort_is_a_usage_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert _score(tmp_path, "o", "--judge-base-url", "http://127.0.0.1:9/v1",
                  "--judge-reasoning-effort", "max") == 2
    assert "--judge-reasoning-effort" in capsys.readouterr().err


def test_the_evaluation_file_takes_reasoning_effort(server: JudgeServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    fact_records(tmp_path / "r.jsonl", 2)

    def run(effort: str) -> int:
        (tmp_path / "eval.toml").write_text(
            'metrics = ["judge:faithfulness"]\n[inputs]\nrecords = "r.jsonl"\n'
            f'[judge]\nmodel = "o-judge"\nbase_url = "{server.base_url}"\n'
            f'api_key_env = "{TEST_KEY_ENV}"\ncache = "c.sqlite"\n'
            f'reasoning_effort = "{effort}"\n', encoding="utf-8")
        return main(["run", str(tmp_path / "eval.toml"), "--out", str(tmp_path / effort),
                     "--no-progress", "--bootstrap", "10"], stdout=io.StringIO())

    assert run("medium") == 0
    assert server.bodies and all(b["reasoning_effort"] == "medium" for b in server.bodies)
    assert run("extreme") == 2
    err = capsys.readouterr().err
    assert "eval.toml" in err and "reasoning_effort" in err
