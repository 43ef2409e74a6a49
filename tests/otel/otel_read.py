"""Evaluation events read back as OpenTelemetry reads them, for the tests: an OTLP/JSON logs
file through the SDK's own decoder, a protobuf body as a collector receives it, and the roots
of a traces file (the spans the events belong to)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Event:
    """One log record as read back: its name, trace and span ids (hex, "" when absent), its
    attributes, and its resource's."""

    name: str
    trace_id: str
    span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]


def _value(any_value: Any) -> Any:
    """An attribute's value, from the SDK's JSON message (unset fields None) or protobuf's."""
    if hasattr(any_value, "WhichOneof"):
        field = any_value.WhichOneof("value")
        return None if field is None else getattr(any_value, field)
    for field in ("string_value", "double_value", "int_value", "bool_value"):
        if getattr(any_value, field) is not None:
            return getattr(any_value, field)
    return None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _events(request: Any) -> list[Event]:
    out = []
    for resource_logs in request.resource_logs:
        resource = _attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                out.append(Event(record.event_name, (record.trace_id or b"").hex(),
                                 (record.span_id or b"").hex(), _attributes(record.attributes),
                                 resource))
    return out


def file_events(path: Path) -> list[Event]:
    """The events of an OTLP/JSON logs file, each line decoded by the SDK's OTLP/JSON decoder
    (trace and span ids in hex, as OTLP/JSON writes them) and parsed by protobuf's
    ``json_format`` into ``ExportLogsServiceRequest`` too (the structure protobuf takes)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest as ProtoRequest,
    )
    from opentelemetry.proto_json.collector.logs.v1.logs_service import (
        ExportLogsServiceRequest,
    )

    out: list[Event] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        json_format.Parse(line, ProtoRequest())  # every field one protobuf knows
        out.extend(_events(ExportLogsServiceRequest.from_dict(json.loads(line))))
    return out


def body_events(body: bytes) -> list[Event]:
    """The events of one OTLP/HTTP protobuf request body."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
    )

    request = ExportLogsServiceRequest()
    request.ParseFromString(body)
    return _events(request)


def trace_roots(path: Path, id_key: str = "qid") -> dict[str, tuple[str, str]]:
    """Record id (the ``metadata`` attribute's ``id_key``) -> (trace id, span id) of each
    trace's root span in an OTLP/JSON traces file."""
    roots: dict[str, tuple[str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    if span.get("parentSpanId"):
                        continue
                    attributes = {a["key"]: a["value"] for a in span["attributes"]}
                    metadata = json.loads(attributes["metadata"]["stringValue"])
                    roots[metadata[id_key]] = (span["traceId"], span["spanId"])
    return roots
