"""Spans from a running Arize Phoenix server, through Phoenix's own client.

``--phoenix URL --project NAME`` reads every span of the project (Phoenix's REST API, page by
page) and hands the traces over whole, in the order their first span started. The server's API
key, where it wants one, comes from ``PHOENIX_API_KEY`` as Phoenix's client reads it: a URL with
user info or a query string is refused, so that no secret reaches a manifest or a message.
A project's spans are held while they are grouped into traces (a server gives them newest
first, not trace by trace); for exports larger than memory, read an OTLP/JSON file instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

from rageval.core.errors import InputError, MissingDependencyError, UsageError
from rageval.core.urls import has_secrets, public_url
from rageval.inputs.traces.spans import Span, span_kind

__all__ = ["check_phoenix_url", "phoenix_call", "phoenix_client", "phoenix_source",
           "phoenix_traces"]

TIMEOUT_SECONDS = 60
T = TypeVar("T")


def phoenix_source(url: str, project: str) -> str:
    """How a Phoenix project is named in messages and the manifest (no secrets)."""
    return f"phoenix project {project!r} at {public_url(url)}"


def phoenix_client(url: str) -> Any:
    """Phoenix's client for the server at ``url`` (checked: http(s), a host, no secrets)."""
    check_phoenix_url(url)
    try:
        from phoenix.client import Client
    except ImportError:
        raise MissingDependencyError("arize-phoenix-client", "phoenix") from None
    return Client(base_url=url.rstrip("/"))


def check_phoenix_url(url: str) -> None:
    """Refuse a ``--phoenix`` URL that is not http(s) with a host and a numeric port, or that
    carries a secret; the messages show the URL without its user info or query."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--phoenix must be an http(s) URL with a host (and a numeric port), "
                         f"got {public_url(url)!r}")
    if has_secrets(url):
        raise UsageError("--phoenix URL carries user info or a query string: give the "
                         "server's API key in the PHOENIX_API_KEY environment variable instead")


def phoenix_call(url: str, project: str, call: Callable[[], T]) -> T:
    """``call()``, with the server's failures told as :class:`InputError` naming it (after
    :func:`phoenix_client`: Phoenix's client is installed)."""
    import httpx
    from phoenix.client.exceptions import PhoenixException

    source = phoenix_source(url, project)
    try:
        return call()
    except httpx.HTTPStatusError as error:
        status = error.response.status_code
        if status == 404:
            raise InputError("no such project on the server (or no such span)",
                             path=source) from None
        if status in (401, 403):
            raise InputError(f"the server refused the request (HTTP {status}): set "
                             "PHOENIX_API_KEY to a key it accepts", path=source) from None
        raise InputError(f"the server answered HTTP {status}", path=source) from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise InputError(f"cannot reach the server: {type(error).__name__}",
                         path=source) from None
    except PhoenixException as error:  # a server too old for the call, say
        raise InputError(f"the server cannot do this: {error}", path=source) from None


def phoenix_traces(url: str, project: str, since: datetime | None = None,
                   until: datetime | None = None) -> Iterator[list[Span]]:
    """Every trace of ``project`` on the Phoenix server at ``url`` (with a span that started
    at ``since`` or later and before ``until``, when given), its spans in start order, traces
    in the order their first span started."""
    client = phoenix_client(url)
    raw = phoenix_call(url, project, lambda: client.spans.get_spans(
        project_identifier=project, start_time=since, end_time=until, limit=sys.maxsize,
        timeout=TIMEOUT_SECONDS))
    source = phoenix_source(url, project)
    traces: dict[str, list[Span]] = {}
    for index, item in enumerate(raw):
        span = _span(item, source, index)
        traces.setdefault(span.trace_id, []).append(span)
    ordered = sorted(traces.values(), key=lambda spans: (min(s.start for s in spans),
                                                         spans[0].trace_id))
    for spans in ordered:
        yield sorted(spans, key=lambda s: s.start)


def _span(item: Any, source: str, index: int) -> Span:
    try:
        context = item["context"]
        attributes = dict(item.get("attributes") or {})
        return Span(str(context["trace_id"]), str(context["span_id"]),
                    item.get("parent_id") or None, str(item.get("name") or ""),
                    span_kind(attributes, item.get("span_kind")),
                    _microseconds(item["start_time"]), _microseconds(item["end_time"]),
                    attributes)
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"span {index} of the server's answer is malformed ({error!r})",
                         path=source) from None


def _microseconds(stamp: str) -> int:
    moment = datetime.fromisoformat(stamp)
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond
