"""The run hooks of judge panels (:data:`PANEL_HOOKS`): every member checked as a judge of its
own before anything is sent (its options, its key, an offline replay's cache), and the
manifest's ``judge_panel`` section: the rule, the members, the judge work they did, and the
members left out because their judge stopped (:class:`LeftOut`, ``--panel-min-members``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rageval.core.metric import RunHooks, Slot
from rageval.judge.llm.checks import judge_section
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.prompting.prompt_files import prompt_info
from rageval.judge.rubric.hooks import check_judge
from rageval.judge.rubric.render import RENDER_VERSION

if TYPE_CHECKING:
    from rageval.core.metric import Batch, Metric
    from rageval.core.records import Record

__all__ = ["PANEL_HOOKS", "PANEL_LEFT_OUT", "PANEL_STATS", "LeftOut", "PanelHooks"]

# The run's account of the panels' judge work (apart from the single judge's ``judge``).
PANEL_STATS = Slot[RunStats](("judge_panel", "stats"))


@dataclass
class LeftOut:
    """The members a run left out of its panels, by name, each with the error that stopped its
    judge (under ``--panel-min-members``: a member that answered nothing is asked no more, and
    the panel goes on with the others)."""

    members: dict[str, str] = field(default_factory=dict)

    def merge(self, other: LeftOut) -> None:
        """Add another window's (a worker's) members left out."""
        for name, why in other.members.items():
            self.members.setdefault(name, why)


# The run's members left out of its panels.
PANEL_LEFT_OUT = Slot[LeftOut](("judge_panel", "left out"))


class PanelHooks(RunHooks):
    """The hooks every panel metric of a run shares."""

    section = "judge_panel"

    def check(self, records: Sequence[Record], metrics: Sequence[Metric]) -> None:
        if metrics:
            metrics[0].options.judge.check()  # the panel holds together (JudgeOptions.check)
        for panel in metrics:
            for _, member in panel.members:  # type: ignore[attr-defined]
                check_judge(records, [member])

    def manifest(self, run: Batch, metrics: Sequence[Metric]) -> dict[str, Any] | None:
        if not metrics:
            return None
        first = metrics[0]
        members = first.members  # type: ignore[attr-defined]
        stats: RunStats = run.run_wide(PANEL_STATS, RunStats)
        prompts: dict[str, dict[str, str]] = {}
        for panel in metrics:
            for name, member in panel.members:  # type: ignore[attr-defined]
                prompts[f"{member.rubric.id}|{name}"] = prompt_info(member.rubric)
        section = judge_section(members[0][1].judge, stats, prompts, RENDER_VERSION)
        section["rule"] = first.rule  # type: ignore[attr-defined]
        section["min_members"] = first.min_members  # type: ignore[attr-defined]
        section["left_out"] = dict(run.run_wide(PANEL_LEFT_OUT, LeftOut).members)
        section["members"] = [{"name": name, "model": m.judge.model,
                               "endpoint": None if m.judge.offline else m.judge.endpoint,
                               "prompts_dir": m.judge.prompts_dir, "seed": m.judge.seed,
                               "temperature": m.judge.temperature}
                              for name, m in members]
        section["metrics"] = [str(m) for m in metrics]
        return section


PANEL_HOOKS = PanelHooks()
