"""``tools:precision``, ``tools:recall`` and ``tools:f1``: an agent's tool calls against the
calls expected of it (the record's ``tool_calls`` and ``reference_tool_calls``).

With ``m`` the calls paired with expected calls (:mod:`rageval.tools.matching`: the ``match``
and ``order`` rules, numbers within ``tol``), ``c`` the calls made and ``e`` the calls
expected: precision is ``m / c``, recall ``m / e`` and F1 ``2m / (c + e)``. No call made
when none was expected is agreement: 1 for all three. Precision is undefined when no call was
made (and one was expected), recall when none was expected (and one was made): unscored with
that reason, as is a record that does not give its calls or the expected ones.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, MetricResult, ScoreOptions, Slot
from rageval.core.params import Param
from rageval.core.records import Record
from rageval.core.scale import RATIO
from rageval.tools.matching import MATCH_RULES, ORDER_RULES, Pairing, pair_calls

__all__ = ["KINDS", "SCOPES", "ToolCallMetric"]

#: What one value covers: a record or turn, or a whole conversation.
SCOPES: tuple[str, ...] = ("turn", "conversation")

#: The metrics of the ``tools:`` namespace, with their one-line definitions.
KINDS: dict[str, str] = {
    "precision": "share of the agent's tool calls that match an expected call",
    "recall": "share of the expected tool calls that the agent made",
    "f1": "harmonic mean of tool-call precision and recall: 2m / (calls + expected)",
}

NO_CALLS = "no tool_calls (the record does not give the calls it made)"
NO_EXPECTED = "no reference_tool_calls (the record does not give the calls expected of it)"
_UNDEFINED = {
    "precision": "no tool call was made: precision is undefined (0 of 0)",
    "recall": "no tool call was expected: recall is undefined (0 of 0)",
}


class ToolCallMetric(Metric):
    """One of :data:`KINDS` (see the module)."""

    family = "tools"
    value_range = RATIO
    params: ClassVar[tuple[Param, ...]] = (
        Param("match", str, "exact", "what makes two calls the same: exact (name and equal "
              "arguments), name (name only), args_subset (name, and every expected argument "
              "equal in the call)", choices=MATCH_RULES),
        Param("order", str, "any", "any: pair calls whatever their order; strict: pairs "
              "keep the order of both lists", choices=ORDER_RULES),
        Param("tol", float, 0.0, "numbers in arguments are equal within this absolute "
              "difference", minimum=0),
        Param("scope", str, "turn", "turn: each record or turn's calls against its own "
              "reference_tool_calls; conversation: every call of a conversation, in order, "
              "against the conversation's reference_tool_calls", choices=SCOPES),
    )
    needs = frozenset({"tool_calls", "reference_tool_calls"})

    def __init__(self, kind: str, cutoff: int | None = None,
                 options: ScoreOptions | None = None, **params: Any) -> None:
        if kind not in KINDS:
            raise UsageError(f"unknown metric 'tools:{kind}'; the tools: metrics are "
                             f"{', '.join('tools:' + k for k in KINDS)}")
        self.summary = KINDS[kind]
        # Scoped to conversations, it grades each conversation whole (its own line).
        self.level = "conversation" if params.get("scope") == "conversation" else "turn"
        super().__init__(cutoff, options, name=f"tools:{kind}", **params)
        if not math.isfinite(self.values["tol"]):
            raise UsageError(f"tools:{kind}: tol must be a finite number, got "
                             f"{self.values['tol']!r}")

    @property
    def kind(self) -> str:
        return self.base.split(":", 1)[1]

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.kind, cutoff=self.cutoff, options=options, **dict(self.values))

    def details_key(self) -> str:
        """The three metrics under the same rules share one pairing per record."""
        rules = str(self.name).split(":", 1)[1].removeprefix(self.kind)
        return f"tools{rules}"

    def score(self, batch: Batch) -> MetricResult:
        slot = Slot[list[Pairing | str]](("tools", self.values["match"], self.values["order"],
                                          self.values["tol"], self.values["scope"]))
        pairings = batch.cached(slot, lambda: [self._pairing(r) for r in batch.records])
        values = np.full(len(batch), np.nan)
        reasons: list[str | None] = [None] * len(batch)
        details: list[dict[str, Any] | None] = [None] * len(batch)
        for i, (record, found) in enumerate(zip(batch.records, pairings, strict=True)):
            if isinstance(found, str):
                reasons[i] = found
                continue
            values[i], reasons[i] = _value(self.kind, len(found), len(record.tool_calls or ()),
                                           len(record.reference_tool_calls or ()))
            details[i] = _details(record, found)
        return MetricResult({str(self.name): values}, reasons, details)

    def _pairing(self, record: Record) -> Pairing | str:
        if record.tool_calls is None:
            return NO_CALLS
        if record.reference_tool_calls is None:
            return NO_EXPECTED
        return pair_calls(record.tool_calls, record.reference_tool_calls,
                          match=self.values["match"], order=self.values["order"],
                          tol=self.values["tol"])


def _value(kind: str, matched: int, calls: int, expected: int) -> tuple[float, str | None]:
    if calls == 0 and expected == 0:
        return 1.0, None
    if kind == "f1":
        return 2 * matched / (calls + expected), None
    total = calls if kind == "precision" else expected
    return (matched / total, None) if total else (math.nan, _UNDEFINED[kind])


def _details(record: Record, pairs: Pairing) -> dict[str, Any]:
    """Which calls were paired, and the names of those left over on each side."""
    calls, expected = record.tool_calls or (), record.reference_tool_calls or ()
    made = {call for call, _ in pairs}
    wanted = {want for _, want in pairs}
    return {"pairs": [list(pair) for pair in pairs],
            "unexpected": [c.name for i, c in enumerate(calls) if i not in made],
            "missed": [c.name for j, c in enumerate(expected) if j not in wanted]}
