"""Getting a reply for every judge request: from the cache, else from the judge.

A :class:`Unit` is one request (a record, one of its contexts for per-context rubrics, a sample,
an order for pairwise judging) with its cache key under each wire format the run may ask in,
and its request id (the same whatever the format, see
:mod:`~rageval.judge.llm.cache.entries`). :func:`gather` looks every unit up in the cache by
its id, and under each of its keys where the id finds none (the first format of the ladder that
has a reply wins, so a replay finds replies whatever format produced them:
:meth:`~rageval.judge.llm.cache.store.JudgeCache.lookup`) and asks the judge only for what is
missing, storing each reply under the key of the format it was actually produced in, with the
request's id, as soon as it arrives (the replies that arrive together are committed in one
transaction, and what arrived before a failure is committed before the failure is raised). What
the judge did is counted in :class:`RunStats` for the manifest, and told to
``JudgeOptions.progress`` as it goes (:meth:`RunStats.tell`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rageval.judge.llm.cache.store import JudgeCache, NewReply, Stored
from rageval.judge.llm.costs.plan import DRY_RUN
from rageval.judge.llm.options import JudgeOptions, SharedCache
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.served import ServedCheck
from rageval.judge.llm.transport.endpoint import api_key_problem
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.transport.params import DEFAULT, DEFAULTED, defaulted
from rageval.judge.llm.units import Reply, Unit, reply_meta

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.judge.llm.transport.client import JudgeClient, JudgeResult

__all__ = ["NOT_CACHED", "gather", "provenance", "uncached"]

NOT_CACHED = "not in the judge cache (offline)"


class Sourced(Protocol):
    """What :func:`provenance` reads of a reply (a :class:`Reply`, a claim step's outcome)."""

    endpoint: str | None
    format: str | None
    defaults: tuple[str, ...]


def provenance(replies: Sequence[Sourced]) -> dict[str, Any]:
    """The endpoint(s) and wire format(s) behind the replies (for details and signatures),
    and each parameter the model's default stood for: ``"temperature": "default"``, or
    ``["configured", "default"]`` when only some replies had it so."""
    if len(replies) == 1:  # most items: one reply (what the loops below give it)
        return _provenance_of_one(replies[0])
    out: dict[str, Any] = {}
    for name, values in (("endpoint", [r.endpoint for r in replies]),
                         ("response_format", [r.format for r in replies])):
        seen = sorted({v for v in values if v})
        if seen:
            out[name] = seen[0] if len(seen) == 1 else seen
    for name in DEFAULTED:
        default = {name in r.defaults for r in replies}
        if True in default:
            out[name] = DEFAULT if default == {True} else ["configured", DEFAULT]
    return out


def _provenance_of_one(reply: Sourced) -> dict[str, Any]:
    """:func:`provenance` of a single reply."""
    out: dict[str, Any] = {}
    if reply.endpoint:
        out["endpoint"] = reply.endpoint
    if reply.format:
        out["response_format"] = reply.format
    if reply.defaults:
        for name in DEFAULTED:
            if name in reply.defaults:
                out[name] = DEFAULT
    return out


def provenance_only(details: Sequence[dict[str, Any] | None] | None,
                    keys: tuple[str, ...]) -> list[dict[str, Any] | None] | None:
    """Of each record's details only ``keys`` (what a signature reads), one shared dict per
    distinct content: a long run keeps a pointer per record, not a dict."""
    if details is None:
        return None
    shared: dict[Any, dict[str, Any]] = {}
    out: list[dict[str, Any] | None] = []
    for detail in details:
        kept = {k: detail[k] for k in keys if k in detail} if detail else {}
        if not kept:
            out.append(None)
            continue
        out.append(shared.setdefault(_content_key(kept), kept))
    return out


def _content_key(kept: dict[str, Any]) -> Any:
    """What tells contents apart in :func:`provenance_only`: the items themselves where every
    value is a string or a list of strings (what a signature reads: endpoints, formats,
    flags), else the canonical JSON (``1`` and ``True`` are different contents, equal in
    Python)."""
    items = []
    for name, value in kept.items():
        if type(value) is str:
            items.append((name, value))
        elif type(value) is list and all(type(v) is str for v in value):
            items.append((name, tuple(value)))
        else:
            return json.dumps(kept, sort_keys=True, default=str)
    return tuple(sorted(items))


def uncached(judge: JudgeOptions, units: list[Unit],
             found: dict[str, Stored] | None = None) -> list[Unit]:
    """The units whose reply the cache lacks in every format (all of them with ``refresh``).
    Reads the cache only where it exists: nothing is created. ``found``: where the replies
    found are put, by :attr:`Unit.key` (read in the same pass, for :func:`gather` to use
    rather than read them again)."""
    if judge.refresh or not units:
        return list(units)
    if not os.path.exists(judge.cache_path):
        return list(units)
    cache = judge.open_cache()
    if cache is None:
        return list(units)
    requests = [unit.lookup() for unit in units]
    with cache:
        if found is None:
            keys = cache.find(requests, backfill=not judge.dry_run)
            return [unit for unit, key in zip(units, keys, strict=True) if key is None]
        replies = cache.lookup(requests, backfill=not judge.dry_run)
    for unit, reply in zip(units, replies, strict=True):
        if reply is not None:
            found[unit.key] = reply
    return [unit for unit, reply in zip(units, replies, strict=True) if reply is None]


def gather(judge: JudgeOptions, units: list[Unit], records: list[Record], schema: ReplySchema,
           stats: RunStats, meta: Callable[[Unit], dict[str, Any]],
           read: Mapping[str, Stored] | None = None) -> dict[str, Reply]:
    """A reply (or an error) for every unit, by :attr:`Unit.key`: from the cache, else from
    the judge (``meta(unit)`` is stored beside each new reply). ``read``: replies already
    read from the cache for this run, by key (:func:`uncached`'s ``found``): the cache is
    read only for the others."""
    replies: dict[str, Reply] = {}
    pending: dict[str, Unit] = {}
    cache = judge.open_cache()
    try:
        found: list[Stored | None] = [None] * len(units)
        if cache is not None and not judge.refresh:
            found = _looked_up(judge, cache, units, read or {})
        for unit, hit in zip(units, found, strict=True):
            if unit.key in replies or unit.key in pending:
                continue
            if hit is not None:
                stats.hits += 1
                stats.add_usage(hit.usage, cached=True)
                replies[unit.key] = _cached_reply(unit, hit)
                if judge.dry_run:
                    stats.plan(_kind(meta(unit))).hit(hit.usage)
            elif judge.dry_run:
                stats.misses += 1
                stats.plan(_kind(meta(unit))).send(stats.prompt_tokens(judge, unit.messages))
                replies[unit.key] = Reply(error=DRY_RUN)
            elif judge.offline:
                stats.misses += 1
                replies[unit.key] = Reply(error=NOT_CACHED)
            else:
                stats.misses += 1
                pending[unit.key] = unit
        if units:
            stats.tell(judge, stats.requests + len(pending), stats.failed)
        served = ServedCheck(judge.model or "", (r.served_model for r in replies.values()),
                             enabled=not (judge.offline or judge.any_served_model
                                          or judge.dry_run))
        if pending and cache is not None and judge.batch:  # the provider's batch API
            from rageval.judge.llm.batch.run import ask_by_batch

            replies.update(capped := _capped(judge, list(pending.values()), stats))
            try:
                replies.update(ask_by_batch(judge, cache,
                                            [u for k, u in pending.items() if k not in capped],
                                            records, schema, stats, meta, served))
            finally:
                if judge.budget is not None:
                    judge.budget.settled()  # the replies' usage replaces the estimates
        elif pending and cache is not None:
            replies.update(_ask(judge, cache, list(pending.values()), records, schema, stats,
                                meta, served))
        elif served.needed and api_key_problem(judge.api_key_env, judge.base_url) is None:
            served.probe(_client(judge))
    finally:
        if cache is not None:
            cache.close()
    for reply in replies.values():
        if reply.text is not None:
            stats.formats[reply.format or "?"] += 1
            stats.endpoints[reply.endpoint or "?"] += 1
            stats.served[reply.served_model or "?"] += 1
    return replies


def _looked_up(judge: JudgeOptions, cache: JudgeCache | SharedCache, units: list[Unit],
               read: Mapping[str, Stored]) -> list[Stored | None]:
    """Each unit's reply in the cache: from ``read`` where it is there, the others looked up
    (in one pass)."""
    found = [read.get(unit.key) for unit in units]
    rest = [i for i, stored in enumerate(found) if stored is None]
    if rest:
        looked = cache.lookup([units[i].lookup() for i in rest], backfill=not judge.dry_run)
        for i, stored in zip(rest, looked, strict=True):
            found[i] = stored
    return found


def _kind(meta: dict[str, Any]) -> str:
    """The kind of request a unit is, for a dry run's table: its rubric or claim step."""
    return str(meta.get("rubric") or meta.get("step") or "judge")


def _cached_reply(unit: Unit, stored: Stored) -> Reply:
    """The reply of ``unit`` found in the cache, in the wire format of the key it was under."""
    fmt = next(fmt for fmt, key in unit.keys.items() if key == stored.key)
    meta = stored.meta
    # Replies stored before formats were negotiated sit under the json_schema key even when
    # the endpoint had refused it; their meta says so.
    if meta.get("format") is None and meta.get("structured") is False:
        fmt = "text"
    served = meta.get("served_model")
    return Reply(stored.reply_text, meta.get("logprobs"), cached=True, format=fmt,
                 endpoint=stored.endpoint, finish_reason=meta.get("finish_reason"),
                 served_model=served if isinstance(served, str) else None,
                 defaults=defaulted(meta.get("sent")))


def _client(judge: JudgeOptions) -> JudgeClient:
    from rageval.judge.llm.transport.client import JudgeClient

    return JudgeClient(judge, judge.session)


def _ask(judge: JudgeOptions, cache: JudgeCache | SharedCache, pending: list[Unit],
         records: list[Record], schema: ReplySchema, stats: RunStats,
         meta: Callable[[Unit], dict[str, Any]], served: ServedCheck) -> dict[str, Reply]:
    from rageval.judge.llm.transport.client import JudgeRequest

    capped = _capped(judge, pending, stats)
    pending = [unit for unit in pending if unit.key not in capped]
    if not pending:
        return capped
    client = _client(judge)
    requests = [JudgeRequest(unit.messages, unit.schema or schema, unit.sample, tag=unit,
                             seed=None if judge.seed is None else judge.seed + unit.sample)
                for unit in pending]
    total = stats.requests + len(requests)  # this account's, this round's included
    judge_id = f"{judge.model}@{judge.endpoint}"
    replied_before = judge_id in stats.replied  # else a round answering nothing stops the run
    failed = [stats.failed]  # stats.failed counts this round's failures once it is over
    arrived = _Arrived(cache, stats, replace=judge.refresh)

    def store(result: JudgeResult) -> None:
        unit: Unit = result.request.tag
        stats.requests += 1
        stats.add_usage(result.usage, cached=False)
        if judge.budget is not None:
            judge.budget.received(judge, result.usage)
        if not result.ok or result.text is None:
            failed[0] += 1
        else:
            stats.replied.add(judge_id)
            served.check(result.model)  # before this reply joins cached ones of another
            extra = reply_meta(unit, records, meta(unit), fmt=result.format,
                               finish_reason=result.finish_reason, served_model=result.model,
                               logprobs=result.logprobs, sent=result.sent)
            arrived.add((unit.keys[result.format],
                         client.request_summary(result.request, result.format), result.text,
                         result.usage, extra, unit.request_id))
        stats.tell(judge, total, failed[0])

    try:
        results = client.complete_many(requests, concurrency=judge.concurrency,
                                       rpm=judge.rpm, on_result=store,
                                       shared=judge.session.shared_limits,
                                       on_drained=arrived.commit,
                                       replied_before=replied_before)
    finally:
        stats.refused.update(client.refused_formats)
        stats.refused_params.update(client.refused_params)
        arrived.commit()  # whatever arrived before a failure is kept
        if judge.budget is not None:
            judge.budget.settled()
    out: dict[str, Reply] = {}
    for result in results:
        unit = result.request.tag
        if result.ok and result.text is not None:
            out[unit.key] = Reply(result.text, result.logprobs, format=result.format,
                                  endpoint=client.public_endpoint,
                                  finish_reason=result.finish_reason,
                                  served_model=result.model, defaults=defaulted(result.sent))
        else:
            stats.failed += 1
            out[unit.key] = Reply(error=f"judge request failed: {result.error}")
    out.update(capped)
    return out


def _capped(judge: JudgeOptions, pending: list[Unit], stats: RunStats) -> dict[str, Reply]:
    """The requests the run's caps refuse, in the order they would be sent (none without
    caps), each answered with why (:mod:`~rageval.judge.llm.costs.budget`)."""
    if judge.budget is None:
        return {}
    out: dict[str, Reply] = {}
    for unit in pending:
        tokens = stats.prompt_tokens(judge, unit.messages) if judge.max_cost is not None else 0
        reason = judge.budget.admit(judge, tokens)
        if reason is not None:
            out[unit.key] = Reply(error=reason)
    stats.capped += len(out)
    return out


class _Arrived:
    """New replies on their way into the cache: those the client hands over in one lot (see
    :class:`~rageval.judge.llm.transport.pool.Scheduler`) are committed in one transaction,
    right after.

    One transaction per reply would cost the calling thread three round trips into SQLite per
    reply, each giving up the interpreter lock and waiting to get it back from the threads
    sending requests: at high concurrency that thread would fall behind the replies.
    """

    def __init__(self, cache: JudgeCache | SharedCache, stats: RunStats, *,
                 replace: bool) -> None:
        self.cache = cache
        self.stats = stats
        self.replace = replace
        self.waiting: list[NewReply] = []

    def add(self, reply: NewReply) -> None:
        self.waiting.append(reply)

    def commit(self) -> None:
        """Store every reply waiting, in one transaction. When the lot cannot be written,
        its replies are stored one by one, so that one that cannot be stored (the error then
        stops the run) does not take the others with it."""
        if not self.waiting:
            return
        batch, self.waiting = self.waiting, []
        try:
            self.stats.stored += self.cache.put_many(batch, replace=self.replace)
        except Exception as lot_error:
            failed: Exception | None = None
            for reply in batch:
                try:
                    self.stats.stored += self.cache.put_many([reply], replace=self.replace)
                except Exception as error:
                    failed = failed or error
            raise (failed or lot_error) from None
