"""The orchestrator: records x metrics -> :class:`~rageval.core.results.Results`, through the
metric lifecycle, naming no family.

:func:`run_metrics` takes a run's inputs whole (:class:`~rageval.inputs.run.RunInputs`: its
records, window by window, and their judgments) and its settings
(:class:`~rageval.engine.settings.RunSettings`), resolves metric names, and runs in named
phases (:class:`_Run`): planned, read ahead (the metrics' passes over the records made), each
window taken in (each metric's run hooks checking that the run can go ahead before anything is
read from outside, written or sent; digested; a judgments provider filling in the judgments of
records without any; every metric required to score at least one record) and scored (the
engine prepares it and scores it in batches, each batch's per-record results to a sink,
:mod:`rageval.engine.sink`, and what the summary needs kept, :mod:`rageval.summary.parts`),
settled once every record is in, summed up (mean or the metric's corpus figure, seeded
bootstrap CI, unscored counts with reasons), and its manifest written from the hooks'
sections. The public entry point is :func:`rageval.evaluate`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from rageval.core.errors import UsageError, did_you_mean
from rageval.core.manifest import run_manifest
from rageval.core.metric import Batch, Metric, ScoreOptions, by_hooks, settled
from rageval.core.providers import JudgmentsProvider
from rageval.core.records import Record
from rageval.core.records.label_file import LabelsFileColumns
from rageval.core.registry import create
from rageval.core.results import MetricSummary, Results
from rageval.core.results.conversations import TurnRules
from rageval.engine.group import MetricGroup, made
from rageval.engine.local import Engine, LocalEngine
from rageval.engine.settings import RunSettings
from rageval.engine.sink import MemorySink, Sink
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
    run = _Run(_resolve(metrics, options), inputs.provider, options, settings, progress, sink,
               engine)
    return run.results(inputs)


class _Run:
    """One run in progress: how it runs, what it keeps between its phases and its windows,
    and its phases, in order (:meth:`results`): planned before anything is read (here: a
    threshold on no output of its turns is refused), read ahead with the metrics' passes
    made, window by window taken in and scored, settled once every record is in, and summed
    up. The run's inputs and records are handed from phase to phase, never kept here.

    Its metrics are two groups (:class:`~rageval.engine.group.MetricGroup`): those of turns
    (records), and those of whole conversations (:mod:`rageval.engine.whole`)."""

    def __init__(self, resolved: list[Metric], provider: JudgmentsProvider | None,
                 options: ScoreOptions, settings: RunSettings, progress: ProgressHook | None,
                 sink: Sink, engine: Engine) -> None:
        self.options, self.settings = options, settings
        self.progress, self.sink, self.engine = progress, sink, engine
        self.order = {str(m): i for i, m in enumerate(resolved)}  # as the metrics were asked
        # How the summary is kept: the bootstrap's seed and resamples, and how many records
        # keep every value (see rageval.summary.parts.SummaryParts).
        parts_options: dict[str, Any] = {
            "seed": settings.seed, "bootstrap": settings.bootstrap,
            "exact_records": settings.exact_records}
        shared: dict[Any, Any] = {}  # the run-wide objects its batches share
        self.turns = MetricGroup([m for m in resolved if m.level != "conversation"], shared,
                                 parts_options)
        self.whole = WholeConversations([m for m in resolved if m.level == "conversation"],
                                        shared, parts_options)
        self.rules = _turn_rules(self.turns.metrics, self.whole.metrics, settings)
        self.helpers = provider.metrics() if provider is not None else []  # the provider's
        self.single = False  # whether the run is one window (every record read at once)
        self.last_batch: Batch = Batch([])
        self.passes: dict[Hashable, Any] = {}  # the results of the metrics' passes
        self.extra: dict[str, Any] = {}  # the manifest's sections beside the metrics'

    def results(self, inputs: RunInputs) -> Results:
        """The run's phases, in order."""
        for window in self.read_ahead(inputs):
            if not window:
                continue
            batch, conversations = self.take(window, inputs)
            self.score(batch, conversations)
            # The manifest hooks read a run of one window whole; of several, what is
            # run-wide.
            self.last_batch = batch if self.single else Batch([], shared=self.turns.shared)
            window = batch = conversations = None  # type: ignore[assignment]  # not held
        turn_signers, whole_signers = self.settle(inputs)
        return Results(self.sink.records(), self.summary(turn_signers, whole_signers),
                       self.manifest(turn_signers, whole_signers, inputs))

    def read_ahead(self, inputs: RunInputs) -> Iterator[list[Record]]:
        """The run's windows, the first one or two read before anything is scored, every
        window joined into one where a metric needs every record at once or a pass over the
        records cannot read them twice; the human labels' columns set up (before the records
        are read once more); the passes made, over the window held or over the records read
        once more."""
        passes = self.turns.passes()
        one = (not all(m.streams() for m in self.turns.metrics)
               or (bool(passes) and not inputs.records.rereadable()))
        windows, self.single = _ahead(inputs.windows(), one)
        if inputs.human is not None:  # the metrics on a fixed scale (a rubric's) are calibrated
            self.turns.calibrate(inputs.human, inputs.source)
        elif inputs.human_labels is not None:
            self.turns.calibrate_from_file(inputs.human_labels, inputs.allow_unknown_labels)
        if passes:
            windows = list(windows) if self.single else windows
            self.passes = made(passes, windows if self.single else inputs.windows(again=True))
        return iter(windows)

    def take(self, window: list[Record],
             inputs: RunInputs) -> tuple[Batch, Batch | None]:
        """A window taken in before anything of it is scored: checked (its conversations,
        the metrics' hooks, the fields they need), digested as read, its judgments filled by
        the provider, its human labels kept. Returns the window's batch and that of the
        conversations ending in it (None when none does)."""
        _check_conversations(window, self.settings,
                             inputs.human is not None or inputs.human_labels is not None)
        ending = conversations_ending(window) if self.whole.metrics else []
        self.turns.read(window)
        self.whole.read(ending)  # what the whole-conversation metrics read of each
        batch = Batch(window, shared=self.turns.shared, passes=self.passes)
        conversations = Batch(ending, shared=self.turns.shared) if ending else None
        if inputs.provider is not None:
            if self.single:  # the run's records are in: refused before the provider's work
                self.turns.fields.require(batch.records, but="judgments")
            inputs.fill_judgments(batch)
            if self.single:
                self.extra.update(inputs.provided(batch))
        if self.single:  # every record is in: the metrics settle on how they sign
            judgments = inputs.judgments.source()
            self.turns.require(batch.records, self.options, judgments)
            if self.whole.metrics and not ending:
                raise self.whole.no_conversations()
            self.whole.require(ending, self.options, judgments)
        else:
            self.turns.note(batch.records)
            self.whole.note(ending)
        return batch, conversations

    def score(self, batch: Batch, conversations: Batch | None) -> None:
        """Score a window: its records by the metrics of turns (``progress`` is told the
        run's size when the window is the whole run), then the conversations ending in it by
        those of whole conversations."""
        size = self.settings.batch_size
        self.turns.score(batch, batch_size=size, sink=self.sink, engine=self.engine,
                         progress=self.progress,
                         total=len(batch.records) if self.single else None)
        if conversations is not None:
            self.whole.score(conversations, batch_size=size, sink=self.sink,
                             engine=self.engine)

    def settle(self, inputs: RunInputs) -> tuple[list[Metric], list[Metric]]:
        """Once every record was read: where the judgments came from (qrels may have matched
        none), the metrics of turns and of whole conversations under the options they sign
        with, and what a run of several windows checks at its end."""
        judgments = inputs.judgments
        if inputs.provider is not None and not self.single:
            self.extra.update(inputs.provided(self.last_batch))
        turn_signers = settled(self.turns.metrics, self.options, judgments.source())
        whole_signers = settled(self.whole.metrics, self.options, judgments.source())
        if self.whole.metrics and not self.whole.count:
            raise self.whole.no_conversations()
        if not self.single:
            self.turns.finish()
            self.whole.finish()
        return turn_signers, whole_signers

    def summary(self, turn_signers: list[Metric],
                whole_signers: list[Metric]) -> dict[str, MetricSummary]:
        """Each output's summary, each value with the range its metric declares (for every
        channel that shows it), in the order the metrics were asked for."""
        seed, bootstrap = self.settings.seed, self.settings.bootstrap
        summary = {**self.turns.parts.summarise(turn_signers, seed, bootstrap,
                                                noise=self.settings.resample_samples),
                   **self.whole.parts.summarise(whole_signers, seed, bootstrap)}
        return {name: replace(summary[name], scale=m.output_scale(name))
                for m in self.signers(turn_signers, whole_signers)
                for name in m.output_names()}

    def manifest(self, turn_signers: list[Metric], whole_signers: list[Metric],
                 inputs: RunInputs) -> dict[str, Any]:
        """The run's manifest: where its records came from (and how to read them again, when
        an input spec named them), its metrics' and hooks' sections, what it scored."""
        turns, whole, extra, labels = self.turns, self.whole, self.extra, self.turns.labels
        for hooks, group in by_hooks([*turns.metrics, *whole.metrics, *self.helpers]):
            extra[hooks.section] = hooks.manifest(self.last_batch, group)
        extra["data"] = turns.data(turn_signers)
        if whole.metrics:  # their evaluation set is the conversations, digested apart
            extra["data"]["metrics"].update(whole.data(whole_signers)["metrics"])
        groups = turns.parts.groups
        if groups.conversations:
            extra["conversations"] = {"count": groups.conversations, "turns": groups.turns,
                                      **self.rules.to_json()}
        if isinstance(labels, LabelsFileColumns):
            extra["human_labels"] = labels_manifest(labels)
        elif labels is not None:
            extra["human_labels"] = {"field": labels.field, "records": labels.found,
                                     "metrics": list(labels.scales)}
        settings = self.settings
        described = {} if inputs.manifest is None else {"inputs": inputs.manifest}
        return run_manifest({"source": inputs.source, "count": turns.count, **described},
                            self.signers(turn_signers, whole_signers), self.helpers,
                            settings.seed, settings.bootstrap, extra, ci=settings.ci)

    def signers(self, turns: list[Metric], wholes: list[Metric]) -> list[Metric]:
        """The settled metrics of turns and of whole conversations, in the order asked."""
        return sorted([*turns, *wholes], key=lambda m: self.order[str(m)])


def labels_manifest(labels: LabelsFileColumns) -> dict[str, Any]:
    """The manifest's record of a labels file: per metric, the labelled count, each
    annotator's count, the selection, and the annotators' agreement where two or more
    labelled common records."""
    from rageval.stats.agreement import annotator_agreement  # runs with a labels file alone

    out = labels.describe()
    for name, item in out["metrics"].items():
        agreement = annotator_agreement(labels.ratings(name), labels.scales[name])
        if agreement is not None:
            item["agreement"] = agreement
    return out


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


def _chain(ahead: list[list[Record]], rest: Iterator[list[Record]]) -> Iterator[list[Record]]:
    """The windows read ahead, then the rest, each let go of here once handed over."""
    while ahead:
        yield ahead.pop(0)
    yield from rest


def _check_conversations(window: list[Record], settings: RunSettings,
                         human: bool) -> None:
    """A run of conversations resamples conversations: the options that resample records
    (within records, or against human labels) are refused before its first is scored."""
    if not any(record.conversation is not None for record in window):
        return
    if settings.resample_samples:
        raise UsageError(f"--ci {settings.ci} resamples the samples within records; a run "
                         "of conversations resamples conversations: leave --ci out")
    if human:
        raise UsageError("human labels calibrate record by record; a run of conversations "
                         "is summed up by conversation: leave --human and --human-labels out")


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


def _resolve(metrics: Iterable[str | Metric], options: ScoreOptions) -> list[Metric]:
    if isinstance(metrics, str):
        metrics = [metrics]
    resolved: list[Metric] = []
    for item in metrics:
        if isinstance(item, Metric):
            # A metric object built elsewhere gets this run's options (and so its signature),
            # with the run's progress hook and run state.
            metric = item if item.options.same_run(options) else item.with_options(options)
        else:
            metric = create(item, options)
        if str(metric) in {str(m) for m in resolved}:
            raise UsageError(f"metric {metric} requested twice")
        resolved.append(metric)
    if not resolved:
        raise UsageError("no metrics requested (e.g. -m ndcg@10)")
    return resolved
