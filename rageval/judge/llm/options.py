"""A run's judge as ``evaluate(..., judge=JudgeOptions(...))`` takes it: :class:`JudgeOptions`,
the judge's configuration (:class:`~rageval.judge.llm.config.JudgeConfig`, built from the
``--judge-*`` flags on the command line) with what one call adds: its progress callback and the
run's :class:`~rageval.judge.llm.session.JudgeSession`; and the reply cache it opens.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from rageval.core.errors import UsageError
from rageval.core.workers import Sharing
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.config import (
    DEFAULT_CACHE,
    TOP_LOGPROBS,
    JudgeConfig,
    check_extra,
    parse_extra,
)
from rageval.judge.llm.costs.budget import RequestBudget
from rageval.judge.llm.session import JudgeSession

__all__ = ["DEFAULT_CACHE", "TOP_LOGPROBS", "JudgeConfig", "JudgeOptions", "JudgeProgress",
           "JudgeSession", "check_extra", "parse_extra"]


@dataclass(frozen=True)
class JudgeProgress:
    """A snapshot of the judge's work, handed to ``JudgeOptions.progress`` once the cache has
    been read for a round of requests and then as each reply arrives.

    The counts are those of one *account* so far: a run keeps one for its rubric judge and one
    for its claim-level judging, each asking in one or more rounds. Within an account no count
    goes down, and ``total`` grows as a new round adds the requests it sends; the snapshots of
    one account share ``account``, so a listener that shows the whole run adds up the latest
    snapshot of each.
    """

    done: int  # requests finished (replies and failures)
    total: int  # requests sent or to be sent (the cache lacked their reply)
    failed: int  # requests that failed for good
    tokens: int  # total tokens of the replies received
    hits: int = 0  # requests answered from the cache (never sent)
    cached_tokens: int = 0  # total tokens of those cached replies (replayed, not spent)
    cost_usd: float | None = None  # USD spent on the replies received; None: no prices given
    # Of the replies received: prompt tokens the endpoint read from its own prompt cache
    # (provider prompt caching, not rageval's cache) and reasoning tokens (part of the
    # completion tokens), as far as the endpoint reports them.
    cached_prompt_tokens: int = 0
    prompt_tokens: int = 0  # of the replies received, what the share above is of
    reasoning_tokens: int = 0
    account: int = 0  # tells accounts apart (its value means nothing else)
    note: str = ""  # how a pending batch stands (--judge-batch): status, counts, time


@dataclass(frozen=True, kw_only=True)
class JudgeOptions(JudgeConfig):
    """How the judge is reached and how its replies are cached (one per run): a
    :class:`~rageval.judge.llm.config.JudgeConfig` (every field documented there, with its
    option), and what belongs to one call, never to the configuration.

    ``progress`` is called as replies arrive (it never changes a value). ``session`` holds
    the run's state (:class:`~rageval.judge.llm.session.JudgeSession`): ``evaluate`` binds a
    fresh one when the run starts (:meth:`bound`), so options reused by two runs share none
    of it; every copy of the options within a run keeps it. A session the caller makes and
    gives (``JudgeOptions(..., session=JudgeSession())``) is kept as it is by every run given
    these options: they then share what it holds (what the endpoints were found to accept, the
    caps' use), as the caller chose. Its caps are the first given with it; options sharing it
    with other caps are refused.
    """

    progress: Callable[[JudgeProgress], object] | None = field(default=None, compare=False,
                                                                repr=False)
    session: JudgeSession = field(default=None, compare=False, repr=False)  # type: ignore

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.session is None:
            object.__setattr__(self, "session", self.fresh_session())
        elif not self.session.per_run:
            self.session.share_caps(self.max_requests, self.max_cost)

    def fresh_session(self) -> JudgeSession:
        return JudgeSession.start(self.max_requests, self.max_cost)

    def bound(self) -> JudgeOptions:
        """These options with a session of their own: what one run judges with (a session the
        caller gave is kept)."""
        if not self.session.per_run:
            return self
        return replace(self, session=self.fresh_session())

    @property
    def budget(self) -> RequestBudget | None:
        """The run's caps and how much of them is used (None without caps)."""
        return self.session.budget

    def for_workers(self, workers: int, sharing: Sharing | None = None) -> JudgeOptions:
        """The options one of ``workers`` processes judges with, so that together they stay
        within this run's concurrency and requests per minute and keep one reply cache: with
        ``sharing`` every request of every worker takes a lease from the limits they share,
        and the cache is the caller's, reached through the engine; without, each worker gets
        its share of the concurrency (at least 1) and of the rate, and opens the cache file
        itself. Paths become absolute; the progress callback stays behind."""
        if self.budget is not None:
            raise UsageError("--judge-max-requests and --judge-max-cost cap one process's "
                             "requests: they do not apply with --engine ray")
        if self.batch:
            # Each worker would send batches of its own and record them in one file beside the
            # cache, with no lock between processes: a record lost is a batch paid twice.
            raise UsageError("--judge-batch sends a run's requests as batches from one "
                             "process: it does not apply with --engine ray (a batch is "
                             "not faster for being sent from many)")
        local = replace(self, progress=None, cache=os.path.abspath(self.cache_path),
                        prompts_dir=(None if self.prompts_dir is None
                                     else os.path.abspath(self.prompts_dir)),
                        session=self.session.for_workers())
        if sharing is None:
            share = max(1, self.concurrency // workers)
            rpm = None if self.rpm is None else self.rpm / workers
            return replace(local, concurrency=share, rpm=rpm)
        cache: Any = _NO_CACHE  # an offline run without a cache file: none on any worker
        if not (self.offline and not os.path.exists(local.cache_path)):
            cache = sharing.service(("judge-cache", local.cache_path), _open_cache,
                                    local.cache_path)
        session = self.session.for_workers(sharing.limits(self.concurrency, self.rpm), cache)
        return replace(local, rpm=None, session=session)

    def open_cache(self) -> JudgeCache | SharedCache | None:
        """The reply cache, or None for an offline run whose cache file does not exist (a
        worker of a distributed run: the caller's, through the engine)."""
        shared = self.session.shared_cache
        if isinstance(shared, str) and shared == _NO_CACHE:
            return None
        if shared is not None:
            return SharedCache(shared)
        path = self.cache_path
        if self.offline and not os.path.exists(path):
            return None
        if path.endswith(".jsonl"):
            return JudgeCache.from_jsonl(path)
        return JudgeCache(path)


# The shared cache of a worker whose run has none (an offline run without a cache file).
_NO_CACHE = "no cache"


def _open_cache(path: str) -> JudgeCache:
    """The cache a run's workers share, opened once where the caller runs."""
    return JudgeCache.from_jsonl(path) if path.endswith(".jsonl") else JudgeCache(path)


class SharedCache:
    """The reply cache of a distributed run as a worker sees it: the caller's, each call made
    there (reads, and writes stored when they are made: a worker that dies loses only the lot
    of replies it had not handed over yet)."""

    def __init__(self, proxy: Any) -> None:
        self._proxy = proxy

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        return self._proxy.get_many(list(keys))

    def missing(self, keys: Iterable[str]) -> list[str]:
        return self._proxy.missing(list(keys))

    def lookup(self, requests: list[Any], *, backfill: bool = False) -> list[Any]:
        return self._proxy.lookup(requests, backfill=backfill)

    def find(self, requests: list[Any], *, backfill: bool = False) -> list[Any]:
        return self._proxy.find(requests, backfill=backfill)

    def put_many(self, *args: Any, **kwargs: Any) -> int:
        return self._proxy.put_many(*args, **kwargs)

    def close(self) -> None:
        """Nothing: the cache stays open for the other workers (the caller closes it)."""

    def __enter__(self) -> SharedCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
