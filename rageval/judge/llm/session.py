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

from rageval.core.errors import UsageError
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
    (:class:`~rageval.judge.llm.transport.backend.Backends`). :meth:`opponent` keeps the other
    system's answers of each file, read once; :meth:`hand_over` keeps what one step of the run
    made for a later one (the requests a window's check rendered, for its scoring);
    :meth:`for_workers` gives the session its workers judge with.
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
        self._handed: dict[Hashable, Any] = {}
        # The sessions of this run's workers, by what they share (for_workers); kept so that
        # what they share outlives the call that made them.
        self._workers: dict[tuple[int, int], JudgeSession] = {}

    @classmethod
    def start(cls, max_requests: int | None = None,
              max_cost: float | None = None) -> JudgeSession:
        """A fresh session for a run with these caps (none: no budget is kept)."""
        capped = max_requests is not None or max_cost is not None
        return cls(RequestBudget(max_requests, max_cost) if capped else None, per_run=True)

    def share_caps(self, max_requests: int | None, max_cost: float | None) -> None:
        """Give this session, shared by the caller's choice, the caps of options given it: the
        first caps given are its own; options with other caps cannot share it."""
        if max_requests is None and max_cost is None:
            return
        with self._lock:
            if self.budget is None:
                self.budget = RequestBudget(max_requests, max_cost)
            elif (self.budget.max_requests, self.budget.max_cost) != (max_requests, max_cost):
                raise UsageError(
                    f"this judge session counts the caps max_requests={self.budget.max_requests}"
                    f", max_cost={self.budget.max_cost}: options with max_requests="
                    f"{max_requests}, max_cost={max_cost} cannot share it")

    def for_workers(self, shared_limits: SharedLimits | None = None,
                    shared_cache: Any = None) -> JudgeSession:
        """The session this run's workers judge with, holding what they share (``shared_limits``,
        ``shared_cache``): one per what is shared, so that the metrics of a run sent to a worker
        together arrive there with one session, and learn of each endpoint once."""
        key = (id(shared_limits), id(shared_cache))
        with self._lock:
            if key not in self._workers:
                self._workers[key] = JudgeSession(shared_limits=shared_limits,
                                                  shared_cache=shared_cache)
            return self._workers[key]

    def opponent(self, key: Hashable, build: Callable[[], T]) -> T:
        """The other system's records for ``key`` (a file's version), read on first use."""
        return self._once(self._opponents, key, build)

    def hand_over(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` for the next :meth:`take_over` of ``key`` (replacing what was kept
        for it)."""
        with self._lock:
            self._handed[key] = value

    def take_over(self, key: Hashable) -> Any:
        """What was handed over for ``key``, no longer kept (None: nothing)."""
        with self._lock:
            return self._handed.pop(key, None)

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
