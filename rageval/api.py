"""The public entry point :func:`evaluate`: turns its keywords into the run's settings
(:class:`~rageval.engine.settings.RunSettings`), options
(:class:`~rageval.core.metric.ScoreOptions`) and inputs
(:class:`~rageval.inputs.run.RunInputs`), each built once, and hands them to the
orchestrator."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from rageval.core.errors import UsageError
from rageval.core.metric import Metric, ScoreOptions
from rageval.core.records import Record
from rageval.core.registry import judgments_provider
from rageval.core.results import Results
from rageval.engine.settings import DEFAULT_RAY_WINDOW, DEFAULT_WINDOW, ENGINES, RunSettings
from rageval.inputs import InputSpec
from rageval.inputs.run import RunInputs
from rageval.orchestrator import ProgressHook, run_metrics

if TYPE_CHECKING:
    from rageval.core.progress import LoadProgress, StepProgress
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["DEFAULT_RAY_WINDOW", "DEFAULT_WINDOW", "ENGINES", "evaluate"]


def evaluate(
    records: Sequence[Record] | str | os.PathLike[str] | InputSpec,
    metrics: Iterable[str | Metric],
    *,
    qrels: str | os.PathLike[str] | Mapping[str, Mapping[str, int]] | None = None,
    trec_convention: bool = False,
    seed: int = 0,
    bootstrap: int = 1000,
    batch_size: int = 1000,
    ci: str = "records",
    progress: ProgressHook | None = None,
    load_progress: LoadProgress | None = None,
    steps: StepProgress | None = None,
    embedding_cache: str | None = None,
    judge: JudgeOptions | None = None,
    judgments_from: str | None = None,
    human: str | None = None,
    format: str | None = None,
    max_line_bytes: int | None = None,
    out: str | os.PathLike[str] | None = None,
    window: int | None = None,
    turn_thresholds: Mapping[str, float] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    ray_workers: int | None = None,
    human_labels: str | os.PathLike[str] | None = None,
    allow_unknown_labels: bool = False,
) -> Results:
    """Score ``records`` with ``metrics`` and aggregate.

    ``records`` is a list of :class:`Record`, a path (JSONL, CSV, Parquet), or an
    :class:`~rageval.inputs.InputSpec` naming files in another format (ragas-style columns, a
    TREC RAG run, a TREC run joined with BEIR queries, corpus and qrels; see docs/inputs.md).
    ``metrics`` are names (``"ndcg@10"``) or metric objects. ``qrels`` (a TREC qrels path or a
    mapping ``{record_id: {doc_id: grade}}``) fills the judgments of records.
    ``trec_convention`` scores queries without relevant judgments as trec_eval does (0) instead
    of leaving them unscored.
    ``seed`` and ``bootstrap`` drive the CIs; ``ci="judge-noise"`` draws the CI of a judge
    metric asked several times per record (``JudgeOptions(samples=N)``) from the records and
    then each record's samples, so that it holds the judge's own noise (docs/judge.md);
    ``ci="poisson"`` draws every CI from running sums with Poisson weights, as a run past
    100,000 records does (docs/scale.md).
    ``progress`` is called after each batch.
    ``load_progress`` is told how far a records file has been read (``(done, total)``, see
    :func:`~rageval.core.records.load_records`); ``steps`` (a
    :class:`~rageval.core.progress.StepProgress`) how far the long steps inside metrics are
    (BERTScore's embedding). Neither changes a value or a signature.
    ``embedding_cache`` is where BERTScore keeps embeddings between runs (a directory, or
    ``"none"``); by default ``$RAGEVAL_EMBEDDING_CACHE`` or ``~/.cache/rageval/bertscore``.
    ``judge`` (a :class:`~rageval.judge.llm.options.JudgeOptions`) configures ``judge:*`` metrics:
    model, endpoint, cache, offline replay. ``judgments_from="judge"`` has the judge grade the
    contexts of records without judgments (``context_relevance``, 0-3) and uses the grades as
    their judgments (see :mod:`rageval.judge.rubric.judgments`). ``human`` names a field of
    the records holding human labels (a number, or an object mapping metrics to numbers, as
    ``rageval agree --human`` reads them): each judge metric's summary then gives its mean
    calibrated by them (``calibrated``: prediction-powered inference, see docs/calibration.md).
    ``human_labels`` names a labels file (``rageval annotate``'s) that does so instead, its
    labels joined by record id and metric and averaged across annotators (active inference
    when they were actively selected); a label of a record the run does not have is an error
    unless ``allow_unknown_labels``. ``human`` and ``human_labels`` together are an error.
    ``format`` and ``max_line_bytes``
    apply to every records file the run reads (see :func:`~rageval.core.records.load_records`).

    A records file in rageval's own format is read and scored ``window`` records at a time
    (default :data:`DEFAULT_WINDOW`, or :data:`DEFAULT_RAY_WINDOW` on Ray; see
    docs/scale.md): memory holds one window of records, the summary's compact parts and,
    unless ``out`` names a run directory, every record's results. With ``out`` the
    per-record results go to ``out/records.jsonl`` as they finish and ``summary.json`` follows
    once the run is complete (the returned results read the records back from there when
    asked). BERTScore with ``idf=true`` counts its document frequencies in a pass over the
    references that reads the records file twice (an input read once, a pipe, is scored as
    one window); claim-level judging and ``judgments_from`` work window by window, their
    manifest sections summed over the run. Values never depend on ``window``.

    ``turn_thresholds`` (output name -> value) give, for a run with conversations, the value
    under which a turn fails (over which, where lower is better): each conversation's
    ``first_failing`` turn in :meth:`~rageval.core.results.Results.conversations` and
    ``conversations.jsonl`` (docs/conversations.md).

    ``engine="ray"`` scores each window's batches on a Ray cluster (``pip install
    'rageval[ray]'``): the one at ``ray_address``, else a local one started for the run, with
    ``ray_workers`` actors (default: its CPUs, at most 8). Values, summaries and signatures
    are the local engine's.
    """
    started = time.perf_counter()
    settings = RunSettings(seed=seed, bootstrap=bootstrap, batch_size=batch_size, window=window,
                           engine=engine, ray_address=ray_address, ray_workers=ray_workers,
                           out=out, ci=ci, turn_thresholds=dict(turn_thresholds or {}))
    # (every setting checked before anything is read)
    if isinstance(records, InputSpec) and records.max_line_bytes is not None:
        max_line_bytes = records.max_line_bytes  # the spec's own, as the more specific
    # Where the judgments came from is known once the records are read: the orchestrator
    # settles it (inputs.judgments) before the metrics sign with it.
    if judge is not None:  # a session of this run's own: runs reusing the options share none
        judge = judge.bound()
    options = ScoreOptions(trec_convention=trec_convention,
                           embedding_cache=embedding_cache, judge=judge,
                           max_line_bytes=max_line_bytes, steps=steps)
    provider = None
    if judgments_from is not None:
        if judgments_from == "judge" and judge is None:
            raise UsageError("judgments_from='judge' needs a judge (judge=JudgeOptions("
                             "model=...), or --judge-model)")
        provider = judgments_provider(judgments_from, options)
    inputs = RunInputs(records, qrels=qrels, provider=provider, human=human, format=format,
                       max_line_bytes=max_line_bytes, window=settings.window_size,
                       progress=load_progress, human_labels=human_labels,
                       allow_unknown_labels=allow_unknown_labels)
    with settings.scorer() as scorer:
        return run_metrics(inputs, metrics, options, settings, progress=progress,
                           started=started, engine=scorer)
