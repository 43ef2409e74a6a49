"""How the judge is reached and cached: :class:`JudgeOptions`, one per run.

``evaluate(..., judge=JudgeOptions(...))`` in Python, the ``--judge-*`` flags on the command
line. :meth:`JudgeOptions.check` validates every option before anything is read, written or
sent, so a bad option never leaves a cache file or an output directory behind.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from rageval.core import read_only
from rageval.core.errors import MOST_SAMPLES, UsageError, check_int
from rageval.core.files import creatable
from rageval.core.workers import SharedLimits, Sharing
from rageval.judge.llm.backend import Backends
from rageval.judge.llm.cache.store import JudgeCache
from rageval.judge.llm.costs.budget import RequestBudget
from rageval.judge.llm.endpoint import Endpoint
from rageval.judge.llm.formats import LADDERS, MODES
from rageval.judge.llm.members import check_panel, panel_members

__all__ = ["DEFAULT_CACHE", "TOP_LOGPROBS", "JudgeOptions", "JudgeProgress"]

DEFAULT_CACHE = os.path.join(".rageval", "cache.sqlite")
TOP_LOGPROBS = 20  # the most the OpenAI API returns per token


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
    account: int = 0  # tells accounts apart (its value means nothing else)


@dataclass(frozen=True)
class JudgeOptions:
    """How the judge is reached and how its replies are cached (one per run).

    ``model`` is part of every cache key and signature, so replaying offline needs it too.
    ``base_url``: an OpenAI-compatible endpoint (default OpenAI's); user info and query values
    in it are credentials and are never shown or stored. ``cache``: the SQLite file of replies
    (default ``.rageval/cache.sqlite``), or a JSONL export read for an offline replay.
    ``offline``: use the cache only, never the network; ``allow_missing``: with ``offline``,
    leave records the cache lacks unscored instead of failing. ``refresh``: ask again even when a
    reply is cached, and store the new one. ``api_key_env`` names the environment variable
    holding the key (the key itself is never stored). ``prompts_dir``: a directory of user
    rubrics looked up by name before the built-ins.

    ``response_format``: how structured output is asked for, one of
    :data:`~rageval.judge.llm.formats.MODES` (``auto`` negotiates with the endpoint).
    ``timeout``: seconds per attempt; ``max_retries``: attempts after the first for a passing
    fault (429, 5xx, a timeout, a dropped connection); ``first_reply_timeout``: seconds from
    the first request within which some reply must arrive, else the run stops (None: 300, or
    twice ``timeout`` when that is longer). ``max_tokens``: the longest reply asked
    for (None: the endpoint's default; small local models can otherwise write until their
    context is full). ``history_chars``: the most characters of earlier turns shown with a
    turn of a conversation, the oldest left out first (None: all of them).
    ``samples``: replies per item; the value is their mean and the spread goes in the details.
    ``seed``: sent with each request (sample ``i`` gets ``seed + i``, so samples differ on
    endpoints that honour seeds). ``logprobs``: score by the expected value of the score token's
    top log-probabilities (G-Eval) instead of the reply's integer. ``price_in``/``price_out``:
    USD per million prompt/completion tokens, for the cost in the manifest. ``against``: the
    records file of the other system, for ``judge:pairwise``. ``extra``: request fields sent
    as they are, for a server's own sampling parameters (``{"repeat_penalty": 1.1}`` for
    llama.cpp); they are part of the cache key and the signature. ``progress`` is
    called as replies arrive (not part of the configuration: it never changes a value).
    """

    model: str | None = None
    base_url: str | None = None
    cache: str | None = None
    offline: bool = False
    allow_missing: bool = False
    refresh: bool = False
    concurrency: int = 16
    rpm: float | None = None
    api_key_env: str = "OPENAI_API_KEY"
    prompts_dir: str | None = None
    temperature: float = 0.0
    timeout: float = 120.0
    first_reply_timeout: float | None = None
    max_retries: int = 5
    response_format: str = "auto"
    max_tokens: int | None = None
    # The most characters of earlier turns a turn of a conversation is judged with (None:
    # every earlier turn): rageval.judge.prompting.history.
    history_chars: int | None = None
    seed: int | None = None
    samples: int = 1
    logprobs: bool = False
    price_in: float | None = None
    price_out: float | None = None
    against: str | None = None
    # Server-specific request fields sent as they are (llama.cpp's repeat_penalty, vLLM's
    # top_k, ...): part of every cache key and signature, like the sampling parameters.
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # Reuse cached replies even when the endpoint now serves another model under the name.
    any_served_model: bool = False
    # Send nothing: count what would be sent, and its tokens and cost (--dry-run).
    dry_run: bool = False
    # The run's caps on what it sends (--judge-max-requests, --judge-max-cost), and how much
    # of them is used: one budget for the whole run, kept by every copy of these options.
    max_requests: int | None = None
    max_cost: float | None = None
    budget: RequestBudget | None = field(default=None, compare=False, repr=False)
    # A panel of judges (--judge SPEC, repeatable): what each member changes of these options
    # (judge.llm.members), how the members' values make the panel's (PANEL_RULES), and how
    # many members must answer for the panel to go on without the others (None: every one).
    panel: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    panel_rule: str = "mean"
    panel_min_members: int | None = None
    progress: Callable[[JudgeProgress], object] | None = field(default=None, compare=False,
                                                                repr=False)
    # What the workers of a distributed run share (set by for_workers, never by hand): the
    # concurrency cap and rate they obey together (rageval.core.workers.SharedLimits), and
    # the reply cache, one file on the caller's machine that every worker reads and writes
    # through the engine (a proxy of a JudgeCache).
    shared_limits: SharedLimits | None = field(default=None, compare=False, repr=False)
    shared_cache: Any = field(default=None, compare=False, repr=False)
    # The run's chat backends, one per endpoint and model, and what they learned (the wire
    # formats an endpoint accepts, the model it serves): kept by every copy of these options.
    backends: Backends = field(default_factory=Backends, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Read-only: what a signature and the cache keys were made from cannot change after.
        if isinstance(self.extra, Mapping) and not isinstance(self.extra, MappingProxyType):
            object.__setattr__(self, "extra", read_only(dict(self.extra)))
        if self.panel and not all(isinstance(m, MappingProxyType) for m in self.panel):
            object.__setattr__(self, "panel", tuple(read_only(dict(m)) for m in self.panel))
        if self.budget is None and (self.max_requests is not None or self.max_cost is not None):
            object.__setattr__(self, "budget", RequestBudget(self.max_requests, self.max_cost))

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
        local = replace(self, progress=None, cache=os.path.abspath(self.cache_path),
                        prompts_dir=(None if self.prompts_dir is None
                                     else os.path.abspath(self.prompts_dir)))
        if sharing is None:
            share = max(1, self.concurrency // workers)
            rpm = None if self.rpm is None else self.rpm / workers
            return replace(local, concurrency=share, rpm=rpm)
        cache: Any = _NO_CACHE  # an offline run without a cache file: none on any worker
        if not (self.offline and not os.path.exists(local.cache_path)):
            cache = sharing.service(("judge-cache", local.cache_path), _open_cache,
                                    local.cache_path)
        return replace(local, rpm=None, shared_limits=sharing.limits(self.concurrency, self.rpm),
                       shared_cache=cache)

    @property
    def cache_path(self) -> str:
        return self.cache if self.cache is not None else DEFAULT_CACHE

    @property
    def endpoint(self) -> str:
        """The endpoint's scheme, host, port and path: never a credential (signatures,
        manifests)."""
        return Endpoint.of(self.base_url).public

    @property
    def ladder(self) -> tuple[str, ...]:
        """The wire formats this run may ask in, most constrained first."""
        return LADDERS[self.response_format]

    def params(self, sample_index: int = 0) -> dict[str, Any]:
        """The sampling parameters sent with one request (as ``JudgeClient.params``)."""
        p: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            p["max_tokens"] = self.max_tokens
        if self.seed is not None:
            p["seed"] = self.seed + sample_index
        if self.logprobs:
            p.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        p.update(self.extra)
        return p

    @property
    def extra_text(self) -> str:
        """The extra request fields as signatures show them (``key=json``, sorted)."""
        # "|" separates a signature's fields: escaped as JSON may (still the same value).
        return ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}".replace("|", "\\u007c")
                        for k, v in sorted(self.extra.items()))

    def cost_usd(self, usage: Mapping[str, int]) -> float | None:
        """USD for ``usage`` (prompt and completion tokens) at ``price_in``/``price_out`` per
        million tokens (a price left out counts as 0); None when neither price is given."""
        if self.price_in is None and self.price_out is None:
            return None
        cost = (usage.get("prompt_tokens", 0) * (self.price_in or 0.0)
                + usage.get("completion_tokens", 0) * (self.price_out or 0.0)) / 1e6
        return round(cost, 6)

    def check(self) -> None:
        """Raise a :class:`UsageError` for any invalid option (creates nothing)."""
        if not self.model:
            raise UsageError(
                "judge metrics need a judge model (--judge-model, or "
                "evaluate(..., judge=JudgeOptions(model=...))); it is part of the cache key, "
                "so an --offline replay needs it too"
            )
        if self.refresh and self.offline:
            raise UsageError("--refresh asks the judge again and cannot be used with --offline")
        if self.allow_missing and not self.offline:
            raise UsageError("--allow-missing only applies with --offline")
        check_int("judge concurrency", self.concurrency, 1)
        check_int("judge samples", self.samples, 1, high=MOST_SAMPLES)
        check_int("--judge-max-retries", self.max_retries, 0)
        if self.max_tokens is not None:
            check_int("--judge-max-tokens", self.max_tokens, 1)
        if self.history_chars is not None:
            check_int("--judge-history-chars", self.history_chars, 0)
        if self.seed is not None:
            check_int("judge seed", self.seed, 0)
        if self.rpm is not None and self.rpm <= 0:
            raise UsageError(f"judge rpm must be positive, got {self.rpm}")
        if not (isinstance(self.timeout, int | float) and math.isfinite(self.timeout)
                and self.timeout > 0):
            raise UsageError(f"--judge-timeout must be a positive number of seconds, "
                             f"got {self.timeout!r}")
        first = self.first_reply_timeout
        if first is not None and not (isinstance(first, int | float) and math.isfinite(first)
                                      and first > 0):
            raise UsageError(f"--judge-first-reply-timeout must be a positive number of "
                             f"seconds, got {first!r}")
        if self.response_format not in MODES:
            raise UsageError(f"--judge-response-format must be one of {', '.join(MODES)}, "
                             f"got {self.response_format!r}")
        if not 0 <= self.temperature <= 2:
            raise UsageError(f"judge temperature must be between 0 and 2, got {self.temperature}")
        for name, price in (("--judge-price-in", self.price_in),
                            ("--judge-price-out", self.price_out)):
            if price is not None and not (price >= 0 and math.isfinite(price)):
                raise UsageError(f"{name} must be a non-negative price, got {price}")
        self._check_caps()
        self._check_panel()
        check_extra(self.extra)
        Endpoint.of(self.base_url)  # a malformed URL is a usage error, shown redacted
        self._check_cache_path()

    def members(self) -> list[tuple[str, JudgeOptions]]:
        """The panel's members by name, each with the options it judges with (none without a
        panel)."""
        return panel_members(self)

    def _check_panel(self) -> None:
        check_panel(self)

    def _check_caps(self) -> None:
        if self.max_requests is not None:
            check_int("--judge-max-requests", self.max_requests, 1)
        if self.max_cost is None:
            return
        if not (isinstance(self.max_cost, int | float) and math.isfinite(self.max_cost)
                and self.max_cost > 0):
            raise UsageError(f"--judge-max-cost must be a positive amount of USD, got "
                             f"{self.max_cost!r}")
        if self.price_in is None and self.price_out is None:
            raise UsageError("--judge-max-cost needs the prices to count the cost by: "
                             "--judge-price-in and --judge-price-out (USD per million tokens)")

    def _check_cache_path(self) -> None:
        path = self.cache_path
        if path.endswith(".jsonl") and not self.offline:
            raise UsageError(
                f"--cache {path}: a JSONL export can only be replayed (--offline); "
                "to extend it, load it into a SQLite cache with 'rageval cache import'"
            )
        if os.path.isdir(path):
            raise UsageError(f"--cache {path}: is a directory, expected a cache file")
        if not self.offline and not os.path.exists(path):
            problem = creatable(os.path.dirname(os.path.abspath(path)))
            if problem is not None:
                raise UsageError(f"--cache {path}: cannot create the cache: {problem}")

    def open_cache(self) -> JudgeCache | SharedCache | None:
        """The reply cache, or None for an offline run whose cache file does not exist (a
        worker of a distributed run: the caller's, through the engine)."""
        if isinstance(self.shared_cache, str) and self.shared_cache == _NO_CACHE:
            return None
        if self.shared_cache is not None:
            return SharedCache(self.shared_cache)
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

    def put_many(self, *args: Any, **kwargs: Any) -> int:
        return self._proxy.put_many(*args, **kwargs)

    def close(self) -> None:
        """Nothing: the cache stays open for the other workers (the caller closes it)."""

    def __enter__(self) -> SharedCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Request fields rageval sets itself (each has its own option), or that would change what a
# reply is (several choices, a stream): never taken from --judge-extra.
_OWN_FIELDS = {
    "model": "--judge-model", "messages": "the rubric", "temperature": "--judge-temperature",
    "seed": "--judge-seed", "max_tokens": "--judge-max-tokens", "logprobs": "--judge-logprobs",
    "top_logprobs": "--judge-logprobs", "response_format": "--judge-response-format",
    "n": "--judge-samples", "stream": "nothing: replies are read whole",
    "stream_options": "nothing: replies are read whole",
}


def parse_extra(items: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items (``--judge-extra``) as request fields: a VALUE that reads as JSON
    is that value (``1.1``, ``false``, ``["\\n"]``), any other is a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--judge-extra {item!r}: expected KEY=VALUE "
                             "(e.g. repeat_penalty=1.1)")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        if key in out:
            raise UsageError(f"--judge-extra {key} is given twice")
        out[key] = value
    return out


def check_extra(extra: Mapping[str, Any]) -> None:
    """Refuse extra request fields rageval sets itself, or that are not plain JSON."""
    if not isinstance(extra, Mapping):
        raise UsageError(f"judge extra must be a mapping of request fields, got "
                         f"{type(extra).__name__}")
    for key, value in extra.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise UsageError(f"judge extra field {key!r} is not a request field name")
        if key in _OWN_FIELDS:
            raise UsageError(f"judge extra field {key!r} is set by rageval itself (use "
                             f"{_OWN_FIELDS[key]})")
        if value is None:
            raise UsageError(f"judge extra field {key!r} is null: leave it out instead")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise UsageError(f"judge extra field {key!r} must be a JSON value (a string, "
                             f"number, boolean, list or table), got {value!r}") from None
