"""Scores out as OpenTelemetry GenAI evaluation events (``rageval score --otel-events FILE``,
``--otel-endpoint URL``).

Each value of a run becomes a ``gen_ai.evaluation.result`` event (:mod:`.events`) on the span
its record came from (:mod:`.spans`), written as OTLP/JSON logs or sent to an OTLP/HTTP
collector through the OpenTelemetry SDK (:mod:`.export`; the ``otel`` extra). Importing this
package does not load OpenTelemetry: only writing or sending does.
"""

from __future__ import annotations

from rageval.otel.events import CONVENTIONS, EVENT_NAME, EvaluationEvent, SpanRef, evaluation_events
from rageval.otel.export import CollectorError, Delivery, send_events, write_events
from rageval.otel.spans import record_spans

__all__ = ["CONVENTIONS", "EVENT_NAME", "CollectorError", "Delivery", "EvaluationEvent",
           "SpanRef", "evaluation_events", "record_spans", "send_events", "write_events"]
