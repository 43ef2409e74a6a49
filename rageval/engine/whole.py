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
from rageval.core.metric import Metric
from rageval.core.records import Record
from rageval.engine.group import MetricGroup

__all__ = ["WholeConversations", "conversations_ending"]


def conversations_ending(records: Sequence[Record]) -> list[Record]:
    """One record for each conversation whose last turn is among ``records``, in order."""
    return [record.conversation.as_record() for record in records
            if record.conversation is not None
            and record.turn == len(record.conversation.turns)]


class WholeConversations(MetricGroup):
    """The conversation-level metrics of a run and what they keep between windows. What they
    read of the conversations is digested apart from the turns' (a change of a conversation's
    own expectations leaves the turns' digests)."""

    def __init__(self, metrics: list[Metric], shared: dict[Any, Any],
                 parts_options: dict[str, Any] | None = None) -> None:
        super().__init__(metrics, shared, parts_options, over_conversations=True)

    def no_conversations(self) -> UsageError:
        names = ", ".join(str(m) for m in self.metrics)
        return UsageError(f"{names} grade{'s' if len(self.metrics) == 1 else ''} whole "
                          "conversations, and no record of this run has turns")
