"""Records from traces: OpenTelemetry spans following the OpenInference conventions or the
OpenTelemetry GenAI conventions.

``--input-format openinference`` reads an OTLP/JSON file (:mod:`.otlp`); ``--phoenix URL
--project NAME`` reads a Phoenix project (:mod:`.phoenix`); ``--input-format otel-genai``
reads an OTLP/JSON file of GenAI spans. Either way the spans are grouped by trace and each
trace (or each top-level span of a chosen kind or operation) becomes a record by its
conventions (:mod:`.openinference`, :mod:`.genai`; the trace's tree: :mod:`.tree`), joined
with a file of references by id (:mod:`.references`; its judgments join as qrels do) and
validated as any record is. Records carry their ``trace_id`` and ``span_id`` among their extra
fields, for the scores to go back to the span they came from.

A file is read window by window (a trace is held only until its last span is read); errors
name the file and line of the span, or the trace, as well as the record. With sessions
(``--trace-sessions``), the records of traces sharing a session id (OpenInference's
``session.id``, GenAI's ``gen_ai.conversation.id``) are held until every trace is read and
become the turns of one conversation (:mod:`.sessions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rageval.core.errors import InputError
from rageval.core.records import record_windows
from rageval.core.records.ids import IdCheck
from rageval.core.records.model import with_judgments
from rageval.core.records.validation import validate_records
from rageval.inputs.files import check_file, line_limit
from rageval.inputs.traces import genai, openinference
from rageval.inputs.traces.openinference import TRACE_MAP_FIELDS
from rageval.inputs.traces.sessions import SESSION_ID, Sessions
from rageval.inputs.traces.spans import SPAN_KINDS, Span

if TYPE_CHECKING:
    from rageval.core.progress import LoadProgress
    from rageval.core.records.model import Record
    from rageval.inputs.spec import InputSpec
    from rageval.inputs.traces.references import ReferencesJoin

__all__ = ["SPAN_KINDS", "TRACE_MAP_FIELDS", "references_of", "trace_source", "trace_windows"]


def trace_source(spec: InputSpec) -> str:
    """How the spec's traces are named in messages and the manifest."""
    if spec.phoenix is not None:
        from rageval.inputs.traces.phoenix import phoenix_source

        return phoenix_source(spec.phoenix, spec.project or "")
    return str(spec.records)


def _traces(spec: InputSpec, progress: LoadProgress | None) -> Iterator[list[Span]]:
    if spec.phoenix is not None:
        from rageval.inputs.spec import moment
        from rageval.inputs.traces.phoenix import phoenix_traces

        return phoenix_traces(spec.phoenix, spec.project or "", moment(spec.since, "since"),
                              moment(spec.until, "until"))
    from rageval.inputs.traces.otlp import otlp_traces

    path = str(spec.records)
    check_file(path)
    return otlp_traces(path, line_limit(spec.max_line_bytes), progress)


def references_of(spec: InputSpec) -> ReferencesJoin | None:
    """The spec's references file, read (None without one): its references join the trace
    records in :func:`trace_windows`, its judgments (``.qrels``) where a run's judgments join."""
    if spec.references is None:
        return None
    from rageval.inputs.traces.references import ReferencesJoin

    return ReferencesJoin(str(spec.references), max_line_bytes=spec.max_line_bytes)


def trace_windows(spec: InputSpec, size: int, progress: LoadProgress | None = None, *,
                  join: ReferencesJoin | None = None) -> Iterator[list[Record]]:
    """The records of the spec's traces in lists of at most ``size``, read as the run goes,
    with the references of ``join`` (:func:`references_of`; None: none joined) and its
    judgments, each record built once with them (its qrels, :class:`~rageval.core.records.
    judgments.JoinedQrels`, are then only counted where a run's judgments join)."""
    source = trace_source(spec)
    # record number -> (line, "trace" or "session", its id), for a window's errors
    places: dict[int, tuple[int | None, str, str]] = {}
    field_map = dict(spec.field_map)
    unit_kind = spec.unit()
    by_genai = spec.reader() == "otel-genai"
    units = genai.units if by_genai else openinference.units
    session_key = genai.CONVERSATION_ID if by_genai else SESSION_ID
    qrels = None if join is None else join.qrels

    def items() -> Iterator[tuple[int, Any]]:
        count = 0
        sessions = Sessions(session_key) if spec.sessions else None
        try:
            for spans in _traces(spec, progress):
                for unit in units(spans, unit_kind, field_map, source):
                    line, item = unit.line, unit.item
                    if join is not None:
                        join.fill(item, source, line)
                    if sessions is not None:
                        whole = unit.object()
                        if sessions.hold(spans, line, whole):
                            continue
                    else:  # the record itself, or its object for its checks to tell why not
                        grades = None if qrels is None else qrels.get(item["id"])
                        # the references file's grades, read-only: shared, not copied
                        whole = unit.record(grades) or unit.object()
                    count += 1
                    places[count] = (line or None, "trace", item["trace_id"])
                    yield count, whole
            for line, session, item in sessions.conversations() if sessions else ():
                count += 1
                places[count] = (line or None, "session", session)
                yield count, item
        except InputError as error:  # placed at a span's line already: not a record number
            raise _SpanError(error.message, path=error.path, line=error.line,
                             field=error.field) from None
        if not count:
            what = "operation" if by_genai else "kind"
            kind = "" if unit_kind == "trace" else f" (no span of {what} {unit_kind})"
            raise InputError(f"no trace gave a record{kind}", path=source)
        if join is not None:
            join.finish()

    ids = IdCheck(source, "record")
    checked = validate_records(items(), source, "record", ids, built=True)
    if qrels is not None:
        checked = _judged(checked, qrels)
    windows = record_windows(checked, ids, size)
    while True:
        try:
            window = next(windows, None)
        except InputError as error:
            raise _placed(error, places) from None
        if window is None:
            return
        places.clear()
        yield window


def _judged(records: Iterable[Record],
            qrels: Mapping[str, Mapping[str, int]]) -> Iterator[Record]:
    """``records``, each whose id ``qrels`` holds with its grades: those built from their
    objects (a record its reader could not build itself, a session's) get them here; a trace
    record holds no judgments of its own, so none is in two places."""
    for record in records:
        if record.judgments is None:
            grades = qrels.get(record.id)
            if grades is not None:
                record = with_judgments(record, grades)
        yield record


class _SpanError(InputError):
    """An error of the spans themselves, told at the span's line (not a record number)."""


def _placed(error: InputError, places: dict[int, tuple[int | None, str, str]]) -> InputError:
    """A validation error about record number ``n`` told with its trace and span line."""
    place = places.get(error.line or 0)
    if place is None or isinstance(error, _SpanError):
        return error
    line, unit, name = place
    return InputError(f"record {error.line} ({unit} {name}): {error.message}", path=error.path,
                      line=line, field=error.field)
