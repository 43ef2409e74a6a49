"""A run's values as Phoenix span annotations, written and counted.

One annotation per record and metric of the summary table (components stay in records.jsonl):
``name`` the metric's name, ``score`` its value, ``explanation`` the judge's reasoning where a
judge gave one, ``annotator_kind`` LLM for judge-made values and CODE for the others, and the
value's short signature in ``metadata``. A record left unscored gets the label ``unscored`` and
its reason as the explanation, so that Phoenix shows why. Every annotation carries the
identifier ``rageval``: Phoenix keeps one annotation per span, name and identifier, so a rerun
updates the values in place and never adds a second one.

The texts an annotation carries (the reasoning, the unscored reason) are masked by the run's
:class:`~rageval.core.outputs.masking.Masker` and hold no lone surrogate (each replaced by
U+FFFD): what a server echoed never reaches Phoenix's store, and the request is always valid
JSON in UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rageval.core.errors import InputError, UsageError
from rageval.core.outputs.masking import NO_SECRETS, Masker
from rageval.core.outputs.text import valid_unicode
from rageval.inputs.spec import TRACE_KINDS
from rageval.inputs.traces import trace_windows
from rageval.inputs.traces.phoenix import phoenix_call, phoenix_client, phoenix_source

if TYPE_CHECKING:
    from rageval.core.results import RecordResult, Results
    from rageval.inputs.spec import InputSpec

__all__ = ["IDENTIFIER", "AnnotationReport", "annotate_run", "span_annotations"]

IDENTIFIER = "rageval"
_JUDGED = frozenset({"judge", "claims", "nuggets"})
_BATCH = 500  # annotations per request
_LOOKUP = 100  # span ids per existence query (they travel in the URL)


@dataclass(frozen=True)
class AnnotationReport:
    """What one annotation pass did: annotations written, records annotated, and records
    whose span the project does not hold (left out)."""

    written: int
    records: int
    missing: int


def span_annotations(rows: Iterable[RecordResult], spans: Mapping[str, str],
                     metrics: Mapping[str, str],
                     masker: Masker = NO_SECRETS) -> Iterator[dict[str, Any]]:
    """The annotations of ``rows`` (a run's records) on their spans (``spans``: record id ->
    span id; records without one are skipped), for the ``metrics`` (name -> short signature),
    their texts masked by ``masker``."""
    mask = masker
    for row in rows:
        span_id = spans.get(row.id)
        if span_id is None:
            continue
        for name, signature in metrics.items():
            if name not in row.scores:
                continue
            yield _annotation(row, name, span_id, signature, mask)


def _annotation(row: RecordResult, name: str, span_id: str, signature: str,
                mask: Masker) -> dict[str, Any]:
    value = row.scores[name]
    detail = row.details.get(name)
    reasoning = detail.get("reasoning") if isinstance(detail, Mapping) else None
    judged = name.partition(":")[0] in _JUDGED or reasoning is not None
    result: dict[str, Any] = {"label": None, "score": None, "explanation": None}
    if value is None or value != value:  # unscored: say why
        result.update(label="unscored", explanation=_text(row.errors.get(name), mask))
    else:
        result.update(score=float(value), explanation=_text(reasoning, mask))
    return {"name": name, "annotator_kind": "LLM" if judged else "CODE", "span_id": span_id,
            "result": result, "identifier": IDENTIFIER, "metadata": {"signature": signature}}


def _text(text: object, mask: Masker) -> str | None:
    """An annotation's text: masked, each lone surrogate replaced by U+FFFD."""
    if not isinstance(text, str):
        return None
    return valid_unicode(mask(text))


def annotate_run(results: Results, spec: InputSpec, url: str, project: str,
                 masker: Masker = NO_SECRETS) -> AnnotationReport:
    """Write ``results`` (a run whose records came from the traces ``spec`` names) to their
    spans in ``project`` on the Phoenix server at ``url``, their texts masked by ``masker``."""
    spans = record_spans(spec)
    client = phoenix_client(url)
    present = _present(client, url, project, sorted(set(spans.values())))
    if spans and not present:
        raise InputError("none of the run's spans is in this project: send the same traces "
                         "to it, or name the project they went to (--project)",
                         path=phoenix_source(url, project))
    kept = {rid: span for rid, span in spans.items() if span in present}
    metrics = {name: s.short_signature or s.signature for name, s in results.summary.items()
               if s.in_table}
    written, batch = 0, []
    for annotation in span_annotations(results.records, kept, metrics, masker):
        batch.append(annotation)
        if len(batch) == _BATCH:
            written += _send(client, url, project, batch)
            batch = []
    if batch:
        written += _send(client, url, project, batch)
    return AnnotationReport(written, len(kept), len(spans) - len(kept))


def record_spans(spec: InputSpec) -> dict[str, str]:
    """Record id -> the span it came from, read again from the traces ``spec`` names."""
    if spec.reader() not in TRACE_KINDS:
        raise UsageError("--phoenix-annotate writes scores to the spans records came from: "
                         "read the records from traces (--input-format openinference or "
                         "otel-genai, or --phoenix URL --project NAME)")
    return {record.id: str(record.extra["span_id"])
            for window in trace_windows(spec, 10_000) for record in window}


def _present(client: Any, url: str, project: str, span_ids: list[str]) -> set[str]:
    """The span ids among ``span_ids`` that the project holds."""
    found: set[str] = set()
    for start in range(0, len(span_ids), _LOOKUP):
        chunk = span_ids[start:start + _LOOKUP]
        spans = phoenix_call(url, project, lambda chunk=chunk: client.spans.get_spans(
            project_identifier=project, span_ids=chunk, limit=len(chunk)))
        found.update(span["context"]["span_id"] for span in spans)
    return found


def _send(client: Any, url: str, project: str, batch: list[dict[str, Any]]) -> int:
    phoenix_call(url, project, lambda: client.spans.log_span_annotations(
        span_annotations=batch, sync=True))
    return len(batch)
