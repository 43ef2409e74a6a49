"""What a run would ask its judge (``--dry-run``): for each kind of request (a rubric, a
claim-level step), the requests it would send, the replies the cache already holds, and the
tokens and cost the requests are estimated at. The manifest section of the judge work holds it
under ``dry_run``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from rageval.judge.llm.costs.tokens import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["DRY_RUN", "Planned", "batch_plan"]

#: Why a judged item has no value in a dry run.
DRY_RUN = "not asked: a dry run sends nothing"


@dataclass
class Planned:
    """One kind of request in a dry run."""

    hits: int = 0
    to_send: int = 0
    prompt_tokens: int = 0
    # The completion tokens of the cached replies that reported them, to estimate the rest by.
    cached_completion_tokens: int = 0
    cached_with_usage: int = 0

    def hit(self, usage: dict[str, int]) -> None:
        self.hits += 1
        if "completion_tokens" in usage:
            self.cached_completion_tokens += int(usage["completion_tokens"])
            self.cached_with_usage += 1

    def send(self, prompt_tokens: int) -> None:
        self.to_send += 1
        self.prompt_tokens += prompt_tokens

    def merge(self, other: Planned) -> None:
        for name in (f.name for f in fields(self)):  # every field is a count
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def completion_estimate(self, max_tokens: int | None) -> tuple[int | None, str]:
        """The completion tokens the requests to send are estimated at, and how."""
        if self.cached_with_usage:
            mean = self.cached_completion_tokens / self.cached_with_usage
            return round(self.to_send * mean), "the mean of this run's cached replies"
        if max_tokens is not None:
            return self.to_send * max_tokens, "at most --judge-max-tokens each"
        return None, "unknown: no cached reply to go by, and no --judge-max-tokens"

    def to_json(self, judge: JudgeOptions) -> dict[str, Any]:
        completion, how = self.completion_estimate(judge.max_tokens)
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion or 0}
        return {"requests": self.to_send, "cache_hits": self.hits,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                "completion_estimate": how,
                "cost_usd": judge.sent_cost(usage)}


# What a batch line holds besides its messages' text (its custom_id, url, parameters,
# response format and JSON punctuation), for the estimate of a batch file's size.
_LINE_BYTES = 1_000


def batch_plan(judge: JudgeOptions, planned: Mapping[str, Planned]) -> dict[str, Any]:
    """With ``--judge-batch``: the batches a run would send (split at the provider's limits
    on requests and on bytes, the bytes estimated from the prompt tokens), and the share of
    the prices they are counted at."""
    from rageval.judge.llm.batch import lines  # the limits, read now (a test lowers them)

    requests = sum(p.to_send for p in planned.values())
    prompt = sum(p.prompt_tokens for p in planned.values())
    size = prompt * CHARS_PER_TOKEN + _LINE_BYTES * requests
    batches = max(math.ceil(requests / lines.MAX_REQUESTS), math.ceil(size / lines.MAX_BYTES))
    return {"batches": batches, "requests": requests, "prompt_tokens": prompt,
            "input_bytes_estimate": size, "discount": judge.batch_discount}
