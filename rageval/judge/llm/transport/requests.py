"""What the judge client sends and what it hands back: :class:`JudgeRequest`,
:class:`JudgeResult`, and :class:`JudgeError` for a run that stopped for good."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rageval.core.errors import RagevalError
from rageval.judge.llm.transport.formats import ReplySchema

__all__ = ["JudgeError", "JudgeRequest", "JudgeResult", "total_usage"]


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

    ``messages`` are chat messages (``{"role": ..., "content": ...}``); ``schema`` is the
    reply's JSON schema, sent in the wire format the endpoint accepts (None: plain text);
    ``sample_index`` tells repeated samples of the same request apart in the cache key;
    ``tag`` is the caller's own handle (a record id, a cache key) and is returned untouched.
    """

    messages: Sequence[Mapping[str, Any]]
    schema: ReplySchema | None = None
    sample_index: int = 0
    tag: Any = None
    seed: int | None = None  # overrides the configuration's seed for this request (per sample)


@dataclass(frozen=True)
class JudgeResult:
    """The outcome of one request: a reply (``text``) or a reason it failed (``error``).

    ``format`` is the wire format the request was sent in
    (:mod:`rageval.judge.llm.transport.formats`), the one its reply is cached under. ``usage``
    holds the token counts reported by the endpoint (``prompt_tokens``, ``completion_tokens``,
    ``total_tokens``).
    """

    index: int
    request: JudgeRequest
    text: str | None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    finish_reason: str | None = None
    format: str = "text"
    error: str | None = None
    latency_s: float = 0.0
    # With logprobs requested: one [token, logprob, [[alternative, logprob], ...]] per token.
    logprobs: list[list[Any]] | None = None
    # What was sent differently from the configured parameters, which the endpoint refused
    # (:mod:`rageval.judge.llm.transport.params`): {"max_completion_tokens": 256,
    # "temperature": "default"}; empty when the request went as configured.
    sent: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the endpoint returned a reply text."""
        return self.error is None and self.text is not None

    @property
    def structured(self) -> bool:
        """Whether a ``response_format`` was sent with the request that produced the reply."""
        return self.format != "text"


def total_usage(results: Iterable[JudgeResult | None]) -> dict[str, int]:
    """Token counts summed over results (failed and missing results count nothing)."""
    out = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for r in results:
        if r is None:
            continue
        for k, v in r.usage.items():
            out[k] = out.get(k, 0) + v
    return out
