"""A run's values as ``gen_ai.evaluation.result`` events, described without OpenTelemetry.

One event per record and metric of the summary table (components stay in records.jsonl), by
the OpenTelemetry GenAI semantic conventions (:data:`CONVENTIONS`):

- ``gen_ai.evaluation.name``: the metric's name (``ndcg@10``, ``judge:faithfulness``);
- ``gen_ai.evaluation.score.value``: its value, a double (absent when the record was left
  unscored);
- ``gen_ai.evaluation.score.label``: ``unscored`` for a record left unscored (absent
  otherwise: rageval's values are numbers);
- ``gen_ai.evaluation.explanation``: the judge's reasoning where a judge gave one, else for a
  record left unscored the reason;
- ``rageval.record.id`` (the record's id), ``rageval.signature`` (the value's short
  signature), and for a conversation's turns and its own values ``gen_ai.conversation.id``.

The event is parented to the span its record came from (:class:`SpanRef`) where rageval knows
it: records read from traces. Records of other inputs (a JSONL file) have no span: their
events carry no trace context, and ``rageval.record.id`` says which record they score.

Texts taken from records or a judge (reasoning, reasons, ids) are masked by the run's
:class:`~rageval.core.outputs.masking.Masker` and hold no lone surrogate, so that every
encoder (JSON, protobuf) takes them as data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rageval.core.outputs.masking import NO_SECRETS, Masker
from rageval.core.outputs.text import valid_unicode

if TYPE_CHECKING:
    from rageval.core.results import RecordResult, Results

__all__ = ["CONVENTIONS", "EVENT_NAME", "EvaluationEvent", "SpanRef", "evaluation_events",
           "table_metrics"]

#: The conventions these events follow (the GenAI conventions are in Development status: the
#: names may change in a later version).
CONVENTIONS = "OpenTelemetry GenAI semantic conventions v0.1.0"
EVENT_NAME = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
CONVERSATION_ID = "gen_ai.conversation.id"
RECORD_ID = "rageval.record.id"
SIGNATURE = "rageval.signature"
UNSCORED = "unscored"

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16


@dataclass(frozen=True)
class SpanRef:
    """A span: its trace id (32 lower-case hex digits) and span id (16)."""

    trace_id: str
    span_id: str

    @classmethod
    def of(cls, trace_id: object, span_id: object) -> SpanRef | None:
        """The span these ids name, or None when they are not valid OpenTelemetry ids."""
        if not isinstance(trace_id, str) or not isinstance(span_id, str):
            return None
        trace_id, span_id = trace_id.lower(), span_id.lower()
        if (not _TRACE_ID.fullmatch(trace_id) or not _SPAN_ID.fullmatch(span_id)
                or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN):
            return None
        return cls(trace_id, span_id)


@dataclass(frozen=True)
class EvaluationEvent:
    """One ``gen_ai.evaluation.result`` event: its attributes and the span it belongs to
    (None: no span known)."""

    attributes: dict[str, str | float]
    span: SpanRef | None


def table_metrics(results: Results) -> dict[str, str]:
    """The run's table metrics (components left out): name -> short signature."""
    return {name: s.short_signature or s.signature for name, s in results.summary.items()
            if s.in_table}


def evaluation_events(rows: Iterable[RecordResult], spans: Mapping[str, SpanRef],
                      metrics: Mapping[str, str],
                      masker: Masker = NO_SECRETS) -> Iterator[EvaluationEvent]:
    """The events of ``rows`` (a run's records), each on its record's span in ``spans``
    (record id -> span; a record without one gets events without a span), for ``metrics``
    (name -> short signature), their texts masked by ``masker``."""
    for row in rows:
        span = spans.get(row.id) if row.turn is not None or row.conversation is None else None
        for name, signature in metrics.items():
            if name in row.scores:
                yield EvaluationEvent(_attributes(row, name, signature, masker), span)


def _attributes(row: RecordResult, name: str, signature: str,
                mask: Masker) -> dict[str, str | float]:
    value = row.scores[name]
    out: dict[str, str | float] = {NAME: name}
    if value is None or value != value:  # unscored: say why
        out[SCORE_LABEL] = UNSCORED
        reason = _text(row.errors.get(name), mask)
        if reason:
            out[EXPLANATION] = reason
    else:
        out[SCORE_VALUE] = float(value)
        reasoning = _text(_reasoning(row.details.get(name)), mask)
        if reasoning:
            out[EXPLANATION] = reasoning
    out[RECORD_ID] = _text(row.id, mask) or ""
    if row.conversation is not None:
        out[CONVERSATION_ID] = _text(row.conversation, mask) or ""
    if signature:
        out[SIGNATURE] = signature
    return out


def _reasoning(detail: Any) -> object:
    return detail.get("reasoning") if isinstance(detail, Mapping) else None


def _text(text: object, mask: Masker) -> str | None:
    """An attribute's text: masked, each lone surrogate replaced by U+FFFD."""
    if not isinstance(text, str):
        return None
    return valid_unicode(mask(text))
