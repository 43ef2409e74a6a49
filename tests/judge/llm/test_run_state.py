"""What a run learns of its judge endpoints (the wire formats they accept, the model they serve)
is the run's, kept by its chat backends: two runs in one process, at the same time in threads
or one after the other, share none of it."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from judge_server import (
    TEST_KEY,
    TEST_KEY_ENV,
    JudgeServer,
    fact_records,
    keyed_options,
    wire_format,
)

from rageval.api import evaluate
from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.transport.backend import Backends
from rageval.judge.llm.transport.client import JudgeError
from rageval.judge.llm.transport.sdk import SdkBackend

METRICS = ["judge:faithfulness"]



@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)


def test_two_runs_in_threads_against_two_endpoints_share_nothing(tmp_path: Path) -> None:
    with JudgeServer(expected_key=TEST_KEY, reject_response_format=True,
                     latency_s=0.01) as refusing, \
            JudgeServer(expected_key=TEST_KEY, latency_s=0.01) as accepting:
        accepting.served_as = "/models/b.gguf"
        runs: dict[str, Any] = {}
        failures: list[BaseException] = []

        def run(name: str, server: JudgeServer) -> None:
            try:
                judge = keyed_options(server, tmp_path / f"{name}.sqlite", concurrency=2)
                runs[name] = (judge, evaluate(fact_records(tmp_path / f"{name}.jsonl", 4), METRICS,
                                              judge=judge, bootstrap=10))
            except BaseException as exc:  # handed to the test's thread
                failures.append(exc)

        threads = [threading.Thread(target=run, args=("a", refusing)),
                   threading.Thread(target=run, args=("b", accepting))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures
    (judge_a, a), (judge_b, b) = runs["a"], runs["b"]
    formats_a = a.manifest["judge"]["response_format"]
    formats_b = b.manifest["judge"]["response_format"]
    assert set(formats_a["refused"]) == {"json_schema", "json_object+schema", "json_object"}
    assert formats_a["used"] == {"text": 4}
    assert formats_b["refused"] == {} and formats_b["used"] == {"json_schema": 4}
    assert b.manifest["judge"]["served_models"] == {"/models/b.gguf": 4}
    assert "/models/b.gguf" not in a.manifest["judge"]["served_models"]
    # The options given were not changed by the runs: each run had a session of its own.
    assert len(judge_a.session.backends) == len(judge_b.session.backends) == 0


def test_a_later_run_learns_the_endpoint_anew(tmp_path: Path) -> None:
    """A refusal one run met is not taken for the next run's: the endpoint may have changed
    (a server restarted with grammar support), and the next run asks again."""
    with JudgeServer(expected_key=TEST_KEY, reject_response_format=True) as server:
        first = evaluate(fact_records(tmp_path / "r.jsonl", 4), METRICS,
                         judge=keyed_options(server, tmp_path / "1.sqlite"), bootstrap=10)
        assert first.manifest["judge"]["response_format"]["used"] == {"text": 4}
        server.reject_response_format = False
        sent = server.requests
        second = evaluate(fact_records(tmp_path / "r.jsonl", 4), METRICS,
                          judge=keyed_options(server, tmp_path / "2.sqlite"), bootstrap=10)
        assert second.manifest["judge"]["response_format"] == {
            "mode": "auto", "used": {"json_schema": 4}, "refused": {}}
        assert [wire_format(b) for b in server.bodies[sent:]] == ["json_schema"] * 4


def test_runs_given_one_session_share_what_it_learned(tmp_path: Path) -> None:
    """A session the caller gives is kept: the second run knows the endpoint's refusals and
    sends no probe, and the caps given with the options count across both runs."""
    from dataclasses import replace

    from rageval.judge.llm.session import JudgeSession

    with JudgeServer(expected_key=TEST_KEY, reject_response_format=True) as server:
        judge = replace(keyed_options(server, tmp_path / "1.sqlite"), session=JudgeSession(),
                        max_requests=100)
        evaluate(fact_records(tmp_path / "r.jsonl", 4), METRICS, judge=judge, bootstrap=10)
        sent = server.requests
        second = evaluate(fact_records(tmp_path / "s.jsonl", 2), METRICS,
                          judge=replace(judge, cache=str(tmp_path / "2.sqlite")), bootstrap=10)
        assert second.manifest["judge"]["response_format"]["used"] == {"text": 2}
        assert [wire_format(b) for b in server.bodies[sent:]] == ["text"] * 2
        assert len(judge.session.backends) == 1
        assert judge.budget is not None and judge.budget.sent == 4 + 2


def test_a_later_run_asks_again_which_model_is_served(tmp_path: Path) -> None:
    """What the endpoint said it serves holds within a run, not into the next one."""
    records = fact_records(tmp_path / "r.jsonl", 2)
    cache = tmp_path / "c.sqlite"
    with JudgeServer(expected_key=TEST_KEY) as server:
        server.served_as = "/models/first.gguf"
        evaluate(records, METRICS, judge=keyed_options(server, cache), bootstrap=10)
        # Every reply cached: the next run asks what is served (first.gguf, as cached).
        evaluate(records, METRICS, judge=keyed_options(server, cache), bootstrap=10)
        server.served_as = "/models/second.gguf"
        with pytest.raises(JudgeError, match=r"now serves '/models/second\.gguf'"):
            evaluate(records, METRICS, judge=keyed_options(server, cache), bootstrap=10)


def test_a_run_hands_out_one_backend_per_endpoint_and_model() -> None:
    backends = Backends()
    config = JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="K",
                         timeout=5.0, max_retries=1)
    one = backends.get(config)
    assert isinstance(one, SdkBackend)
    assert backends.get(replace(config, base_url="http://127.0.0.1:9/v1/")) is one
    assert backends.get(replace(config, model="n")) is not one
    assert len(backends) == 2


def test_backends_copied_to_another_process_arrive_empty() -> None:
    import pickle

    backends = Backends()
    backends.get(JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="K",
                             timeout=5.0, max_retries=1))
    copy = pickle.loads(pickle.dumps(backends))
    assert len(copy) == 0 and len(backends) == 1


class _Scripted:
    """A backend of the test's own (no HTTP): what a backend beside the SDK's must offer."""

    def __init__(self, model: str, refuses: frozenset[str] = frozenset()) -> None:
        from rageval.judge.llm.transport.endpoint import Endpoint
        from rageval.judge.llm.transport.negotiation import Negotiation
        from rageval.judge.llm.transport.params import ParamNegotiation

        self.model = model
        self.endpoint = Endpoint.of("http://127.0.0.1:9/v1")
        self.timeout = 5.0
        self.max_retries = 0
        self.formats = Negotiation()
        self.params = ParamNegotiation()
        self.secrets: tuple[str, ...] = ()
        self.refuses = refuses
        self.sent: list[dict[str, Any]] = []

    def chat(self, kwargs: dict[str, Any], body: dict[str, Any], *, retries: int | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        import httpx
        import openai

        self.sent.append(body)
        wire = body.get("response_format", {}).get("type", "text")
        if wire in self.refuses:
            response = httpx.Response(400, request=httpx.Request("POST", "http://x"))
            raise openai.BadRequestError("response_format is not supported",
                                         response=response,
                                         body={"message": "response_format is not supported"})
        text = json.dumps({"reasoning": "scripted", "score": len(self.sent)})
        return {"model": "scripted", "choices": [{"message": {"content": text},
                                                  "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}

    def served_model(self) -> str | None:
        return "scripted"


def test_a_client_sends_through_the_backend_it_is_given() -> None:
    from rageval.judge.llm.config import JudgeConfig
    from rageval.judge.llm.transport.backend import ChatBackend
    from rageval.judge.llm.transport.client import JudgeClient, JudgeRequest
    from rageval.judge.llm.transport.formats import ReplySchema

    schema = ReplySchema("verdict", {"type": "object",
                                     "properties": {"score": {"type": "integer"}}})
    backend = _Scripted("m", refuses=frozenset({"json_schema"}))
    assert isinstance(backend, ChatBackend)  # structurally: a protocol, not a base class
    client = JudgeClient(JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1"),
                         backend=backend)
    requests = [JudgeRequest([{"role": "user", "content": f"q{i}"}], schema) for i in range(4)]
    results = client.complete_many(requests, concurrency=2)
    assert all(r.ok and r.model == "scripted" for r in results)
    assert {r.format for r in results} == {"json_object+schema"}
    assert list(backend.formats.refused) == ["json_schema"]  # learned by the backend
    assert client.served_model() == "scripted" and client.usage["total_tokens"] == 20
    with pytest.raises(Exception, match="not this client's judge"):
        JudgeClient(JudgeConfig(model="other", base_url="http://127.0.0.1:9/v1"),
                    backend=backend)
