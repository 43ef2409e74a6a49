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

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from rageval.errors import RagevalError, UsageError
from rageval.judge.cache import JudgeCache, cache_key
from rageval.judge.logprobs import expected_score
from rageval.judge.parsing import parse_reply
from rageval.judge.prompts import RENDER_VERSION, Rubric, load_rubric, render, response_format
from rageval.names import MetricName
from rageval.registry import Batch, Metric, MetricResult, ScoreOptions, register_namespace
from rageval.signature import Field

if TYPE_CHECKING:
    from rageval.judge.client import JudgeResult
    from rageval.records import Record

__all__ = ["DEFAULT_CACHE", "JudgeMetric", "JudgeOptions", "JudgeProgress", "check_offline",
           "judge_manifest"]

DEFAULT_CACHE = os.path.join(".rageval", "cache.sqlite")
DEFAULT_BASE_URL = "https://api.openai.com/v1"
NOT_CACHED = "not in the judge cache (offline)"
_SHOWN_MISSING = 5
TOP_LOGPROBS = 20  # the most the OpenAI API returns per token


def _zero_usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

# Rubric input -> the record field it reads (the orchestrator's "needs" names).
_INPUT_FIELD = {
    "query": "query",
    "contexts": "contexts",
    "context": "contexts",
    "answer": "answer",
    "reference": "reference",
}


@dataclass(frozen=True)
class JudgeProgress:
    """A snapshot of the judge's work, handed to ``JudgeOptions.progress`` as replies arrive."""

    done: int  # requests finished (replies and failures)
    total: int  # requests this batch sends
    failed: int  # requests that failed for good
    tokens: int  # total tokens reported so far in this run


@dataclass(frozen=True)
class JudgeOptions:
    """How the judge is reached and how its replies are cached (one per run).

    ``model`` is part of every cache key and signature, so replaying offline needs it too.
    ``base_url``: an OpenAI-compatible endpoint (default OpenAI's). ``cache``: the SQLite file
    of replies (default ``.rageval/cache.sqlite``), or a JSONL export read for an offline replay.
    ``offline``: use the cache only, never the network; ``allow_missing``: with ``offline``,
    leave records the cache lacks unscored instead of failing. ``refresh``: ask again even when a
    reply is cached, and store the new one. ``api_key_env`` names the environment variable
    holding the key (the key itself is never stored). ``prompts_dir``: a directory of user
    rubrics looked up by name before the built-ins.

    ``samples``: replies per item; the value is their mean and the spread goes in the details.
    ``seed``: sent with each request (sample ``i`` gets ``seed + i``, so samples differ on
    endpoints that honour seeds). ``logprobs``: score by the expected value of the score token's
    top log-probabilities (G-Eval) instead of the reply's integer. ``price_in``/``price_out``:
    USD per million prompt/completion tokens, for the cost in the manifest. ``against``: the
    records file of the other system, for ``judge:pairwise``. ``progress`` is
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
    max_retries: int = 5
    seed: int | None = None
    samples: int = 1
    logprobs: bool = False
    price_in: float | None = None
    price_out: float | None = None
    against: str | None = None
    progress: Callable[[JudgeProgress], object] | None = field(default=None, compare=False,
                                                                repr=False)

    @property
    def cache_path(self) -> str:
        return self.cache if self.cache is not None else DEFAULT_CACHE

    @property
    def host(self) -> str:
        """The endpoint's host (never a key), for signatures and manifests."""
        url = (self.base_url or DEFAULT_BASE_URL).rstrip("/")
        return urlsplit(url).netloc or url

    def params(self, sample_index: int = 0) -> dict[str, Any]:
        """The sampling parameters sent with one request (as ``JudgeClient.params``)."""
        p: dict[str, Any] = {"temperature": self.temperature}
        if self.seed is not None:
            p["seed"] = self.seed + sample_index
        if self.logprobs:
            p.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        return p

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
        _check_int("judge concurrency", self.concurrency, 1)
        _check_int("judge samples", self.samples, 1)
        if self.seed is not None:
            _check_int("judge seed", self.seed, 0)
        if self.rpm is not None and self.rpm <= 0:
            raise UsageError(f"judge rpm must be positive, got {self.rpm}")
        if not 0 <= self.temperature <= 2:
            raise UsageError(f"judge temperature must be between 0 and 2, got {self.temperature}")
        for name, price in (("--judge-price-in", self.price_in),
                            ("--judge-price-out", self.price_out)):
            if price is not None and not (price >= 0 and math.isfinite(price)):
                raise UsageError(f"{name} must be a non-negative price, got {price}")
        if self.cache_path.endswith(".jsonl") and not self.offline:
            raise UsageError(
                f"--cache {self.cache_path}: a JSONL export can only be replayed (--offline); "
                "to extend it, load it into a SQLite cache with 'rageval cache import'"
            )

    def open_cache(self) -> JudgeCache | None:
        """The reply cache, or None for an offline run whose cache file does not exist."""
        path = self.cache_path
        if self.offline and not os.path.exists(path):
            return None
        if path.endswith(".jsonl"):
            return JudgeCache.from_jsonl(path)
        return JudgeCache(path)


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UsageError(f"{name} must be an integer of at least {low}, got {value!r}")


@dataclass
class _RunStats:
    """What the judge did during one run (kept in the run's batch cache, for the manifest)."""

    hits: int = 0
    misses: int = 0
    requests: int = 0
    failed: int = 0
    stored: int = 0
    usage: dict[str, int] = field(default_factory=_zero_usage)
    cached_usage: dict[str, int] = field(default_factory=_zero_usage)
    prompts: dict[str, dict[str, str]] = field(default_factory=dict)

    def add_usage(self, usage: dict[str, int], *, cached: bool) -> None:
        target = self.cached_usage if cached else self.usage
        for key, value in usage.items():
            target[key] = target.get(key, 0) + int(value)


@dataclass(frozen=True)
class _Unit:
    """One judge request: a record (and one of its contexts, for per-context rubrics) and a
    sample index."""

    record: int
    context: int | None
    sample: int
    messages: list[dict[str, str]]
    key: str
    order: int = 0  # pairwise judging: which answer is shown first


@dataclass
class _Reply:
    """What came back for one unit: a reply text (and log-probabilities), or an error."""

    text: str | None = None
    logprobs: list[list[Any]] | None = None
    cached: bool = False
    error: str | None = None


class JudgeMetric(Metric):
    """One rubric graded by the LLM judge; values on the rubric's scale, NaN when unscored.

    A rubric whose inputs include ``context`` grades each retrieved context on its own (the
    TREC 0-3 scale of ``context_relevance``): the record's value is the mean grade of its
    contexts, and the details list every context's grade.
    """

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
        self.rubric: Rubric = load_rubric(target, judge.prompts_dir)
        self.per_context = "context" in self.rubric.inputs
        self.needs = frozenset(_INPUT_FIELD[name] for name in self.rubric.inputs)  # type: ignore[misc]
        super().__init__(cutoff=cutoff, options=opts, **params)

    @property
    def judge(self) -> JudgeOptions:
        judge = self.options.judge
        if judge is None or not judge.model:
            JudgeOptions().check()  # raises the "needs a judge model" error
            raise AssertionError("unreachable")
        return judge

    def ready(self) -> None:
        """Raise a usage error, before any scoring, when the metric cannot run."""

    def response_format(self) -> dict[str, Any]:
        """The structured output this metric asks the judge for."""
        return response_format(self.rubric)

    def _run_stats(self, batch: Batch) -> _RunStats:
        stats: _RunStats = batch.run.cached(("judge", "stats"), _RunStats)
        stats.prompts[self.rubric.id] = _prompt_info(self.rubric)
        return stats

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.target, cutoff=self.cutoff, options=options, **dict(self.values))

    def signature_extra(self) -> list[Field]:
        judge = self.options.judge or JudgeOptions()
        fields = [
            Field("judge", judge.model or "?", "jm"),
            Field("endpoint", judge.host, "ep"),
            Field("rubric", self.rubric.id, "r"),
            Field("rubric_version", self.rubric.version, "rv"),
            Field("prompt", self.rubric.short_hash, "h"),
            Field("render", RENDER_VERSION, "rd"),
            Field("temperature", f"{judge.temperature:g}", "t"),
            Field("samples", str(judge.samples), "n"),
            Field("score", "logprobs" if judge.logprobs else "reply", "sc"),
        ]
        if judge.seed is not None:
            fields.append(Field("seed", str(judge.seed), "sd"))
        return fields

    # -- requests --------------------------------------------------------------------------

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

    def units(self, record: Record, index: int = 0) -> list[_Unit]:
        """Every request this record needs (none when it lacks an input)."""
        if self.missing_input(record) is not None:
            return []
        judge = self.judge
        fmt = response_format(self.rubric)
        contexts: list[int | None] = (list(range(len(record.contexts))) if self.per_context
                                      else [None])
        out = []
        for context in contexts:
            messages = render(self.rubric, record, context)
            for sample in range(judge.samples):
                key = cache_key(judge.model or "", messages, judge.params(sample), fmt, sample)
                out.append(_Unit(index, context, sample, messages, key))
        return out

    def request(self, record: Record) -> tuple[list[dict[str, str]], dict[str, Any], str]:
        """The messages, response format and cache key of this record's first request."""
        unit = self.units(record)[0]
        return unit.messages, response_format(self.rubric), unit.key

    # -- scoring ---------------------------------------------------------------------------

    def score(self, batch: Batch) -> MetricResult:
        n = len(batch)
        reasons = [self.missing_input(record) for record in batch.records]
        units, replies = self._batch_replies(batch)
        values = np.full(n, np.nan)
        details: list[dict[str, Any] | None] = [None] * n
        by_record: dict[int, list[tuple[_Unit, _Reply]]] = {}
        for unit in units:
            by_record.setdefault(unit.record, []).append((unit, replies[unit.key]))
        for i, pairs in by_record.items():
            record = batch.records[i]
            if self.per_context:
                values[i], reasons[i], details[i] = self._per_context(record, pairs)
            else:
                item = self._item(pairs)
                values[i], reasons[i], details[i] = item.value, item.reason, item.details
        return MetricResult({str(self.name): values}, reasons, details)

    def _batch_replies(self, batch: Batch) -> tuple[list[_Unit], dict[str, _Reply]]:
        """The batch's units and a reply (or error) for each.

        The replies for every record of the batch's scope (all the batches of one scoring
        pass) are gathered when its first batch is scored, in one stream of requests: batches
        only bound the memory of the other metrics, and a judge that stopped at each batch
        boundary would let its requests in flight drain to zero every time (and open new
        connections), a stall that costs throughput at high concurrency.
        """
        scope = batch.scope
        stats = self._run_stats(batch)
        if scope is batch.records:
            units = [u for i, record in enumerate(batch.records) for u in self.units(record, i)]
            return units, self._replies(self.judge, batch, units, stats)

        def gather() -> tuple[dict[int, list[_Unit]], dict[str, _Reply]]:
            # Unit indices are the scope's here (the cache's metadata reads record ids there).
            by_record = {id(r): self.units(r, i) for i, r in enumerate(scope)}
            everything = [u for units in by_record.values() for u in units]
            replies = self._replies(self.judge, Batch(scope, run=batch.run), everything, stats)
            return by_record, replies

        by_record, replies = batch.run.cached(("judge", "replies", str(self), id(scope)), gather)
        units = [replace(u, record=i) for i, record in enumerate(batch.records)
                 for u in by_record[id(record)]]
        return units, replies

    def _replies(self, judge: JudgeOptions, batch: Batch, units: list[_Unit],
                 stats: _RunStats) -> dict[str, _Reply]:
        """A reply (or an error) for every unit: from the cache, else from the judge."""
        replies: dict[str, _Reply] = {}
        pending: list[_Unit] = []
        cache = judge.open_cache()
        try:
            for unit in units:
                if unit.key in replies:
                    continue
                entry = None if cache is None or judge.refresh else cache.get(unit.key)
                if entry is not None:
                    stats.hits += 1
                    stats.add_usage(entry.usage, cached=True)
                    replies[unit.key] = _Reply(entry.reply_text, entry.meta.get("logprobs"),
                                               cached=True)
                    continue
                stats.misses += 1
                if judge.offline:
                    replies[unit.key] = _Reply(error=NOT_CACHED)
                else:
                    pending.append(unit)
            if pending:
                assert cache is not None
                replies.update(self._ask(judge, cache, batch, pending, stats))
        finally:
            if cache is not None:
                cache.close()
        return replies

    def _ask(self, judge: JudgeOptions, cache: JudgeCache, batch: Batch,
             pending: list[_Unit], stats: _RunStats) -> dict[str, _Reply]:
        from rageval.judge.client import JudgeClient, JudgeRequest

        client = JudgeClient(
            judge.model or "", base_url=judge.base_url, api_key_env=judge.api_key_env,
            temperature=judge.temperature, timeout=judge.timeout, max_retries=judge.max_retries,
            top_logprobs=TOP_LOGPROBS if judge.logprobs else None,
        )
        fmt = self.response_format()
        requests = [JudgeRequest(unit.messages, fmt, unit.sample, tag=unit,
                                 seed=None if judge.seed is None else judge.seed + unit.sample)
                    for unit in pending]
        done = [0, 0]  # finished, failed

        def store(result: JudgeResult) -> None:
            unit: _Unit = result.request.tag
            stats.requests += 1
            stats.add_usage(result.usage, cached=False)
            done[0] += 1
            if not result.ok or result.text is None:
                done[1] += 1
            else:
                meta = {"rubric": self.rubric.id, "rubric_version": self.rubric.version,
                        "record": batch.records[unit.record].id, "structured": result.structured,
                        "finish_reason": result.finish_reason, "served_model": result.model}
                if unit.order:
                    meta["order"] = unit.order
                if unit.context is not None:
                    meta["context"] = batch.records[unit.record].contexts[unit.context].id
                if result.logprobs is not None:
                    meta["logprobs"] = result.logprobs
                if cache.put(unit.key, client.request_summary(result.request), result.text,
                             result.usage, meta, replace=judge.refresh):
                    stats.stored += 1
            if judge.progress is not None:
                judge.progress(JudgeProgress(done[0], len(requests), done[1],
                                             stats.usage.get("total_tokens", 0)))

        results = client.complete_many(requests, concurrency=judge.concurrency,
                                       rpm=judge.rpm, on_result=store)
        out: dict[str, _Reply] = {}
        for result in results:
            unit = result.request.tag
            if result.ok and result.text is not None:
                out[unit.key] = _Reply(result.text, result.logprobs)
            else:
                stats.failed += 1
                out[unit.key] = _Reply(error=f"judge request failed: {result.error}")
        return out

    # -- aggregation -----------------------------------------------------------------------

    def _item(self, pairs: list[tuple[_Unit, _Reply]]) -> _Item:
        """One graded item (a record, or one context) from its samples' replies."""
        judge = self.judge
        scores: list[float] = []
        errors: list[str] = []
        details: dict[str, Any] = {"reasoning": None,
                                   "cached": all(reply.cached for _, reply in pairs)}
        distributions: list[dict[int, float]] = []
        for _, reply in pairs:
            if reply.error is not None:
                errors.append(reply.error)
                continue
            parsed = parse_reply(reply.text, self.rubric)
            if details["reasoning"] is None:
                details["reasoning"] = parsed.reasoning
            if not parsed.ok:
                errors.append(f"judge reply not usable: {parsed.error}")
                details.setdefault("raw", reply.text)
                continue
            if judge.logprobs:
                expected = expected_score(reply.logprobs, self.rubric)
                if expected.value is None:
                    errors.append(f"judge reply not usable: {expected.error}")
                    details.setdefault("raw", reply.text)
                    continue
                distributions.append(expected.distribution)
                scores.append(expected.value)
            else:
                scores.append(float(parsed.score))  # type: ignore[arg-type]
        if judge.logprobs and distributions:
            details["distribution"] = _mean_distribution(distributions)
        if judge.samples > 1:
            details["samples"] = scores
            details["samples_used"] = f"{len(scores)} of {len(pairs)}"
            if scores:
                details["sd"] = float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0
                details["range"] = [min(scores), max(scores)]
        if not scores:
            return _Item(math.nan, errors[0], details)
        return _Item(float(np.mean(scores)), None, details)

    def _per_context(self, record: Record, pairs: list[tuple[_Unit, _Reply]]
                     ) -> tuple[float, str | None, dict[str, Any]]:
        """Every context graded on its own; the record's value is the mean grade."""
        by_context: dict[int, list[tuple[_Unit, _Reply]]] = {}
        for unit, reply in pairs:
            by_context.setdefault(unit.context or 0, []).append((unit, reply))
        grades: list[dict[str, Any]] = []
        failed: list[str] = []
        for index, context_pairs in sorted(by_context.items()):
            item = self._item(context_pairs)
            grade = None if math.isnan(item.value) else item.value
            grades.append({"id": record.contexts[index].id, "grade": grade, **item.details})
            if item.reason is not None:
                failed.append(f"context {record.contexts[index].id}: {item.reason}")
        details = {"contexts": grades,
                   "cached": all(g["cached"] for g in grades)}
        if failed:
            reason = (f"{len(failed)} of {len(grades)} contexts not graded "
                      f"(first: {failed[0]})")
            return math.nan, reason, details
        return float(np.mean([g["grade"] for g in grades])), None, details


@dataclass(frozen=True)
class _Item:
    value: float
    reason: str | None
    details: dict[str, Any]


def _mean_distribution(distributions: list[dict[int, float]]) -> dict[str, float]:
    scores = sorted({s for d in distributions for s in d})
    return {str(s): sum(d.get(s, 0.0) for d in distributions) / len(distributions)
            for s in scores}


def _prompt_info(rubric: Rubric) -> dict[str, str]:
    return {"version": rubric.version, "hash": rubric.hash, "source": rubric.source}


def _factory(name: MetricName, options: ScoreOptions) -> Metric:
    target = name.base.split(":", 1)[1]
    if name.cutoff is not None:
        raise UsageError(f"{name.base} takes no cutoff '@{name.cutoff}'")
    if target == "pairwise":
        from rageval.judge.pairwise import PairwiseMetric

        return PairwiseMetric(options=options, **dict(name.params))
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
    for metric in judged:
        metric.ready()
    if not judge.offline or judge.allow_missing:
        return
    wanted: dict[str, tuple[str, str]] = {}  # key -> (record id, rubric id)
    for metric in judged:
        for record in records:
            for unit in metric.units(record):
                wanted.setdefault(unit.key, (record.id, metric.rubric.id))
    if not wanted:
        return
    cache = judge.open_cache()
    if cache is None:
        absent = set(wanted)
    else:
        with cache:
            absent = set(cache.missing(wanted))
    lacking = [wanted[key] for key in wanted if key in absent]
    if not lacking:
        return
    shown = ", ".join(f"{rid} ({crit})" for rid, crit in lacking[:_SHOWN_MISSING])
    more = f" and {len(lacking) - _SHOWN_MISSING} more" if len(lacking) > _SHOWN_MISSING else ""
    path = judge.cache_path
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
        prompts.setdefault(metric.rubric.id, _prompt_info(metric.rubric))
    out: dict[str, Any] = {
        "model": judge.model,
        "endpoint": judge.host,
        "offline": judge.offline,
        "temperature": judge.temperature,
        "seed": judge.seed,
        "samples": judge.samples,
        "score": "logprobs" if judge.logprobs else "reply",
        "render_version": RENDER_VERSION,
        "prompts": prompts,
        "cache": {"path": judge.cache_path, "hits": stats.hits, "misses": stats.misses,
                  "stored": stats.stored, "refresh": judge.refresh},
        "requests": stats.requests,
        "failed": stats.failed,
        "usage": dict(stats.usage),
        "cached_usage": dict(stats.cached_usage),
    }
    if judge.price_in is not None or judge.price_out is not None:
        out["cost_usd"] = {
            "price_in_per_mtok": judge.price_in,
            "price_out_per_mtok": judge.price_out,
            "this_run": _cost(stats.usage, judge),
            "replayed_from_cache": _cost(stats.cached_usage, judge),
        }
    return out


def _cost(usage: dict[str, int], judge: JudgeOptions) -> float:
    """USD for ``usage`` at the given prices (a price left out counts as 0)."""
    cost = (usage.get("prompt_tokens", 0) * (judge.price_in or 0.0)
            + usage.get("completion_tokens", 0) * (judge.price_out or 0.0)) / 1e6
    return round(cost, 6)
