"""What the judge did during one run (:class:`RunStats`): cache hits and misses, requests sent
and failed, tokens, the wire formats and endpoints of the replies used, a dry run's plan and the
requests the run's caps kept back. Kept in the run's batch cache, for the manifest."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rageval.judge.llm.costs.plan import Planned
from rageval.judge.llm.costs.tokens import PromptTokens
from rageval.judge.llm.options import JudgeOptions, JudgeProgress

if TYPE_CHECKING:
    from rageval.judge.llm.transport.requests import JudgeResult

__all__ = ["RunStats"]


def _zero_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


_ACCOUNTS = itertools.count(1)  # unlike id(), never reused by a later account


@dataclass
class RunStats:
    """What the judge did during one run (kept in the run's batch cache, for the manifest)."""

    hits: int = 0
    misses: int = 0
    requests: int = 0
    failed: int = 0
    stored: int = 0
    # Tokens of the replies received this run, and of those replayed from rageval's cache; each
    # adds the endpoint's cached_prompt_tokens (prompt tokens read from the provider's prompt
    # cache: a prompt-caching discount, unrelated to rageval's cache) and reasoning_tokens
    # (inside completion_tokens) where it reports them.
    usage: dict[str, int] = field(default_factory=_zero_usage)
    cached_usage: dict[str, int] = field(default_factory=_zero_usage)
    prompts: dict[str, dict[str, str]] = field(default_factory=dict)
    formats: Counter[str] = field(default_factory=Counter)  # replies used, by wire format
    endpoints: Counter[str] = field(default_factory=Counter)  # replies used, by endpoint
    served: Counter[str] = field(default_factory=Counter)  # replies used, by served model
    refused: dict[str, str] = field(default_factory=dict)  # wire format -> endpoint's words
    # Request parameters the endpoint refused and that were sent adapted -> its words.
    refused_params: dict[str, str] = field(default_factory=dict)
    # A dry run's requests by kind (a rubric, a claim-level step), and how tokens are counted.
    planned: dict[str, Planned] = field(default_factory=dict)
    capped: int = 0  # requests the run's caps kept from being sent
    # The judges (model@endpoint) that replied to a request of this run: one that has not,
    # when a round of its requests is over, is dead (JudgeClient.complete_many).
    replied: set[str] = field(default_factory=set)
    # Replies that came by the provider's batch API, their tokens (counted in usage too) and
    # the batches (rageval.judge.llm.batch).
    batched: int = 0
    batch_usage: dict[str, int] = field(default_factory=_zero_usage)
    batches: list[str] = field(default_factory=list)
    tokens: PromptTokens | None = field(default=None, compare=False, repr=False)
    # Names this account in progress snapshots (JudgeProgress.account).
    account: int = field(default_factory=lambda: next(_ACCOUNTS), compare=False)

    def add_usage(self, usage: dict[str, int], *, cached: bool) -> None:
        target = self.cached_usage if cached else self.usage
        for key, value in usage.items():
            target[key] = target.get(key, 0) + int(value)

    def add_batch_usage(self, usage: dict[str, int]) -> None:
        for key, value in usage.items():
            self.batch_usage[key] = self.batch_usage.get(key, 0) + int(value)

    def spent_usd(self, judge: JudgeOptions) -> float | None:
        """USD spent on this account's replies: the batch's at ``judge.batch_discount`` of
        the prices (None without prices)."""
        cost = judge.cost_usd(self.usage)
        if cost is None or not self.batched:
            return cost
        saved = (judge.cost_usd(self.batch_usage) or 0.0) * (1 - judge.batch_discount)
        return round(cost - saved, 6)

    def merge(self, other: RunStats) -> None:
        """Add the counts of another account of the same run (a worker's) to this one."""
        for name in ("hits", "misses", "requests", "failed", "stored", "capped", "batched"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.add_usage(other.usage, cached=False)
        self.add_usage(other.cached_usage, cached=True)
        for key, info in other.prompts.items():
            self.prompts.setdefault(key, info)
        self.formats.update(other.formats)
        self.endpoints.update(other.endpoints)
        self.served.update(other.served)
        for key, words in other.refused.items():
            self.refused.setdefault(key, words)
        for key, words in other.refused_params.items():
            self.refused_params.setdefault(key, words)
        for kind, planned in other.planned.items():
            self.planned.setdefault(kind, Planned()).merge(planned)
        self.replied |= other.replied
        self.add_batch_usage(other.batch_usage)
        self.batches += [b for b in other.batches if b not in self.batches]

    def add_failures(self, results: Iterable[JudgeResult | None]) -> None:
        """Count the requests of a round that stopped (``JudgeError.results``: None where a
        request was not sent) that were sent and failed: a round that stops raises before
        its failures are counted with its results."""
        self.failed += sum(1 for r in results if r is not None and not r.ok)

    def plan(self, kind: str) -> Planned:
        return self.planned.setdefault(kind, Planned())

    def prompt_tokens(self, judge: JudgeOptions, messages: list[dict[str, str]]) -> int:
        """A request's prompt tokens, counted as its endpoint would (:mod:`.tokens`)."""
        if self.tokens is None:
            self.tokens = PromptTokens(judge.base_url, os.environ.get(judge.api_key_env))
        return self.tokens.count(messages)

    def tell(self, judge: JudgeOptions, total: int, failed: int, note: str = "") -> None:
        """Hand ``judge.progress`` (if any) a snapshot of this account: ``total`` requests
        sent or to send so far, ``failed`` of them failed for good (``note``: how a pending
        batch stands)."""
        if judge.progress is None:
            return
        judge.progress(JudgeProgress(
            self.requests, total, failed, self.usage.get("total_tokens", 0), hits=self.hits,
            cached_tokens=self.cached_usage.get("total_tokens", 0),
            cost_usd=self.spent_usd(judge), account=self.account, note=note,
            cached_prompt_tokens=self.usage.get("cached_prompt_tokens", 0),
            prompt_tokens=self.usage.get("prompt_tokens", 0),
            reasoning_tokens=self.usage.get("reasoning_tokens", 0)))
