"""``judge:pairwise``: is this run's answer better than another system's answer to the same query?

``rageval score RECORDS -m judge:pairwise --judge-against OTHER`` shows the judge each query
with two answers, this run's and the one ``OTHER`` (a records file, paired by id) holds for the
same id, together with the reference answer and the retrieved contexts when the record has them
(the contexts only when both records hold the same ones: an answer is not judged against
passages its system never retrieved; ``details`` say when they were left out). The judge is
asked twice, once in each order (this run's answer as A, then as B), because judges favour a
position: a verdict that changes when the answers are swapped is a tie, and the share of records
whose two verdicts agree is reported as the position-consistency rate.

Per record (from this run's side): ``judge:pairwise`` is 1 for a win, 0.5 for a tie, 0 for a
loss, so its mean is the win rate with ties counted half (with its bootstrap CI, like every
mean); the components ``.win``, ``.tie``, ``.loss`` and ``.consistent`` are 0/1 indicators whose
means are the win, tie and loss rates and the position-consistency rate. Two identical answers
are a tie without asking the judge. With ``--judge-samples N`` each sample is asked in both
orders and the record's values are means over the samples.

The prompt is a data file (``prompts/pairwise/pairwise.toml``, or ``pairwise.toml`` in
``--prompts-dir``), loaded, rendered and its replies parsed by :mod:`rageval.judge.pairwise.prompt`;
its hash is part of the signature and of every cache key. Requests go through the same cache,
client and offline replay as every judge call.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, MetricResult, ScoreOptions, context_text_reason
from rageval.core.signature import Field
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import provenance
from rageval.judge.llm.session import JudgeSession
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.units import Reply, Unit, make_unit
from rageval.judge.pairwise.prompt import (
    PAIRWISE,
    PairwisePrompt,
    Verdict,
    load_pairwise_prompt,
    parse_verdict,
    render_pair,
    verdict_format,
    verdict_schema,
)
from rageval.judge.prompting.tampering import add_flags, aimed_at_judge
from rageval.judge.rubric.metric import JudgeMetric, judge_fields

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["PairwiseMetric", "PairwisePrompt", "Verdict", "load_pairwise_prompt",
           "parse_verdict", "render_pair", "verdict_format"]

IDENTICAL = "identical answers: a tie without asking the judge"
CONTEXTS_DIFFER = "not shown: the two records' contexts differ"
# Per record, the outcome from this run's side: value, and which indicator is set.
_WIN, _TIE, _LOSS = 1.0, 0.5, 0.0


# ---- the other system's answers ------------------------------------------------------------


@dataclass(frozen=True)
class Opponent:
    """The other system's records by id, read from ``path``; ``digest`` identifies their
    answers and contexts (in signatures: the same file name with other answers is another
    opponent)."""

    path: str
    records: dict[str, Record]
    digest: str

    def answer(self, record_id: str) -> str | None:
        return self.records[record_id].answer

    def same_contexts(self, record: Record) -> bool:
        other = self.records[record.id].contexts
        return [c.text for c in other] == [c.text for c in record.contexts]

    def shown_contexts(self, record: Record) -> bool:
        """Whether the judge is shown the contexts: both systems retrieved the same texts,
        and the record's contexts have texts to show (not ids alone)."""
        return self.same_contexts(record) and context_text_reason(record) is None


def load_opponent(path: str, session: JudgeSession,
                  max_line_bytes: int | None = None) -> Opponent:
    """The records file's answers (read once per file version in a run: its ``session``)."""
    try:
        stat = os.stat(path)
    except OSError as error:
        raise UsageError(f"--judge-against {path}: {error.strerror or error}") from None
    key = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    return session.opponent(key, lambda: _read_opponent(path, max_line_bytes))


def _read_opponent(path: str, max_line_bytes: int | None) -> Opponent:
    from rageval.core.records import load_records

    records = {record.id: record for record in load_records(path, max_line_bytes=max_line_bytes)}
    digest = hashlib.sha256()
    for record_id in sorted(records):
        record = records[record_id]
        texts = [c.text for c in record.contexts]
        digest.update(json.dumps([record_id, record.answer, texts]).encode())
    return Opponent(path, records, digest.hexdigest()[:12])


# ---- the metric --------------------------------------------------------------------------


class PairwiseMetric(JudgeMetric):
    """``judge:pairwise``: this run's answer against ``--judge-against``'s, in both orders."""

    summary = ("pairwise LLM judge: this run's answer vs --judge-against FILE's, asked in both "
               "orders; 1 win, 0.5 tie, 0 loss (mean: win rate, ties half)")

    def __init__(self, target: str = PAIRWISE, cutoff: int | None = None,
                 options: ScoreOptions | None = None, **params: Any) -> None:
        opts = options or ScoreOptions()
        judge = opts.judge or JudgeOptions()
        self.target = PAIRWISE
        self.rubric = load_pairwise_prompt(judge.prompts_dir)  # type: ignore[assignment]
        self.per_context = False
        Metric.__init__(self, cutoff=cutoff, options=opts, name=f"judge:{PAIRWISE}",
                        needs=("query", "answer"), **params)

    @property
    def opponent(self) -> Opponent:
        judge = self.options.judge
        if judge is None or not judge.against:
            raise UsageError("judge:pairwise compares this run's answers with another "
                             "system's: give that system's records with --judge-against FILE")
        return load_opponent(judge.against, judge.session, self.options.max_line_bytes)

    def ready(self) -> None:
        if self.judge.logprobs:
            raise UsageError("--judge-logprobs reads the probabilities of a rubric's score "
                             "token; judge:pairwise replies with a verdict and cannot use it")
        self.opponent  # noqa: B018  (raises the usage error before any scoring)

    def score_range(self) -> tuple[float, float]:
        return 0.0, 1.0  # a loss, a win

    def output_names(self) -> list[str]:
        name = str(self.name)
        return [name, *(f"{name}.{part}" for part in ("win", "tie", "loss", "consistent"))]

    def table_names(self) -> list[str]:
        name = str(self.name)
        return [name, f"{name}.consistent"]

    def reply_schema(self) -> ReplySchema:
        return verdict_schema()

    def request(self, record: Record) -> tuple[list[dict[str, str]], dict[str, Any], str]:
        """The messages, response format and cache key of this record's first request."""
        if not self.units(record):
            raise UsageError(f"record {record.id!r} needs no pairwise request "
                             f"({self.missing_input(record) or IDENTICAL})")
        return super().request(record)

    def signature_extra(self) -> list[Field]:
        judge = self.options.judge or JudgeOptions()
        against = "?"
        if judge.against:
            opponent = self.opponent
            against = f"{Path(opponent.path).name}#{opponent.digest}"
        fields = judge_fields(judge)
        fields[2:2] = [Field("prompt_version", self.rubric.version, "rv"),
                       Field("prompt", self.rubric.short_hash, "h")]
        return [*fields, Field("orders", "both", "o"), Field("against", against, "vs"),
                *judge.signed("seed")]

    def missing_input(self, record: Record) -> str | None:
        if record.query is None:
            return "no query (the record has no 'query')"
        if record.answer is None:
            return "no answer (the record has no 'answer')"
        opponent = self.opponent
        if record.id not in opponent.records:
            return f"no record {record.id!r} in --judge-against {opponent.path}"
        if opponent.answer(record.id) is None:
            return f"record {record.id!r} of --judge-against {opponent.path} has no answer"
        return None

    def units(self, record: Record, index: int = 0) -> list[Unit]:
        """Both orders (0: this run's answer as A; 1: as B) times the samples; none for a
        record without an input or whose two answers are identical."""
        if self.missing_input(record) is not None:
            return []
        ours, theirs = record.answer or "", self.opponent.answer(record.id) or ""
        if ours == theirs:
            return []
        judge = self.judge
        schema = verdict_schema()
        shared = self.opponent.shown_contexts(record)
        out = []
        for order, (first, second) in enumerate(((ours, theirs), (theirs, ours))):
            messages = render_pair(self.rubric, record, first, second,  # type: ignore[arg-type]
                                   show_contexts=shared)
            for sample in range(judge.samples):
                out.append(make_unit(judge, schema, index, None, sample, messages, order))
        return out

    def _judged_texts(self, record: Record) -> dict[str, list[str]]:
        """What the judge is shown of a record: the query, both answers, the contexts."""
        texts = {"query": [record.query or ""], "answer": [record.answer or ""],
                 "other answer": [self.opponent.answer(record.id) or ""]}
        if self.opponent.shown_contexts(record):
            texts["contexts"] = [context.text for context in record.contexts]
        return texts

    def score(self, batch: Batch) -> MetricResult:
        n = len(batch)
        names = self.output_names()
        values = {name: np.full(n, np.nan) for name in names}
        reasons: list[str | None] = [self.missing_input(r) for r in batch.records]
        details: list[dict[str, Any] | None] = [None] * n
        units, replies = self.batch_replies(batch)
        by_record: dict[int, list[tuple[Unit, Reply]]] = {}
        for unit in units:
            by_record.setdefault(unit.record, []).append((unit, replies[unit.key]))
        for i in range(n):
            if reasons[i] is not None:
                continue
            if i not in by_record:  # identical answers: a tie the judge never saw
                outcome = _Outcome([(_TIE, None)], None, {"verdicts": [], "note": IDENTICAL,
                                                          "cached": True})
            else:
                outcome = _outcome(by_record[i])
                outcome.details.update(provenance([reply for _, reply in by_record[i]]))
                add_flags(outcome.details, [aimed_at_judge(self._judged_texts(batch.records[i]))])
                if not self.opponent.same_contexts(batch.records[i]):
                    outcome.details["contexts"] = CONTEXTS_DIFFER
                elif (why := context_text_reason(batch.records[i])) is not None:
                    outcome.details["contexts"] = f"not shown: {why}"
            reasons[i], details[i] = outcome.reason, outcome.details
            if outcome.reason is None:
                _fill(values, names, i, outcome.samples)
        return MetricResult(values, reasons, details)


@dataclass(frozen=True)
class _Outcome:
    # Per sample: the value from this run's side, and whether the two orders agreed (None
    # when the judge was not asked: identical answers say nothing about position bias).
    samples: list[tuple[float, bool | None]]
    reason: str | None
    details: dict[str, Any]


def _outcome(pairs: list[tuple[Unit, Reply]]) -> _Outcome:
    """Per sample, the two orders' verdicts turned into this run's win/tie/loss."""
    verdicts: dict[tuple[int, int], str] = {}
    shown: list[dict[str, Any]] = []
    errors: list[str] = []
    for unit, reply in sorted(pairs, key=lambda p: (p[0].sample, p[0].order)):
        entry: dict[str, Any] = {"order": "this run as A" if unit.order == 0 else
                                 "this run as B", "sample": unit.sample}
        if reply.error is not None:
            errors.append(reply.error)
            entry["error"] = reply.error
        else:
            parsed = parse_verdict(reply.text)
            entry["reasoning"] = parsed.reasoning
            if parsed.verdict is None:
                errors.append(reply.unusable(parsed.error or ""))
                entry.update(error=parsed.error, raw=reply.text)
            else:
                entry["verdict"] = parsed.verdict
                verdicts[(unit.sample, unit.order)] = parsed.verdict
        shown.append(entry)
    samples: list[tuple[float, bool | None]] = []
    asked = sorted({u.sample for u, _ in pairs})
    for sample in asked:
        if (sample, 0) in verdicts and (sample, 1) in verdicts:
            first = _from_this_side(verdicts[(sample, 0)], 0)
            second = _from_this_side(verdicts[(sample, 1)], 1)
            samples.append((first if first == second else _TIE, first == second))
    details = {"verdicts": shown, "cached": all(reply.cached for _, reply in pairs)}
    if not samples:
        return _Outcome([], errors[0] if errors else "no verdict in both orders", details)
    if len(asked) > 1:
        details["samples_used"] = f"{len(samples)} of {len(asked)}"
    return _Outcome(samples, None, details)


def _from_this_side(verdict: str, order: int) -> float:
    """A verdict as this run's outcome: in order 0 this run is A, in order 1 it is B."""
    if verdict == "tie":
        return _TIE
    return _WIN if (verdict == "A") == (order == 0) else _LOSS


def _fill(values: dict[str, np.ndarray], names: list[str], i: int,
          samples: list[tuple[float, bool | None]]) -> None:
    outcomes = np.array([value for value, _ in samples])
    headline, win, tie, loss, consistent = names
    values[headline][i] = float(outcomes.mean())
    values[win][i] = float((outcomes == _WIN).mean())
    values[tie][i] = float((outcomes == _TIE).mean())
    values[loss][i] = float((outcomes == _LOSS).mean())
    agreed = [c for _, c in samples if c is not None]
    values[consistent][i] = float(np.mean(agreed)) if agreed else np.nan
