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
  Before a run scores anything, :func:`check_headers` refuses headers the exporter would
  drop and :func:`check_reachable` a collector that cannot be reached.

The SDK's own log lines are kept from the terminal while rageval builds, uses and shuts down
the exporter (:func:`otel_quiet`): they may quote a header whole, credential and all; rageval
says what happened itself.

The events go in batches of :data:`BATCH`, so a large run is never held whole. OpenTelemetry
is imported only here, when events are written or sent.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
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
from rageval.otel.events import EVENT_NAME, SCHEMA_URL, EvaluationEvent

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord

__all__ = ["BATCH", "EXTRA", "HEADER_VARIABLES", "CollectorError", "Delivery", "check_headers",
           "check_reachable", "check_sdk", "logs_url", "otel_quiet", "send_events",
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
_OTEL_LOGGER = "opentelemetry"
#: The variables the exporter takes its headers from: the first one set, the other ignored.
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
_CONNECT_TIMEOUT = 3.0  # seconds: a collector on the network answers a connection well within
_ERRNO = re.compile(r"\[Errno -?[0-9]+\][^'\"()]*")


class CollectorError(RagevalError):
    """The collector refused the events, or could not be reached."""

    exit_code = 2


@dataclass(frozen=True)
class Delivery:
    """What went out: events, of them those on a span, and those of whole conversations (on
    no one span)."""

    events: int
    on_spans: int
    whole_conversations: int = 0


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
        raise UsageError(f"--otel-endpoint {public_url(endpoint)!r}: expected an http:// or "
                         "https:// URL of an OTLP/HTTP collector, e.g. http://localhost:4318")
    if parts.path in ("", "/"):
        parts = parts._replace(path=_LOGS_PATH)
    return urlunsplit(parts)


def check_headers() -> None:
    """Refuse the exporter's headers variable (the first of :data:`HEADER_VARIABLES` set) when
    the SDK's own parser, reading it as the exporter does, would drop a header of it: the
    collector would refuse the events only once the run is over. The error names the
    variable, never its value (a header holds a credential)."""
    name = next((n for n in HEADER_VARIABLES if os.environ.get(n)), None)
    if name is None:
        return
    from opentelemetry.util.re import parse_env_headers

    with otel_quiet() as said:
        parse_env_headers(os.environ[name], liberal=True)
    if said:
        raise UsageError(f"{name}: a header in it is not NAME=VALUE (pairs separated by "
                         "commas, each value percent-encoded), so the OTLP exporter would drop "
                         "it and the collector refuse the events: correct the variable (its "
                         "value is not shown: it holds credentials)")


def check_reachable(endpoint: str, timeout: float = _CONNECT_TIMEOUT) -> None:
    """Raise :class:`CollectorError` unless a TCP connection to the collector at ``endpoint``
    opens within ``timeout`` seconds (a collector that is not running is said before the run
    scores anything). A URL the exporter reaches through a proxy (``HTTPS_PROXY`` and the
    like, ``NO_PROXY`` not naming it) is not checked: the proxy stands between."""
    import requests.utils

    url = logs_url(endpoint)
    if requests.utils.get_environ_proxies(url):
        return
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout).close()
    except OSError as error:
        why = f"no answer within {timeout:g} s" if isinstance(error, TimeoutError) else \
            _cause(error)
        raise CollectorError(f"the OTLP collector at {public_url(url)} cannot be reached "
                             f"({why}): start it, or check --otel-endpoint") from None


def _batches(events: Iterable[EvaluationEvent], counts: list[int]
             ) -> Iterator[list[ReadableLogRecord]]:
    """The events as SDK log records, :data:`BATCH` at a time; ``counts`` (events, on spans,
    of whole conversations) is kept up to date."""
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord, SeverityNumber
    from opentelemetry.context import Context
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    resource = Resource.create({SERVICE_NAME: "rageval", SERVICE_VERSION: __version__})
    scope = InstrumentationScope("rageval", __version__, schema_url=SCHEMA_URL)
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
        counts[2] += event.whole_conversation
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

    counts = [0, 0, 0]

    def write(handle: BinaryIO) -> None:
        for batch in _batches(events, counts):
            line = json.dumps(encode_logs(batch).to_dict(), separators=(",", ":"))
            handle.write(line.encode("utf-8") + b"\n")

    try:
        atomic_write_with(path, write)
    except OSError as error:
        raise UsageError(f"--otel-events {os.fspath(path)}: cannot write: "
                         f"{error.strerror or error}") from None
    return Delivery(*counts)


def send_events(endpoint: str, events: Iterable[EvaluationEvent]) -> Delivery:
    """Send ``events`` to the OTLP/HTTP collector at ``endpoint`` (see :func:`logs_url`) with
    the SDK's exporter; a :class:`CollectorError` saying why (the collector's status, or why
    it could not be reached) when a batch is refused or cannot be delivered: the batches
    before it stay sent."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult

    url = logs_url(endpoint)
    session = _watched_session()
    counts = [0, 0, 0]
    with otel_quiet():  # building the exporter parses the headers: the SDK may quote them
        exporter = OTLPLogExporter(endpoint=url, session=session)
        try:
            for batch in _batches(events, counts):
                if exporter.export(batch) is not LogRecordExportResult.SUCCESS:
                    sent = counts[0] - len(batch)
                    before = f"the {sent} before were sent" if sent else "none was sent"
                    raise CollectorError(f"the OTLP collector at {public_url(url)} did not "
                                         "take the evaluation events ("
                                         f"{session.last or 'no reply'}); {before}")
        finally:
            exporter.shutdown()
    return Delivery(*counts)


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
def otel_quiet() -> Iterator[list[logging.LogRecord]]:
    """The OpenTelemetry SDK's log lines (every ``opentelemetry`` logger) kept from the
    terminal meanwhile, and handed to the caller in the list it yields: they may quote a
    header, credential and all, and rageval says what happened itself."""
    said: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record)

    logger = logging.getLogger(_OTEL_LOGGER)
    handler, propagate = Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield said
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
