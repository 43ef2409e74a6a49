"""The orchestrator: records x metrics -> :class:`~rageval.core.results.Results`, through the
metric lifecycle, naming no family.

:func:`run_metrics` (a run held in memory) and :func:`stream_metrics` (a run read window by
window) resolve metric names, have each metric's run hooks check that the run can go ahead
before anything is read from outside, written or sent, let a judgments provider fill in the
judgments of records without any, check that every metric can score at least one record, have
the hooks prepare each window, score in batches, hand each batch's per-record results to a
sink (:mod:`rageval.engine.sink`) and keep what the summary needs
(:mod:`rageval.engine.summary`), aggregate each output (mean or the metric's corpus figure,
seeded bootstrap CI, unscored counts with reasons), and collect the manifest sections of the
hooks. The public entry point is :func:`rageval.evaluate`.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from rageval.core.errors import UsageError, check_int
from rageval.core.metric import (
    Batch,
    JudgmentsProvider,
    Metric,
    RunHooks,
    ScoreOptions,
)
from rageval.core.records import Record
from rageval.core.records.field_hints import field_hint
from rageval.core.registry import create, judgments_provider
from rageval.core.results import Results
from rageval.core.version import __version__
from rageval.engine.local import Engine, LocalEngine, merge_run_wide
from rageval.engine.sink import MemorySink, Sink
from rageval.engine.summary import SummaryParts

# (records done, records total): the total is None while a run streamed from a file is read.
ProgressHook = Callable[[int, int | None], None]


def run_metrics(
    records: list[Record],
    metrics: Iterable[str | Metric],
    options: ScoreOptions,
    *,
    source: str = "<memory>",
    judgments_from: str | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
    batch_size: int = 1000,
    progress: ProgressHook | None = None,
    started: float | None = None,
    sink: Sink | None = None,
    engine: Engine | None = None,
) -> Results:
    """Score ``records`` with ``metrics`` under ``options`` and aggregate (see the module).

    ``started`` is the :func:`time.perf_counter` reading the run's wall time counts from (the
    caller's, when it read the records; default: now). ``sink`` receives the per-record
    results batch by batch (default: kept in memory).
    """
    if not records:
        check_settings(seed, bootstrap, batch_size)
        raise UsageError("no records to score")
    return stream_metrics(iter([records]), metrics, options, source=source,
                          judgments_from=judgments_from, seed=seed, bootstrap=bootstrap,
                          batch_size=batch_size, progress=progress, started=started, sink=sink,
                          engine=engine)


def stream_metrics(
    windows: Iterator[list[Record]],
    metrics: Iterable[str | Metric],
    options: ScoreOptions,
    *,
    source: str = "<memory>",
    judgments_from: str | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
    batch_size: int = 1000,
    progress: ProgressHook | None = None,
    started: float | None = None,
    sink: Sink | None = None,
    signing: Callable[[], ScoreOptions] | None = None,
    engine: Engine | None = None,
) -> Results:
    """Score a run read window by window (each window a list of records, prepared and scored
    on its own) and aggregate as the windows finish: what a run keeps is the summary's parts
    and, unless ``sink`` writes them elsewhere, the per-record results.

    A run of one window is checked as a whole before anything is scored. A run of several
    checks each window as it comes, and whether every metric found its inputs in some record
    at the end (nothing is written then). With ``judgments_from``, or a metric that does not
    stream (:meth:`~rageval.core.metric.Metric.streams`), the windows are joined into one
    before anything is scored. ``signing`` gives the options the summary signs with, known
    only once every record was read (where the judgments came from); values never depend on
    them. ``engine`` scores each window's batches (default: here, one after the other).
    """
    started = time.perf_counter() if started is None else started
    check_settings(seed, bootstrap, batch_size)
    sink = sink if sink is not None else MemorySink()
    try:
        results = _stream(windows, metrics, options, source, judgments_from, seed, bootstrap,
                          batch_size, progress, sink, signing, engine or LocalEngine())
    except BaseException:
        sink.abort()
        raise
    results.manifest["wall_time_s"] = round(time.perf_counter() - started, 3)
    try:
        sink.commit(results.summary_json())
    except BaseException:
        sink.abort()
        raise
    return results


def _stream(windows: Iterator[list[Record]], metrics: Iterable[str | Metric],
            options: ScoreOptions, source: str, judgments_from: str | None, seed: int,
            bootstrap: int, batch_size: int, progress: ProgressHook | None, sink: Sink,
            signing: Callable[[], ScoreOptions] | None, engine: Engine) -> Results:
    provider = (judgments_provider(judgments_from, options) if judgments_from is not None
                else None)
    resolved = _resolve(metrics, options)
    first = next(windows, None)
    following = next(windows, None) if first is not None else None
    if first is None or (not first and following is None):
        raise UsageError("no records to score")
    if following is not None and (provider is not None
                                  or not all(m.streams() for m in resolved)):
        # A judgments provider, or a metric that needs every record at once: one window.
        first = [*first, *following, *(r for window in windows for r in window)]
        following = None
    single = following is None
    ahead = [first] if following is None else [first, following]
    del first, following  # a window is let go once scored: only `ahead` holds them
    state = _RunState(resolved)
    extra: dict[str, Any] = {}
    for window in _chain(ahead, windows):
        if not window:
            continue
        run = Batch(window, shared=state.shared)
        for hooks, group in _by_hooks(state.metrics):
            hooks.check(window, group)
        if provider is not None:
            _check_inputs(window, state.metrics, but="judgments")  # before the provider's work
            window, graded, options, extra[provider.section] = _fill_judgments(
                provider, window, state.metrics, options, run)
            state = _RunState(graded, state.shared)  # one window: nothing scored yet
        if single:
            _check_inputs(window, state.metrics)
        else:
            state.note_fields(window)
        for hooks, group in _by_hooks(state.metrics):
            hooks.prepare(run, group)
        _score_window(state, run, batch_size, progress, sink, len(window) if single else None,
                      engine)
        # The manifest hooks read a run of one window whole; of several, what is run-wide.
        state.last_run = run if single else Batch([], shared=state.shared)
        window = run = None  # type: ignore[assignment]  # not held while the next is read
    final = signing() if signing is not None else options  # may find the inputs wanting
    if not single:
        state.check_fields()
    signers = [m if m.options == final else m.with_options(final) for m in state.metrics]
    summary = state.parts.summarise(signers, seed, bootstrap)
    helpers = provider.metrics() if provider is not None else []
    manifest = _manifest(source, state.count, signers, helpers, final, seed, bootstrap)
    for hooks, group in _by_hooks([*state.metrics, *helpers]):
        extra[hooks.section] = hooks.manifest(state.last_run, group)
    _add_sections(manifest, extra)
    return Results(sink.records(), summary, manifest)


def _chain(ahead: list[list[Record]], rest: Iterator[list[Record]]) -> Iterator[list[Record]]:
    """The windows read ahead, then the rest, each let go of here once handed over."""
    while ahead:
        yield ahead.pop(0)
    yield from rest


class _RunState:
    """What a run keeps between its windows."""

    def __init__(self, metrics: list[Metric], shared: dict[Any, Any] | None = None) -> None:
        self.metrics = metrics
        self.parts = SummaryParts(metrics)
        self.shared: dict[Any, Any] = {} if shared is None else shared
        self.count = 0
        self.last_run: Batch = Batch([])
        self._found: set[str] = set()  # the needed fields some record had
        self._extra_keys: set[str] = set()

    def note_fields(self, window: list[Record]) -> None:
        needed = {field for metric in self.metrics for field in metric.needs} - self._found
        for field in needed:
            if any(r.has(field) for r in window):
                self._found.add(field)
        self._extra_keys.update(key for r in window for key in r.extra)

    def check_fields(self) -> None:
        """After a run of several windows: a metric whose inputs no record had is an error."""
        for metric in self.metrics:
            for needed in sorted(metric.needs - self._found):
                raise _missing_field(metric, needed, self._extra_keys)


def _score_window(state: _RunState, run: Batch, batch_size: int,
                  progress: ProgressHook | None, sink: Sink, total: int | None,
                  engine: Engine) -> None:
    """Score a window batch by batch on the engine, in order: each batch's per-record
    results go to the sink and what the summary needs to the run's parts."""
    done = state.count
    for scored in engine.score(state.metrics, run, batch_size):
        sink.write(scored.block)
        for metric, (part, reasons) in zip(state.metrics, scored.parts, strict=True):
            state.parts.add_part(metric, part, reasons)
        merge_run_wide(state.shared, scored.run_wide)
        done += len(scored.block)
        if progress is not None:
            progress(done, total)
    state.count += len(run.records)


def _add_sections(manifest: dict[str, Any], sections: dict[str, Any]) -> None:
    """The hooks' and the provider's manifest sections; one never replaces another key."""
    for key, section in sections.items():
        if section is None:
            continue
        if key in manifest:
            raise RuntimeError(f"two parts of the run write the manifest key {key!r}")
        manifest[key] = section


def _fill_judgments(
    provider: JudgmentsProvider, records: list[Record], metrics: list[Metric],
    options: ScoreOptions, run: Batch,
) -> tuple[list[Record], list[Metric], ScoreOptions, dict[str, Any]]:
    """Judgments from the provider; the metrics then sign with the judgments' new source."""
    provider.check(records)
    filled, source, account = provider.fill(records, run, options.judgments_source)
    run.records = filled  # the run's records now carry the provided judgments
    options = replace(options, judgments_source=source)
    return filled, [m.with_options(options) for m in metrics], options, account


def _by_hooks(metrics: Sequence[Metric]) -> list[tuple[RunHooks, list[Metric]]]:
    """The metrics grouped by the run hooks they share, in the order first met."""
    groups: dict[int, tuple[RunHooks, list[Metric]]] = {}
    for metric in metrics:
        if metric.hooks is not None:
            groups.setdefault(id(metric.hooks), (metric.hooks, []))[1].append(metric)
    return list(groups.values())


def check_settings(seed: int, bootstrap: int, batch_size: int) -> None:
    """Raise a usage error for a seed, resample count or batch size out of range."""
    for name, value, low in (("seed", seed, 0), ("bootstrap", bootstrap, 1),
                             ("batch_size", batch_size, 1)):
        check_int(name, value, low)


def _resolve(metrics: Iterable[str | Metric], options: ScoreOptions) -> list[Metric]:
    if isinstance(metrics, str):
        metrics = [metrics]
    resolved: list[Metric] = []
    for item in metrics:
        if isinstance(item, Metric):
            # A metric object built elsewhere gets this run's options (and so its signature).
            metric = item if item.options == options else item.with_options(options)
        else:
            metric = create(item, options)
        if str(metric) in {str(m) for m in resolved}:
            raise UsageError(f"metric {metric} requested twice")
        resolved.append(metric)
    if not resolved:
        raise UsageError("no metrics requested (e.g. -m ndcg@10)")
    return resolved


def _check_inputs(records: list[Record], metrics: list[Metric], but: str | None = None) -> None:
    """Stop before scoring when a metric could not score a single record (``but``: a field
    left for later, when something is about to fill it)."""
    for metric in metrics:
        for needed in sorted(metric.needs - {but}):
            if not any(r.has(needed) for r in records):
                raise _missing_field(metric, needed, {key for r in records for key in r.extra})


def _missing_field(metric: Metric, needed: str, extra_keys: set[str]) -> UsageError:
    hint = field_hint(needed, extra_keys) or {
        "judgments": " (or give --qrels)",
        "contexts": " (every record's contexts list is empty)",
    }.get(needed, "")
    return UsageError(f"metric {metric} needs '{needed}', and no record has it{hint}")


def _manifest(
    source: str,
    count: int,
    metrics: list[Metric],
    helpers: list[Metric],
    options: ScoreOptions,
    seed: int,
    bootstrap: int,
) -> dict[str, Any]:
    """The core of the manifest (``helpers``: the judgments provider's metrics, whose
    libraries count too)."""
    return {
        "rageval": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "records": {"source": source, "count": count},
        "metrics": [str(m) for m in metrics],
        "judgments": options.judgments_source,
        "trec_convention": options.trec_convention,
        "bootstrap": {"resamples": bootstrap, "seed": seed, "level": 0.95,
                      "method": "percentile"},
        "versions": _versions([*metrics, *helpers]),
    }


# Libraries every run's values rest on; each metric adds its own (Metric.libraries).
_ALWAYS_VERSIONED = ("numpy", "polars")


def _versions(metrics: Sequence[Metric]) -> dict[str, str]:
    """Versions of the libraries that can change a value, read from package metadata."""
    out = {"python": platform.python_version()}
    wanted = dict.fromkeys([*_ALWAYS_VERSIONED, *(lib for m in metrics for lib in m.libraries)])
    for package in wanted:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return out
