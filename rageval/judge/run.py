"""The judge metrics' run hooks (:data:`JUDGE_HOOKS`): the checks before any scoring and the
manifest's ``judge`` section.

:func:`check_judge` runs before anything is read from the judge, written or sent: every option
is valid, every judge metric can run, an offline replay finds every reply it needs, and a run
that must ask the judge has the API key it needs. :func:`judge_manifest` is the manifest's
``judge`` section. Both get the run's judge metrics (rubric and pairwise alike) and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from rageval.core.errors import RagevalError
from rageval.core.metric import RunHooks
from rageval.judge.client import JudgeError
from rageval.judge.endpoint import api_key_problem
from rageval.judge.first_reply import first_reply_limit
from rageval.judge.misses import explain_misses
from rageval.judge.options import JudgeOptions
from rageval.judge.prompts import RENDER_VERSION, prompt_info
from rageval.judge.replies import RunStats, Unit, uncached

if TYPE_CHECKING:
    from rageval.core.metric import Batch, Metric
    from rageval.core.records import Record
    from rageval.judge.formats import ReplySchema
    from rageval.judge.prompts import Rubric

__all__ = ["JUDGE_HOOKS", "JudgeHooks", "OfflineCacheMiss", "check_cached", "check_judge",
           "judge_manifest", "judge_section"]

_SHOWN_MISSING = 5


class OfflineCacheMiss(RagevalError):
    """An offline replay lacks cached judge replies."""

    exit_code = 2


class JudgedMetric(Protocol):
    """What the hooks use of a judge metric (:class:`~rageval.judge.metric.JudgeMetric`)."""

    rubric: Rubric

    @property
    def judge(self) -> JudgeOptions: ...

    def ready(self) -> None: ...

    def units(self, record: Record, index: int = 0) -> list[Unit]: ...

    def reply_schema(self) -> ReplySchema: ...


class JudgeHooks(RunHooks):
    """The run hooks every judge metric shares: one cache, one endpoint, one manifest section."""

    section = "judge"

    def check(self, records: Sequence[Record], metrics: Sequence[Metric]) -> None:
        check_judge(records, _judged(metrics))

    def prepare(self, run: Batch, metrics: Sequence[Metric]) -> None:
        # Every judge metric of the run asks in one stream (JudgeMetric.batch_replies). Filled
        # in place: a metric that gathered before (the judgments provider's) found it empty.
        run.cached(GROUP, list)[:] = metrics

    def manifest(self, run: Batch, metrics: Sequence[Metric]) -> dict[str, Any] | None:
        return judge_manifest(run, _judged(metrics))


JUDGE_HOOKS = JudgeHooks()
# The run's judge metrics, in a window's run Batch cache (set by JudgeHooks.prepare).
GROUP = ("judge", "metrics")


def _judged(metrics: Sequence[Metric]) -> list[JudgedMetric]:
    return list(metrics)  # type: ignore[arg-type]  # the hooks are given judge metrics only


def check_judge(records: Sequence[Record], judged: Sequence[JudgedMetric]) -> None:
    """Before any scoring: every judge option is valid; an offline run without
    ``allow_missing`` finds every reply it needs in the cache (else :class:`OfflineCacheMiss`
    listing how many are missing and the first few record ids and criteria); a run that has to
    ask the judge has its API key (else :class:`~rageval.judge.client.JudgeError`)."""
    if not judged:
        return
    judge = judged[0].judge
    judge.check()
    for metric in judged:
        metric.ready()
    if judge.offline and judge.allow_missing:
        return
    if not judge.offline and api_key_problem(judge.api_key_env, judge.base_url) is None:
        # Whatever the cache lacks can be asked for: rendering every request and looking it
        # up here would only delay the first request (scoring looks them up anyway).
        return
    wanted: dict[str, tuple[Unit, str, str]] = {}  # identity key -> (unit, record id, rubric)
    for metric in judged:
        schema = metric.reply_schema()
        for record in records:
            for unit in metric.units(record):
                if unit.schema is None:  # carried so that a miss can be explained
                    unit = replace(unit, schema=schema)
                wanted.setdefault(unit.key, (unit, record.id, metric.rubric.id))
    check_cached(judge, wanted)


def check_cached(judge: JudgeOptions, wanted: dict[str, tuple[Unit, str, str]]) -> None:
    """The replies a run wants (by key: the unit, its record id and what asks for it) are
    cached, or the run may ask for them: an offline run lacking any raises
    :class:`OfflineCacheMiss` listing how many and the first few; a run that has to ask needs
    its API key (else :class:`~rageval.judge.client.JudgeError`)."""
    lacking = uncached(judge, [unit for unit, _, _ in wanted.values()])
    if not lacking:
        return
    if not judge.offline:
        problem = api_key_problem(judge.api_key_env, judge.base_url)
        if problem is not None:
            raise JudgeError(f"{len(lacking)} judge replies are not cached and must be asked "
                             f"for, but {problem}")
        return
    shown = ", ".join(f"{wanted[u.key][1]} ({wanted[u.key][2]})"
                      for u in lacking[:_SHOWN_MISSING])
    more = f" and {len(lacking) - _SHOWN_MISSING} more" if len(lacking) > _SHOWN_MISSING else ""
    path = judge.cache_path
    where = path if os.path.exists(path) else f"{path} (no such file)"
    why = explain_misses(judge, lacking) if os.path.exists(path) else None
    raise OfflineCacheMiss(
        f"--offline: {len(lacking)} of {len(wanted)} judge replies are not in the cache "
        f"{where}: {shown}{more}; " + (f"{why}; otherwise " if why else "")
        + "run once online to fill it, or give --allow-missing to leave them unscored"
    )


def judge_manifest(run: Batch, judged: Sequence[JudgedMetric]) -> dict[str, Any] | None:
    """The manifest's ``judge`` section: model, endpoint, response formats, prompt hashes,
    cache and tokens."""
    if not judged:
        return None
    judge = judged[0].judge
    stats: RunStats = run.run_wide(("judge", "stats"), RunStats)
    prompts = dict(stats.prompts)
    for metric in judged:
        prompts.setdefault(metric.rubric.id, prompt_info(metric.rubric))
    return judge_section(judge, stats, prompts)


def judge_section(judge: JudgeOptions, stats: RunStats,
                  prompts: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A manifest section of judge work: model, endpoint, response formats, the prompts
    used, cache and tokens (the rubric judge's ``judge``, claim-level judging's ``claims``)."""
    out: dict[str, Any] = {
        "model": judge.model,
        "endpoint": None if judge.offline else judge.endpoint,
        "endpoints_used": dict(stats.endpoints),
        "served_models": dict(stats.served),
        "offline": judge.offline,
        "response_format": {"mode": judge.response_format, "used": dict(stats.formats),
                            "refused": dict(stats.refused)},
        "timeout_s": judge.timeout,
        "first_reply_timeout_s": first_reply_limit(judge.first_reply_timeout, judge.timeout),
        "max_retries": judge.max_retries,
        "max_tokens": judge.max_tokens,
        "temperature": judge.temperature,
        "seed": judge.seed,
        "extra": dict(judge.extra),
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
            "this_run": judge.cost_usd(stats.usage),
            "replayed_from_cache": judge.cost_usd(stats.cached_usage),
        }
    return out
