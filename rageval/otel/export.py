"""Evaluation events out through the OpenTelemetry SDK: an OTLP/JSON file, or a collector.

Each :class:`~rageval.otel.events.EvaluationEvent` becomes an SDK log record (an event: its
``event_name`` ``gen_ai.evaluation.result``, severity INFO, the trace and span ids of its span)
under the resource ``service.name=rageval`` (``OTEL_RESOURCE_ATTRIBUTES`` and
``OTEL_SERVICE_NAME`` add to it or rename it) and the instrumentation scope ``rageval``.

- :func:`write_events`: the SDK's OTLP/JSON encoder (``opentelemetry-exporter-otlp-json-
  common``), one ``ExportLogsServiceRequest`` per line as the SDK's file exporter writes them,
  the file written whole or not at all (a temporary file renamed into place);
- :func:`send_events`: the SDK's OTLP/HTTP exporter (protobuf), to a collector's logs
  endpoint; its headers, timeout, compression and certificates come from the SDK's own
  variables (``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_LOGS_TIMEOUT``, ...).

The events go in batches of :data:`BATCH`, so a large run is never held whole. OpenTelemetry
is imported only here, when events are written or sent.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

from rageval.core.errors import MissingDependencyError, RagevalError, UsageError
from rageval.core.files import atomic_write_with
from rageval.core.urls import public_url
from rageval.core.version import __version__
from rageval.otel.events import EVENT_NAME, EvaluationEvent

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord

__all__ = ["BATCH", "EXTRA", "CollectorError", "Delivery", "check_sdk", "logs_url", "send_events",
           "write_events"]

BATCH = 512  # events per request (and per line of the file)
EXTRA = "otel"
#: The modules each way out needs, and the package that brings each.
_FILE_MODULES = {
    "opentelemetry.sdk": "opentelemetry-sdk",
    "opentelemetry.exporter.otlp.json.common": "opentelemetry-exporter-otlp-json-common"}
_HTTP_MODULES = {"opentelemetry.sdk": "opentelemetry-sdk",
                 "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http"}
_LOGS_PATH = "/v1/logs"
_EXPORTER_LOGGER = "opentelemetry.exporter"
_ERRNO = re.compile(r"\[Errno -?[0-9]+\][^'\"()]*")


class CollectorError(RagevalError):
    """The collector refused the events, or could not be reached."""

    exit_code = 2


@dataclass(frozen=True)
class Delivery:
    """What went out: events, and of them those on a span."""

    events: int
    on_spans: int


def check_sdk(file: bool, endpoint: bool) -> None:
    """Raise :class:`MissingDependencyError` naming the ``otel`` extra unless the packages
    writing a file (``file``) and sending to a collector (``endpoint``) are installed; nothing
    is imported."""
    import importlib.util

    needed = {**(_FILE_MODULES if file else {}), **(_HTTP_MODULES if endpoint else {})}
    for module, package in needed.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package missing
            found = False
        if not found:
            raise MissingDependencyError(package, EXTRA)


def logs_url(endpoint: str) -> str:
    """The collector's logs URL: ``endpoint`` itself when it names a path, else (a base URL,
    ``http://host:4318``) with ``/v1/logs`` appended, as OTLP/HTTP places logs."""
    parts = urlsplit(endpoint)
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        parts = parts._replace(scheme="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--otel-endpoint {endpoint!r}: expected an http:// or https:// URL "
                         "of an OTLP/HTTP collector, e.g. http://localhost:4318")
    if parts.path in ("", "/"):
        parts = parts._replace(path=_LOGS_PATH)
    return urlunsplit(parts)


def _batches(events: Iterable[EvaluationEvent], counts: list[int]
             ) -> Iterator[list[ReadableLogRecord]]:
    """The events as SDK log records, :data:`BATCH` at a time; ``counts`` (events, on spans)
    is kept up to date."""
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord, SeverityNumber
    from opentelemetry.context import Context
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    resource = Resource.create({SERVICE_NAME: "rageval", SERVICE_VERSION: __version__})
    scope = InstrumentationScope("rageval", __version__)
    now = time.time_ns()
    batch: list[ReadableLogRecord] = []
    for event in events:
        context = Context()
        if event.span is not None:
            span = trace.NonRecordingSpan(trace.SpanContext(
                int(event.span.trace_id, 16), int(event.span.span_id, 16), is_remote=True,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)))
            context = trace.set_span_in_context(span, context)
            counts[1] += 1
        record = LogRecord(timestamp=now, observed_timestamp=now, context=context,
                           severity_number=SeverityNumber.INFO, severity_text="INFO",
                           attributes=event.attributes, event_name=EVENT_NAME)
        batch.append(ReadableLogRecord(record, resource, scope))
        counts[0] += 1
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def write_events(path: str | os.PathLike[str], events: Iterable[EvaluationEvent]) -> Delivery:
    """Write ``events`` to ``path`` as OTLP/JSON log lines (the SDK's encoder), whole or not
    at all; an empty run writes an empty file."""
    from opentelemetry.exporter.otlp.json.common._log_encoder import encode_logs

    counts = [0, 0]

    def write(handle: BinaryIO) -> None:
        for batch in _batches(events, counts):
            line = json.dumps(encode_logs(batch).to_dict(), separators=(",", ":"))
            handle.write(line.encode("utf-8") + b"\n")

    try:
        atomic_write_with(path, write)
    except OSError as error:
        raise UsageError(f"--otel-events {os.fspath(path)}: cannot write: "
                         f"{error.strerror or error}") from None
    return Delivery(counts[0], counts[1])


def send_events(endpoint: str, events: Iterable[EvaluationEvent]) -> Delivery:
    """Send ``events`` to the OTLP/HTTP collector at ``endpoint`` (see :func:`logs_url`) with
    the SDK's exporter; a :class:`CollectorError` saying why (the collector's status, or why
    it could not be reached) when a batch is refused or cannot be delivered: the batches
    before it stay sent."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult

    url = logs_url(endpoint)
    session = _watched_session()
    exporter = OTLPLogExporter(endpoint=url, session=session)
    counts = [0, 0]
    try:
        for batch in _batches(events, counts):
            with _exporter_quiet():
                result = exporter.export(batch)
            if result is not LogRecordExportResult.SUCCESS:
                sent = counts[0] - len(batch)
                raise CollectorError(f"the OTLP collector at {public_url(url)} did not take "
                                     f"the evaluation events: {session.last or 'no reply'} "
                                     f"({sent} were sent before)")
    finally:
        exporter.shutdown()
    return Delivery(counts[0], counts[1])


def _watched_session() -> Any:
    """A ``requests`` session for the exporter that remembers how its last request ended (the
    status a collector answered, or why none could be reached), for the error to say."""
    import requests

    class Watched(requests.Session):
        last: str | None = None

        def request(self, *args: Any, **kwargs: Any) -> Any:
            try:
                response = super().request(*args, **kwargs)
            except Exception as error:
                self.last = f"cannot be reached: {_cause(error)}"
                raise
            self.last = f"HTTP {response.status_code} {response.reason or ''}".rstrip()
            return response

    return Watched()


def _cause(error: Exception) -> str:
    """The heart of a connection error (``[Errno 111] Connection refused``), else its text."""
    text = str(error)
    found = _ERRNO.search(text)
    return found.group(0).rstrip() if found else f"{type(error).__name__}: {text}"


@contextmanager
def _exporter_quiet() -> Iterator[None]:
    """The SDK exporter's own log lines kept from the terminal meanwhile: rageval says what
    happened itself."""
    logger = logging.getLogger(_EXPORTER_LOGGER)
    handler, propagate = logging.NullHandler(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
