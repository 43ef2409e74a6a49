"""What every kind of judge run checks before it asks, and reports after: the replies it needs
are cached or may be asked for (:func:`check_cached`; in a dry run, :func:`would_stop`), and
the manifest section of its judge work (:func:`judge_section`). The rubric judge's hooks
(:mod:`rageval.judge.rubric.hooks`) and claim-level judging's
(:mod:`rageval.judge.claims.hooks`) both use them.
"""

from __future__ import annotations

import os
from typing import Any

from rageval.core.errors import RagevalError
from rageval.judge.llm.cache.store import Stored
from rageval.judge.llm.config import first_reply_limit
from rageval.judge.llm.costs.plan import batch_plan
from rageval.judge.llm.misses import explain_misses
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import uncached
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.transport.endpoint import Endpoint, api_key_problem
from rageval.judge.llm.transport.requests import JudgeError
from rageval.judge.llm.units import Unit

__all__ = ["OfflineCacheMiss", "check_cached", "judge_section", "prompt_cache_share",
           "would_stop"]

_SHOWN_MISSING = 5


class OfflineCacheMiss(RagevalError):
    """An offline replay lacks cached judge replies."""

    exit_code = 2


def check_cached(judge: JudgeOptions, wanted: dict[str, tuple[Unit, str, str]],
                 found: dict[str, Stored] | None = None) -> None:
    """The replies a run wants (by key: the unit, its record id and what asks for it) are
    cached, or the run may ask for them: an offline run lacking any raises
    :class:`OfflineCacheMiss` listing how many and the first few; a run that has to ask needs
    its API key (else :class:`~rageval.judge.llm.transport.client.JudgeError`). ``found``:
    where the replies found are put (see :func:`~rageval.judge.llm.replies.uncached`)."""
    lacking = uncached(judge, [unit for unit, _, _ in wanted.values()], found)
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


def would_stop(judge: JudgeOptions, stats: RunStats) -> list[str]:
    """What a dry run finds that would stop the real run before its first reply: requests to
    send without the API key they need, an endpoint that cannot be reached."""
    to_send = sum(planned.to_send for planned in stats.planned.values())
    if not to_send:
        return []
    problems = []
    problem = api_key_problem(judge.api_key_env, judge.base_url)
    if problem is not None:
        problems.append(f"{to_send} judge replies are not cached and must be asked for, but "
                        f"{problem}")
    if stats.tokens is not None and stats.tokens.unreachable:
        problems.append(f"judge endpoint {Endpoint.of(judge.base_url).shown}: "
                        f"{stats.tokens.unreachable}")
    return problems


def prompt_cache_share(usage: dict[str, int]) -> dict[str, Any] | None:
    """What the endpoint's own prompt cache served of this run's prompt tokens, as it
    reported it (provider prompt caching: unrelated to rageval's cache of replies); None when
    no reply reported it."""
    if "cached_prompt_tokens" not in usage:
        return None
    prompt, cached = usage.get("prompt_tokens", 0), usage["cached_prompt_tokens"]
    return {"cached_prompt_tokens": cached, "prompt_tokens": prompt,
            "share": round(cached / prompt, 4) if prompt else 0.0}


def judge_section(judge: JudgeOptions, stats: RunStats, prompts: dict[str, dict[str, str]],
                  render_version: str) -> dict[str, Any]:
    """A manifest section of judge work: model, endpoint, response formats, the prompts
    used (and the version of the wording around them), cache and tokens (the rubric judge's
    ``judge``, claim-level judging's ``claims``)."""
    out: dict[str, Any] = {
        "model": judge.model,
        "endpoint": None if judge.offline else judge.endpoint,
        "endpoints_used": dict(stats.endpoints),
        "served_models": dict(stats.served),
        "offline": judge.offline,
        "response_format": {"mode": judge.response_format, "used": dict(stats.formats),
                            "refused": dict(stats.refused)},
        # What a reasoning model refused and was sent adapted (transport.params).
        "refused_parameters": dict(stats.refused_params),
        "timeout_s": judge.timeout,
        "first_reply_timeout_s": first_reply_limit(judge.first_reply_timeout, judge.timeout),
        "max_retries": judge.max_retries,
        "max_tokens": judge.max_tokens,
        "temperature": judge.temperature,
        "seed": judge.seed,
        "extra": dict(judge.extra),
        "samples": judge.samples,
        "score": "logprobs" if judge.logprobs else "reply",
        "render_version": render_version,
        "prompts": prompts,
        "cache": {"path": judge.cache_path, "hits": stats.hits, "misses": stats.misses,
                  "stored": stats.stored, "refresh": judge.refresh},
        "requests": stats.requests,
        "failed": stats.failed,
        "usage": dict(stats.usage),
        "cached_usage": dict(stats.cached_usage),
    }
    prompt_cache = prompt_cache_share(stats.usage)
    if prompt_cache is not None:
        out["prompt_cache"] = prompt_cache
    if judge.budget is not None:
        out["caps"] = {"max_requests": judge.max_requests, "max_cost_usd": judge.max_cost,
                       "reached": judge.budget.reached, "not_sent": stats.capped}
    if judge.dry_run:
        out["dry_run"] = {kind: planned.to_json(judge) for kind, planned in stats.planned.items()}
        out["prompt_tokens_counted_by"] = (stats.tokens.method if stats.tokens is not None
                                           else None)
        out["would_stop"] = would_stop(judge, stats)
        if judge.batch:
            out["batch_plan"] = batch_plan(judge, stats.planned)
    if judge.batch or stats.batched:
        out["batch"] = batch_section(judge, stats)
    if judge.price_in is not None or judge.price_out is not None:
        out["cost_usd"] = {
            "price_in_per_mtok": judge.price_in,
            "price_out_per_mtok": judge.price_out,
            "price_cached_in_per_mtok": (judge.price_in if judge.price_cached_in is None
                                         else judge.price_cached_in),
            "this_run": stats.spent_usd(judge),
            "replayed_from_cache": judge.cost_usd(stats.cached_usage),
        }
        if stats.batched:
            out["cost_usd"]["batch_discount"] = judge.batch_discount
    return out


def batch_section(judge: JudgeOptions, stats: RunStats) -> dict[str, Any]:
    """The manifest's account of batch judging: the replies that came by batch, their
    batches and tokens, and the share of the prices they are counted at."""
    return {"replies": stats.batched, "batches": list(stats.batches),
            "usage": dict(stats.batch_usage), "discount": judge.batch_discount,
            "cost_usd": judge.batch_cost(stats.batch_usage) if stats.batched else None}
