"""A reasoning model's refusals are learned once per endpoint and model: the first request probes
while the others wait, each refused parameter costs one request more (N requests + one per
refused parameter, not 2N), the clients of a run share what was learned, another run learns it
anew. The cache key stays the configured parameters'; what was sent differently is the
result's ``sent``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from judge_server import JudgeServer

from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.session import JudgeSession
from rageval.judge.llm.transport.client import JudgeClient, JudgeError, JudgeRequest
from rageval.judge.llm.transport.formats import ReplySchema

SCHEMA = ReplySchema("verdict", {"type": "object", "properties": {
    "reasoning": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["reasoning", "score"], "additionalProperties": False})


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer(reasoning=True, latency_s=0.02) as s:
        yield s


def _config(server: JudgeServer, **settings: Any) -> JudgeConfig:
    return JudgeConfig(**{"model": "o-judge", "base_url": server.base_url, "timeout": 5.0,
                          "max_retries": 1, "max_tokens": 512, **settings})


def _requests(n: int, schema: ReplySchema | None = None, tag: str = "") -> list[JudgeRequest]:
    return [JudgeRequest([{"role": "user", "content": f"Rate answer {tag}{i} on 1-5."}],
                         schema) for i in range(n)]


@pytest.mark.parametrize("schema", [None, SCHEMA], ids=["text", "json_schema"])
def test_n_requests_cost_n_plus_one_per_refused_parameter(server: JudgeServer,
                                                          schema: ReplySchema | None) -> None:
    results = JudgeClient(_config(server)).complete_many(_requests(20, schema), concurrency=8)
    assert all(r.ok for r in results), [r.error for r in results]
    assert server.requests == 20 + 2  # max_tokens refused, then temperature 0, then accepted
    first, second, *rest = server.bodies
    assert "max_tokens" in first and "temperature" in first
    assert "max_tokens" not in second and second["temperature"] == 0
    assert all("max_tokens" not in b and "temperature" not in b
               and b["max_completion_tokens"] == 512 for b in rest)
    assert all(r.sent == {"max_completion_tokens": 512, "temperature": "default"}
               for r in results)
    assert {r.format for r in results} == {"text" if schema is None else "json_schema"}


def test_the_clients_of_a_run_share_what_was_learned_and_another_run_learns_anew(
        server: JudgeServer) -> None:
    session = JudgeSession()
    JudgeClient(_config(server), session).complete_many(_requests(3), concurrency=2)
    assert server.requests == 3 + 2
    client = JudgeClient(_config(server, concurrency=4), session)  # the same backend
    assert client.refused_params.keys() == {"max_tokens", "temperature"}
    client.complete_many(_requests(3, tag="b"), concurrency=2)
    assert server.requests == 5 + 3
    JudgeClient(_config(server)).complete_many(_requests(3, tag="c"), concurrency=2)
    assert server.requests == 8 + 3 + 2  # a new run's backend probes again


def test_the_cache_key_is_the_configured_parameters(server: JudgeServer) -> None:
    client = JudgeClient(_config(server))
    request = _requests(1)[0]
    before = client.cache_key(request)
    [result] = client.complete_many([request])
    assert result.ok and client.cache_key(request) == before
    assert client.params(request) == {"temperature": 0.0, "max_tokens": 512}
    assert client.request_summary(request)["params"] == {"temperature": 0.0, "max_tokens": 512}


def test_a_temperature_of_one_is_sent_as_it_is(server: JudgeServer) -> None:
    results = JudgeClient(_config(server, temperature=1.0)).complete_many(_requests(4))
    assert all(r.ok and r.sent == {"max_completion_tokens": 512} for r in results)
    assert server.requests == 4 + 1 and server.bodies[-1]["temperature"] == 1


def test_reasoning_effort_is_sent_and_keys_the_cache(server: JudgeServer) -> None:
    plain, effort = JudgeClient(_config(server)), JudgeClient(_config(server,
                                                                      reasoning_effort="low"))
    request = _requests(1)[0]
    assert effort.params(request)["reasoning_effort"] == "low"
    assert effort.cache_key(request) != plain.cache_key(request)
    [result] = effort.complete_many([request])
    assert result.ok and server.bodies[-1]["reasoning_effort"] == "low"


def test_a_reply_left_empty_by_reasoning_says_why(server: JudgeServer) -> None:
    server.reasoning_tokens = 300
    with pytest.raises(JudgeError) as stopped:  # every reply alike: no use going on
        JudgeClient(_config(server, max_tokens=200)).complete_many(_requests(2))
    assert "raise --judge-max-tokens or leave it out" in str(stopped.value)
    assert "--judge-timeout" not in str(stopped.value)  # the patience is not what to change
    for result in stopped.value.results:
        assert result is not None and not result.ok
        assert "max_completion_tokens=200" in (result.error or "")
        assert "200 of them reasoning tokens" in (result.error or "")
        assert "raise --judge-max-tokens or leave it out" in (result.error or "")
        assert result.usage["completion_tokens"] == 200


def test_reasoning_tokens_are_counted_as_completion_tokens(server: JudgeServer) -> None:
    client = JudgeClient(_config(server))
    [result] = client.complete_many(_requests(1))
    assert result.ok and result.usage["completion_tokens"] >= server.reasoning_tokens


def test_asking_which_model_is_served_adapts_too(server: JudgeServer) -> None:
    client = JudgeClient(_config(server))
    assert client.served_model() == "o-judge"
    assert server.requests == 3  # max_tokens, then temperature refused, then answered
    client.complete_many(_requests(2))
    assert server.requests == 3 + 2  # the run's requests go adapted from the start


def test_replies_partly_at_the_default_temperature_sign_both() -> None:
    from rageval.core.signature import Field
    from rageval.judge.llm.replies import provenance
    from rageval.judge.llm.transport.params import signed_defaults
    from rageval.judge.llm.units import Reply

    default, configured = Reply("{}", defaults=("temperature",)), Reply("{}")
    assert provenance([default, default])["temperature"] == "default"
    assert provenance([default, configured])["temperature"] == ["configured", "default"]
    assert "temperature" not in provenance([configured])
    fields = [Field("temperature", "0", "t"), Field("seed", "7", "sd")]
    assert signed_defaults(fields, [None, {"temperature": "default"}]) == \
        [Field("temperature", "default", "t"), Field("seed", "7", "sd")]
    assert signed_defaults(fields, [{"temperature": "default"},
                                    {"temperature": ["configured", "default"]}])[0].value == \
        "0,default"
    assert signed_defaults(fields, [{}]) == fields
