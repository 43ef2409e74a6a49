"""Where each record's evaluation events go: the span the record came from.

Records read from traces (:mod:`rageval.inputs.traces`) keep their ``trace_id`` and
``span_id`` among their extra fields; the run's results do not, so the traces are read again
(window by window: only the ids are kept). Records of any other input (a records file written
by an application that knew its spans) are read again the same way: those whose own
``trace_id`` and ``span_id`` fields are valid OpenTelemetry ids get their events on that span,
the others none. Input that cannot be read twice (standard input) gives no spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from rageval.inputs.spec import TRACE_KINDS
from rageval.otel.events import SpanRef

if TYPE_CHECKING:
    from rageval.core.records.model import Record
    from rageval.inputs.spec import InputSpec

__all__ = ["from_traces", "record_spans"]

_WINDOW = 10_000


def from_traces(spec: InputSpec) -> bool:
    """Whether the records ``spec`` names are read from traces."""
    return spec.reader() in TRACE_KINDS


def record_spans(spec: InputSpec) -> dict[str, SpanRef]:
    """Record id -> the span it came from (records without valid span ids left out)."""
    spans: dict[str, SpanRef] = {}
    for window in _windows(spec):
        for record in window:
            span = SpanRef.of(record.extra.get("trace_id"), record.extra.get("span_id"))
            if span is not None:
                spans[record.id] = span
    return spans


def _windows(spec: InputSpec) -> Iterator[list[Record]]:
    if from_traces(spec):
        from rageval.inputs.traces import trace_windows

        return trace_windows(spec, _WINDOW)
    from rageval.inputs.source import record_source

    source = record_source(spec)
    return source.read(_WINDOW).windows if source.rereadable() else iter(())
