"""How servers refuse a request parameter, one test per wording: OpenAI (and Azure OpenAI, whose
bodies are OpenAI's), OpenRouter (the provider's error as JSON text in ``metadata.raw``), a
LiteLLM proxy, a FastAPI server forbidding unknown fields. A refusal of ``max_tokens``,
``temperature`` or ``seed`` is adapted and the request sent again; a refusal of what rageval
must not drop (``reasoning_effort``, ``logprobs``, a ``--judge-extra`` field) stops the run
saying what to change; any other 400 stays the permanent error it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from judge_server import JudgeServer, openai_refusal

from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.transport.client import JudgeClient, JudgeError, JudgeRequest
from rageval.judge.llm.transport.params import refused_param


def _openrouter(inner: dict[str, Any]) -> dict[str, Any]:
    return {"error": {"message": "Provider returned error", "code": 400,
                      "metadata": {"raw": json.dumps(inner, indent=2),
                                   "provider_name": "OpenAI"}}}


def _litellm(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": "400"}}


_LITELLM_TEMPERATURE = (
    "litellm.UnsupportedParamsError: gpt-5 models don't support temperature=0. Only "
    "temperature=1 is supported. To drop unsupported params set `litellm.drop_params = True`")
_LITELLM_O_SERIES = (
    "litellm.UnsupportedParamsError: O-series models don't support temperature=0.0. Only "
    "temperature=1 is supported. To drop unsupported openai params from the call, set "
    "`litellm.drop_params = True`")
_LITELLM_PARAMS = (
    "litellm.UnsupportedParamsError: openai does not support parameters: ['reasoning_effort'], "
    "for model=gpt-4o. To drop these, set `litellm.drop_params=True` or for proxy:\n\n"
    "`litellm_settings:\n drop_params: true`\n")
_NO_CODE = {"message": "Unsupported parameter: 'temperature' is not supported with this model.",
            "type": "invalid_request_error", "param": "temperature", "code": None}

# name -> (the parameter refused, the status, the error body)
WORDINGS: dict[str, tuple[str, int, Any]] = {
    "openai-max_tokens": ("max_tokens", 400, openai_refusal("max_tokens")),
    "openai-temperature-value": ("temperature", 400, openai_refusal("temperature", 0)),
    "openai-temperature-parameter": ("temperature", 400, openai_refusal("temperature")),
    "openai-seed": ("seed", 400, openai_refusal("seed")),
    "proxy-max_tokens-message-only": (
        "max_tokens", 400, {"error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.", "code": "invalid_request_body"}}),
    "azure-temperature-no-code": ("temperature", 400, {"error": _NO_CODE}),
    "openrouter-temperature": ("temperature", 400, _openrouter({"error": _NO_CODE})),
    "openrouter-max_tokens": ("max_tokens", 400, _openrouter(openai_refusal("max_tokens"))),
    "litellm-temperature": ("temperature", 400, _litellm(_LITELLM_TEMPERATURE)),
    "litellm-o-series-temperature": ("temperature", 400, _litellm(_LITELLM_O_SERIES)),
    "fastapi-extra-forbidden": ("seed", 422, {"detail": [{
        "type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not "
        "permitted", "input": 7}]}),
}

# name -> (the parameter refused, the status, the error body, what the error must say)
UNADAPTABLE: dict[str, tuple[str, int, Any, str]] = {
    "openai-reasoning_effort": ("reasoning_effort", 400, openai_refusal("reasoning_effort"),
                                "choose another --judge-reasoning-effort, or leave it out"),
    "azure-unrecognized-argument": (
        "reasoning_effort", 400, {"error": {
            "message": "Unrecognized request argument supplied: reasoning_effort",
            "type": "invalid_request_error", "param": None, "code": None}},
        "choose another --judge-reasoning-effort, or leave it out"),
    "openai-unknown-parameter": (
        "reasoning_effort", 400, {"error": {
            "message": "Unknown parameter: 'reasoning_effort'.", "type":
            "invalid_request_error", "param": "reasoning_effort", "code": "unknown_parameter"}},
        "choose another --judge-reasoning-effort, or leave it out"),
    "litellm-parameters": ("reasoning_effort", 400, _litellm(_LITELLM_PARAMS),
                           "choose another --judge-reasoning-effort, or leave it out"),
    "openai-reasoning_effort-value": (
        "reasoning_effort", 400, {"error": {
            "message": "Unsupported value: 'reasoning_effort' does not support 'minimal' with "
                       "this model. Supported values are: 'low', 'medium', and 'high'.",
            "type": "invalid_request_error", "param": "reasoning_effort",
            "code": "unsupported_value"}},
        "choose another --judge-reasoning-effort, or leave it out"),
    "openai-logprobs": ("logprobs", 400, openai_refusal("logprobs"),
                        "cannot score with --judge-logprobs"),
    "openai-extra-field": ("top_p", 400, openai_refusal("top_p", 0.5),
                           "leave it out of --judge-extra"),
}


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


def _client(server: JudgeServer, **settings: Any) -> JudgeClient:
    return JudgeClient(JudgeConfig(**{"model": "m", "base_url": server.base_url,
                                      "timeout": 5.0, "max_retries": 1, "seed": 7,
                                      "max_tokens": 256, **settings}))


def _requests(n: int) -> list[JudgeRequest]:
    return [JudgeRequest([{"role": "user", "content": f"Rate answer {i} on a scale of 1-5."}])
            for i in range(n)]


@pytest.mark.parametrize("name", sorted(WORDINGS))
def test_a_refused_parameter_is_recognised_and_adapted(server: JudgeServer, name: str) -> None:
    param, status, body = WORDINGS[name]
    message = body.get("error", {}).get("message", "") if "error" in body else ""
    assert refused_param(status, body, message) == param
    server.param_refusals = {param: (status, body)}
    results = _client(server).complete_many(_requests(3), concurrency=3)
    assert all(r.ok for r in results), [r.error for r in results]
    assert server.requests == 3 + 1  # the first request refused once, sent again adapted
    refused, *adapted = server.bodies
    assert param in refused and all(param not in b for b in adapted)
    if param == "max_tokens":
        assert all(b["max_completion_tokens"] == 256 for b in adapted)
        assert all(r.sent == {"max_completion_tokens": 256} for r in results)
    else:
        assert all(r.sent == {param: "default"} for r in results)


@pytest.mark.parametrize("name", sorted(UNADAPTABLE))
def test_a_refusal_that_cannot_be_adapted_stops_the_run_saying_why(server: JudgeServer,
                                                                    name: str) -> None:
    param, status, body, says = UNADAPTABLE[name]
    message = body["error"]["message"]
    assert refused_param(status, body, message) == param
    server.param_refusals = {param: (status, body)}
    server.latency_s = 0.05  # the other requests are waiting when the refusal comes
    settings: dict[str, Any] = {"reasoning_effort": "high"} if param == "reasoning_effort" \
        else {"logprobs": True} if param == "logprobs" else {"extra": {param: 0.5}}
    with pytest.raises(JudgeError, match=says) as stopped:
        _client(server, **settings).complete_many(_requests(6), concurrency=6)
    assert repr(param) in str(stopped.value)
    assert server.requests == 1  # the others waited for the first one's verdict


@pytest.mark.parametrize("body", [
    {"error": {"message": "Invalid 'temperature': decimal above maximum value. Expected a value "
               "<= 2, but got 3 instead.", "type": "invalid_request_error",
               "param": "temperature", "code": "decimal_above_max_value"}},
    {"error": {"message": "Invalid value for 'messages'.", "type": "invalid_request_error",
               "param": "messages", "code": None}},
    {"error": {"message": "Unsupported value: 'messages[0].role' does not support 'system' "
               "with this model.", "type": "invalid_request_error",
               "param": "messages[0].role", "code": "unsupported_value"}},
], ids=["invalid-temperature", "invalid-messages", "unsupported-message-role"])
def test_any_other_400_stays_a_permanent_error(server: JudgeServer, body: Any) -> None:
    assert refused_param(400, body, body["error"]["message"]) is None
    server.param_refusals = {"temperature": (400, body)}
    with pytest.raises(JudgeError, match="HTTP 400"):
        _client(server).complete_many(_requests(2), concurrency=1)
    assert server.requests == 1


def test_a_refusal_names_a_parameter_only_with_a_client_error_status() -> None:
    assert refused_param(500, openai_refusal("max_tokens"), "") is None
    assert refused_param(400, "not json", "Unsupported parameter: 'max_tokens' is not "
                                          "supported with this model.") == "max_tokens"
