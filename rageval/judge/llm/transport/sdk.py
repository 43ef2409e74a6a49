"""Chat completions through the openai SDK: :class:`SdkBackend` (the
:class:`~rageval.judge.llm.transport.backend.ChatBackend` of an OpenAI-compatible endpoint),
sending a request and reading what it hands back: the reply's JSON, an endpoint's error text,
whether an error is permanent, and log-probabilities in the compact form the cache keeps."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai

from rageval.judge.llm.transport.endpoint import Endpoint
from rageval.judge.llm.transport.negotiation import Negotiation
from rageval.judge.llm.transport.params import ParamNegotiation, refused_param

if TYPE_CHECKING:
    from rageval.judge.llm.config import JudgeConfig

__all__ = ["SERVED_FRESH_S", "ChatReply", "SdkBackend", "compact_logprobs", "error_text",
           "is_permanent", "is_refused", "is_too_long", "is_transient", "plain_messages",
           "read_reply", "send_chat"]

#: How long one answer to "which model do you serve?" holds (the rounds of a run that follow).
SERVED_FRESH_S = 60.0

# A 400 that is about one request's length, not about the endpoint: that request fails (and
# its record is unscored), the others go on. Each server words it its own way:
#   OpenAI, llama-cpp-python  "This model's maximum context length is 2048 tokens. However, ..."
#                             (code context_length_exceeded)
#   llama-server              "request (7739 tokens) exceeds the available context size (4096
#                             tokens), try increasing it" (type exceed_context_size_error);
#                             older: "the request exceeds the available context size. ..."
#   vLLM                      "This model's maximum context length is ..."; "... resulting in a
#                             maximum input length of N tokens"; "The decoder prompt (length N)
#                             is longer than the maximum model length of M"
#   Ollama (truncate off)     "the input length exceeds the context length"; "the prompt is
#                             longer than the context length currently available to the model"
_TOO_LONG = re.compile(
    r"context (?:length|window|size)|maximum context|max context size|too many tokens"
    r"|exceeds? (?:the )?(?:available |maximum )?(?:context|maximum)|prompt is too long"
    r"|maximum (?:model|input) length|longer than the (?:maximum|context)"
    r"|input length exceeds", re.IGNORECASE)
_TOO_LONG_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


def send_chat(sdk: openai.OpenAI, kwargs: dict[str, Any], body: dict[str, Any]
              ) -> dict[str, Any]:
    """One chat completion through the SDK (its retries, its errors), returned as the JSON
    object the endpoint sent.

    ``kwargs`` are the SDK's typed parameters; ``body`` holds the request's plain JSON parts
    (messages, response format, extra parameters), sent as the SDK's extra body, which takes
    precedence over the typed parameters of the same name. Why: the SDK matches each typed
    message against its union of message types by introspection, about a third of the CPU time
    of a whole request, to change nothing in plain JSON; and it builds response models of
    which the judge reads four fields. At high concurrency the client's CPU time per request
    is what bounds the throughput.
    """
    raw = sdk.chat.completions.with_raw_response.create(**kwargs, extra_body=body)
    reply = json.loads(raw.content)
    if not isinstance(reply, dict):
        raise ValueError(f"expected a JSON object, got {type(reply).__name__}")
    return reply


class SdkBackend:
    """Chat completions for one model at one OpenAI-compatible endpoint, through the openai
    SDK, and what a run learns of them: the wire formats the endpoint accepts
    (:attr:`formats`), the request parameters it refuses (:attr:`params`) and the model it last
    said it serves. One per (endpoint, model) of a
    run: the clients that share it share what it learned, and nothing else does.

    Built from the judge's configuration: its model, endpoint, timeout and retries. The API
    key is read from ``$api_key_env`` once; :attr:`secrets` are the texts an error echoed back
    must never show (the key and the URL's credentials)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.model = config.model or ""
        self.endpoint = endpoint = Endpoint.of(config.base_url)
        self.timeout = timeout = config.timeout
        self.max_retries = max_retries = config.max_retries
        self.formats = Negotiation()
        self.params = ParamNegotiation()
        # Local endpoints (vLLM, Ollama, llama.cpp) usually ignore the key.
        key = os.environ.get(config.api_key_env, "") or "unused"
        self.secrets = tuple(s for s in {key, *endpoint.secrets}
                             if len(s) >= 4 and s != "unused")
        self._sdk = openai.OpenAI(base_url=endpoint.base_url, api_key=key,
                                  default_query=endpoint.query or None,
                                  max_retries=max_retries, timeout=timeout)
        del key
        self._variants: dict[int, openai.OpenAI] = {}  # by retries
        self._lock = threading.Lock()
        self._served: tuple[float, str | None] | None = None  # (when asked, the answer)

    def chat(self, kwargs: dict[str, Any], body: dict[str, Any], *, retries: int | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        """One chat completion (:func:`send_chat`): with the SDK's retries and timeout, or
        with ``retries`` retries and ``timeout`` seconds per attempt where given."""
        return send_chat(self._with(retries, timeout), kwargs, body)

    def served_model(self) -> str | None:
        """The model the endpoint says serves :attr:`model` now: a one-token request, at most
        two attempts of 30 s; one answer holds :data:`SERVED_FRESH_S` seconds. The SDK's
        error when it cannot say (not remembered: the next call asks again)."""
        with self._lock:
            asked = self._served
        if asked is not None and time.monotonic() - asked[0] <= SERVED_FRESH_S:
            return asked[1]
        body = self._ask_served()
        model = body.get("model")  # a reasoning model's one token may leave no text
        served = model if isinstance(model, str) else None
        with self._lock:
            self._served = (time.monotonic(), served)
        return served

    def _ask_served(self) -> dict[str, Any]:
        """The reply to a one-token request, its parameters adapted as the run's requests are
        (a reasoning model refuses ``max_tokens`` and a temperature of 0)."""
        sdk = self._with(min(1, self.max_retries), min(self.timeout, 30.0))
        configured = {"max_tokens": 1, "temperature": 0}
        while True:
            adaptation = self.params.adaptation
            params, _ = adaptation.apply(configured)
            try:
                return send_chat(sdk, {"model": self.model, "messages": []},
                                 {"messages": [{"role": "user", "content": "Say OK."}], **params})
            except openai.APIStatusError as exc:
                param = refused_param(exc.status_code, exc.body, error_text(exc))
                if param is None or self.params.adapt(param, f"HTTP {exc.status_code}",
                                                      adaptation):
                    raise

    def _with(self, retries: int | None, timeout: float | None) -> openai.OpenAI:
        """The SDK client with these retries and timeout (None: the backend's own). Those
        with other retries alone are made once (a probe's, a resent probe's: a copy per
        request would cost the time of building it); a timeout of its own is a deadline's,
        made for one attempt."""
        if timeout is not None:
            options: dict[str, Any] = {"timeout": timeout}
            if retries is not None:
                options["max_retries"] = retries
            return self._sdk.with_options(**options)
        if retries is None:
            return self._sdk
        with self._lock:
            sdk = self._variants.get(retries)
            if sdk is None:
                sdk = self._variants[retries] = self._sdk.with_options(max_retries=retries)
            return sdk


@dataclass(frozen=True)
class ChatReply:
    """What the judge reads of a chat reply: the first choice's text (None when ``failure``
    says why there is none), why it finished, its raw log-probabilities, the model that
    served it and the token counts."""

    text: str | None
    failure: str | None
    finish_reason: str | None = None
    logprobs: Any = None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


def read_reply(reply: dict[str, Any]) -> ChatReply:
    """The :class:`ChatReply` of a reply's JSON object; ValueError when it is not one a chat
    endpoint sends."""
    usage = _usage(reply.get("usage"), reply.get("timings"))
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        return ChatReply(None, "the endpoint returned no choices", usage=usage)
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ValueError("a choice that is not a JSON object")
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    text = message.get("content")
    finish = choice.get("finish_reason")
    if text is None:
        refusal = message.get("refusal")
        why = f"refused: {refusal}" if refusal else f"empty reply (finish_reason={finish})"
        return ChatReply(None, why, usage=usage)
    if not isinstance(text, str):
        raise ValueError(f"the message content is a {type(text).__name__}, not text")
    model = reply.get("model")
    return ChatReply(text, None, finish if isinstance(finish, str) else None,
                     choice.get("logprobs"), model if isinstance(model, str) else None, usage)


def _usage(usage: object, timings: object = None) -> dict[str, int]:
    """The token counts of a reply's ``usage`` object (those it has), with the prompt tokens
    the endpoint read from its prompt cache (``cached_prompt_tokens``) and the completion's
    reasoning tokens (``reasoning_tokens``, already inside ``completion_tokens``) where it says.

    OpenAI and vLLM report ``usage.prompt_tokens_details.cached_tokens`` and
    ``usage.completion_tokens_details.reasoning_tokens``; llama.cpp's server reports its prompt
    cache as ``timings.cache_n`` beside ``usage`` (read when ``prompt_tokens_details`` is
    absent). A field that is missing, not a count or larger than what it is part of is left out.
    """
    if not isinstance(usage, dict):
        return {}
    out = {k: v for k in ("prompt_tokens", "completion_tokens", "total_tokens")
           if _count(v := usage.get(k))}
    cached = _detail(usage, "prompt_tokens_details", "cached_tokens")
    if cached is None and isinstance(timings, dict) and _count(timings.get("cache_n")):
        cached = timings["cache_n"]
    reasoning = _detail(usage, "completion_tokens_details", "reasoning_tokens")
    for key, value, within in (("cached_prompt_tokens", cached, "prompt_tokens"),
                               ("reasoning_tokens", reasoning, "completion_tokens")):
        if value is not None and value <= out.get(within, value):
            out[key] = value
    return out


def _count(value: object) -> bool:
    """Whether a usage field is a token count (a non-negative integer, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _detail(usage: dict[str, Any], details: str, name: str) -> int | None:
    """A count inside one of ``usage``'s detail objects, or None when it has none."""
    inner = usage.get(details)
    value = inner.get(name) if isinstance(inner, dict) else None
    return value if _count(value) else None


def plain_messages(messages: list[dict[str, Any]]) -> bool:
    """Whether every message is plain text (a role and a string content, nothing else): what
    the SDK's typed transform leaves exactly as it is."""
    return all(isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
               and len(m) == 2 for m in messages)


def compact_logprobs(logprobs: Any) -> list[list[Any]] | None:
    """``choice["logprobs"]["content"]`` (the reply's JSON) as ``[[token, logprob, [[alt,
    logprob], ...]], ...]``, or None when the endpoint sent none (compact lists keep the cache
    small). Raises ValueError when they are not what the chat API sends."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return None
    try:
        out: list[list[Any]] = []
        for item in content:
            alternatives = [[alt["token"], float(alt["logprob"])]
                            for alt in (item.get("top_logprobs") or [])]
            out.append([item["token"], float(item["logprob"]), alternatives])
    except (AttributeError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable logprobs ({type(exc).__name__}: {exc})") from None
    return out


def error_text(exc: openai.APIStatusError) -> str:
    """The endpoint's own error message (falls back to the SDK's)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def is_permanent(exc: openai.APIStatusError) -> bool:
    """401/403/404, 400 and other 4xx (except 408/409/429 and a 400 saying that one prompt is
    too long for the model), and 429 for exhausted quota."""
    status = exc.status_code
    if status == 429:
        return exc.code == "insufficient_quota" or exc.type == "insufficient_quota"
    if status in (408, 409):
        return False
    if status == 400 and is_too_long(exc):
        return False
    return 400 <= status < 500


def is_too_long(exc: openai.APIStatusError) -> bool:
    """Whether an error says that one request's prompt does not fit the model's context."""
    body = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error", body)
    codes = {exc.code, exc.type}
    if isinstance(inner, dict):
        codes |= {inner.get("code"), inner.get("type")}
    return bool(_TOO_LONG_CODES & {c for c in codes if isinstance(c, str)}) or \
        _TOO_LONG.search(error_text(exc)) is not None


def is_transient(exc: openai.APIStatusError) -> bool:
    """A fault worth another attempt: what the SDK retries (408, 409, 429, every 5xx), an
    exhausted quota excepted."""
    if is_permanent(exc):
        return False
    return exc.status_code in (408, 409, 429) or exc.status_code >= 500


def is_refused(exc: BaseException) -> bool:
    """Whether a connection error is a refused connection: nothing listens at the endpoint's
    host and port (the SDK's error wraps httpx's, which wraps the socket's)."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError):
            return True
        error = error.__cause__ or error.__context__
    return False


def permanent_hint(status: int, credentials: str) -> str:
    """What a permanent HTTP ``status`` most likely means; ``credentials`` says what was sent
    to authenticate (see :meth:`~rageval.judge.llm.transport.endpoint.Endpoint.credentials`)."""
    if status == 401:
        return f"authentication failed: check {credentials}"
    if status == 403:
        return "permission denied for this key or model"
    if status == 404:
        return "model or endpoint not found: check the model name and --judge-base-url"
    if status == 429:
        return "quota exhausted"
    return "the endpoint rejected the request"
