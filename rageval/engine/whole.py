"""The metrics that grade whole conversations (``level = "conversation"``: the
conversation-level rubrics, ``judge:resolution`` and ``judge:consistency``).

They score one record per conversation (:meth:`~rageval.core.records.Conversation.as_record`,
``turn`` 0), made when a window holds the conversation's last turn, through the same
lifecycle as every metric: checked, prepared, scored on the engine, summed up. Their results go
to ``records.jsonl`` as the conversation's own line (``{"id": "conv-7", "conversation":
"conv-7", "scores": ...}``), after the turns of the window, and their summary is over
conversations like every value of such a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, ScoreOptions, by_hooks, settled
from rageval.core.records import Record
from rageval.core.records.digest import DataDigest
from rageval.core.records.field_hints import NeededFields
from rageval.engine.local import Engine, merge_run_wide
from rageval.engine.sink import Sink
from rageval.summary import SummaryParts

__all__ = ["WholeConversations", "conversations_ending"]


def conversations_ending(records: Sequence[Record]) -> list[Record]:
    """One record for each conversation whose last turn is among ``records``, in order."""
    return [record.conversation.as_record() for record in records
            if record.conversation is not None
            and record.turn == len(record.conversation.turns)]


class WholeConversations:
    """The conversation-level metrics of a run and what they keep between windows."""

    def __init__(self, metrics: list[Metric], shared: dict[Any, Any],
                 parts_options: dict[str, Any] | None = None) -> None:
        self.metrics = metrics
        self.parts = SummaryParts(metrics, over_conversations=True, **(parts_options or {}))
        self.fields = NeededFields({str(m): m.needs for m in metrics})
        self.shared = shared  # the run's: their judge work is counted with the rest
        self.count = 0
        # What they read of the conversations, for the manifest's "data" (apart from the
        # turns': a change of a conversation's own expectations leaves the turns' digests).
        self.digest = DataDigest(field for m in metrics for field in m.needs)

    def no_conversations(self) -> UsageError:
        names = ", ".join(str(m) for m in self.metrics)
        return UsageError(f"{names} grade{'s' if len(self.metrics) == 1 else ''} whole "
                          "conversations, and no record of this run has turns")

    def check(self, records: Sequence[Record]) -> None:
        """Before the window is scored: their hooks' checks, on its conversations."""
        for hooks, group in by_hooks(self.metrics):
            hooks.check(records, group)

    def score(self, records: list[Record], *, single: bool, options: ScoreOptions,
              judgments: str, batch_size: int, sink: Sink, engine: Engine) -> None:
        """Score the conversations ending in a window (``single``: the whole run)."""
        if single:
            if not records:
                raise self.no_conversations()
            self.fields.require(records)
            self.metrics = settled(self.metrics, options, judgments)
        else:
            self.fields.note(records)
        if not records:
            return
        run = Batch(records, shared=self.shared)
        start = 0
        for scored in engine.score(self.metrics, run, batch_size):
            self.parts.add_records(records[start : start + len(scored.block)])
            start += len(scored.block)
            sink.write(scored.block)
            for metric, (part, reasons) in zip(self.metrics, scored.parts, strict=True):
                self.parts.add_part(metric, part, reasons)
            merge_run_wide(self.shared, scored.run_wide)
        self.count += len(records)
