"""``--otel-events FILE``, ``--otel-endpoint URL``: checked before a run scores anything (the
``otel`` extra installed, the collector's URL well formed), done once its results are written
(see :mod:`rageval.otel`)."""

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
    from rageval.otel.export import check_sdk, logs_url

    check_sdk(file=bool(file), endpoint=bool(endpoint))
    if endpoint:
        logs_url(endpoint)  # a malformed URL refused before anything is scored
    return OtelTarget(file or None, endpoint or None)


def events_step(target: OtelTarget | None, spec: InputSpec, results: Results,
                out: str | None, masker: Masker = NO_SECRETS) -> bool:
    """Write and send the run's evaluation events, saying on stderr how many went where;
    False (the error said) when one of them could not be done: the run's results stand."""
    if target is None:
        return True
    from rageval.otel import evaluation_events, record_spans, send_events, write_events
    from rageval.otel.events import table_metrics

    kept = f"in {out}" if out else "on the terminal only (no --out)"
    try:
        spans = record_spans(spec)
    except RagevalError as error:
        return _failed(error, "no evaluation events were written or sent", kept, masker)
    metrics = table_metrics(results)

    def events() -> Iterator[EvaluationEvent]:
        return evaluation_events(results.records, spans, metrics, masker)

    done = True
    if target.file:
        done = _deliver(lambda: write_events(target.file or "", events()),
                        f"to {target.file} (OTLP/JSON)", kept, masker)
    if target.endpoint:
        from rageval.core.urls import public_url
        from rageval.otel.export import logs_url

        where = f"to the OTLP collector at {public_url(logs_url(target.endpoint))}"
        done = _deliver(lambda: send_events(target.endpoint or "", events()), where, kept,
                        masker) and done
    return done


def _deliver(act: Callable[[], Delivery], where: str, kept: str, masker: Masker) -> bool:
    try:
        delivery = act()
    except RagevalError as error:
        return _failed(error, f"the evaluation events were not all delivered {where}", kept,
                       masker)
    spanless = delivery.events - delivery.on_spans
    alone = f"; {spanless} without a span (records not read from traces)" if spanless else ""
    print(terminal(masker(f"wrote {delivery.events} evaluation events {where}: "
                          f"{delivery.on_spans} on their records' spans{alone}")),
          file=sys.stderr)
    return True


def _failed(error: RagevalError, what: str, kept: str, masker: Masker) -> bool:
    text = f"{error.format()} ({what}; the run's results stand {kept})"
    print(terminal_lines(masker(text)), file=sys.stderr)
    return False
