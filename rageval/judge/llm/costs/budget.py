"""The caps a run puts on what it sends its judge: ``--judge-max-requests N`` and
``--judge-max-cost USD``, shared by every judge metric and claim-level step of the run.

A request is admitted before it is sent, in the order the run would send it, while it fits
under both caps; the first that would pass one is refused and so is every later one (a run
stops asking where its cap is, and a rerun with a higher cap asks only for what the cache
lacks). A request's cost is estimated as it is admitted: its prompt tokens (counted as
:mod:`~rageval.judge.llm.costs.tokens` counts them) and a completion of ``--judge-max-tokens``
tokens, or of the mean completion of the replies received so far (none before the first
reply), at the run's prices (a batch's with ``--judge-batch``). A round of requests is
admitted before it is sent, on the estimates; what its replies report replaces them for the
rounds after it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["RequestBudget"]


class Priced(Protocol):
    """What the budget reads of the run's judge options (:class:`JudgeOptions`)."""

    max_tokens: int | None

    def sent_cost(self, usage: Mapping[str, int]) -> float | None: ...


@dataclass
class RequestBudget:
    """How much of a run's caps its judge requests have used."""

    max_requests: int | None = None
    max_cost: float | None = None
    sent: int = 0
    spent: float = 0.0  # USD of the replies received, as their usage reports
    reached: str | None = None  # the cap that stopped the run, as its flag says it
    _estimated: float = 0.0  # USD of the requests admitted whose replies are not in yet
    _completions: list[int] = field(default_factory=lambda: [0, 0])  # tokens, replies
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(self, judge: Priced, prompt_tokens: int) -> str | None:
        """None when one more request fits under the caps (it is counted from then on), else
        why it may not be sent; once one is refused, every later one is."""
        with self._lock:
            reason = self._over(judge, prompt_tokens)
            if reason is not None:
                return reason
            self.sent += 1
            return None

    def received(self, judge: Priced, usage: dict[str, int]) -> None:
        """A reply's usage: what it cost replaces the estimates of the requests in flight."""
        with self._lock:
            self.spent += judge.sent_cost(usage) or 0.0
            if "completion_tokens" in usage:
                self._completions[0] += int(usage["completion_tokens"])
                self._completions[1] += 1

    def settled(self) -> None:
        """Every admitted request has its reply (or failed): no estimate is left."""
        with self._lock:
            self._estimated = 0.0

    def _over(self, judge: Priced, prompt_tokens: int) -> str | None:
        if self.reached is not None:
            return self._reason()
        if self.max_requests is not None and self.sent >= self.max_requests:
            self.reached = f"--judge-max-requests {self.max_requests}"
            return self._reason()
        if self.max_cost is not None:
            tokens, replies = self._completions
            completion = (judge.max_tokens if judge.max_tokens is not None
                          else round(tokens / replies) if replies else 0)
            cost = judge.sent_cost({"prompt_tokens": prompt_tokens,
                                   "completion_tokens": completion}) or 0.0
            if self.spent + self._estimated + cost > self.max_cost:
                self.reached = f"--judge-max-cost {self.max_cost:g}"
                return self._reason()
            self._estimated += cost
        return None

    def _reason(self) -> str:
        return f"not asked: the run reached its judge cap ({self.reached})"
