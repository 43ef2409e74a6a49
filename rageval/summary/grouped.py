"""A run's summary over conversations: which conversation each scored record belongs to, and
each output's values summed up per conversation.

A run with conversations aggregates over conversations, not turns: a conversation's value is
the mean of its scored turns, the run's value the mean of those, and the bootstrap resamples
conversations (a cluster bootstrap: turns of one conversation are not independent draws). A
record on its own counts as a conversation of one turn, so a run without conversations is
summed up exactly as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rageval.core.metric import Metric, MetricResult
from rageval.core.records import Conversation, Record
from rageval.core.results import MetricSummary
from rageval.core.signature import Field
from rageval.stats.exact import exact_group_means, exact_mean
from rageval.stats.groups import group_sums
from rageval.stats.resampling import bootstrap_ci
from rageval.summary.columns import GrowingColumn

#: The signature field of every value summed up over conversations.
UNIT = Field("unit", "conversation", "u")

__all__ = ["ConversationGroups", "PerConversation", "per_conversation",
           "summarise_conversations"]


class ConversationGroups:
    """The conversation (a number from 0, in the order met) of each record scored, kept only
    once a run has met a conversation (before that, every record is its own), and only while
    :attr:`hold` (a summary kept as running sums folds each batch's turns as it comes)."""

    def __init__(self) -> None:
        self._column: GrowingColumn | None = None
        self._last: Conversation | None = None
        self._count = 0  # records seen
        self._groups = 0  # groups numbered so far
        self.conversations = 0  # of those, conversations (not records on their own)
        self.turns = 0  # the records that are turns of one
        self.hold = True

    def add(self, records: Sequence[Record]) -> tuple[np.ndarray, list[Record]]:
        """Note the records scored next, in their order: their group numbers, and the records
        that start a group (a conversation's first turn here, or a record on its own)."""
        if self._column is None and all(r.conversation is None for r in records):
            numbers = np.arange(self._groups, self._groups + len(records), dtype=np.int64)
            self._count += len(records)
            self._groups += len(records)
            self._last = None
            return numbers, list(records)
        if self._column is None and self.hold:
            self._column = GrowingColumn(np.int64)
            self._column.append(np.arange(self._count, dtype=np.int64))
        numbers = np.empty(len(records), dtype=np.int64)
        starts: list[Record] = []
        for i, record in enumerate(records):
            conversation = record.conversation
            if conversation is None or conversation is not self._last:
                self._groups += 1
                self.conversations += conversation is not None
                starts.append(record)
            self.turns += conversation is not None
            numbers[i] = self._groups - 1
            self._last = conversation
        if self._column is not None:
            self._column.append(numbers)
        self._count += len(records)
        return numbers, starts

    @property
    def open(self) -> bool:
        """Whether the last record noted is a turn, whose conversation may go on."""
        return self._last is not None

    def array(self) -> np.ndarray | None:
        """Each record's conversation number; None for a run without conversations (or one
        whose numbers are no longer held)."""
        return None if self._column is None else self._column.array()

    def array_copy(self) -> np.ndarray | None:
        """:meth:`array`, still held."""
        return None if self._column is None else self._column.copy().array()

    def release(self) -> np.ndarray | None:
        """The numbers held so far, no longer held from here on."""
        held = self.array()
        self._column, self.hold = None, False
        return held


@dataclass(frozen=True)
class PerConversation:
    """One output summed up per conversation, for the conversations with a scored turn:
    the mean (correctly rounded), the lowest value and the last turn's value (NaN when the
    last is unscored), and the scored turns' positions in the run, conversation by
    conversation. ``drawn`` are the means the bootstrap resamples: each conversation's sum
    divided by its count, as every earlier run's intervals drew them (the same intervals)."""

    means: np.ndarray
    lowest: np.ndarray
    last: np.ndarray
    turns: list[np.ndarray]
    conversations: int  # every conversation of the run, scored or not
    drawn: np.ndarray

    def turn_indices(self) -> Callable[[np.ndarray], np.ndarray]:
        """Resampled conversations (indices into :attr:`means`) -> their turns' positions."""
        return lambda picked: np.concatenate([self.turns[i] for i in picked])


def per_conversation(values: np.ndarray, groups: np.ndarray) -> PerConversation:
    """``values`` (one per record, NaN unscored) summed up by ``groups``
    (:meth:`ConversationGroups.array`)."""
    count = int(groups[-1]) + 1 if len(groups) else 0
    scored = ~np.isnan(values)
    sums, sizes = group_sums(values, scored, groups, count)
    means = exact_group_means(values[scored], groups[scored], count)
    has = sizes > 0
    lowest = np.full(count, np.inf)
    np.minimum.at(lowest, groups[scored], values[scored])
    ends = np.flatnonzero(np.append(groups[1:] != groups[:-1], True))  # each one's last row
    positions = np.flatnonzero(scored)
    turns = np.split(positions, np.cumsum(sizes)[:-1])
    return PerConversation(means[has], lowest[has], values[ends][has],
                           [t for t, h in zip(turns, has, strict=True) if h], count,
                           sums[has] / sizes[has])


def summarise_conversations(metric: Metric, result: MetricResult, reasons: Counter[str],
                            seed: int, bootstrap: int, means: dict[str, np.ndarray] | None,
                            groups: np.ndarray) -> dict[str, MetricSummary]:
    """Each output's summary over conversations (see the module): ``n`` counts the
    conversations with a scored turn, ``unscored`` those without; the turns scored and
    unscored, and the means of each conversation's lowest and last value, are figures beside
    it. A corpus figure (corpus BLEU) is over every scored turn, its CI from resampled
    conversations. ``means`` as :func:`~rageval.summary.parts.summarise` takes it."""
    signature = metric.result_signature(result).extend([UNIT])
    headline = metric.output_names()[0]
    flagged = Counter(flag for detail in result.details or () if detail
                      for flag in detail.get("flags", ()))
    out: dict[str, MetricSummary] = {}
    for name, values in result.values.items():
        grouped = per_conversation(values, groups)
        scored = int((~np.isnan(values)).sum())
        corpus = None
        if name == headline and len(grouped.means):
            corpus = metric.corpus_value(result, np.flatnonzero(~np.isnan(values)))
        if corpus is not None:
            value, aggregate = corpus, "corpus"
            expand = grouped.turn_indices()
            ci = bootstrap_ci(grouped.drawn, resamples=bootstrap, seed=seed,
                              statistic=lambda picked, e=expand: metric.corpus_value(
                                  result, e(picked)))
        else:
            value = exact_mean(grouped.means) if len(grouped.means) else None
            aggregate = "mean"
            if means is None:
                ci = bootstrap_ci(grouped.drawn, resamples=bootstrap, seed=seed)
            else:
                ci, means[name] = None, grouped.drawn
        last = grouped.last[~np.isnan(grouped.last)]
        figures: dict[str, object] = {"turns": {"scored": scored, "unscored": len(values) - scored},
                   "conversation_min": exact_mean(grouped.lowest) if len(grouped.means)
                   else None,
                   "conversation_last": exact_mean(last) if len(last) else None}
        if name == headline:
            figures.update(metric.summary_figures(result))
        out[name] = MetricSummary(
            value, len(grouped.means), grouped.conversations - len(grouped.means), ci,
            signature.format(), dict(reasons), aggregate, signature.format(short=True),
            in_table=name in metric.table_names(), flagged=dict(flagged), figures=figures,
            ci_method="conversations")
    return out
