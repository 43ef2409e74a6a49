"""The rubric judge as a metric: ``judge:<rubric name or path>``.

Each record is rendered with the rubric (:func:`~rageval.judge.rubric.render.render`); its
replies come from the judge cache or the judge (:func:`~rageval.judge.llm.replies.gather`: only
the replies the cache lacks are asked for, each stored the moment it arrives, so an interrupted
run loses nothing and a restart asks only for what is missing). Values stay on the rubric's
scale (1-5 for the built-in rubrics).

A reply that cannot be parsed, or a request that failed for good, leaves the record unscored with
a reason; the raw reply is kept in the record's details. ``offline`` replays from the cache
alone: no client is built and no network call is made; when the cache lacks an entry the run
stops before scoring (the judge's run hooks, :class:`~rageval.judge.rubric.hooks.JudgeHooks`) unless
``allow_missing`` leaves those unscored.

The signature names the endpoint and the response format the replies came from (read from the
replies: a replay signs with the endpoint that recorded them, not the one configured now).
Run-wide judge configuration travels in :class:`~rageval.judge.llm.options.JudgeOptions`
(``ScoreOptions.judge``; ``evaluate(..., judge=JudgeOptions(...))``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from rageval.core.metric import (
    Batch,
    Metric,
    MetricResult,
    ScoreOptions,
    Slot,
    context_text_reason,
)
from rageval.core.signature import Field, Signature
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import gather, provenance, provenance_only
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.transport.params import DEFAULTED, signed_defaults
from rageval.judge.llm.units import Reply, Unit, make_unit
from rageval.judge.prompting.prompt_files import prompt_info
from rageval.judge.prompting.tampering import Flag, add_flags, aimed_at_judge, reasoning_copied
from rageval.judge.rubric.hooks import GROUP, JUDGE_HOOKS, JUDGE_STATS, rendered_units
from rageval.judge.rubric.logprobs import expected_score
from rageval.judge.rubric.parsing import parse_reply
from rageval.judge.rubric.render import RENDER_VERSION, render, reply_schema, slot_texts
from rageval.judge.rubric.rubrics import Rubric, load_rubric
from rageval.judge.rubric.stability import noise_samples, sample_stats, stability

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.judge.llm.cache.store import Stored

__all__ = ["BatchReplies", "JudgeMetric", "SharedReplies", "judge_fields"]

# Rubric input -> the record field it reads (the orchestrator's "needs" names).
# What the summary reads of a record's details (summary_part keeps these only): what the
# signature names, and the flags it counts.
_PROVENANCE = ("endpoint", "response_format", "flags", *DEFAULTED)

_INPUT_FIELD = {
    "query": "query",
    "contexts": "contexts",
    "context": "contexts",
    "answer": "answer",
    "reference": "reference",
    "conversation": "conversation",
}


class JudgeMetric(Metric):
    """One rubric graded by the LLM judge; values on the rubric's scale, NaN when unscored.

    A rubric whose inputs include ``context`` grades each retrieved context on its own (the
    TREC 0-3 scale of ``context_relevance``): the record's value is the mean grade of its
    contexts, and the details list every context's grade.
    """

    family = "judge"
    grades = True  # its model, prompt and parameters are part of the evaluation set
    reached_at = frozenset({"endpoint"})
    base = "judge"
    hooks = JUDGE_HOOKS
    # Where the run counts this metric's judge work (the manifest section's account).
    stats_account: ClassVar[Slot[RunStats]] = JUDGE_STATS
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
        self.rubric: Rubric = load_rubric(target, judge.prompts_dir)
        self.per_context = "context" in self.rubric.inputs
        self.level = self.rubric.level
        # One schema for every request: it remembers its encodings for the cache keys.
        self._schema = reply_schema(self.rubric)
        # The rubric's inputs a record must have (a turn's conversation is shown when there
        # is one), read for every record.
        self._required = tuple(name for name in self.rubric.inputs
                               if name != "conversation" or self.rubric.level == "conversation")
        super().__init__(cutoff=cutoff, options=opts, name=f"judge:{target}",
                         needs=(_INPUT_FIELD[name] for name in self._required), **params)

    @property
    def judge(self) -> JudgeOptions:
        judge = self.options.judge
        if judge is None or not judge.model:
            JudgeOptions().check()  # raises the "needs a judge model" error
            raise AssertionError("unreachable")
        return judge

    def ready(self) -> None:
        """Raise a usage error, before any scoring, when the metric cannot run."""

    def score_range(self) -> tuple[float, float]:
        return float(self.rubric.scale_min), float(self.rubric.scale_max)

    def reply_schema(self) -> ReplySchema:
        """The structured output this metric asks the judge for."""
        return self._schema

    def run_stats(self, batch: Batch) -> RunStats:
        stats = batch.run.run_wide(self.stats_account, RunStats)
        stats.prompts[self.rubric.id] = prompt_info(self.rubric)
        return stats

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.target, cutoff=self.cutoff, options=options, **dict(self.values))

    def signature_extra(self) -> list[Field]:
        judge = self.options.judge or JudgeOptions()
        fields = judge_fields(judge)
        fields[2:2] = [Field("rubric", self.rubric.id, "r"),
                       Field("rubric_version", self.rubric.version, "rv"),
                       Field("prompt", self.rubric.short_hash, "h")]
        return [*fields, *judge.signed("logprobs", "seed")]

    def summary_part(self, result: MetricResult) -> MetricResult:
        """The values, of each record's details only what the signature reads (the endpoint
        and response format of its replies, one shared dict per distinct pair), and, with
        several samples, what the stability figures and ``--ci judge-noise`` read."""
        samples = self.judge.samples
        stats = (sample_stats(result.details or [None] * len(result.reasons), samples,
                              self.per_context) if samples > 1 else None)
        return MetricResult(result.values, [], provenance_only(result.details, _PROVENANCE),
                            stats)

    def summary_figures(self, result: MetricResult) -> dict[str, Any]:
        if result.stats is None:
            return {}
        return {"stability": stability(result.stats, self.judge.samples)}

    def summary_keeps_rows(self) -> bool:
        """With several samples, the stability figures read every record's samples."""
        return self.judge.samples > 1

    def noise_samples(self, result: MetricResult) -> np.ndarray | None:
        if result.stats is None:
            return None
        return noise_samples(result.stats, result.values[str(self.name)])

    def result_signature(self, result: MetricResult) -> Signature:
        """The endpoint and response format are those of the replies that were used (a replay
        signs with what recorded them); when no reply was used, those configured. A parameter
        the endpoint refused and the model's default stood for is signed ``default``."""
        used: dict[str, set[str]] = {"endpoint": set(), "response_format": set()}
        for detail in result.details or []:
            for key, seen in used.items():
                value = (detail or {}).get(key)
                seen.update([value] if isinstance(value, str) else value or [])
        signature = self.signature()
        fields = [replace(f, value=",".join(sorted(used[f.key])))
                  if used.get(f.key) else f for f in signature.fields]
        return Signature(tuple(signed_defaults(fields, result.details or [])))

    # -- requests --------------------------------------------------------------------------

    def missing_input(self, record: Record) -> str | None:
        """Why ``record`` cannot be shown to the judge under this rubric, or None."""
        for name in self._required:
            field_name = _INPUT_FIELD[name]
            if name == "conversation" and (record.conversation is None or record.turn != 0):
                return "not a conversation (a conversation-level rubric grades whole ones)"
            if not record.has(field_name):
                return f"no {field_name} (the record has no '{field_name}')"
            if field_name == "contexts" and (reason := context_text_reason(record)):
                return reason  # ids alone: no passage to show the judge
        return None

    def units(self, record: Record, index: int = 0) -> list[Unit]:
        """Every request this record needs (none when it lacks an input)."""
        if self.missing_input(record) is not None:
            return []
        judge = self.judge
        schema = self.reply_schema()
        contexts: list[int | None] = (list(range(len(record.contexts))) if self.per_context
                                      else [None])
        out = []
        for context in contexts:
            messages = render(self.rubric, record, context, judge.history_chars)
            for sample in range(judge.samples):
                out.append(make_unit(judge, schema, index, context, sample, messages,
                                     own_schema=True))
        return out

    def request(self, record: Record) -> tuple[list[dict[str, str]], dict[str, Any], str]:
        """The messages, response format and cache key of this record's first request, in the
        most constrained wire format the run may ask in."""
        unit = self.units(record)[0]
        fmt = next(iter(unit.keys))
        return unit.messages, self.reply_schema().wire(fmt) or {}, unit.key

    # -- scoring ---------------------------------------------------------------------------

    def score(self, batch: Batch) -> MetricResult:
        n = len(batch)
        reasons = [self.missing_input(record) for record in batch.records]
        units, replies = self.batch_replies(batch)
        values = np.full(n, np.nan)
        details: list[dict[str, Any] | None] = [None] * n
        by_record: dict[int, list[tuple[Unit, Reply]]] = {}
        for unit in units:
            by_record.setdefault(unit.record, []).append((unit, replies[unit.key]))
        for i, pairs in by_record.items():
            record = batch.records[i]
            if self.per_context:
                values[i], reasons[i], details[i] = self._per_context(record, pairs)
            else:
                item = self._item(pairs, slot_texts(self.rubric, record, None))
                values[i], reasons[i], details[i] = item.value, item.reason, item.details
            details[i] = {**(details[i] or {}), **provenance([reply for _, reply in pairs])}
        return MetricResult({str(self.name): values}, reasons, details)

    def batch_replies(self, batch: Batch) -> BatchReplies:
        """The batch's units and a reply (or error) for each: this metric's share of the
        replies prepared for the batch's scope (:meth:`prepare`)."""
        return self.prepare(batch).share(self.share_name, batch.records)

    def prepare(self, batch: Batch) -> SharedReplies:
        """The replies of every judge metric of the run asking this metric's judge, for every
        record of the batch's scope (all the batches of one scoring pass).

        They are gathered when the first batch of the scope is scored, by the first of those
        metrics to score it, in one stream of requests (the run's judge metrics:
        :data:`~rageval.judge.rubric.hooks.GROUP`, set by the run hooks), and kept for the
        others: batches and rubrics only bound the memory and the order of the scoring, and a
        judge that stopped at each batch or rubric boundary would let its requests in flight
        drain to zero every time, a stall that costs throughput at high concurrency.
        """
        scope = batch.scope
        holder = batch if scope is batch.records else batch.run  # dropped with what it covers
        group = self._group(batch)
        slot = Slot[SharedReplies](("judge", "replies", frozenset(m.share_name for m in group),
                                    id(scope)))
        return holder.cached(slot, lambda: self._gather_scope(batch, group))

    @property
    def share_name(self) -> str:
        """What names this metric's share of the replies gathered with others' (its name)."""
        return str(self)

    def _group(self, batch: Batch) -> list[JudgeMetric]:
        """This metric and the run's other judge metrics asking the same judge."""
        others = {str(m): m for m in batch.run.cached(GROUP, list)
                  if isinstance(m, JudgeMetric) and m.judge == self.judge}
        others.pop(str(self), None)
        return [self, *others.values()]

    def _gather_scope(self, batch: Batch, group: list[JudgeMetric]) -> SharedReplies:
        """The ``group``'s units by record (indices are the scope's: the cache's metadata
        reads record ids there) and their replies, gathered in one stream."""
        scope = batch.scope
        units: dict[str, dict[int, list[Unit]]] = {}
        sent: list[Unit] = []
        owner: dict[str, JudgeMetric] = {}
        read: dict[str, Stored] = {}  # replies the run's check read from the cache
        for metric in group:
            handed = rendered_units(metric, scope)  # by the run's check, if it did
            if handed is None:
                rendered = [metric.units(r, i) for i, r in enumerate(scope)]
            else:
                rendered = handed.units
                read.update(handed.found)
            by_record = {id(r): record_units for r, record_units in zip(scope, rendered,
                                                                         strict=True)}
            units[metric.share_name] = by_record
            metric.run_stats(batch)  # its prompt in the manifest
            schema = metric.reply_schema()
            for record_units in by_record.values():
                for unit in record_units:
                    owner.setdefault(unit.key, metric)
                    sent.append(unit if unit.schema is not None else replace(unit, schema=schema))
        replies = gather(self.judge, sent, list(scope), self.reply_schema(),
                         self.run_stats(batch), lambda unit: owner[unit.key].reply_meta(unit),
                         read)
        return SharedReplies(units, replies)

    def reply_meta(self, unit: Unit) -> dict[str, Any]:
        """What the cache stores beside a new reply of this metric (besides the record id)."""
        meta: dict[str, Any] = {"rubric": self.rubric.id, "rubric_version": self.rubric.version}
        if unit.order:
            meta["order"] = unit.order
        return meta

    # -- aggregation -----------------------------------------------------------------------

    def _item(self, pairs: list[tuple[Unit, Reply]], texts: dict[str, list[str]]) -> _Item:
        """One graded item (a record, or one context) from its samples' replies (``texts``:
        the judged texts, read for :mod:`~rageval.judge.prompting.tampering`'s flags)."""
        judge = self.judge
        scores: list[float] = []
        errors: list[str] = []
        details: dict[str, Any] = {"reasoning": None,
                                   "cached": all(reply.cached for _, reply in pairs)}
        distributions: list[dict[int, float]] = []
        copied = None
        for _, reply in pairs:
            if reply.error is not None:
                errors.append(reply.error)
                continue
            parsed = parse_reply(reply.text, self.rubric)
            if details["reasoning"] is None:
                details["reasoning"] = parsed.reasoning
            copied = copied or reasoning_copied(parsed.reasoning, texts)
            if not parsed.ok:
                errors.append(reply.unusable(parsed.error or ""))
                details.setdefault("raw", reply.text)
                continue
            if judge.logprobs:
                expected = expected_score(reply.logprobs, self.rubric, parsed.score)
                if expected.value is None:
                    errors.append(reply.unusable(expected.error or ""))
                    details.setdefault("raw", reply.text)
                    continue
                distributions.append(expected.distribution)
                scores.append(expected.value)
            else:
                scores.append(float(parsed.score))  # type: ignore[arg-type]
        add_flags(details, [aimed_at_judge(texts), copied])
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
        # One sample's mean is its score (numpy's mean costs more than the rest of the item).
        value = float(scores[0]) if len(scores) == 1 else float(np.mean(scores))
        return _Item(value, None, details)

    def _per_context(self, record: Record, pairs: list[tuple[Unit, Reply]]
                     ) -> tuple[float, str | None, dict[str, Any]]:
        """Every context graded on its own; the record's value is the mean grade."""
        by_context: dict[int, list[tuple[Unit, Reply]]] = {}
        for unit, reply in pairs:
            by_context.setdefault(unit.context or 0, []).append((unit, reply))
        grades: list[dict[str, Any]] = []
        failed: list[str] = []
        flags: list[Flag] = []
        for index, context_pairs in sorted(by_context.items()):
            item = self._item(context_pairs, slot_texts(self.rubric, record, index))
            grade = None if math.isnan(item.value) else item.value
            grades.append({"id": record.contexts[index].id, "grade": grade, **item.details})
            if item.reason is not None:
                failed.append(f"context {record.contexts[index].id}: {item.reason}")
            flags += [Flag(name, f"context {record.contexts[index].id}: {why}")
                      for name, why in item.details.get("flag_reasons", {}).items()]
        details = {"contexts": grades,
                   "cached": all(g["cached"] for g in grades)}
        add_flags(details, flags)
        if failed:
            reason = (f"{len(failed)} of {len(grades)} contexts not graded "
                      f"(first: {failed[0]})")
            return math.nan, reason, details
        return float(np.mean([g["grade"] for g in grades])), None, details


class BatchReplies(NamedTuple):
    """One metric's requests for a batch (record indices are the batch's) and a reply (or
    error) for each, by :attr:`Unit.key`."""

    units: list[Unit]
    replies: Mapping[str, Reply]


@dataclass(frozen=True)
class SharedReplies:
    """What the judge metrics asking one judge prepare together for the records of one
    scoring scope: each metric's requests by record (``units[share_name][id(record)]``,
    record indices the scope's), and a reply (or error) for every request, by its key."""

    units: Mapping[str, Mapping[int, list[Unit]]]
    replies: Mapping[str, Reply]

    def share(self, name: str, records: Sequence[Record]) -> BatchReplies:
        """The share of metric ``name`` for ``records`` (a batch of the scope)."""
        by_record = self.units[name]
        return BatchReplies([u.at(i) for i, record in enumerate(records)
                             for u in by_record[id(record)]],
                            self.replies)


@dataclass(frozen=True)
class _Item:
    value: float
    reason: str | None
    details: dict[str, Any]


def judge_fields(judge: JudgeOptions) -> list[Field]:
    """The signature fields every judge metric shares (the endpoint and response format are
    replaced by those of the replies used, see :meth:`JudgeMetric.result_signature`)."""
    return [*judge.signed("model", "base_url", "response_format"),
            Field("render", RENDER_VERSION, "rd"),
            *judge.signed("temperature", "samples", "max_tokens", "reasoning_effort",
                          "history_chars", "extra")]


def _mean_distribution(distributions: list[dict[int, float]]) -> dict[str, float]:
    scores = sorted({s for d in distributions for s in d})
    return {str(s): sum(d.get(s, 0.0) for d in distributions) / len(distributions)
            for s in scores}
