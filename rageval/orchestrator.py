"""The orchestrator: records x metrics -> :class:`~rageval.core.results.Results`, through the
metric lifecycle, naming no family.

:func:`run_metrics` takes a run's inputs whole (:class:`~rageval.inputs.run.RunInputs`: its
records, window by window, and their judgments) and its settings
(:class:`~rageval.engine.settings.RunSettings`), resolves metric names, has each metric's run
hooks check that the run can go ahead before anything is read from outside, written or sent,
lets a judgments provider fill in the judgments of records without any, checks that every
metric can score at least one record, has the engine prepare each window and score it in
batches, hand each batch's per-record results to a sink (:mod:`rageval.engine.sink`) and keep
what the summary needs
(:mod:`rageval.engine.summary`), aggregate each output (mean or the metric's corpus figure,
seeded bootstrap CI, unscored counts with reasons), and collect the manifest sections of the
hooks. The public entry point is :func:`rageval.evaluate`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from rageval.core.errors import UsageError, did_you_mean
from rageval.core.manifest import run_manifest
from rageval.core.metric import Batch, Metric, RunPass, ScoreOptions, by_hooks, settled
from rageval.core.providers import JudgmentsProvider
from rageval.core.records import Record
from rageval.core.records.digest import DataDigest
from rageval.core.records.field_hints import NeededFields
from rageval.core.records.human import LabelColumns
from rageval.core.registry import create
from rageval.core.results import Results
from rageval.core.results.conversations import TurnRules
from rageval.engine.local import Engine, LocalEngine, merge_run_wide
from rageval.engine.settings import RunSettings
from rageval.engine.sink import MemorySink, Sink
from rageval.engine.summary import SummaryParts
from rageval.engine.whole import WholeConversations, conversations_ending
from rageval.inputs.run import RunInputs

# (records done, records total): the total is None while a run streamed from a file is read.
ProgressHook = Callable[[int, int | None], None]


def run_metrics(
    inputs: RunInputs,
    metrics: Iterable[str | Metric],
    options: ScoreOptions,
    settings: RunSettings,
    *,
    progress: ProgressHook | None = None,
    started: float | None = None,
    engine: Engine | None = None,
) -> Results:
    """Score the run's ``inputs`` with ``metrics`` under ``options`` and aggregate (see the
    module): what a run keeps is the summary's parts and, unless ``settings`` name a run
    directory to write them to, the per-record results.

    A run of one window is checked as a whole before anything is scored. A run of several
    checks each window as it comes, and whether every metric found its inputs in some record
    at the end (nothing is written then); a judgments provider fills each window before it is
    scored. With a metric that does not stream (:meth:`~rageval.core.metric.Metric.streams`),
    the windows are joined into one before anything is scored. The metrics' passes over the run
    (:class:`~rageval.core.metric.RunPass`) read the records once more before the first window
    is scored, or, where they cannot be read twice (a pipe), read them as one window.
    ``started`` is the :func:`time.perf_counter` reading the run's wall time counts from
    (default: now); ``engine`` prepares and scores each window's batches (default: here, one
    after the other).
    """
    started = time.perf_counter() if started is None else started
    sink = settings.sink() or MemorySink()
    try:
        results = _run(inputs, metrics, options, settings, progress, sink,
                       engine or LocalEngine())
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


def _run(inputs: RunInputs, metrics: Iterable[str | Metric], options: ScoreOptions,
         settings: RunSettings, progress: ProgressHook | None, sink: Sink,
         engine: Engine) -> Results:
    """The run's phases, in order: planned before anything is read, read ahead (the
    metrics' passes over the records made), window by window taken in and scored, settled
    once every record is in, and summed up."""
    resolved = _resolve(metrics, options)
    state = _RunState(resolved, settings, inputs.provider)
    windows = _read_ahead(inputs, state)
    for window in windows:
        if not window:
            continue
        run, ending = _take_window(window, state, inputs, options, settings)
        _score_window(state, run, settings.batch_size, progress, sink, engine)
        if state.whole.metrics:
            state.whole.score(ending, single=state.single, options=options,
                              judgments=inputs.judgments.source(),
                              batch_size=settings.batch_size, sink=sink, engine=engine)
        # The manifest hooks read a run of one window whole; of several, what is run-wide.
        state.last_run = run if state.single else Batch([], shared=state.shared)
        window = run = ending = None  # type: ignore[assignment]  # not held while the next is read
    turn_signers, whole_signers = _settle(state, inputs, options)
    summary = _summary(state, turn_signers, whole_signers, settings)
    return Results(sink.records(), summary,
                   _manifest(state, inputs, turn_signers, whole_signers, settings))


def _read_ahead(inputs: RunInputs, state: _RunState) -> Iterator[list[Record]]:
    """The run's windows, the first one or two read before anything is scored, every window
    joined into one where a metric needs every record at once or a pass over the records
    cannot read them twice; the passes made, over the window held or over the records read
    once more; the human labels' columns set up."""
    passes = _passes(state.metrics)
    one = (not all(m.streams() for m in state.metrics)
           or (bool(passes) and not inputs.records.rereadable()))
    windows, state.single = _ahead(inputs.windows(), one)
    if passes:
        windows = list(windows) if state.single else windows
        state.passes = _made(passes, windows if state.single else inputs.windows(again=True))
    if inputs.human is not None:  # the metrics on a fixed scale (a rubric's) are calibrated
        state.labels = LabelColumns.of(inputs.human, [(str(m), m.score_range())
                                                      for m in state.metrics], inputs.source)
    return iter(windows)


def _take_window(window: list[Record], state: _RunState, inputs: RunInputs,
                 options: ScoreOptions, settings: RunSettings) -> tuple[Batch, list[Record]]:
    """A window taken in before it is scored: checked (its conversations, the metrics'
    hooks, the fields they need), digested as read, its judgments filled by the provider,
    its human labels kept. Returns the window's batch and the records of the conversations
    ending in it."""
    single, whole = state.single, state.whole
    run = Batch(window, shared=state.shared, passes=state.passes)
    _check_conversations(window, settings, inputs)
    state.digest.add(window)  # as read: judgments given during the run are not the set's
    ending = conversations_ending(window) if whole.metrics else []
    whole.digest.add(ending)  # what the whole-conversation metrics read of each
    for hooks, group in by_hooks(state.metrics):
        hooks.check(window, group)
    whole.check(ending)
    if inputs.provider is not None:
        window = _fill_judgments(run, state, inputs)
    if single:
        state.fields.require(window)
        # Every record is in: the metrics score under the options they sign with.
        state.metrics = settled(state.metrics, options, inputs.judgments.source())
    else:
        state.fields.note(window)
    if state.labels is not None:
        for name, labels in state.labels.take(window).items():
            state.parts.add_labels(name, labels)
        if single:
            _check_labels_found(state.labels)
    return run, ending


def _fill_judgments(run: Batch, state: _RunState, inputs: RunInputs) -> list[Record]:
    """The window's records with the provider's judgments, checked first; a run of one window
    is refused for missing fields before the provider's work, and accounted for after it."""
    provider = inputs.provider
    assert provider is not None
    if state.single:  # the run's records are in: refused before the provider's work
        state.fields.require(run.records, but="judgments")
    provider.check(run.records)
    run.records = provider.fill(run.records, run)
    if state.single:
        _provided(provider, run, inputs, state.extra)
    return run.records


def _settle(state: _RunState, inputs: RunInputs,
            options: ScoreOptions) -> tuple[list[Metric], list[Metric]]:
    """Once every record was read: where the judgments came from (qrels may have matched
    none), the metrics of turns and of whole conversations under the options they sign with,
    and what a run of several windows checks at its end."""
    if inputs.provider is not None and not state.single:
        _provided(inputs.provider, state.last_run, inputs, state.extra)
    turn_signers = settled(state.metrics, options, inputs.judgments.source())
    whole_signers = settled(state.whole.metrics, options, inputs.judgments.source())
    if state.whole.metrics and not state.whole.count:
        raise state.whole.no_conversations()
    if not state.single:
        state.fields.check()
        state.whole.fields.check()
        if state.labels is not None:
            _check_labels_found(state.labels)
    return turn_signers, whole_signers


def _summary(state: _RunState, turn_signers: list[Metric], whole_signers: list[Metric],
             settings: RunSettings) -> dict[str, Any]:
    """Each output's summary, each value with the range its metric declares (for every
    channel that shows it), in the order the metrics were asked for."""
    summary = {**state.parts.summarise(turn_signers, settings.seed, settings.bootstrap,
                                       noise=settings.resample_samples),
               **state.whole.parts.summarise(whole_signers, settings.seed, settings.bootstrap)}
    return {name: replace(summary[name], scale=m.output_scale(name))
            for m in state.signers(turn_signers, whole_signers) for name in m.output_names()}


def _manifest(state: _RunState, inputs: RunInputs, turn_signers: list[Metric],
              whole_signers: list[Metric], settings: RunSettings) -> dict[str, Any]:
    """The run's manifest: where its records came from (and how to read them again, when an
    input spec named them), its metrics' and hooks' sections, what it scored."""
    whole, extra = state.whole, state.extra
    for hooks, group in by_hooks([*state.metrics, *whole.metrics, *state.helpers]):
        extra[hooks.section] = hooks.manifest(state.last_run, group)
    extra["data"] = state.digest.manifest(*_data_needs(turn_signers))
    if whole.metrics:  # their evaluation set is the conversations, digested apart
        extra["data"]["metrics"].update(
            whole.digest.manifest(*_data_needs(whole_signers))["metrics"])
    if state.parts.groups.conversations:
        extra["conversations"] = {"count": state.parts.groups.conversations,
                                  "turns": state.parts.groups.turns, **state.rules.to_json()}
    if state.labels is not None:
        extra["human_labels"] = {"field": state.labels.field, "records": state.labels.found,
                                 "metrics": list(state.labels.scales)}
    described = {} if inputs.manifest is None else {"inputs": inputs.manifest}
    return run_manifest({"source": inputs.source, "count": state.count, **described},
                        state.signers(turn_signers, whole_signers), state.helpers,
                        settings.seed, settings.bootstrap, extra, ci=settings.ci)


def _provided(provider: JudgmentsProvider, run: Batch, inputs: RunInputs,
              extra: dict[str, Any]) -> None:
    """Once every record is filled: where the run's judgments came from, the provider's
    label built on the qrels' or the records' own, and its manifest section."""
    source, extra[provider.section] = provider.account(run, inputs.judgments.source())
    inputs.judgments.provided(source)


def _ahead(windows: Iterator[list[Record]], one: bool,
           ) -> tuple[Iterator[list[Record]], bool]:
    """The windows, the first one or two read before anything is scored (``one``: every
    window joined into one), and whether the run is a single window."""
    first = next(windows, None)
    following = next(windows, None) if first is not None else None
    if first is None or (not first and following is None):
        raise UsageError("no records to score")
    if following is None:
        return _chain([first], windows), True
    if one:  # a metric that needs every record at once, or a pass over records read once
        joined = [*first, *following, *(r for window in windows for r in window)]
        return _chain([joined], iter(())), True
    return _chain([first, following], windows), False


def _passes(metrics: list[Metric]) -> dict[Hashable, RunPass]:
    """The passes over the run its metrics read, one per key."""
    passes: dict[Hashable, RunPass] = {}
    for metric in metrics:
        run_pass = metric.run_pass()
        if run_pass is not None:
            passes.setdefault(run_pass.key, run_pass)
    return passes


def _made(passes: dict[Hashable, RunPass],
          windows: Iterable[list[Record]]) -> dict[Hashable, Any]:
    """The passes' results over every window of the run."""
    for window in windows:
        for run_pass in passes.values():
            run_pass.add(window)
    return {key: run_pass.result() for key, run_pass in passes.items()}


def _chain(ahead: list[list[Record]], rest: Iterator[list[Record]]) -> Iterator[list[Record]]:
    """The windows read ahead, then the rest, each let go of here once handed over."""
    while ahead:
        yield ahead.pop(0)
    yield from rest


class _RunState:
    """What a run keeps between its phases and its windows: its metrics (of turns, and of
    whole conversations apart), how its summary is kept, what it read and checked."""

    def __init__(self, resolved: list[Metric], settings: RunSettings,
                 provider: JudgmentsProvider | None) -> None:
        self.order = {str(m): i for i, m in enumerate(resolved)}  # as the metrics were asked
        self.metrics = [m for m in resolved if m.level != "conversation"]
        # How the summary is kept: the bootstrap's seed and resamples, and how many records
        # keep every value (see rageval.engine.summary.SummaryParts).
        self.parts_options: dict[str, Any] = {
            "seed": settings.seed, "bootstrap": settings.bootstrap,
            "exact_records": settings.exact_records}
        self.parts = SummaryParts(self.metrics, **self.parts_options)
        self.fields = NeededFields({str(m): m.needs for m in self.metrics})
        self.shared: dict[Any, Any] = {}
        self.whole = WholeConversations([m for m in resolved if m.level == "conversation"],
                                        self.shared, self.parts_options)
        # A threshold on no output of the run's turns is refused before anything is read.
        self.rules = _turn_rules(self.metrics, self.whole.metrics, settings)
        self.helpers = provider.metrics() if provider is not None else []  # the provider's
        self.single = False  # whether the run is one window (every record read at once)
        self.count = 0
        self.last_run: Batch = Batch([])
        self.passes: dict[Hashable, Any] = {}  # the results of the metrics' passes
        self.labels: LabelColumns | None = None  # the human labels, when the run has them
        self.extra: dict[str, Any] = {}  # the manifest's sections beside the metrics'
        # What was scored, for telling a baseline of other data (the manifest's "data").
        self.digest = DataDigest(field for m in self.metrics for field in m.needs)

    def signers(self, turns: list[Metric], wholes: list[Metric]) -> list[Metric]:
        """The settled metrics of turns and of whole conversations, in the order asked."""
        return sorted([*turns, *wholes], key=lambda m: self.order[str(m)])


def _score_window(state: _RunState, run: Batch, batch_size: int,
                  progress: ProgressHook | None, sink: Sink, engine: Engine) -> None:
    """Score a window batch by batch on the engine, in order: each batch's per-record
    results go to the sink and what the summary needs to the run's parts. ``progress`` is
    told the run's size when the window is the whole run."""
    done = state.count
    total = len(run.records) if state.single else None
    start = 0
    for scored in engine.score(state.metrics, run, batch_size):
        state.parts.add_records(run.records[start : start + len(scored.block)])
        start += len(scored.block)
        sink.write(scored.block)
        for metric, (part, reasons) in zip(state.metrics, scored.parts, strict=True):
            state.parts.add_part(metric, part, reasons)
        merge_run_wide(state.shared, scored.run_wide)
        done += len(scored.block)
        if progress is not None:
            progress(done, total)
    state.count += len(run.records)


def _check_conversations(window: list[Record], settings: RunSettings,
                         inputs: RunInputs) -> None:
    """A run of conversations resamples conversations: the options that resample records
    (within records, or against human labels) are refused before its first is scored."""
    if not any(record.conversation is not None for record in window):
        return
    if settings.resample_samples:
        raise UsageError(f"--ci {settings.ci} resamples the samples within records; a run "
                         "of conversations resamples conversations: leave --ci out")
    if inputs.human is not None:
        raise UsageError("human labels calibrate record by record; a run of conversations "
                         "is summed up by conversation: leave --human out")


def _data_needs(metrics: list[Metric]) -> tuple[dict[str, Any], dict[str, str]]:
    """What each output reads of the records, and the graders' configuration, by output."""
    return ({name: m.needs for m in metrics for name in m.output_names()},
            {name: m.grading() for m in metrics if m.grades for name in m.output_names()})


def _turn_rules(metrics: list[Metric], wholes: list[Metric],
                settings: RunSettings) -> TurnRules:
    """How conversations.jsonl rates turns; a threshold on no output of the run's turns is
    refused before anything is read."""
    outputs = [name for m in metrics for name in m.output_names()]
    for name in settings.turn_thresholds:
        if name not in outputs:
            hint = did_you_mean(name, outputs, n=3)
            raise UsageError(f"turn threshold {name}: not an output scored per turn in this "
                             f"run{'; ' + hint if hint else ''}")
    lower = frozenset(name for m in metrics for name in m.output_names()
                      if m.lower_is_better(name))
    whole = tuple(name for m in wholes for name in m.output_names())
    return TurnRules(dict(settings.turn_thresholds), lower, whole)


def _check_labels_found(labels: LabelColumns) -> None:
    if labels.found == 0:
        raise UsageError(f"human labels: no record of {labels.source} has a field "
                         f"{labels.field!r}")


def _resolve(metrics: Iterable[str | Metric], options: ScoreOptions) -> list[Metric]:
    if isinstance(metrics, str):
        metrics = [metrics]
    resolved: list[Metric] = []
    for item in metrics:
        if isinstance(item, Metric):
            # A metric object built elsewhere gets this run's options (and so its signature),
            # its progress hook included (which equality leaves out).
            same = item.options == options and item.options.steps is options.steps
            metric = item if same else item.with_options(options)
        else:
            metric = create(item, options)
        if str(metric) in {str(m) for m in resolved}:
            raise UsageError(f"metric {metric} requested twice")
        resolved.append(metric)
    if not resolved:
        raise UsageError("no metrics requested (e.g. -m ndcg@10)")
    return resolved
