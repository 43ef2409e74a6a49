"""``--otel-events FILE``, ``--otel-endpoint URL``: checked before a run scores anything (the
``otel`` extra installed; the collector's URL well formed, its headers variable readable, the
collector reachable), done once its results are written (see :mod:`rageval.otel`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rageval.core.errors import RagevalError
from rageval.core.outputs.masking import NO_SECRETS
from rageval.core.outputs.text import terminal, terminal_lines

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rageval.core.outputs.masking import Masker
    from rageval.core.results import Results
    from rageval.inputs.spec import InputSpec
    from rageval.otel import Delivery, EvaluationEvent

__all__ = ["OtelTarget", "events_step", "otel_target"]


@dataclass(frozen=True)
class OtelTarget:
    """Where the run's evaluation events go: a file, a collector, or both."""

    file: str | None
    endpoint: str | None


def otel_target(args: argparse.Namespace) -> OtelTarget | None:
    """The run's evaluation events' destinations from its options; None when it has none.
    OpenTelemetry itself is not imported here: only found."""
    file = getattr(args, "otel_events", None)
    endpoint = getattr(args, "otel_endpoint", None)
    if not file and not endpoint:
        return None
    from rageval.otel.export import check_headers, check_reachable, check_sdk, logs_url

    check_sdk(file=bool(file), endpoint=bool(endpoint))
    if endpoint:  # each refused before anything is scored, not after a long run
        logs_url(endpoint)
        check_headers()
        check_reachable(endpoint)
    return OtelTarget(file or None, endpoint or None)


def events_step(target: OtelTarget | None, spec: InputSpec, results: Results,
                out: str | None, masker: Masker = NO_SECRETS) -> bool:
    """Write and send the run's evaluation events, saying on stderr how many went where;
    False (the error said) when one of them could not be done: the run's results stand."""
    if target is None:
        return True
    from rageval.otel import evaluation_events, record_spans, send_events, write_events
    from rageval.otel.events import table_metrics
    from rageval.otel.spans import from_traces

    kept = f"in {out}" if out else "on the terminal only (no --out)"
    try:
        spans = record_spans(spec)
    except RagevalError as error:
        return _failed(error, "no evaluation events were written or sent", kept, masker)
    metrics = table_metrics(results)
    spanless = ("trace records without valid span ids" if from_traces(spec)
                else "records not read from traces, without trace_id and span_id")

    def events() -> Iterator[EvaluationEvent]:
        return evaluation_events(results.records, spans, metrics, masker)

    done = True
    if target.file:
        done = _deliver(lambda: write_events(target.file or "", events()),
                        f"wrote {{}} evaluation events to {target.file} (OTLP/JSON)", spanless,
                        kept, masker)
    if target.endpoint:
        from rageval.core.urls import public_url
        from rageval.otel.export import logs_url

        where = f"to the OTLP collector at {public_url(logs_url(target.endpoint))}"
        done = _deliver(lambda: send_events(target.endpoint or "", events()),
                        f"sent {{}} evaluation events {where}", spanless, kept,
                        masker) and done
    return done


def _deliver(act: Callable[[], Delivery], done: str, spanless: str, kept: str,
             masker: Masker) -> bool:
    """Write or send the events (``act``), then say ``done`` (its ``{}`` the count) and where
    they went; False, the error said, when that failed."""
    try:
        delivery = act()
    except RagevalError as error:
        return _failed(error, None, kept, masker)
    alone = delivery.events - delivery.on_spans - delivery.whole_conversations
    parts = [f"{delivery.on_spans} on their records' spans"]
    if delivery.whole_conversations:
        parts.append(f"{delivery.whole_conversations} of whole conversations (no one span)")
    if alone:
        parts.append(f"{alone} without a span ({spanless})")
    print(terminal(masker(f"{done.format(delivery.events)}: {'; '.join(parts)}")),
          file=sys.stderr)
    return True


def _failed(error: RagevalError, what: str | None, kept: str, masker: Masker) -> bool:
    said = f"{what}; " if what else ""
    text = f"{error.format()} ({said}the run's results stand {kept})"
    print(terminal_lines(masker(text)), file=sys.stderr)
    return False
