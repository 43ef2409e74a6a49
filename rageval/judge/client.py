"""The judge client: OpenAI-compatible chat completions, concurrent, with retries and a stop rule.

:class:`JudgeClient` speaks the chat API through the official ``openai`` package, so any
OpenAI-compatible endpoint works (OpenAI, Azure, vLLM, Ollama, a proxy). Its one public call,
:meth:`JudgeClient.complete_many`, is synchronous: concurrency is a thread pool inside it (no
asyncio, so it also works inside Jupyter).

* Transient failures (429 honouring ``Retry-After``, 5xx, timeouts, dropped connections) are
  retried by the SDK's own retry machinery (bounded exponential backoff, ``max_retries``). A
  request that still fails is returned as a failed :class:`JudgeResult` with a reason (unscored,
  never a silent zero); the run goes on.
* A permanent failure (401, 403, 404 model not found, 400 other than a refusal of
  ``response_format``, exhausted quota) stops the run at once: no new request is started, those
  in flight finish (and are handed to ``on_result``), then :class:`JudgeError` is raised.
* ``on_result`` is called, in the calling thread, as each result arrives, so the caller can store
  every reply in the cache the moment it exists.
* When an endpoint refuses structured output (400 naming ``response_format``/``json_schema``) the
  request is retried without it, and the client remembers not to send it to that endpoint again.
  While that is unknown, only one request carries ``response_format`` (a probe); the others wait
  for its verdict, so a refusing endpoint sees the schema once. The verdict is kept for the
  process, per endpoint and model, so later clients do not probe again.
* The API key is read from an environment variable (``OPENAI_API_KEY`` unless another name is
  given). It never appears in a repr, an error message or a result: any text the endpoint echoes
  back is redacted.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import openai

from rageval.errors import RagevalError, UsageError
from rageval.judge.cache import cache_key

__all__ = ["JudgeClient", "JudgeError", "JudgeRequest", "JudgeResult", "total_usage"]

_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RF_REFUSAL = re.compile(r"response_format|json_schema|json_object|structured output|guided_json",
                         re.IGNORECASE)


# Whether an (endpoint, model) accepts response_format, once known: later clients in the same
# process skip the probe. Only the two verdicts are kept, never anything about a request.
_RF_VERDICTS: dict[tuple[str, str], bool] = {}


class JudgeError(RagevalError):
    """The judge endpoint failed for good (bad key, unknown model, bad request, no quota).

    ``results`` holds what finished before the run stopped (``None`` where nothing was sent).
    """

    exit_code = 2

    def __init__(self, message: str, *, results: Sequence[JudgeResult | None] = ()) -> None:
        super().__init__(message)
        self.results: list[JudgeResult | None] = list(results)


@dataclass(frozen=True)
class JudgeRequest:
    """One chat request to the judge.

    ``messages`` are chat messages (``{"role": ..., "content": ...}``); ``response_format`` is
    the structured-output request (e.g. a ``json_schema``), or ``None``; ``sample_index`` tells
    repeated samples of the same request apart in the cache key; ``tag`` is the caller's own
    handle (a record id, a cache key) and is returned untouched with the result.
    """

    messages: Sequence[Mapping[str, Any]]
    response_format: Mapping[str, Any] | None = None
    sample_index: int = 0
    tag: Any = None
    seed: int | None = None  # overrides the client's seed for this request (per-sample seeds)


@dataclass(frozen=True)
class JudgeResult:
    """The outcome of one request: a reply (``text``) or a reason it failed (``error``).

    ``structured`` says whether ``response_format`` was sent with the request that produced the
    reply (it is not after the endpoint refused structured output). ``usage`` holds the token
    counts reported by the endpoint (``prompt_tokens``, ``completion_tokens``, ``total_tokens``).
    """

    index: int
    request: JudgeRequest
    text: str | None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    finish_reason: str | None = None
    structured: bool = False
    error: str | None = None
    latency_s: float = 0.0
    # With logprobs requested: one [token, logprob, [[alternative, logprob], ...]] per token.
    logprobs: list[list[Any]] | None = None

    @property
    def ok(self) -> bool:
        """True when the endpoint returned a reply text."""
        return self.error is None and self.text is not None


def total_usage(results: Iterable[JudgeResult | None]) -> dict[str, int]:
    """Token counts summed over results (failed and missing results count nothing)."""
    out = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for r in results:
        if r is None:
            continue
        for k, v in r.usage.items():
            out[k] = out.get(k, 0) + v
    return out


class _Fatal(Exception):
    """A permanent failure inside a worker (carries an already-redacted message)."""


@dataclass(frozen=True)
class _Done:
    """A worker has no more requests to send (``error``: the exception that ended it)."""

    error: BaseException | None


class _Stopped(Exception):
    """The run was stopped before this request was sent."""


class _TokenBucket:
    """At most ``rpm`` request starts per minute, evenly spaced (burst ``burst``)."""

    def __init__(self, rpm: float, burst: int = 1) -> None:
        if rpm <= 0:
            raise UsageError(f"rpm must be positive, got {rpm}")
        self.rate = rpm / 60.0
        self.capacity = float(max(1, burst))
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self, stop: threading.Event) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= 1.0:
                    self.tokens -= 1.0
                    return
                delay = (1.0 - self.tokens) / self.rate
            if stop.wait(min(delay, 0.25)):
                raise _Stopped


class JudgeClient:
    """A client for one judge model at one OpenAI-compatible endpoint.

    Parameters are fixed for the client's life, so every request it sends has the same sampling
    parameters (see :meth:`params`, which are part of every cache key). ``extra_params`` are sent
    verbatim in the request body (e.g. ``{"top_k": 1}`` for vLLM).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        extra_params: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
        max_retries: int = 5,
        top_logprobs: int | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise UsageError("judge model must be a non-empty string")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env or ""):
            raise UsageError(f"not an environment variable name: {api_key_env!r}")
        if max_retries < 0:
            raise UsageError("max_retries must be >= 0")
        if timeout <= 0:
            raise UsageError("timeout must be positive")
        if top_logprobs is not None and not 1 <= top_logprobs <= 20:
            raise UsageError(f"top_logprobs must be between 1 and 20, got {top_logprobs}")
        self.model = model
        self.base_url = (base_url or _DEFAULT_BASE_URL).rstrip("/")
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.extra_params = dict(extra_params or {})
        self.top_logprobs = top_logprobs
        self.timeout = timeout
        self.max_retries = max_retries
        key = os.environ.get(api_key_env, "")
        if not key:
            if base_url is None:
                raise JudgeError(
                    f"no API key: set the environment variable {api_key_env} "
                    "(or point --judge-base-url at an endpoint that needs none)"
                )
            key = "unused"  # local endpoints (vLLM, Ollama) usually ignore the key
        self._secrets = tuple(s for s in {key} if len(s) >= 4 and s != "unused")
        self._sdk = openai.OpenAI(base_url=self.base_url, api_key=key,
                                  max_retries=max_retries, timeout=timeout)
        del key
        self._rf_cond = threading.Condition()
        # None: not known yet for this endpoint and model (a verdict is shared in-process).
        self._rf_supported: bool | None = _RF_VERDICTS.get((self.base_url, model))
        self._rf_probe_busy = False
        self._usage_lock = threading.Lock()
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def __repr__(self) -> str:
        return (f"JudgeClient(model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key_env={self.api_key_env!r})")

    # -- description -----------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The endpoint's host (for manifests and signatures)."""
        return urlsplit(self.base_url).netloc or self.base_url

    @property
    def structured_output(self) -> bool | None:
        """Whether this endpoint accepts ``response_format``; ``None`` until known."""
        return self._rf_supported

    @property
    def usage(self) -> dict[str, int]:
        """Token counts summed over every reply this client received."""
        with self._usage_lock:
            return dict(self._usage)

    def params(self, request: JudgeRequest | None = None) -> dict[str, Any]:
        """Every sampling parameter sent with ``request`` (unset ones left out)."""
        seed = self.seed if request is None or request.seed is None else request.seed
        p: dict[str, Any] = {"temperature": self.temperature, "seed": seed,
                             "max_tokens": self.max_tokens, "top_p": self.top_p,
                             **self.extra_params}
        if self.top_logprobs is not None:
            p.update(logprobs=True, top_logprobs=self.top_logprobs)
        return {k: v for k, v in p.items() if v is not None}

    def cache_key(self, request: JudgeRequest) -> str:
        """The cache key of ``request`` as this client would send it."""
        return cache_key(self.model, request.messages, self.params(request),
                         request.response_format, request.sample_index)

    def request_summary(self, request: JudgeRequest) -> dict[str, Any]:
        """What to store next to a reply in the cache (no credentials)."""
        return {"model": self.model, "endpoint": self.host,
                "messages": [dict(m) for m in request.messages], "params": self.params(request),
                "response_format": (dict(request.response_format)
                                    if request.response_format is not None else None),
                "sample_index": request.sample_index}

    # -- the run ---------------------------------------------------------------------------

    def complete_many(
        self,
        requests: Iterable[JudgeRequest],
        concurrency: int = 16,
        rpm: float | None = None,
        on_result: Callable[[JudgeResult], object] | None = None,
    ) -> list[JudgeResult]:
        """Send every request, ``concurrency`` at a time, and return results in input order.

        ``rpm`` caps request starts per minute. ``on_result`` is called in the calling thread
        for each result as it arrives (failed ones too: check :attr:`JudgeResult.ok`). Raises
        :class:`JudgeError` after a permanent failure, once the requests in flight finish.
        """
        reqs = list(requests)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise UsageError(f"concurrency must be a positive integer, got {concurrency!r}")
        for r in reqs:
            if not isinstance(r, JudgeRequest):
                raise UsageError(f"expected JudgeRequest, got {type(r).__name__}")
        limiter = _TokenBucket(rpm) if rpm is not None else None
        stop = threading.Event()
        results: list[JudgeResult | None] = [None] * len(reqs)
        fatal: list[str] = []
        callback_error: list[BaseException] = []
        todo = iter(enumerate(reqs))
        # Each worker takes the next request itself, so a slow consumer (the caller storing
        # replies) never holds back the requests in flight; finished ones come back through a
        # queue, read in the calling thread, which is where on_result runs.
        taken = threading.Lock()
        finished: queue.SimpleQueue[JudgeResult | str | _Done | None] = queue.SimpleQueue()

        def worker() -> None:
            error: BaseException | None = None
            try:
                while not stop.is_set():
                    with taken:
                        nxt = next(todo, None)
                    if nxt is None:
                        return
                    finished.put(self._run_one(nxt[0], nxt[1], stop, limiter))
            except BaseException as exc:  # a bug in a worker must not hang the caller
                error = exc
            finally:
                finished.put(_Done(error))

        workers = min(concurrency, len(reqs))
        with ThreadPoolExecutor(max_workers=max(1, workers),
                                thread_name_prefix="rageval-judge") as pool:
            for _ in range(workers):
                pool.submit(worker)
            running = workers
            try:
                while running:
                    out = finished.get()
                    if isinstance(out, _Done):
                        running -= 1
                        if out.error is not None:
                            stop.set()
                            callback_error.append(out.error)
                    elif isinstance(out, str):  # a permanent failure
                        stop.set()
                        fatal.append(out)
                    elif isinstance(out, JudgeResult):
                        results[out.index] = out
                        if on_result is not None and not callback_error:
                            try:
                                on_result(out)
                            except BaseException as exc:
                                stop.set()
                                callback_error.append(exc)
            except BaseException:
                stop.set()  # e.g. KeyboardInterrupt: start nothing more, let in-flight end
                raise
        if callback_error:
            raise callback_error[0]
        if fatal:
            got = sum(1 for r in results if r is not None and r.ok)
            raise JudgeError(
                f"{fatal[0]}; the run stopped after {got} of {len(reqs)} replies",
                results=results,
            )
        return [r for r in results if r is not None]

    # -- one request (worker thread) -------------------------------------------------------

    def _run_one(self, index: int, request: JudgeRequest, stop: threading.Event,
                 limiter: _TokenBucket | None) -> JudgeResult | str | None:
        """A result, a permanent-failure message (str), or None when stopped before sending."""
        try:
            if stop.is_set():
                return None
            if limiter is not None:
                limiter.acquire(stop)
            return self._complete(index, request, stop)
        except _Stopped:
            return None
        except _Fatal as exc:
            stop.set()
            return str(exc)

    def _complete(self, index: int, request: JudgeRequest, stop: threading.Event) -> JudgeResult:
        started = time.monotonic()
        use_rf = False
        probe = False
        if request.response_format is not None:
            with self._rf_cond:
                while True:
                    if self._rf_supported is not None:
                        use_rf = self._rf_supported
                        break
                    if not self._rf_probe_busy:
                        self._rf_probe_busy = probe = use_rf = True
                        break
                    self._rf_cond.wait(timeout=0.05)
                    if stop.is_set():
                        raise _Stopped
        try:
            if stop.is_set():
                raise _Stopped
            try:
                try:
                    resp = self._send(request, use_rf)
                except openai.BadRequestError as exc:
                    if not (use_rf and _RF_REFUSAL.search(_error_text(exc))):
                        raise
                    with self._rf_cond:
                        self._rf_supported = False
                    _RF_VERDICTS[(self.base_url, self.model)] = False
                    use_rf = False
                    resp = self._send(request, use_rf)
                else:
                    if use_rf:
                        with self._rf_cond:
                            self._rf_supported = True
                        _RF_VERDICTS[(self.base_url, self.model)] = True
            except openai.APIStatusError as exc:
                status = exc.status_code
                text = self._redact(_error_text(exc))
                if _is_permanent(exc):
                    raise _Fatal(self._fatal_message(status, text)) from None
                return self._failed(index, request, f"HTTP {status}: {text}", started, use_rf)
            except openai.APITimeoutError:
                return self._failed(index, request,
                                    f"timed out after {self.max_retries + 1} attempts "
                                    f"({self.timeout:g} s each)", started, use_rf)
            except openai.APIConnectionError as exc:
                return self._failed(index, request,
                                    f"connection failed after {self.max_retries + 1} attempts: "
                                    f"{self._redact(str(exc))}", started, use_rf)
            except (openai.OpenAIError, ValueError) as exc:  # unreadable response body
                return self._failed(index, request,
                                    f"malformed response from the endpoint: "
                                    f"{self._redact(type(exc).__name__ + ': ' + str(exc))}",
                                    started, use_rf)
        finally:
            if probe:
                with self._rf_cond:
                    self._rf_probe_busy = False
                    self._rf_cond.notify_all()
        return self._result(index, request, resp, started, use_rf)

    def _send(self, request: JudgeRequest, use_rf: bool) -> Any:
        kwargs: dict[str, Any] = {"model": self.model,
                                  "messages": [dict(m) for m in request.messages],
                                  "temperature": self.temperature}
        seed = self.seed if request.seed is None else request.seed
        if seed is not None:
            kwargs["seed"] = seed
        if self.top_logprobs is not None:
            kwargs.update(logprobs=True, top_logprobs=self.top_logprobs)
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if use_rf and request.response_format is not None:
            kwargs["response_format"] = dict(request.response_format)
        if self.extra_params:
            kwargs["extra_body"] = dict(self.extra_params)
        return self._sdk.chat.completions.create(**kwargs)

    def _result(self, index: int, request: JudgeRequest, resp: Any, started: float,
                structured: bool) -> JudgeResult:
        usage: dict[str, int] = {}
        u = getattr(resp, "usage", None)
        if u is not None:
            for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
                v = getattr(u, k, None)
                if isinstance(v, int):
                    usage[k] = v
        with self._usage_lock:
            for k, v in usage.items():
                self._usage[k] = self._usage.get(k, 0) + v
        choices = getattr(resp, "choices", None) or []
        if not choices:
            return self._failed(index, request, "the endpoint returned no choices", started,
                                structured, usage=usage)
        choice = choices[0]
        text = getattr(choice.message, "content", None)
        finish = getattr(choice, "finish_reason", None)
        if text is None:
            refusal = getattr(choice.message, "refusal", None)
            why = f"refused: {refusal}" if refusal else f"empty reply (finish_reason={finish})"
            return self._failed(index, request, why, started, structured, usage=usage)
        logprobs = None
        if self.top_logprobs is not None:
            logprobs = _compact_logprobs(getattr(choice, "logprobs", None))
            if logprobs is None:
                # Asked for and not given: an endpoint limitation, not a passing fault. Falling
                # back to the reply's score would silently change what the numbers mean.
                raise _Fatal(
                    f"judge endpoint {self.host} (model {self.model!r}) returned no "
                    "log-probabilities; this endpoint or model cannot score with "
                    "--judge-logprobs (drop the flag to use the replies' scores)"
                )
        return JudgeResult(index=index, request=request, text=text, usage=usage,
                           model=getattr(resp, "model", None), finish_reason=finish,
                           structured=structured, latency_s=time.monotonic() - started,
                           logprobs=logprobs)

    def _failed(self, index: int, request: JudgeRequest, error: str, started: float,
                structured: bool, usage: dict[str, int] | None = None) -> JudgeResult:
        return JudgeResult(index=index, request=request, text=None, usage=usage or {},
                           structured=structured, error=self._redact(error),
                           latency_s=time.monotonic() - started)

    def _fatal_message(self, status: int, text: str) -> str:
        where = f"judge endpoint {self.host} (model {self.model!r})"
        if status == 401:
            hint = f"authentication failed: check the API key in ${self.api_key_env}"
        elif status == 403:
            hint = "permission denied for this key or model"
        elif status == 404:
            hint = "model or endpoint not found: check the model name and --judge-base-url"
        elif status == 429:
            hint = "quota exhausted"
        else:
            hint = "the endpoint rejected the request"
        return f"{where}: HTTP {status}, {hint} ({text})"

    def _redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return text


def _compact_logprobs(logprobs: Any) -> list[list[Any]] | None:
    """``choice.logprobs.content`` as ``[[token, logprob, [[alt, logprob], ...]], ...]``, or
    None when the endpoint sent none (compact lists keep the cache small)."""
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if not content:
        return None
    out: list[list[Any]] = []
    for item in content:
        alternatives = [[alt.token, float(alt.logprob)]
                        for alt in (getattr(item, "top_logprobs", None) or [])]
        out.append([item.token, float(item.logprob), alternatives])
    return out


def _error_text(exc: openai.APIStatusError) -> str:
    """The endpoint's own error message (falls back to the SDK's)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def _is_permanent(exc: openai.APIStatusError) -> bool:
    """401/403/404, 400 and other 4xx (except 408/409/429), and 429 for exhausted quota."""
    status = exc.status_code
    if status == 429:
        return exc.code == "insufficient_quota" or exc.type == "insufficient_quota"
    if status in (408, 409):
        return False
    return 400 <= status < 500
