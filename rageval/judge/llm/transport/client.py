"""The judge client: OpenAI-compatible chat completions, concurrent, with retries and a stop rule.

:class:`JudgeClient` speaks the chat API through the official ``openai`` package (OpenAI,
Azure, vLLM, Ollama, llama.cpp, a proxy). Its one public call, :meth:`JudgeClient.complete_many`,
is synchronous: concurrency is a thread pool inside it (no asyncio: it works inside Jupyter).

* Transient failures (429 honouring ``Retry-After``, 5xx, timeouts, dropped connections) are
  retried by the SDK (bounded exponential backoff, ``max_retries``); a request that still fails
  is a failed :class:`JudgeResult` with a reason (unscored, never a silent zero).
* A permanent failure (401, 403, 404 model not found, a 400 other than a refused
  ``response_format`` or an over-long prompt, exhausted quota) stops the run at once: no new
  request is started, those in flight finish (and are handed to ``on_result``), then
  :class:`JudgeError` is raised. So does a judge that is not there (the first requests failing
  alike, a refused connection before the first reply, no reply to any request, however few:
  :mod:`rageval.judge.llm.transport.first_reply`), and a first reply that misses its deadline.
* ``on_result`` is called, in the calling thread, as each result arrives (to store it in the
  cache), ``on_drained`` after each lot of results that arrived together (to commit them).
* Structured output is negotiated (:mod:`rageval.judge.llm.transport.formats`): the first
  request to an (endpoint, model) probes the mode's most constrained wire format, once, without
  retries; a refusal (400, 422 or 500 naming the response format) steps down the ladder, the
  verdict kept by the client's backend (one request per refused format). Other requests wait
  for the verdict.
* Request parameters are negotiated alike (:mod:`rageval.judge.llm.transport.params`): a
  reasoning model's refusal of ``max_tokens`` or of a temperature is adapted (sent as
  ``max_completion_tokens``; left at the model's default), that request sent again at once and
  every later one sent adapted; the cache key stays the configured parameters', what was sent
  differently is the result's ``sent``. A refusal of what must not be dropped
  (``reasoning_effort``, ``logprobs``, an extra field) stops the run saying what to change.
* The requests go through the client's
  :class:`~rageval.judge.llm.transport.backend.ChatBackend` (the openai SDK's chat completions
  unless given another), which owns what a run learns of the endpoint: the clients of a run
  share the run's backend, two runs share nothing.
* The API key (read from ``$OPENAI_API_KEY`` or the variable named), the user info and the
  query values of the base URL (:class:`~rageval.judge.llm.transport.endpoint.Endpoint`)
  appear in no repr, error message or result: any text the endpoint echoes back is redacted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import openai

from rageval.core.errors import UsageError
from rageval.core.workers import SharedLimits
from rageval.judge.llm.cache.store import cache_key
from rageval.judge.llm.config import JudgeConfig
from rageval.judge.llm.session import JudgeSession
from rageval.judge.llm.transport import first_reply
from rageval.judge.llm.transport.backend import ChatBackend
from rageval.judge.llm.transport.endpoint import Endpoint, api_key_problem
from rageval.judge.llm.transport.formats import LADDERS, is_refusal
from rageval.judge.llm.transport.params import refused_param
from rageval.judge.llm.transport.pool import Fatal, RunStopped, Scheduler, Stopped
from rageval.judge.llm.transport.requests import JudgeError, JudgeRequest, JudgeResult, total_usage
from rageval.judge.llm.transport.sdk import (
    compact_logprobs,
    error_text,
    is_permanent,
    is_transient,
    permanent_hint,
    plain_messages,
    read_reply,
)

__all__ = ["JudgeClient", "JudgeError", "JudgeRequest", "JudgeResult", "cut_before_reply",
           "total_usage"]


class JudgeClient:
    """A client for one judge model at one OpenAI-compatible endpoint.

    Its configuration is fixed for the client's life: every request has the same sampling
    parameters (:meth:`params`, part of every cache key), the configuration's ``extra``
    fields going verbatim in the request body (``{"top_k": 1}`` for vLLM). Its requests go
    through ``backend``, which owns what is learned of the endpoint: by default the run
    session's backend for this endpoint and model, shared by the run's clients.
    """

    def __init__(self, config: JudgeConfig, session: JudgeSession | None = None,
                 backend: ChatBackend | None = None) -> None:
        """A client for ``config``'s model and endpoint (checked by ``config.check()``),
        keeping what it learns in the run's ``session`` (a fresh one when left out)."""
        self.config = config
        self.session = session if session is not None else JudgeSession()
        self.endpoint = Endpoint.of(config.base_url)
        problem = api_key_problem(config.api_key_env, config.base_url)
        if problem is not None:
            raise JudgeError(problem)
        self.model = config.model or ""
        self.api_key_env = config.api_key_env
        self.timeout = config.timeout
        self.max_retries = config.max_retries
        self.first_reply_timeout = first_reply.first_reply_limit(config.first_reply_timeout,
                                                                 config.timeout)
        self.mode = config.response_format
        self.ladder = LADDERS[config.response_format]
        if backend is None:
            backend = self.session.backends.get(config)
        elif backend.model != self.model or backend.endpoint.url != self.endpoint.url:
            raise UsageError(f"the backend serves {backend.model!r} at "
                             f"{backend.endpoint.shown}, not this client's judge")
        self.backend = backend
        self._secrets = backend.secrets
        self._usage_lock = threading.Lock()
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def __repr__(self) -> str:
        return (f"JudgeClient(model={self.model!r}, base_url={self.endpoint.shown!r}, "
                f"api_key_env={self.api_key_env!r})")

    # -- description -----------------------------------------------------------------------

    @property
    def public_endpoint(self) -> str:
        """The endpoint's scheme, host, port and path (for manifests, signatures, the cache)."""
        return self.endpoint.public

    @property
    def structured_output(self) -> bool | None:
        """Whether this endpoint accepts a ``response_format``; ``None`` until known."""
        fmt = self.backend.formats.current(self.ladder)
        return None if fmt is None else fmt != "text"

    @property
    def refused_formats(self) -> dict[str, str]:
        """Wire formats the endpoint refused, with its words."""
        return dict(self.backend.formats.refused)

    @property
    def refused_params(self) -> dict[str, str]:
        """Request parameters the endpoint refused (and that are sent adapted), with its words
        (:mod:`~rageval.judge.llm.transport.params`)."""
        return dict(self.backend.params.refused)

    @property
    def usage(self) -> dict[str, int]:
        """Token counts summed over every reply this client received."""
        with self._usage_lock:
            return dict(self._usage)

    def params(self, request: JudgeRequest | None = None) -> dict[str, Any]:
        """Every sampling parameter sent with ``request`` (unset ones left out)."""
        seed = None if request is None else request.seed
        return self.config.params(seed=seed)

    def cache_key(self, request: JudgeRequest, fmt: str = "text") -> str:
        """The cache key of ``request`` sent in wire format ``fmt``."""
        wire = request.schema.wire(fmt) if request.schema is not None else None
        return cache_key(self.model, request.messages, self.params(request), wire,
                         request.sample_index)

    def request_summary(self, request: JudgeRequest, fmt: str = "text") -> dict[str, Any]:
        """What to store next to a reply in the cache (no credentials)."""
        wire = request.schema.wire(fmt) if request.schema is not None else None
        return {"model": self.model, "endpoint": self.public_endpoint,
                "messages": [dict(m) for m in request.messages], "params": self.params(request),
                "response_format": wire, "sample_index": request.sample_index}

    def served_model(self) -> str | None:
        """The model the endpoint says serves :attr:`model` now: a one-token request, at most
        two attempts of 30 s (a check, not the run's work: an endpoint slow to answer leaves
        it unknown rather than holding the run for the whole retry schedule); the backend's
        answer holds a minute, for the rounds of a run that follow."""
        try:
            return self.backend.served_model()
        except (openai.OpenAIError, ValueError) as exc:
            raise JudgeError(f"{self._where()}: asking which model it serves failed: "
                             f"{self._redact(str(exc))}") from None

    # -- the run ---------------------------------------------------------------------------

    def complete_many(
        self,
        requests: Iterable[JudgeRequest],
        concurrency: int | None = None,
        rpm: float | None = None,
        on_result: Callable[[JudgeResult], object] | None = None,
        shared: SharedLimits | None = None,
        on_drained: Callable[[], object] | None = None,
        replied_before: bool = False,
    ) -> list[JudgeResult]:
        """Send every request, ``concurrency`` at a time (default: the configuration's); the
        results in input order. ``rpm`` caps request starts per minute; ``shared`` (limits
        shared with other processes) leases each request. ``on_result`` gets each result as it
        arrives, failed ones too, ``on_drained`` each lot, in the calling thread.
        :class:`JudgeError` once the requests in flight finish: :class:`~.pool.RunStopped`,
        :func:`.first_reply.raise_unanswered` (not when ``replied_before``: the judge answered
        earlier in the run)."""
        reqs = list(requests)
        if concurrency is None:
            concurrency = self.config.concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise UsageError(f"concurrency must be a positive integer, got {concurrency!r}")
        if rpm is not None and rpm <= 0:
            raise UsageError(f"rpm must be positive, got {rpm}")
        for r in reqs:
            if not isinstance(r, JudgeRequest):
                raise UsageError(f"expected JudgeRequest, got {type(r).__name__}")
        first = first_reply.FirstReply(self.first_reply_timeout)  # awaited anew by each call
        where = self._where()
        scheduler = Scheduler(
            reqs, lambda index, request, stop: self._complete(index, request, stop, first),
            concurrency=concurrency, rpm=rpm, shared=shared, on_result=on_result,
            on_drained=on_drained,
            fail_fast=lambda alike: first_reply.failed_alike(where, alike))
        try:
            results = scheduler.run()
        except RunStopped as stop:
            first_reply.raise_unanswered(where, stop.results, stop, replied_before)
            raise
        first_reply.raise_unanswered(where, results, None, replied_before)
        return results

    def _where(self) -> str:
        return f"judge endpoint {self.endpoint.shown} (model {self.model!r})"

    # -- one request (worker thread) -------------------------------------------------------

    def _complete(self, index: int, request: JudgeRequest, stop: threading.Event,
                  first: first_reply.FirstReply) -> JudgeResult:
        started = time.monotonic()
        while True:
            fmt, probe = self._choose(request, stop)
            try:
                reply, sent = self._attempt(request, fmt, probe, first, stop)
                return self._result(index, request, reply, started, fmt, sent)
            except _Refused:
                continue  # the next format of the ladder (the refusal is recorded)
            except openai.APIStatusError as exc:
                status = exc.status_code
                text = self._redact(error_text(exc))
                if is_permanent(exc):
                    raise Fatal(self._fatal_message(status, text)) from None
                return self._failed(index, request, f"HTTP {status}: {text}", started, fmt)
            except openai.APITimeoutError:
                return self._failed(index, request,
                                    f"timed out after {self.max_retries + 1} attempts "
                                    f"({self.timeout:g} s each)", started, fmt)
            except openai.APIConnectionError as exc:
                from rageval.judge.local.state import diagnose  # a local judge that died?

                ended = diagnose(self.endpoint.base_url)
                if ended is not None:  # no use asking a server that is gone
                    raise Fatal(f"{self._where()}: {self._redact(ended)}") from None
                if first_reply.refused_before_reply(exc, first):
                    raise Fatal(first_reply.refused(self._where())) from None
                return self._failed(index, request,
                                    f"connection failed after {self.max_retries + 1} attempts: "
                                    f"{self._redact(str(exc))}", started, fmt)
            except (openai.OpenAIError, ValueError) as exc:  # unreadable response body
                return self._failed(index, request,
                                    f"malformed response from the endpoint: "
                                    f"{self._redact(type(exc).__name__ + ': ' + str(exc))}",
                                    started, fmt)

    def _choose(self, request: JudgeRequest, stop: threading.Event) -> tuple[str, bool]:
        """The wire format to send ``request`` in, and whether it is the probe deciding it."""
        if request.schema is None:
            return "text", False
        formats = self.backend.formats
        fmt, probe = formats.choose(self.ladder, stop.is_set)
        if fmt is None:
            if probe:
                raise Stopped
            refused = "; ".join(f"{f}: {why}" for f, why in formats.refused.items())
            raise Fatal(f"{self._where()} refuses the response format {self.mode!r} "
                        f"({refused}); --judge-response-format auto steps down to one it "
                        "accepts")
        return fmt, probe

    def _attempt(self, request: JudgeRequest, fmt: str, probe: bool,
                 first: first_reply.FirstReply, stop: threading.Event
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Send ``request`` in ``fmt``: the reply and what was sent differently from the
        configured parameters (:meth:`_send_adapted`). A probe goes once, without retries: a
        refusal raises :class:`_Refused` after one request; a probe that meets a passing fault
        is sent again with the retries it has left (the same attempts in all as any request),
        still as the probe."""
        verdict: bool | None = None
        why = ""
        # A probe is sent once: a refusal must cost one request, not a retry schedule. A probe
        # that met a passing fault is sent again with the retries it has left.
        left = self.backend.max_retries - 1
        try:
            try:
                resp = self._send_adapted(request, fmt, 0 if probe else None, first, stop)
            except openai.APIStatusError as exc:
                if (not probe or left < 0 or not is_transient(exc)
                        or self._refusal(exc, fmt)):
                    raise
                resp = self._send_adapted(request, fmt, left, first, stop)
            except openai.APIConnectionError as exc:
                if not probe or left < 0 or first_reply.refused_before_reply(exc, first):
                    raise
                resp = self._send_adapted(request, fmt, left, first, stop)
            verdict = True
            return resp
        except openai.APIStatusError as exc:
            if self._refusal(exc, fmt):
                verdict = False
                why = f"HTTP {exc.status_code}: {self._redact(error_text(exc))}"
                raise _Refused from None
            raise
        finally:
            if probe or verdict is False:  # a failed probe leaves the format undecided
                self.backend.formats.settle(fmt, accepted=verdict, why=why)

    def _refusal(self, exc: openai.APIStatusError, fmt: str) -> bool:
        return fmt != "text" and is_refusal(exc.status_code, error_text(exc))

    def _send_adapted(self, request: JudgeRequest, fmt: str, retries: int | None,
                      first: first_reply.FirstReply, stop: threading.Event
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Send ``request`` with its parameters adapted to what the endpoint takes
        (:mod:`~rageval.judge.llm.transport.params`): the reply's JSON object and what was sent
        differently. A parameter refused is adapted and the request sent again at once (a 400
        is never retried: a refusal costs one request); while the backend has not settled what
        the endpoint takes, one request probes and the others wait. A refusal that cannot be
        adapted stops the run, saying what to change."""
        negotiation = self.backend.params
        while True:
            begun = negotiation.begin(stop.is_set)
            if begun is None:
                raise Stopped
            if negotiation.fatal is not None:  # another request met it: nothing more is sent
                raise Fatal(f"{self._where()} {negotiation.fatal}")
            adaptation, probe = begun
            params, sent = adaptation.apply(self.params(request))
            settled = True  # a reply, or a fault saying nothing of the parameters
            try:
                return self._send(request, fmt, retries, first, params), sent
            except openai.APIStatusError as exc:
                if self._refusal(exc, fmt):
                    settled = False  # the request comes back in the next format
                    raise
                param = refused_param(exc.status_code, exc.body, error_text(exc))
                if param is None:
                    raise
                settled = False
                why = f"HTTP {exc.status_code}: {self._redact(error_text(exc))}"
                if negotiation.adapt(param, why, adaptation) is not None:
                    raise Fatal(f"{self._where()} {negotiation.fatal}") from None
            finally:
                negotiation.end(probe, settled=settled)

    def _send(self, request: JudgeRequest, fmt: str, retries: int | None,
              first: first_reply.FirstReply, params: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` in ``fmt`` with ``params`` and ``retries`` (None: the backend's);
        the reply's JSON object (before the run's ``first`` reply, within its deadline)."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": []}
        # The parameters as sent (see send_chat for the body); the cache key holds them as
        # configured.
        body: dict[str, Any] = dict(params)
        messages = [dict(m) for m in request.messages]
        if plain_messages(messages):
            body["messages"] = messages
        else:
            kwargs["messages"] = messages
        wire = request.schema.wire(fmt) if request.schema is not None else None
        if wire is not None:
            body["response_format"] = wire
        chat = self.backend.chat
        if first.remaining() is None:
            return chat(kwargs, body, retries=retries)
        attempts = (self.backend.max_retries if retries is None else retries) + 1
        return first_reply.send_before_first_reply(
            lambda more, timeout: chat(kwargs, body, retries=more, timeout=timeout), attempts,
            first, self.backend.timeout, self._where())

    def _result(self, index: int, request: JudgeRequest, body: dict[str, Any],
                started: float, fmt: str, sent: dict[str, Any]) -> JudgeResult:
        """The result of a reply (its JSON object) to ``request`` sent with ``sent`` (what
        differed from the configured parameters); ValueError when it is not a chat reply."""
        reply = read_reply(body)
        with self._usage_lock:
            for k, v in reply.usage.items():
                self._usage[k] = self._usage.get(k, 0) + v
        cut = cut_before_reply(body, reply.text, self.params(request), sent)
        if cut is not None:
            return self._failed(index, request, cut, started, fmt, usage=reply.usage)
        if reply.failure is not None:
            return self._failed(index, request, reply.failure, started, fmt, usage=reply.usage)
        logprobs = None
        if self.config.logprobs:
            logprobs = compact_logprobs(reply.logprobs)
            if logprobs is None:
                # Asked for and not given: an endpoint limitation, not a passing fault. Falling
                # back to the reply's score would silently change what the numbers mean.
                raise Fatal(
                    f"{self._where()} returned no log-probabilities; this endpoint or model "
                    "cannot score with --judge-logprobs (drop the flag to use the replies' "
                    "scores)"
                )
        return JudgeResult(index=index, request=request, text=reply.text, usage=reply.usage,
                           model=reply.model, finish_reason=reply.finish_reason, format=fmt,
                           latency_s=time.monotonic() - started, logprobs=logprobs,
                           sent=sent)

    def _failed(self, index: int, request: JudgeRequest, error: str, started: float,
                fmt: str, usage: dict[str, int] | None = None) -> JudgeResult:
        return JudgeResult(index=index, request=request, text=None, usage=usage or {},
                           format=fmt, error=self._redact(error),
                           latency_s=time.monotonic() - started)

    def _fatal_message(self, status: int, text: str) -> str:
        hint = permanent_hint(status, self.endpoint.credentials(self.api_key_env))
        return f"{self._where()}: HTTP {status}, {hint} ({text})"

    def _redact(self, text: str) -> str:
        text = self.endpoint.redact(text)
        for s in self._secrets:
            text = text.replace(s, "***")
        return text


def cut_before_reply(body: dict[str, Any], text: str | None, params: dict[str, Any],
                      sent: dict[str, Any]) -> str | None:
    """Why a reply is empty when the model stopped at its token limit before writing anything
    (None: it did not). Reasoning models spend their reasoning tokens within the limit, so a
    small ``--judge-max-tokens`` can leave nothing for the reply itself."""
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or choice.get("finish_reason") != "length":
        return None
    if isinstance(text, str) and text.strip():
        return None
    usage = body.get("usage")
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    name = "max_completion_tokens" if "max_completion_tokens" in sent else "max_tokens"
    limit = params.get("max_tokens")
    where = f" ({name}={limit})" if limit is not None else ""
    spent = (f", {reasoning} of them reasoning tokens" if isinstance(reasoning, int)
             and reasoning > 0 else "")
    return (f"{first_reply.CUT_AT_LIMIT}{where} before writing one{spent}; a reasoning "
            "model spends its reasoning tokens within that limit: raise --judge-max-tokens or "
            "leave it out")


class _Refused(Exception):
    """The endpoint refused the wire format a request was sent in (already recorded)."""
