"""What one run's judge work keeps while it goes: :class:`JudgeSession`.

A run binds a fresh session to its judge configuration when it starts
(:meth:`~rageval.judge.llm.options.JudgeOptions.bound`), so two runs in one process (a
notebook, the pytest plugin, a service; in threads, with different endpoints) share nothing:
not their caps, not what their endpoints were found to accept, not the other system's answers
read for ``judge:pairwise``. Every copy of the run's options (a panel member's, a claim step's)
keeps the same session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from rageval.core.workers import SharedLimits
from rageval.judge.llm.costs.budget import RequestBudget
from rageval.judge.llm.transport.backend import Backends

__all__ = ["JudgeSession"]

T = TypeVar("T")


class JudgeSession:
    """One run's judge state.

    ``budget``: how much of the run's caps its requests used (None without caps);
    ``shared_limits`` and ``shared_cache``: on a worker of a distributed run, the concurrency
    cap and rate every worker obeys together and the caller's reply cache reached through the
    engine (a proxy of a :class:`~rageval.judge.llm.cache.store.JudgeCache`, or
    :data:`NO_CACHE`). ``backends``: the run's chat backends, one per endpoint and model, each
    owning what the run learned of its endpoint
    (:class:`~rageval.judge.llm.transport.backend.Backends`);
    :meth:`opponent` keeps the other system's answers of each file, read once.
    """

    def __init__(self, budget: RequestBudget | None = None, *,
                 shared_limits: SharedLimits | None = None, shared_cache: Any = None,
                 per_run: bool = False) -> None:
        self.budget = budget
        # Made for one run (renewed by the next), not a session the caller chose to share.
        self.per_run = per_run
        self.shared_limits = shared_limits
        self.shared_cache = shared_cache
        self.backends = Backends()
        self._lock = threading.Lock()
        self._opponents: dict[Hashable, Any] = {}

    @classmethod
    def start(cls, max_requests: int | None = None,
              max_cost: float | None = None) -> JudgeSession:
        """A fresh session for a run with these caps (none: no budget is kept)."""
        capped = max_requests is not None or max_cost is not None
        return cls(RequestBudget(max_requests, max_cost) if capped else None, per_run=True)

    def renewed(self, max_requests: int | None = None,
                max_cost: float | None = None) -> JudgeSession:
        """A fresh session for another run with these caps, sharing what this one was given
        to share with other processes (the limits and the cache of a distributed run)."""
        fresh = self.start(max_requests, max_cost)
        fresh.shared_limits, fresh.shared_cache = self.shared_limits, self.shared_cache
        return fresh

    def opponent(self, key: Hashable, build: Callable[[], T]) -> T:
        """The other system's records for ``key`` (a file's version), read on first use."""
        return self._once(self._opponents, key, build)

    def _once(self, store: dict[Hashable, Any], key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            if key not in store:
                store[key] = build()
            return store[key]

    # A worker of a distributed run gets what the run shares, and starts its own state.
    def __getstate__(self) -> dict[str, Any]:
        return {"budget": self.budget, "shared_limits": self.shared_limits,
                "shared_cache": self.shared_cache, "per_run": self.per_run}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["budget"], shared_limits=state["shared_limits"],  # type: ignore[misc]
                      shared_cache=state["shared_cache"], per_run=state["per_run"])

    def __repr__(self) -> str:
        return f"JudgeSession(budget={self.budget!r})"
