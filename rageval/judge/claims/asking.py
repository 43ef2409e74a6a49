"""Rounds of step requests through the judge cache, for one run of claim-level judging.

A pipeline asks in rounds (the checks need the extracted claims): :meth:`Asker.ask` builds a
request, :meth:`Asker.send` gathers a round's replies with
:func:`~rageval.judge.llm.replies.gather` (cache first, the judge for the rest, every reply stored
as it arrives; identical requests, such as the same reference's claims for two records, are one
request). Each step asks once: rubric options that repeat or reweigh a judgment (samples,
log-probabilities) do not apply to steps whose replies are lists.

A dry run (``dry=True``) reads the cache and asks nothing, so the run's checks can list every
request a replay needs: later rounds are built from the replies the cache holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from rageval.judge.claims.steps import StepPrompt, load_step, render_step
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import gather, provenance
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.transport.formats import ReplySchema
from rageval.judge.llm.units import Reply, Unit, make_unit
from rageval.judge.prompting.history import history_of

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["Asked", "Asker", "Outcome", "replies_used"]

T = TypeVar("T")

# The schema gather is handed; every unit here carries its own (see make_unit's own_schema).
_UNUSED = ReplySchema("rageval_step", {"type": "object"})


@dataclass(frozen=True)
class Asked:
    """One request of a round: the unit, the record index and the step."""

    unit: Unit
    record: int
    step: str


@dataclass(frozen=True)
class Outcome:
    """A reply read by a step's parser: the value, or why there is none."""

    value: Any = None
    error: str | None = None
    cached: bool = True
    endpoint: str | None = None
    format: str | None = None
    defaults: tuple[str, ...] = ()  # parameters the endpoint refused, left at the model's

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Asker:
    """Asks the steps of one run (``records`` are the run's, indexed by the units)."""

    judge: JudgeOptions
    records: Sequence[Record]
    stats: RunStats
    dry: bool = False
    prompts: dict[str, StepPrompt] = field(default_factory=dict)
    asked: list[Asked] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.judge = replace(self.judge, samples=1, logprobs=False)
        if self.dry:
            # A dry run reads the cache on an account of its own: told, the progress display
            # would count every cache hit twice.
            self.judge = replace(self.judge, offline=True, allow_missing=True, refresh=False,
                                 progress=None, dry_run=False)

    def prompt(self, step: str) -> StepPrompt:
        if step not in self.prompts:
            self.prompts[step] = load_step(step, self.judge.prompts_dir)
        return self.prompts[step]

    def ask(self, record: int, step: str, inputs: dict[str, list[str]],
            schema: ReplySchema) -> Asked:
        """One request of ``step`` for record ``record`` (not sent until :meth:`send`)."""
        history = history_of(self.records[record], self.judge.history_chars)
        messages = render_step(self.prompt(step), inputs, history)
        unit = make_unit(self.judge, schema, record, None, 0, messages, own_schema=True)
        return Asked(unit, record, step)

    def send(self, round_: list[Asked], parse: Callable[[Asked, str | None], T | str]
             ) -> dict[str, Outcome]:
        """Every request of the round answered (by unit key), each reply read by ``parse``
        (its value, or a string saying why it is unusable)."""
        if not round_:
            return {}
        self.asked.extend(round_)
        steps = {asked.unit.key: asked.step for asked in round_}

        def meta(unit: Unit) -> dict[str, Any]:
            prompt = self.prompt(steps[unit.key])
            return {"step": prompt.id, "step_version": prompt.version}

        replies = gather(self.judge, [asked.unit for asked in round_], list(self.records),
                         _UNUSED, self.stats, meta)
        return {asked.unit.key: _read(asked, replies[asked.unit.key], parse)
                for asked in round_}


def _read(asked: Asked, reply: Reply, parse: Callable[[Asked, str | None], Any]) -> Outcome:
    where = {"cached": reply.cached, "endpoint": reply.endpoint, "format": reply.format,
             "defaults": reply.defaults}
    if reply.error is not None:
        return Outcome(error=reply.error, **where)
    value = parse(asked, reply.text)
    if isinstance(value, str):
        return Outcome(error=reply.unusable(value), **where)
    return Outcome(value=value, **where)


def replies_used(used: list[Outcome]) -> dict[str, Any]:
    """How many step replies a record's details rest on, whether all came from the cache, and
    the endpoint(s) and wire format(s) that produced them (for details and signatures)."""
    return {"replies": len(used), "cached": all(o.cached for o in used), **provenance(used)}
