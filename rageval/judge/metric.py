"""The rubric judge as a metric: ``judge:<rubric name or path>``.

Each record is rendered with the rubric (:func:`~rageval.judge.prompts.render`), looked up in the
judge cache by :func:`~rageval.judge.cache.cache_key`, and only the replies the cache lacks are
asked of the judge (:meth:`~rageval.judge.client.JudgeClient.complete_many`), each stored in the
cache the moment it arrives, so an interrupted run loses nothing and a restart asks only for what
is missing. Values stay on the rubric's scale (1-5 for the built-in rubrics).

A reply that cannot be parsed, or a request that failed for good, leaves the record unscored with
a reason; the raw reply is kept in the record's details. ``offline`` replays from the cache
alone: no client is built and no network call is made; when the cache lacks an entry the run
stops before scoring (:func:`check_offline`) unless ``allow_missing`` leaves those unscored.

Run-wide judge configuration travels in :class:`JudgeOptions`
(``ScoreOptions.judge``; ``evaluate(..., judge=JudgeOptions(...))``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from rageval.errors import RagevalError, UsageError
from rageval.judge.cache import JudgeCache, cache_key
from rageval.judge.parsing import parse_reply
from rageval.judge.prompts import RENDER_VERSION, Rubric, load_rubric, render, response_format
from rageval.names import MetricName
from rageval.registry import Batch, Metric, MetricResult, ScoreOptions, register_namespace
from rageval.signature import Field

if TYPE_CHECKING:
    from rageval.judge.client import JudgeRequest, JudgeResult
    from rageval.records import Record

__all__ = ["DEFAULT_CACHE", "JudgeMetric", "JudgeOptions", "check_offline", "judge_manifest"]

DEFAULT_CACHE = os.path.join(".rageval", "cache.sqlite")
DEFAULT_BASE_URL = "https://api.openai.com/v1"
NOT_CACHED = "not in the judge cache (offline)"
_SHOWN_MISSING = 5

# Rubric input -> the record field it reads (the orchestrator's "needs" names).
_INPUT_FIELD = {
    "query": "query",
    "contexts": "contexts",
    "context": "contexts",
    "answer": "answer",
    "reference": "reference",
}


@dataclass(frozen=True)
class JudgeOptions:
    """How the judge is reached and how its replies are cached (one per run).

    ``model`` is part of every cache key and signature, so replaying offline needs it too.
    ``base_url``: an OpenAI-compatible endpoint (default OpenAI's). ``cache``: the SQLite file
    of replies (default ``.rageval/cache.sqlite``). ``offline``: use the cache only, never the
    network; ``allow_missing``: with ``offline``, leave records the cache lacks unscored instead
    of failing. ``refresh``: ask again even when a reply is cached, and store the new one.
    ``api_key_env`` names the environment variable holding the key (the key itself is never
    stored). ``prompts_dir``: a directory of user rubrics looked up by name before the built-ins.
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
    max_retries: int = 5

    @property
    def cache_path(self) -> str:
        return self.cache if self.cache is not None else DEFAULT_CACHE

    @property
    def host(self) -> str:
        """The endpoint's host (never a key), for signatures and manifests."""
        url = (self.base_url or DEFAULT_BASE_URL).rstrip("/")
        return urlsplit(url).netloc or url

    def params(self) -> dict[str, Any]:
        """The sampling parameters sent with each request (as ``JudgeClient.params``)."""
        return {"temperature": self.temperature}

    def check(self) -> None:
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
        if isinstance(self.concurrency, bool) or self.concurrency < 1:
            raise UsageError(f"judge concurrency must be at least 1, got {self.concurrency}")
        if self.rpm is not None and self.rpm <= 0:
            raise UsageError(f"judge rpm must be positive, got {self.rpm}")


@dataclass
class _RunStats:
    """What the judge did during one run (kept in the run's batch cache, for the manifest)."""

    hits: int = 0
    misses: int = 0
    requests: int = 0
    failed: int = 0
    stored: int = 0
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    )
    prompts: dict[str, dict[str, str]] = field(default_factory=dict)


class JudgeMetric(Metric):
    """One rubric graded by the LLM judge; values on the rubric's scale, NaN when unscored."""

    family = "judge"
    base = "judge"
    summary = "rubric LLM judge: judge:<rubric name or path> (faithfulness, correctness, ...)"

    def __init__(
        self,
        target: str,
        cutoff: int | None = None,
        options: ScoreOptions | None = None,
        **params: Any,
    ) -> None:
        opts = options or ScoreOptions()
        judge = opts.judge or JudgeOptions()
        self.target = target
        self.base = f"judge:{target}"  # type: ignore[misc]
        rubric = load_rubric(target, judge.prompts_dir)
        if "context" in rubric.inputs:
            raise UsageError(
                f"rubric {rubric.id!r} grades each context on its own; per-context judge "
                "metrics are not supported yet"
            )
        self.rubric: Rubric = rubric
        self.needs = frozenset(_INPUT_FIELD[name] for name in rubric.inputs)  # type: ignore[misc]
        super().__init__(cutoff=cutoff, options=opts, **params)

    @property
    def judge(self) -> JudgeOptions:
        judge = self.options.judge
        if judge is None or not judge.model:
            JudgeOptions().check()  # raises the "needs a judge model" error
            raise AssertionError("unreachable")
        return judge

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.target, cutoff=self.cutoff, options=options, **dict(self.values))

    def signature_extra(self) -> list[Field]:
        judge = self.options.judge or JudgeOptions()
        return [
            Field("judge", judge.model or "?", "jm"),
            Field("endpoint", judge.host, "ep"),
            Field("rubric", self.rubric.id, "r"),
            Field("rubric_version", self.rubric.version, "rv"),
            Field("prompt", self.rubric.short_hash, "h"),
            Field("render", RENDER_VERSION, "rd"),
            Field("temperature", f"{judge.temperature:g}", "t"),
        ]

    # -- keys ------------------------------------------------------------------------------

    def missing_input(self, record: Record) -> str | None:
        """Why ``record`` cannot be shown to the judge under this rubric, or None."""
        for name in self.rubric.inputs:
            field_name = _INPUT_FIELD[name]
            present = {
                "query": record.query is not None,
                "answer": record.answer is not None,
                "contexts": bool(record.contexts),
                "reference": bool(record.references),
            }[field_name]
            if not present:
                return f"no {field_name} (the record has no '{field_name}')"
        return None

    def request(self, record: Record) -> tuple[list[dict[str, str]], dict[str, Any], str]:
        """The messages, response format and cache key of this record's judge request."""
        judge = self.judge
        messages = render(self.rubric, record)
        fmt = response_format(self.rubric)
        key = cache_key(judge.model or "", messages, judge.params(), fmt, 0)
        return messages, fmt, key

    # -- scoring ---------------------------------------------------------------------------

    def score(self, batch: Batch) -> MetricResult:
        judge = self.judge
        stats: _RunStats = batch.run.cached(("judge", "stats"), _RunStats)
        stats.prompts[self.rubric.id] = {"version": self.rubric.version,
                                         "hash": self.rubric.hash,
                                         "source": self.rubric.source}
        n = len(batch)
        values = np.full(n, np.nan)
        reasons: list[str | None] = [None] * n
        details: list[dict[str, Any] | None] = [None] * n
        pending: list[tuple[int, list[dict[str, str]], dict[str, Any], str]] = []

        def take(i: int, text: str, cached: bool) -> None:
            parsed = parse_reply(text, self.rubric)
            details[i] = {"reasoning": parsed.reasoning, "cached": cached}
            if parsed.ok:
                values[i] = float(parsed.score)  # type: ignore[arg-type]
            else:
                details[i]["raw"] = text  # type: ignore[index]
                reasons[i] = f"judge reply not usable: {parsed.error}"

        offline_empty = judge.offline and not os.path.exists(judge.cache_path)
        cache = None if offline_empty else JudgeCache(judge.cache_path)
        try:
            for i, record in enumerate(batch.records):
                why = self.missing_input(record)
                if why is not None:
                    reasons[i] = why
                    continue
                messages, fmt, key = self.request(record)
                entry = None if cache is None or judge.refresh else cache.get(key)
                if entry is not None:
                    stats.hits += 1
                    take(i, entry.reply_text, cached=True)
                    continue
                stats.misses += 1
                if judge.offline:
                    reasons[i] = NOT_CACHED
                    details[i] = {"reasoning": None, "cached": False}
                else:
                    pending.append((i, messages, fmt, key))
            if pending:
                assert cache is not None
                self._ask(judge, cache, batch, pending, stats, take, reasons, details)
        finally:
            if cache is not None:
                cache.close()
        return MetricResult({str(self.name): values}, reasons, details)

    def _ask(
        self,
        judge: JudgeOptions,
        cache: JudgeCache,
        batch: Batch,
        pending: list[tuple[int, list[dict[str, str]], dict[str, Any], str]],
        stats: _RunStats,
        take: Any,
        reasons: list[str | None],
        details: list[dict[str, Any] | None],
    ) -> None:
        from rageval.judge.client import JudgeClient, JudgeRequest

        client = JudgeClient(
            judge.model or "", base_url=judge.base_url, api_key_env=judge.api_key_env,
            temperature=judge.temperature, timeout=judge.timeout, max_retries=judge.max_retries,
        )
        requests = [JudgeRequest(messages, fmt, 0, tag=(i, key))
                    for i, messages, fmt, key in pending]

        def store(result: JudgeResult) -> None:
            stats.requests += 1
            for k, v in result.usage.items():
                stats.usage[k] = stats.usage.get(k, 0) + v
            if not result.ok or result.text is None:
                return
            _, key = result.request.tag
            record = batch.records[result.request.tag[0]]
            meta = {"rubric": self.rubric.id, "rubric_version": self.rubric.version,
                    "record": record.id, "structured": result.structured,
                    "finish_reason": result.finish_reason, "served_model": result.model}
            if cache.put(key, _summary(client, result.request), result.text, result.usage,
                         meta, replace=judge.refresh):
                stats.stored += 1

        results = client.complete_many(requests, concurrency=judge.concurrency,
                                       rpm=judge.rpm, on_result=store)
        for result in results:
            i = result.request.tag[0]
            if result.ok and result.text is not None:
                take(i, result.text, cached=False)
            else:
                stats.failed += 1
                reasons[i] = f"judge request failed: {result.error}"
                details[i] = {"reasoning": None, "cached": False}


def _summary(client: Any, request: JudgeRequest) -> dict[str, Any]:
    summary: dict[str, Any] = client.request_summary(request)
    return summary


def _factory(name: MetricName, options: ScoreOptions) -> Metric:
    target = name.base.split(":", 1)[1]
    if name.cutoff is not None:
        raise UsageError(f"{name.base} takes no cutoff '@{name.cutoff}'")
    return JudgeMetric(target, options=options, **dict(name.params))


register_namespace("judge", _factory)


# -- run-level helpers (called by the orchestrator) ----------------------------------------


def judge_metrics(metrics: list[Metric]) -> list[JudgeMetric]:
    return [m for m in metrics if isinstance(m, JudgeMetric)]


def check_offline(records: list[Record], metrics: list[Metric]) -> None:
    """Before any scoring: every judge option is valid, and an offline run without
    ``allow_missing`` finds every reply it needs in the cache (else a :class:`RagevalError`
    listing how many are missing and the first few record ids and criteria)."""
    judged = judge_metrics(metrics)
    if not judged:
        return
    judge = judged[0].judge
    judge.check()
    if not judge.offline or judge.allow_missing:
        return
    wanted: list[tuple[str, str, str]] = []  # (key, record id, rubric id)
    for metric in judged:
        for record in records:
            if metric.missing_input(record) is None:
                wanted.append((metric.request(record)[2], record.id, metric.rubric.id))
    if not wanted:
        return
    path = judge.cache_path
    if os.path.exists(path):
        with JudgeCache(path) as cache:
            absent = set(cache.missing(key for key, _, _ in wanted))
    else:
        absent = {key for key, _, _ in wanted}
    lacking = [(rid, crit) for key, rid, crit in wanted if key in absent]
    if not lacking:
        return
    shown = ", ".join(f"{rid} ({crit})" for rid, crit in lacking[:_SHOWN_MISSING])
    more = f" and {len(lacking) - _SHOWN_MISSING} more" if len(lacking) > _SHOWN_MISSING else ""
    where = path if os.path.exists(path) else f"{path} (no such file)"
    raise OfflineCacheMiss(
        f"--offline: {len(lacking)} of {len(wanted)} judge replies are not in the cache "
        f"{where}: {shown}{more}; run once online to fill it, or give --allow-missing to "
        "leave them unscored"
    )


class OfflineCacheMiss(RagevalError):
    """An offline replay lacks cached judge replies."""

    exit_code = 2


def judge_manifest(run: Batch, metrics: list[Metric]) -> dict[str, Any] | None:
    """The manifest's ``judge`` section: model, endpoint, prompt hashes, cache and tokens."""
    judged = judge_metrics(metrics)
    if not judged:
        return None
    judge = judged[0].options.judge or JudgeOptions()
    stats: _RunStats = run.cached(("judge", "stats"), _RunStats)
    prompts = dict(stats.prompts)
    for metric in judged:
        prompts.setdefault(metric.rubric.id, {"version": metric.rubric.version,
                                              "hash": metric.rubric.hash,
                                              "source": metric.rubric.source})
    return {
        "model": judge.model,
        "endpoint": judge.host,
        "offline": judge.offline,
        "temperature": judge.temperature,
        "render_version": RENDER_VERSION,
        "prompts": prompts,
        "cache": {"path": judge.cache_path, "hits": stats.hits, "misses": stats.misses,
                  "stored": stats.stored, "refresh": judge.refresh},
        "requests": stats.requests,
        "failed": stats.failed,
        "usage": dict(stats.usage),
    }
