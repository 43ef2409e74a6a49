"""A run's values as ``gen_ai.evaluation.result`` events, described without OpenTelemetry.

One event per record and metric of the summary table (components stay in records.jsonl), by
the OpenTelemetry GenAI semantic conventions (:data:`CONVENTIONS`, :data:`SCHEMA_URL`):

- ``gen_ai.evaluation.name``: the metric's name (``ndcg@10``, ``judge:faithfulness``);
- ``gen_ai.evaluation.score.value``: its value, a double (absent when the record was left
  unscored);
- ``gen_ai.evaluation.score.label``: ``unscored`` for a record left unscored (absent
  otherwise: rageval's values are numbers);
- ``gen_ai.evaluation.explanation``: the judge's reasoning where a judge gave one, else for a
  record left unscored the reason;
- ``error.type``: for a record left unscored because its evaluation failed, the class of the
  failure (:data:`ERROR_TYPES`: the judge's request failed, its reply was not usable, the
  run's judge cap or an offline replay's cache left it unasked). A record with nothing to
  score (no answer, nothing retrieved) is no error: it has none;
- ``rageval.record.id`` (the record's id), ``rageval.signature`` (the value's short
  signature), and for a conversation's turns and its own values ``gen_ai.conversation.id``.

The event is parented to the span its record came from (:class:`SpanRef`) where rageval knows
it: records read from traces. Records of other inputs (a JSONL file) have no span: their
events carry no trace context, and ``rageval.record.id`` says which record they score.

Texts taken from records or a judge (reasoning, reasons) are masked by the run's
:class:`~rageval.core.outputs.masking.Masker` and hold no lone surrogate, so that every
encoder (JSON, protobuf) takes them as data. Ids (``rageval.record.id``,
``gen_ai.conversation.id``) are the key a backend joins the events to the run's records by:
they are masked only by the run's secrets of :data:`ID_SECRET_MIN` characters or more (an API
key, a token, a password), never by a shorter value such as an ``org=acme`` query value of a
URL, which would turn the id ``acme-q1`` into ``***-q1``.
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

__all__ = ["CONVENTIONS", "ERROR_TYPES", "EVENT_NAME", "ID_SECRET_MIN", "SCHEMA_URL",
           "EvaluationEvent", "SpanRef", "evaluation_events", "table_metrics"]

#: The conventions these events follow: open-telemetry/semantic-conventions-genai has no
#: release or tag, so the commit whose gen_ai.evaluation.result definition they implement is
#: pinned (the GenAI conventions are in Development status: a later commit may rename them).
CONVENTIONS = ("OpenTelemetry GenAI semantic conventions, open-telemetry/"
               "semantic-conventions-genai at commit 997a19cc9be3bcd54fe4f45213df8c274f4776f0")
#: The schema URL of those conventions (their model/manifest.yaml), on the events' scope.
SCHEMA_URL = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
EVENT_NAME = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
CONVERSATION_ID = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"
RECORD_ID = "rageval.record.id"
SIGNATURE = "rageval.signature"
UNSCORED = "unscored"
#: The failures an unscored value's reason names -> its ``error.type``, first match first. The
#: phrases are the judge's (rageval.judge.llm), quoted in every reason a judged metric gives.
ERROR_TYPES = (("judge request failed", "judge_request_failed"),
               ("judge reply not usable", "judge_reply_unusable"),
               ("reached its judge cap", "judge_cap_reached"),
               ("not in the judge cache", "judge_reply_not_cached"))
#: The shortest secret that an id is masked by (see the module's docstring): shorter values
#: are no credential an id could carry by accident, and masking them would break the join key.
ID_SECRET_MIN = 8

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
    (None: no span known; ``whole_conversation``: a conversation's own value, which belongs
    to no one span)."""

    attributes: dict[str, str | float]
    span: SpanRef | None
    whole_conversation: bool = False


def table_metrics(results: Results) -> dict[str, str]:
    """The run's table metrics (components left out): name -> short signature."""
    return {name: s.short_signature or s.signature for name, s in results.summary.items()
            if s.in_table}


def evaluation_events(rows: Iterable[RecordResult], spans: Mapping[str, SpanRef],
                      metrics: Mapping[str, str],
                      masker: Masker = NO_SECRETS) -> Iterator[EvaluationEvent]:
    """The events of ``rows`` (a run's records), each on its record's span in ``spans``
    (record id -> span; a record without one gets events without a span), for ``metrics``
    (name -> short signature), their texts masked by ``masker`` (ids only by its long
    secrets: :data:`ID_SECRET_MIN`)."""
    id_masker = Masker(tuple(s for s in masker.secrets if len(s) >= ID_SECRET_MIN))
    for row in rows:
        whole = row.turn is None and row.conversation is not None
        span = None if whole else spans.get(row.id)
        for name, signature in metrics.items():
            if name in row.scores:
                yield EvaluationEvent(_attributes(row, name, signature, masker, id_masker),
                                      span, whole)


def _attributes(row: RecordResult, name: str, signature: str, mask: Masker,
                id_mask: Masker) -> dict[str, str | float]:
    value = row.scores[name]
    out: dict[str, str | float] = {NAME: name}
    if value is None or value != value:  # unscored: say why
        out[SCORE_LABEL] = UNSCORED
        reason = _text(row.errors.get(name), mask)
        if reason:
            out[EXPLANATION] = reason
        error = _error_type(row.errors.get(name))
        if error:
            out[ERROR_TYPE] = error
    else:
        out[SCORE_VALUE] = float(value)
        reasoning = _text(_reasoning(row.details.get(name)), mask)
        if reasoning:
            out[EXPLANATION] = reasoning
    out[RECORD_ID] = _text(row.id, id_mask) or ""
    if row.conversation is not None:
        out[CONVERSATION_ID] = _text(row.conversation, id_mask) or ""
    if signature:
        out[SIGNATURE] = signature
    return out


def _error_type(reason: object) -> str | None:
    """The class of failure an unscored value's reason names (:data:`ERROR_TYPES`), or None
    when nothing failed: the record had nothing to score."""
    if not isinstance(reason, str):
        return None
    return next((kind for phrase, kind in ERROR_TYPES if phrase in reason), None)


def _reasoning(detail: Any) -> object:
    return detail.get("reasoning") if isinstance(detail, Mapping) else None


def _text(text: object, mask: Masker) -> str | None:
    """An attribute's text: masked, each lone surrogate replaced by U+FFFD."""
    if not isinstance(text, str):
        return None
    return valid_unicode(mask(text))
