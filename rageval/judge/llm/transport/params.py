"""Which request parameters an (endpoint, model) refuses, learned once and shared by every
request: reasoning models (OpenAI's o-series and GPT-5, and the same models through Azure, a
LiteLLM proxy or OpenRouter) refuse ``max_tokens`` and any temperature but their default.

A refusal is recognised from the error's ``code`` and ``param`` first, from its words second
(:func:`refused_param`); what is refused is then adapted, for this request (sent again at once,
without spending the retry schedule) and every later one (:class:`ParamNegotiation`, kept by the
run's :class:`~rageval.judge.llm.transport.backend.ChatBackend`, so its clients share it):

``max_tokens``             sent with the same value as ``max_completion_tokens`` (which reasoning
                           models spend on their reasoning tokens too)
``temperature``, ``seed``  left out: the model's default (recorded in each reply's meta and in
                           the results' signature, ``temperature:default``)

Nothing else is dropped: ``logprobs`` (``--judge-logprobs`` would silently score by the replies
instead), ``reasoning_effort`` (asked for explicitly) and ``--judge-extra`` fields stay the
permanent errors they are, with a message saying what to change (:func:`unadaptable`).

The cache key is the configured parameters' (:meth:`JudgeConfig.params`): a run against a
reasoning endpoint and its offline replay find the same keys; what was sent differently is the
reply's ``sent`` meta (:meth:`Adaptation.apply`).

The wordings recognised (status 400, or 422 for a FastAPI server's validation):

- OpenAI and Azure OpenAI: ``{"message": "Unsupported parameter: 'max_tokens' is not supported
  with this model. Use 'max_completion_tokens' instead.", "param": "max_tokens", "code":
  "unsupported_parameter"}``; ``"Unsupported value: 'temperature' does not support 0 with this
  model. Only the default (1) value is supported."`` (``unsupported_value``); ``"Unsupported
  parameter: 'temperature' is not supported with this model."``; ``"Unrecognized request
  argument supplied: reasoning_effort"`` (Azure's older API versions); ``"Unknown parameter:
  'reasoning_effort'."`` (``unknown_parameter``);
- OpenRouter: ``{"message": "Provider returned error", "code": 400, "metadata": {"raw": "<the
  provider's error body as JSON text>"}}``, the provider's error read from ``raw`` (OpenAI's,
  ``code`` null);
- LiteLLM proxy: ``"litellm.UnsupportedParamsError: gpt-5 models don't support temperature=0.
  Only temperature=1 is supported. ..."`` (``param`` null, ``code`` "400") and ``"... openai
  does not support parameters: ['reasoning_effort'], for model=gpt-4o. ..."``;
- a FastAPI server that forbids unknown fields: ``{"detail": [{"type": "extra_forbidden",
  "loc": ["body", "reasoning_effort"], "msg": "Extra inputs are not permitted"}]}``;
- vLLM takes ``max_completion_tokens`` and ``max_tokens`` alike and ignores the fields it does
  not know, so it refuses none of these.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rageval.core.signature import Field

__all__ = ["DEFAULT", "DEFAULTED", "RENAMED", "Adaptation", "ParamNegotiation", "defaulted",
           "refused_param", "signed_defaults", "unadaptable"]

#: Parameters sent under another name when refused.
RENAMED = {"max_tokens": "max_completion_tokens"}
#: Parameters left out when refused (the model's default then): they change how a reply is
#: sampled, not what its numbers mean, and the signature says so.
DEFAULTED = ("temperature", "seed")
#: How a left-out parameter is shown in a reply's ``sent`` meta and in signatures.
DEFAULT = "default"

_STATUSES = (400, 422)
_CODES = frozenset({"unsupported_parameter", "unsupported_value", "unknown_parameter"})
# The parameter a refusal names, in each server's words (see the module's docstring).
_WORDINGS = (
    re.compile(r"Unsupported (?:parameter|value): '(\w+)'", re.IGNORECASE),
    re.compile(r"Unknown parameter: '(\w+)'", re.IGNORECASE),
    re.compile(r"Unrecognized request arguments? supplied: (\w+)", re.IGNORECASE),
    re.compile(r"(?:don't|doesn't|does not) support (\w+)=", re.IGNORECASE),
    re.compile(r"does not support parameters: \[\s*'(\w+)'", re.IGNORECASE),
)


def refused_param(status: int, body: object, message: str) -> str | None:
    """The request parameter an error reply says the endpoint or model does not take (None: it
    says something else). ``body`` is the error's JSON body, ``message`` its text."""
    if status not in _STATUSES:
        return None
    error = _inner(body)
    if error is None:
        return _named(message)
    param, code = error.get("param"), error.get("code")
    words = error.get("message") if isinstance(error.get("message"), str) else message
    named = _named(words)
    if isinstance(param, str) and param:
        if "[" in param:  # "messages[0].role": the messages, not a request parameter
            return None
        param = param.rsplit(".", 1)[-1]  # "body.reasoning_effort" in some validators
        if code in _CODES or named == param:
            return param
    return named


def _inner(body: object) -> dict[str, Any] | None:
    """The error object of an error body: OpenAI's ``error``, the provider's error an
    OpenRouter body carries as JSON text, or a FastAPI validation error's forbidden field."""
    if not isinstance(body, dict):
        return None
    detail = body.get("detail")
    if isinstance(detail, list):
        for item in detail:
            loc = item.get("loc") if isinstance(item, dict) else None
            if item.get("type") == "extra_forbidden" and isinstance(loc, list) and loc:
                return {"param": str(loc[-1]), "code": "unknown_parameter"}
        return None
    error = body.get("error", body)
    if not isinstance(error, dict):
        return None
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if isinstance(raw, str):
        try:
            inner = _inner(json.loads(raw))
        except ValueError:
            inner = None
        if inner is not None:
            return inner
    return error


def _named(message: str) -> str | None:
    for wording in _WORDINGS:
        found = wording.search(message)
        if found:
            return found.group(1)
    return None


def unadaptable(param: str) -> str:
    """What to change when the endpoint refuses ``param``, a parameter rageval does not adapt."""
    if param in ("logprobs", "top_logprobs"):
        return ("this model gives no log-probabilities: it cannot score with --judge-logprobs "
                "(drop the flag to use the replies' scores)")
    if param == "reasoning_effort":
        return ("this model does not take this reasoning effort: choose another "
                "--judge-reasoning-effort, or leave it out (reasoning_effort under [judge])")
    if param in RENAMED.values():
        return "it takes neither max_tokens nor max_completion_tokens: leave --judge-max-tokens out"
    return f"it does not take {param!r}: leave it out of --judge-extra"


@dataclass(frozen=True)
class Adaptation:
    """What is sent differently from the configured parameters: those ``renamed`` (old name ->
    new) and those left at the model's default (``defaulted``)."""

    renamed: tuple[tuple[str, str], ...] = ()
    defaulted: tuple[str, ...] = ()

    @classmethod
    def of_sent(cls, sent: Mapping[str, Any]) -> Adaptation:
        """The adaptation a reply's ``sent`` meta (what :meth:`apply` returned) stands for."""
        return cls(tuple((old, new) for old, new in RENAMED.items() if new in sent),
                   tuple(name for name in DEFAULTED if sent.get(name) == DEFAULT))

    def apply(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The parameters as sent, and what was sent differently (a reply's ``sent`` meta:
        ``{"max_completion_tokens": 256, "temperature": "default"}``; empty when nothing)."""
        body = dict(params)
        sent: dict[str, Any] = {}
        for old, new in self.renamed:
            if old in body:
                value = body.pop(old)
                body.setdefault(new, value)  # one given with --judge-extra is the user's
                sent[new] = body[new]
        for name in self.defaulted:
            if body.pop(name, None) is not None:
                sent[name] = DEFAULT
        return body, sent


class ParamNegotiation:
    """The parameters one (endpoint, model) refused and how its requests are adapted.

    Until a reply settles it, one request at a time is sent (the probe) and the others wait:
    an endpoint that refuses two parameters costs two requests more, not two per request. A
    probe that ends without a reply or a refusal settles it as well (a passing fault says
    nothing of the parameters, and requests must not queue behind a failing endpoint one by
    one); a refusal seen later is adapted all the same."""

    def __init__(self) -> None:
        self.refused: dict[str, str] = {}  # parameter -> the endpoint's words
        self.fatal: str | None = None  # why no request can be sent (a refusal not adapted)
        self._adaptation = Adaptation()
        self._settled = False
        self._probing = False
        self._cond = threading.Condition()

    @property
    def adaptation(self) -> Adaptation:
        with self._cond:
            return self._adaptation

    def begin(self, stopped: Callable[[], bool]) -> tuple[Adaptation, bool] | None:
        """The adaptation to send with and whether this request is the probe; waits while
        another request probes; None when ``stopped()`` while waiting. Check :attr:`fatal`
        after: a request must not be sent once a refusal could not be adapted."""
        with self._cond:
            while self._probing and not self._settled and self.fatal is None:
                self._cond.wait(timeout=0.05)
                if stopped():
                    return None
            probe = not self._settled
            self._probing = self._probing or probe
            return self._adaptation, probe

    def end(self, probe: bool, *, settled: bool) -> None:
        """The probe is over; ``settled``: no parameter is left to learn by probing."""
        if not probe:
            return
        with self._cond:
            self._probing = False
            self._settled = self._settled or settled
            self._cond.notify_all()

    def adapt(self, param: str, why: str, sent: Adaptation) -> str | None:
        """Adapt ``param``, refused by a request sent with ``sent``; the reason it cannot be
        (None: adapted, send again), then kept as :attr:`fatal`, prefixed with ``why``."""
        done = dict(sent.renamed).keys() | set(sent.defaulted)
        if param in done or (param not in RENAMED and param not in DEFAULTED):
            problem = unadaptable(param)
            with self._cond:
                self.fatal = f"refuses {param!r} ({why}): {problem}"
                self._cond.notify_all()
            return problem
        with self._cond:
            self.refused[param] = why
            now = self._adaptation
            if param in RENAMED and param not in dict(now.renamed):
                now = replace(now, renamed=(*now.renamed, (param, RENAMED[param])))
            elif param in DEFAULTED and param not in now.defaulted:
                now = replace(now, defaulted=(*now.defaulted, param))
            self._adaptation = now
        return None


def defaulted(sent: object) -> tuple[str, ...]:
    """The parameters a reply's ``sent`` meta says were left at the model's default."""
    if not isinstance(sent, Mapping):
        return ()
    return tuple(name for name in DEFAULTED if sent.get(name) == DEFAULT)


def signed_defaults(fields: Iterable[Field], details: Iterable[Mapping[str, Any] | None]
                    ) -> list[Field]:
    """``fields`` with each parameter the replies behind ``details`` left at the model's
    default written as ``default`` (``temperature:default``; ``0,default`` when some replies
    had the configured value and some the default). A record's details say it as
    :func:`~rageval.judge.llm.replies.provenance` does: ``"temperature": "default"``, or
    ``["configured", "default"]``."""
    seen: dict[str, set[str]] = {name: set() for name in DEFAULTED}
    for detail in details:
        for name in DEFAULTED:
            value = (detail or {}).get(name)
            seen[name].update([value] if isinstance(value, str) else value or [])
    out = []
    for f in fields:
        values = seen.get(f.key)
        if values:
            f = replace(f, value=",".join(sorted(f.value if v == "configured" else v
                                                 for v in values)))
        out.append(f)
    return out
