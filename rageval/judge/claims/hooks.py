"""The run hooks of the claim-level metrics (:data:`CLAIM_HOOKS`): checks, preparation and the
manifest's ``claims`` section.

``check`` runs before anything is sent or written: the claims and nuggets the records give are
valid; every step prompt loads; then a dry run of every pipeline over the cache alone lists the
requests the run needs (later rounds built from the cached replies of earlier ones), so an
``--offline`` replay that lacks any stops with the list, and a run that must ask the judge has
a model and its API key. A run whose records give every claim and verdict needs no judge at
all. ``prepare`` builds each kind's analysis of a window (a Ray worker's block) once for all
its metrics, with the union of the checks they need. The manifest section has the judge's
shape (model, endpoint, formats, step prompts, cache, requests, tokens) plus the replies per
record, each summed window by window over the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from rageval.core.metric import RunHooks, Slot
from rageval.judge.claims.asking import Asker
from rageval.judge.claims.steps import RENDER_VERSION
from rageval.judge.claims.supplied import supplied_claims, supplied_nuggets
from rageval.judge.llm.checks import check_cached, judge_section
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.units import Unit
from rageval.judge.prompting.prompt_files import prompt_info

if TYPE_CHECKING:
    from rageval.core.metric import Batch, Metric
    from rageval.core.records import Record

__all__ = ["CLAIM_HOOKS", "ClaimHooks", "RepliesTally", "analysis", "run_stats"]


class ClaimLevel(Protocol):
    """What the hooks use of a claim-level metric (:class:`.metrics.ClaimLevelMetric`)."""

    kind: str

    @property
    def judge(self) -> JudgeOptions: ...

    def config(self) -> tuple[Any, ...]: ...

    def wants(self) -> frozenset[str]: ...

    def used_steps(self) -> tuple[str, ...]: ...

    def reads_judgments(self) -> bool: ...

    def ready(self) -> None: ...

    def analyse(self, asker: Asker, wants: frozenset[str]) -> list[dict[str, Any]]: ...


def run_stats(run: Batch) -> RunStats:
    """The run's account of claim-level judge work (apart from the rubric judge's), summed
    over every window (and every Ray worker's block)."""
    return run.run_wide(_STATS, RunStats)


@dataclass
class RepliesTally:
    """The step replies each record's analyses rest on, summed over every window of the run:
    records counted, replies in all, the most of one record."""

    records: int = 0
    replies: int = 0
    most: int = 0

    def add(self, per_record: list[int]) -> None:
        self.records += len(per_record)
        self.replies += sum(per_record)
        self.most = max([self.most, *per_record])

    def merge(self, other: RepliesTally) -> None:
        """Add a worker's tally (see :func:`~rageval.engine.local.merge_run_wide`)."""
        self.records += other.records
        self.replies += other.replies
        self.most = max(self.most, other.most)

    def to_json(self) -> dict[str, float] | None:
        if not self.records:
            return None
        return {"mean": round(self.replies / self.records, 3), "max": self.most}


def analysis(run: Batch | None, records: Sequence[Record], metrics: Sequence[ClaimLevel],
             dry: Asker | None = None) -> list[dict[str, Any]]:
    """The per-record analysis of ``metrics`` (all of one kind and configuration) over
    ``records``, built once per run with the union of what they read and kept in ``run``'s
    cache; a dry run (given its asker, and no run) is built afresh and not kept."""
    first = metrics[0]
    wants: frozenset[str] = frozenset().union(*(m.wants() for m in metrics))
    if dry is not None:
        return first.analyse(dry, wants)
    if run is None:
        raise ValueError("an analysis that asks the judge is kept in its run: give the run")
    store = run.cached(_ANALYSES, dict)
    key = (first.kind, first.config(), first.judge, id(records))
    covered, details = store.get(key, (frozenset(), []))
    if details and wants <= covered:
        return details
    wants = wants | covered
    details = first.analyse(Asker(first.judge, records, run_stats(run)), wants)
    store[key] = (wants, details)
    return details


def _verify(records: Sequence[Record], groups: list[list[ClaimLevel]]) -> None:
    """A dry run of every pipeline over the cache: nothing to ask (every verdict given, or
    all cached) or a run that may ask (a model, its API key), or an offline replay that
    stops listing what it lacks."""
    judge = groups[0][0].judge
    # Every option but the model is checked before the cache is read; the model is needed
    # only when a request is (cache keys need one: a stand-in finds nothing cached).
    stand_in = judge if judge.model else replace(judge, model="(no model)")
    stand_in.check()
    dry = Asker(stand_in, records, RunStats(), dry=True)
    for group in groups:
        analysis(None, records, group, dry=dry)
    if not dry.asked:
        return  # every claim and verdict comes with the records: no judge needed
    judge.check()
    if (judge.offline and judge.allow_missing) or judge.dry_run:  # nothing will be sent
        return
    wanted: dict[str, tuple[Unit, str, str]] = {}
    for asked in dry.asked:
        wanted.setdefault(asked.unit.key, (asked.unit, records[asked.record].id, asked.step))
    check_cached(replace(judge, samples=1, logprobs=False), wanted)


def _groups(metrics: Sequence[Metric]) -> list[list[ClaimLevel]]:
    """The metrics by kind and configuration: each group shares one analysis."""
    groups: dict[Any, list[ClaimLevel]] = {}
    for metric in metrics:
        claim_level: ClaimLevel = metric  # type: ignore[assignment]
        groups.setdefault((claim_level.kind, claim_level.config()), []).append(claim_level)
    return list(groups.values())


class ClaimHooks(RunHooks):
    """The hooks every claim-level metric shares: one cache account, one manifest section."""

    section = "claims"

    def check(self, records: Sequence[Record], metrics: Sequence[Metric]) -> None:
        groups = _groups(metrics)
        if not groups:
            return
        kinds = {group[0].kind for group in groups}
        for record in records:  # what the records give is valid, before any request
            if "claims" in kinds:
                supplied_claims(record)
            if "nuggets" in kinds:
                supplied_nuggets(record)
        for group in groups:
            for metric in group:
                metric.ready()
        _verify(records, groups)

    def prepare(self, run: Batch, metrics: Sequence[Metric]) -> None:
        groups = _groups(metrics)
        # A judgments provider may have filled in judgments since the checks: what the
        # analyses that read them (nuggets from the contexts judged relevant) need is known
        # only now. A dry run reads the cache and asks nothing.
        reading = [group for group in groups if group[0].reads_judgments()]
        if reading:
            _verify(run.records, reading)
        per_record = [0] * len(run.records)
        for group in groups:
            for i, detail in enumerate(analysis(run, run.records, group)):
                per_record[i] += int(detail.get("replies", 0))
        if groups:  # the manifest reads the run's, window after window
            run.run_wide(_REPLIES, RepliesTally).add(per_record)

    def manifest(self, run: Batch, metrics: Sequence[Metric]) -> dict[str, Any] | None:
        groups = _groups(metrics)
        if not groups:
            return None
        judge = replace(groups[0][0].judge, samples=1, logprobs=False)
        stats = run_stats(run)
        asker = Asker(judge, run.records, stats)
        steps = dict.fromkeys(step for group in groups for metric in group
                              for step in metric.used_steps())
        prompts = {step: prompt_info(asker.prompt(step)) for step in steps}
        section = judge_section(judge, stats, prompts, RENDER_VERSION)
        replies = run.run_wide(_REPLIES, RepliesTally).to_json()
        if replies is not None:
            section["replies_per_record"] = replies
        return section


# The run's replies per record (cached or asked, every kind's), for the manifest.
_REPLIES = Slot[RepliesTally](("claims", "replies"))
# The run's account of claim-level judge work (apart from the rubric judge's).
_STATS = Slot[RunStats](("claims", "stats"))
# A window's analyses, by kind, configuration, judge and records: what they cover, the details.
_ANALYSES = Slot[dict[Any, tuple[frozenset[str], list[dict[str, Any]]]]](("claims", "analyses"))


CLAIM_HOOKS = ClaimHooks()
