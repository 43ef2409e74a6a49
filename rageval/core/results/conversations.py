"""``conversations.jsonl``: each conversation of a run summed up from its turns' results.

A run whose records include conversations writes, beside ``records.jsonl`` (one line per
turn, with ``conversation`` and ``turn``), one line per conversation::

    {"id": "conv-7", "turns": 3,
     "scores": {"ndcg@10": {"mean": 0.71, "min": 0.5, "last": 0.9, "scored": 3,
                            "first_failing": 2}}}

For each output scored per turn: the mean and the lowest of the scored turns' values, the last
turn's value (``null`` when the last turn is unscored), how many turns were scored, and, for an
output given
a turn threshold (``--turn-threshold NAME=VALUE``), the first turn (1-based) whose value falls
under it (over it, for an output where lower is better), ``null`` when none does. An output no
turn scored has ``mean``, ``min`` and ``last`` ``null``. The outputs scored on whole
conversations (``judge:resolution``) come under ``conversation_scores``, one value each
(``null``: unscored, the reason on the conversation's line of ``records.jsonl``).

Turns of one conversation are consecutive among the turn lines of ``records.jsonl``: a
conversation is summed up as soon as its last turn's results are in. A run that grades whole
conversations writes each one's own line at the end of the window holding its last turn, so a
summary may wait up to a window for it; a long run holds at most a window's conversations.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rageval.core.files import open_temporary


class RecordResult(Protocol):
    """What a line of ``records.jsonl`` gives (:class:`rageval.core.results.RecordResult`)."""

    @property
    def conversation(self) -> str | None: ...
    @property
    def turn(self) -> int | None: ...
    @property
    def scores(self) -> Mapping[str, float | None]: ...

__all__ = ["CONVERSATIONS_FILE", "TurnRules", "conversation_lines", "conversation_rows",
           "write_conversations"]

CONVERSATIONS_FILE = "conversations.jsonl"


@dataclass(frozen=True)
class TurnRules:
    """How turns are rated when a conversation is summed up: the turn threshold of each
    output that has one, and the outputs where lower is better; and the outputs scored on
    whole conversations (their values come on each conversation's own line)."""

    thresholds: Mapping[str, float] = field(default_factory=dict)
    lower_is_better: frozenset[str] = frozenset()
    conversation_outputs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"turn_thresholds": dict(self.thresholds),
                "lower_is_better": sorted(self.lower_is_better),
                "conversation_outputs": list(self.conversation_outputs)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TurnRules:
        data = data or {}
        return cls({str(k): float(v) for k, v in (data.get("turn_thresholds") or {}).items()},
                   frozenset(data.get("lower_is_better") or ()),
                   tuple(data.get("conversation_outputs") or ()))

    def fails(self, name: str, value: float) -> bool:
        limit = self.thresholds[name]
        return value > limit if name in self.lower_is_better else value < limit


def conversation_rows(records: Iterable[RecordResult],
                      rules: TurnRules) -> Iterator[dict[str, Any]]:
    """One summary per conversation (records on their own are skipped). A conversation's turns
    are consecutive among the turn lines; with outputs scored on whole conversations, its own
    line follows its last turn at the end of the window that held it (after turns of the next
    conversation, perhaps), and its summary waits for that line and takes its values. In the
    order the summaries complete: the turns' end, or the own line."""
    waiting: dict[str, dict[str, Any]] = {}  # summed up, their own line not read yet
    current: str | None = None  # the conversation whose turns are being read
    turns: list[RecordResult] = []
    for record in records:
        conversation = record.conversation
        own_line = conversation is not None and record.turn is None
        # The current conversation's turns are over at a line of another record or turn, or
        # at its own line (another conversation's own line may come between its turns).
        if turns and (conversation == current) == own_line:
            row = _summed(current, turns, rules)  # type: ignore[arg-type]
            turns, current = [], None
            if rules.conversation_outputs:
                waiting[row["id"]] = row
            else:
                yield row
        if own_line:
            row = waiting.pop(conversation, None) or {  # type: ignore[arg-type]
                "id": conversation, "turns": 0, "scores": {}}
            row["conversation_scores"] = {name: _value(record.scores.get(name))
                                          for name in rules.conversation_outputs}
            yield row
        elif conversation is not None:
            current = conversation
            turns.append(record)
    if turns:
        waiting[current] = _summed(current, turns, rules)  # type: ignore[index,arg-type]
    yield from waiting.values()


def conversation_lines(records: Iterable[RecordResult], rules: TurnRules) -> Iterator[str]:
    """:func:`conversation_rows` as the lines of ``conversations.jsonl``."""
    for row in conversation_rows(records, rules):
        yield json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"


def _summed(conversation: str, turns: list[RecordResult], rules: TurnRules) -> dict[str, Any]:
    names = list(dict.fromkeys(name for turn in turns for name in turn.scores))
    scores = {}
    for name in names:
        values = [_value(turn.scores.get(name)) for turn in turns]
        scored = [v for v in values if v is not None]
        entry: dict[str, Any] = {
            "mean": math.fsum(scored) / len(scored) if scored else None,
            "min": min(scored) if scored else None,
            "last": values[-1],
            "scored": len(scored),
        }
        if name in rules.thresholds:
            entry["first_failing"] = next(
                (turn.turn for turn, v in zip(turns, values, strict=True)
                 if v is not None and rules.fails(name, v)), None)
        scores[name] = entry
    return {"id": conversation, "turns": len(turns), "scores": scores}


def _value(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def write_conversations(directory: str | os.PathLike[str], records: Iterable[RecordResult],
                        manifest: Mapping[str, Any]) -> None:
    """Write ``conversations.jsonl`` into a run directory (through a temporary file and a
    rename) when the run's manifest says it had conversations; else remove one an earlier run
    left there, which would pass for this run's."""
    target = Path(directory) / CONVERSATIONS_FILE
    section = manifest.get("conversations")
    if not isinstance(section, Mapping):
        target.unlink(missing_ok=True)
        return
    temporary, handle = open_temporary(target)
    try:
        with handle:
            for line in conversation_lines(records, TurnRules.from_json(section)):
                handle.write(line.encode("utf-8"))
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
