"""A rubric graded by a panel of judges: ``judge:<rubric>`` when the run's judge options name
two members or more (``JudgeOptions.panel``, ``--judge SPEC``).

Each member grades the records as a judge metric of its own (:class:`MemberMetric`): its own
model, endpoint, key, rubric files or seed, its own cache entries, so that a panel replays
offline member by member. The panel's value of a record is made from the members' by the
panel's rule (:mod:`~rageval.judge.panel.rules`); a record's details hold every member's value,
the members that abstained and why, and the spread of the values given. The summary reports,
beside the value, each member's mean and abstentions and Krippendorff's alpha between them
(nominal for a 0-1 verdict, interval otherwise).

A member whose judge stops (an endpoint that answers nothing, a permanent failure) stops the run
with that judge's own message, as a single judge would, unless ``--panel-min-members N`` lets the
panel go on while N members answer: the member is then left out for the rest of the run (it
abstains on every record, asked no more), and the summary, the signature and the manifest say
so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, MetricResult, ScoreOptions
from rageval.core.results import count_of
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import provenance_only
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.transport.requests import JudgeError
from rageval.judge.panel.hooks import PANEL_HOOKS, PANEL_LEFT_OUT, PANEL_STATS, LeftOut
from rageval.judge.panel.rules import aggregate
from rageval.judge.rubric.metric import JudgeMetric, judge_fields
from rageval.stats.agreement import krippendorff_alpha

__all__ = ["MemberMetric", "PanelMetric"]


class MemberMetric(JudgeMetric):
    """One member's grading: a judge metric whose replies the run keeps apart from the other
    members' (they share the rubric's name), and whose work it counts apart from the single
    judge's, so that no manifest section counts a request twice."""

    stats_account = PANEL_STATS

    def __init__(self, target: str, member: str, options: ScoreOptions) -> None:
        self.member = member
        super().__init__(target, options=options)

    @property
    def share_name(self) -> str:
        """Its name and the member's: the members of a panel share the rubric's name."""
        return f"{self}|{self.member}"


class PanelMetric(Metric):
    """``judge:<rubric>`` graded by every member of the run's judge panel."""

    family = "judge"
    grades = True  # its model, prompt and parameters are part of the evaluation set
    reached_at = frozenset({"endpoint"})
    base = "judge"
    hooks = PANEL_HOOKS
    summary = "rubric LLM judge: judge:<rubric name or path> (faithfulness, correctness, ...)"

    def __init__(self, target: str, cutoff: int | None = None,
                 options: ScoreOptions | None = None, **params: Any) -> None:
        opts = options or ScoreOptions()
        if params:
            raise UsageError(f"judge:{target} takes no parameters, got {sorted(params)}")
        judge = opts.judge or JudgeOptions()
        self.target = target
        self.rule = judge.panel_rule
        self.min_members = judge.panel_min_members
        self.members = [(name, MemberMetric(target, name, ScoreOptions(
            **{**_fields_of(opts), "judge": member}))) for name, member in judge.members()]
        scales = {m.score_range() for _, m in self.members}
        if len(scales) > 1:
            raise UsageError(f"judge:{target}: the panel's members grade on different scales "
                             f"({', '.join(f'{lo:g}-{hi:g}' for lo, hi in sorted(scales))}): "
                             "their rubric files must agree")
        first = self.members[0][1]
        self.rubric = first.rubric
        if self.rule == "majority" and first.score_range() != (0.0, 1.0):
            raise UsageError(f"judge:{target}: the majority rule takes a 0-1 verdict, and this "
                             f"rubric's scale is {first.rubric.scale_min}-"
                             f"{first.rubric.scale_max} (use --judge-panel-rule mean or median)")
        super().__init__(cutoff=cutoff, options=opts, name=f"judge:{target}",
                         needs=first.needs)

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.target, cutoff=self.cutoff, options=options)

    def score_range(self) -> tuple[float, float]:
        return self.members[0][1].score_range()

    def ready(self) -> None:
        for _, member in self.members:
            member.ready()

    def signature_extra(self, used: dict[str, set[str]] | None = None) -> list[Field]:
        """The rule, every member (model, endpoint, prompt hash, seed), the rubric, and the
        settings the members share; ``used``: the endpoints each member's replies came from
        (a replay signs with what recorded them), else those configured."""
        def endpoint(name: str, member: MemberMetric) -> str:
            return ",".join(sorted(used[name])) if used and used.get(name) else (
                member.judge.endpoint)

        judges = ";".join(f"{name}={m.judge.model}@{endpoint(name, m)}#{m.rubric.short_hash}"
                          + (f"/seed{m.judge.seed}" if m.judge.seed is not None else "")
                          for name, m in self.members)
        shared = [f for f in judge_fields(self.members[0][1].judge)
                  if f.key not in ("judge", "endpoint")]
        least = ([Field("min_members", str(self.min_members), "mm")]
                 if self.min_members is not None else [])
        return [Field("panel", self.rule, "pn"), *least, Field("judges", judges, "js"),
                Field("rubric", self.rubric.id, "r"),
                Field("rubric_version", self.rubric.version, "rv"), *shared]

    def score(self, batch: Batch) -> MetricResult:
        left_out = batch.run.run_wide(PANEL_LEFT_OUT, LeftOut)
        results = [self._member_score(batch, name, member, left_out)
                   for name, member in self.members]
        gone = [name for name, _ in self.members if name in left_out.members]
        own = [r.details or [None] * len(batch) for r in results]  # each member's details
        name = str(self.name)
        grid = np.vstack([r.values[name] for r in results])  # members x records
        values = np.full(len(batch), math.nan)
        reasons: list[str | None] = [None] * len(batch)
        details: list[dict[str, Any] | None] = []
        for i in range(len(batch)):
            values[i], reason = aggregate(grid[:, i], self.rule)
            abstained = {member: results[k].reasons[i] or "no value"
                         for k, (member, _) in enumerate(self.members)
                         if math.isnan(grid[k, i])}
            if reason is not None:
                why = "; ".join(f"{m}: {r}" for m, r in abstained.items())
                reasons[i] = f"{reason}{f' ({why})' if why else ''}"
            given = grid[~np.isnan(grid[:, i]), i]
            details.append({
                "rule": self.rule,
                "members": {member: None if math.isnan(grid[k, i]) else float(grid[k, i])
                            for k, (member, _) in enumerate(self.members)},
                "abstained": abstained,
                "spread": float(given.max() - given.min()) if len(given) else None,
                "endpoints": {member: (own[k][i] or {}).get("endpoint")
                              for k, (member, _) in enumerate(self.members)},
                **_flags([(member, own[k][i]) for k, (member, _) in enumerate(self.members)]),
                **({"left_out": gone} if gone else {}),
            })
        return MetricResult({name: values}, reasons, details, grid.T.copy())

    def _member_score(self, batch: Batch, name: str, member: MemberMetric,
                      left_out: LeftOut) -> MetricResult:
        """A member's grading of the batch. A member whose judge stops stops the run with its
        judge's error; with ``--panel-min-members`` it is left out instead (asked no more,
        abstaining on every record) while enough members answer."""
        if name not in left_out.members:
            try:
                return member.score(batch)
            except JudgeError as error:
                if self.min_members is None:
                    raise
                left_out.members[name] = str(error)
                batch.run.run_wide(PANEL_STATS, RunStats).add_failures(error.results)
        answering = [other for other, _ in self.members if other not in left_out.members]
        if len(answering) < (self.min_members or 0):
            raise JudgeError(f"{left_out.members[name]}; panel member {name!r} is left out, "
                             f"and {count_of(len(answering), 'member')} of the panel's "
                             f"{len(self.members)} answer, fewer than --panel-min-members "
                             f"{self.min_members}")
        why = f"left out of the panel (--panel-min-members {self.min_members}): " + (
            left_out.members[name])
        return MetricResult({str(self.name): np.full(len(batch), math.nan)},
                            [why] * len(batch), None)

    def summary_part(self, result: MetricResult) -> MetricResult:
        """The values, every member's value of every record (for the agreement), and of the
        details only the endpoints the signature reads and the flags the summary counts."""
        kept = provenance_only(result.details, ("endpoints", "flags", "left_out"))
        return MetricResult(result.values, [], kept, result.stats)

    def result_signature(self, result: MetricResult) -> Signature:
        used: dict[str, set[str]] = {}
        for detail in result.details or []:
            for member, endpoint in ((detail or {}).get("endpoints") or {}).items():
                if endpoint:
                    used.setdefault(member, set()).update(
                        [endpoint] if isinstance(endpoint, str) else endpoint)
        fields = [Field("metric", self.base, "m"), *self.signature_extra(used),
                  Field("rageval", __version__, "v", version=True)]
        return Signature.of(fields)

    def summary_keeps_rows(self) -> bool:
        """The members' agreement reads every record's grid of values."""
        return True

    def summary_figures(self, result: MetricResult) -> dict[str, Any]:
        grid = result.stats
        if grid is None:
            return {}
        names = [name for name, _ in self.members]
        level = "nominal" if self.score_range() == (0.0, 1.0) else "interval"
        given = ~np.isnan(grid)
        gone = {name for detail in result.details or [] for name in
                (detail or {}).get("left_out", ())}
        return {"panel": {
            "rule": self.rule,
            "min_members": self.min_members,
            "members": {name: {"mean": float(np.nanmean(grid[:, k])) if given[:, k].any()
                               else None, "abstained": int((~given[:, k]).sum()),
                               **({"left_out": True} if name in gone else {})}
                        for k, name in enumerate(names)},
            "krippendorff_alpha": krippendorff_alpha(grid.T, level),
            "alpha_level": level,
            "items_rated_twice": int((given.sum(axis=1) >= 2).sum()),
        }}


def _flags(members: list[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    """The judge flags any member raised on a record (texts aimed at the judge, reasoning
    copied), each reason saying which member: the panel's value stands, flagged, as a
    member's would."""
    flags: dict[str, list[str]] = {}
    for member, detail in members:
        for flag in (detail or {}).get("flags", ()):
            reason = ((detail or {}).get("flag_reasons") or {}).get(flag, "")
            flags.setdefault(flag, []).append(f"{member}: {reason}" if reason else member)
    if not flags:
        return {}
    return {"flags": sorted(flags), "flag_reasons": {f: "; ".join(r) for f, r in flags.items()}}


def _fields_of(options: ScoreOptions) -> dict[str, Any]:
    """The run options a member keeps (all but the judge, which is its own)."""
    return {name: getattr(options, name) for name in options.__dataclass_fields__
            if name != "judge"}
