"""How many of each thing a run scored, with their nouns: the one source of the counts that
every channel shows (the terminal's summary and closing line, the HTML report's header,
summary, notes and plots).

A run without conversations scored records, and its summary's ``n`` counts records. A run of
conversations scored turns (each a record) and maybe records on their own; its summary is over
conversations, a record on its own counting as a conversation of one turn, so ``n`` and
``unscored`` count conversations while the reasons for unscored values count turns.
``records.jsonl`` then also holds each conversation's own line (the values that grade it
whole), which is no record and is not counted as one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rageval.core.results.conversations import RecordResult as TurnResult


class RecordResult(TurnResult, Protocol):
    """A line of ``records.jsonl`` (:class:`rageval.core.results.RecordResult`): its
    conversation, turn and scores, and its id."""

    @property
    def id(self) -> str: ...


class Results(Protocol):
    """A run's results (:class:`rageval.core.results.Results`)."""

    @property
    def records(self) -> Sequence[RecordResult]: ...
    @property
    def manifest(self) -> dict[str, Any]: ...


class MetricSummary(Protocol):
    """One output's summary (:class:`rageval.core.results.MetricSummary`)."""

    @property
    def n(self) -> int: ...
    @property
    def unscored(self) -> int: ...
    @property
    def figures(self) -> dict[str, Any]: ...

__all__ = ["MetricCounts", "RunCounts", "count_of", "unit_key", "unit_values"]


def count_of(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is one (``1 record``, ``1,024 records``)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class RunCounts:
    """What a run scored: its records (turns included), its conversations and their turns."""

    records: int  # records scored: the turns of conversations and the records on their own
    conversations: int  # 0: a run without conversations
    turns: int  # the turns of those conversations

    @classmethod
    def of(cls, results: Results) -> RunCounts:
        """Read from the manifest (what the run wrote), else from the records themselves
        (each conversation's own line is no record)."""
        section = results.manifest.get("records")
        records = section.get("count") if isinstance(section, Mapping) else None
        if not isinstance(records, int) or isinstance(records, bool):
            records = sum(1 for r in results.records
                          if r.conversation is None or r.turn is not None)
        section = results.manifest.get("conversations")
        if not isinstance(section, Mapping):
            return cls(records, 0, 0)
        return cls(records, int(section.get("count", 0)), int(section.get("turns", 0)))

    @property
    def alone(self) -> int:
        """Records on their own (not a turn of a conversation)."""
        return self.records - self.turns

    @property
    def unit(self) -> str:
        """The noun of the summary's ``n``: ``record``, or ``conversation``."""
        return "conversation" if self.conversations else "record"

    def text(self) -> str:
        """``8 records``, or ``2 conversations of 4 turns and 1 record on its own``."""
        if not self.conversations:
            return count_of(self.records, "record")
        text = (f"{count_of(self.conversations, 'conversation')} of "
                f"{count_of(self.turns, 'turn')}")
        if self.alone:
            own = "its" if self.alone == 1 else "their"
            text += f" and {count_of(self.alone, 'record')} on {own} own"
        return text

    def n_text(self) -> str:
        """What ``n`` and ``unscored`` count, said once beside a summary table."""
        if not self.conversations:
            return "n counts records"
        if self.alone:
            return "n counts conversations, a record on its own as one"
        return "n counts conversations"


@dataclass(frozen=True)
class MetricCounts:
    """One output's scored and unscored units, with their noun, and, for a run of
    conversations, its scored and unscored turns."""

    scored: int
    unscored: int
    noun: str  # "record" or "conversation"
    turns_scored: int | None = None
    turns_unscored: int | None = None

    @classmethod
    def of(cls, item: MetricSummary, run: RunCounts) -> MetricCounts:
        turns = item.figures.get("turns")
        if isinstance(turns, Mapping):
            return cls(item.n, item.unscored, run.unit, int(turns.get("scored", 0)),
                       int(turns.get("unscored", 0)))
        return cls(item.n, item.unscored, run.unit)

    @property
    def reason_noun(self) -> str:
        """What the reasons for unscored values count: turns, for a value scored per turn."""
        return "turn" if self.turns_scored is not None else self.noun

    def scored_text(self) -> str:
        """``3 conversations (5 turns)``, ``8 records``."""
        text = count_of(self.scored, self.noun)
        return text if self.turns_scored is None else (
            f"{text} ({count_of(self.turns_scored, 'turn')})")

    def unscored_text(self) -> str:
        """``2 conversations unscored (4 turns)``, ``1 record unscored``."""
        text = f"{count_of(self.unscored, self.noun)} unscored"
        return text if not self.turns_unscored else (
            f"{text} ({count_of(self.turns_unscored, 'turn')})")

    def reason_text(self, count: int, reason: str) -> str:
        """A reason's count and words: ``4 unscored turns: no relevant judgments`` in a run of
        conversations, ``2 unscored: no answer`` in a run of records (its unit said once)."""
        if self.reason_noun == "record":
            return f"{count:,} unscored: {reason}"
        return f"{count:,} unscored {self.reason_noun}{'' if count == 1 else 's'}: {reason}"


def unit_key(result: RecordResult) -> str:
    """The unit a result belongs to: its conversation's id (its turns and its own line), or
    the record's own id."""
    return result.conversation if result.conversation is not None else result.id


def unit_values(records: Iterable[RecordResult], metric: str) -> dict[str, tuple[float, int]]:
    """The value the summary averages for each unit that has one: a record's own value, a
    conversation's mean over its scored turns (or its own line's value, for an output that
    grades it whole); with how many values each mean holds. In the order units are met."""
    sums: dict[str, list[float]] = {}
    for result in records:
        value = _finite(result.scores.get(metric))
        if value is not None:
            sums.setdefault(unit_key(result), []).append(value)
    return {key: (math.fsum(values) / len(values), len(values)) for key, values in sums.items()}


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
