"""Where each record's evaluation events go: the span the record came from.

Records read from traces (:mod:`rageval.inputs.traces`) keep their ``trace_id`` and
``span_id`` among their extra fields; the run's results do not, so the traces are read again
(window by window: only the ids are kept). Records of any other input have no span.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rageval.otel.events import SpanRef

if TYPE_CHECKING:
    from rageval.inputs.spec import InputSpec

__all__ = ["TRACE_READERS", "from_traces", "record_spans"]

#: The input readers whose records come from spans.
TRACE_READERS = frozenset({"openinference", "otel-genai"})
_WINDOW = 10_000


def from_traces(spec: InputSpec) -> bool:
    """Whether the records ``spec`` names are read from traces."""
    return spec.reader() in TRACE_READERS


def record_spans(spec: InputSpec) -> dict[str, SpanRef]:
    """Record id -> the span it came from (empty for records not read from traces)."""
    if not from_traces(spec):
        return {}
    from rageval.inputs.traces import trace_windows

    spans: dict[str, SpanRef] = {}
    for window in trace_windows(spec, _WINDOW):
        for record in window:
            span = SpanRef.of(record.extra.get("trace_id"), record.extra.get("span_id"))
            if span is not None:
                spans[record.id] = span
    return spans
