"""Relevance judgments from the judge (``--judgments-from judge``).

Records that carry no judgments (inline or from ``--qrels``) have each retrieved context graded
by the ``context_relevance`` rubric on the TREC 0-3 scale (the UMBRELA approach), and those
grades become the record's judgments, so the retrieval metrics can score pipelines that have no
human labels. The retrieval metrics' signatures then say ``judgments:judge/...`` with the rubric
hash and the judge model: such numbers do not compare with numbers from human qrels.

What a user should know about judged judgments:

* only retrieved contexts are graded, so recall and NDCG's ideal ranking are relative to the
  pool of what was retrieved (as with any pooled qrels);
* a grade averaged over several samples, or a log-probability expectation, is rounded half up
  to the integer grade the retrieval metrics need;
* a record with any context the judge could not grade gets no judgments at all (its retrieval
  metrics are unscored with a reason) rather than judgments with holes that would read as
  "not relevant".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, ScoreOptions, Slot
from rageval.core.providers import JudgmentsProvider
from rageval.core.records import apply_judgments
from rageval.judge.rubric.metric import JudgeMetric

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["JUDGMENTS_RUBRIC", "JudgeJudgments", "JudgedJudgments", "judge_judgments",
           "judgments_metric"]

JUDGMENTS_RUBRIC = "context_relevance"
_SHOWN = 10


@dataclass
class JudgedJudgments:
    """What the judge contributed, summed window by window: whether any record needed grading
    and any had judgments already, how many records it graded, which it could not (the first
    few, with their reasons)."""

    asked: bool = False
    others: bool = False
    graded: int = 0
    incomplete: int = 0
    reasons: dict[str, str] = field(default_factory=dict)

    def source(self, metric: JudgeMetric, base: str) -> str:
        """The judgments field of the retrieval metrics' signatures (``base``: where the
        judgments the judge did not give came from)."""
        if not self.asked:  # every record had judgments already: the judge added nothing
            return base
        return source_label(metric, base if self.others else "none")

    def manifest(self, source: str) -> dict[str, Any]:
        return {"rubric": JUDGMENTS_RUBRIC, "source": source,
                "records_graded": self.graded, "records_incomplete": self.incomplete,
                "incomplete": dict(self.reasons)}


class JudgeJudgments(JudgmentsProvider):
    """``judgments_from="judge"``: the provider the registry hands the orchestrator."""

    section = "judged_judgments"

    def __init__(self, options: ScoreOptions) -> None:
        self.grader = judgments_metric(options)

    def metrics(self) -> list[Metric]:
        return [self.grader]

    def check(self, records: Sequence[Record]) -> None:
        todo = [r for r in records if needs_grading(r)]
        if self.grader.hooks is not None:
            self.grader.hooks.check(todo, [self.grader])

    def fill(self, records: list[Record], run: Batch) -> list[Record]:
        return judge_judgments(records, self.grader, run)

    def account(self, run: Batch, source: str) -> tuple[str, dict[str, Any]]:
        info = run.run_wide(_ACCOUNT, JudgedJudgments)
        source = info.source(self.grader, source)
        return source, info.manifest(source)


# The run's account of judged judgments, in its run-wide objects.
_ACCOUNT = Slot[JudgedJudgments](("judged_judgments", "account"))


def judgments_metric(options: ScoreOptions) -> JudgeMetric:
    """The per-context judge metric whose grades become judgments."""
    if options.judge is None or not options.judge.model:
        raise UsageError("--judgments-from judge needs a judge model (--judge-model)")
    return JudgeMetric(JUDGMENTS_RUBRIC, options=options)


def needs_grading(record: Record) -> bool:
    return not record.has("judgments") and record.has("contexts") and record.has("query")


def source_label(metric: JudgeMetric, base: str) -> str:
    """``judge/<rubric>@<hash>/<model>``, prefixed by the other source when there is one."""
    judge = metric.judge
    label = f"judge/{metric.rubric.id}@{metric.rubric.short_hash}/{judge.model}"
    return label if base == "none" else f"{base}+{label}"


def judge_judgments(records: list[Record], metric: JudgeMetric, run: Batch) -> list[Record]:
    """Grade the contexts of every record without judgments and fill its judgments, counting
    what the judge did in the run's account (window by window)."""
    info = run.run_wide(_ACCOUNT, JudgedJudgments)
    info.others = info.others or any(r.judgments is not None for r in records)
    todo = [r for r in records if needs_grading(r)]
    if not todo:  # every record has judgments already: the judge adds nothing
        return records
    info.asked = True
    result = metric.score(Batch(todo, run=run))
    details = result.details or [None] * len(todo)
    grades: dict[str, dict[str, int]] = {}
    for record, reason, detail in zip(todo, result.reasons, details, strict=True):
        if reason is not None or detail is None:
            info.incomplete += 1
            if len(info.reasons) < _SHOWN:
                info.reasons[record.id] = reason or "not graded"
            continue
        grades[record.id] = {c["id"]: _round_half_up(c["grade"]) for c in detail["contexts"]}
    info.graded += len(grades)
    if not grades:
        return records
    # Labelled as the judge's, for an error that names where a grade came from.
    return apply_judgments(records, grades, source=source_label(metric, "none"))


def _round_half_up(grade: float) -> int:
    return math.floor(grade + 0.5)
