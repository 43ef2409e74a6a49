"""The orchestrator: records x metrics -> :class:`~rageval.core.results.Results`.

One synchronous entry point, :func:`evaluate`. It resolves metric names, merges qrels, checks
before any scoring that every metric can score at least one record, scores in batches, and
aggregates each output (mean or corpus figure, seeded bootstrap CI, unscored counts with reasons).
"""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rageval.compare.stats import bootstrap_ci
from rageval.core.errors import InputError, UsageError
from rageval.core.records import Record, apply_judgments, load_records
from rageval.core.registry import Batch, Metric, MetricResult, ScoreOptions, create
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.core.version import __version__

if TYPE_CHECKING:
    from rageval.judge.options import JudgeOptions

# Which record field each "needs" entry refers to, and how to tell it is present.
_FIELD_PRESENT: dict[str, Callable[[Record], bool]] = {
    "judgments": lambda r: r.judgments is not None,
    "contexts": lambda r: bool(r.contexts),
    "answer": lambda r: r.answer is not None,
    "reference": lambda r: bool(r.references),
    "query": lambda r: r.query is not None,
}

ProgressHook = Callable[[int, int], None]  # (records done, records total)


def evaluate(
    records: Sequence[Record] | str | os.PathLike[str],
    metrics: Iterable[str | Metric],
    *,
    qrels: str | os.PathLike[str] | Mapping[str, Mapping[str, int]] | None = None,
    trec_convention: bool = False,
    seed: int = 0,
    bootstrap: int = 1000,
    batch_size: int = 1000,
    progress: ProgressHook | None = None,
    embedding_cache: str | None = None,
    judge: JudgeOptions | None = None,
    judgments_from: str | None = None,
    format: str | None = None,
    max_line_bytes: int | None = None,
) -> Results:
    """Score ``records`` with ``metrics`` and aggregate.

    ``records`` is a list of :class:`Record` or a path (JSONL, CSV, Parquet). ``metrics`` are
    names (``"ndcg@10"``) or metric objects. ``qrels`` (a TREC qrels path or a mapping
    ``{record_id: {doc_id: grade}}``) fills the judgments of records. ``trec_convention`` scores
    queries without relevant judgments as trec_eval does (0) instead of leaving them unscored.
    ``seed`` and ``bootstrap`` drive the CIs; ``progress`` is called after each batch.
    ``embedding_cache`` is where BERTScore keeps embeddings between runs (a directory, or
    ``"none"``); by default ``$RAGEVAL_EMBEDDING_CACHE`` or ``~/.cache/rageval/bertscore``.
    ``judge`` (a :class:`~rageval.judge.metric.JudgeOptions`) configures ``judge:*`` metrics:
    model, endpoint, cache, offline replay. ``judgments_from="judge"`` has the judge grade the
    contexts of records without judgments (``context_relevance``, 0-3) and uses the grades as
    their judgments (see :mod:`rageval.judge.judgments`). ``format`` and ``max_line_bytes``
    apply to every records file the run reads (see :func:`~rageval.core.records.load_records`).
    """
    started = time.perf_counter()
    _check_settings(seed, bootstrap, batch_size)
    source = str(records) if isinstance(records, (str, os.PathLike)) else "<memory>"
    loaded = (load_records(records, format=format, max_line_bytes=max_line_bytes)
              if isinstance(records, (str, os.PathLike)) else list(records))
    loaded, judgments_source = _with_qrels(loaded, qrels, source)
    if judgments_from is not None and judge is None:
        raise UsageError("judgments_from='judge' needs a judge (judge=JudgeOptions(model=...), "
                         "or --judge-model)")
    if judgments_from not in (None, "judge"):
        raise UsageError(f"judgments_from must be 'judge' or None, got {judgments_from!r}")
    run = Batch(loaded)
    graders: list[Metric] = []  # the judge metric grading contexts into judgments, if any
    judged_info = None
    if judgments_from == "judge":
        from rageval.judge.judgments import judge_judgments, judgments_metric, needs_grading
        from rageval.judge.run import check_judge

        grader = judgments_metric(ScoreOptions(trec_convention=trec_convention, judge=judge))
        graders.append(grader)
        check_judge([r for r in loaded if needs_grading(r)], graders)
        loaded, judged_info = judge_judgments(loaded, grader, run, judgments_source)
        judgments_source = judged_info.source
        run.records = loaded  # the run's records now carry the judged judgments
    options = ScoreOptions(trec_convention=trec_convention, judgments_source=judgments_source,
                           embedding_cache=embedding_cache, judge=judge,
                           max_line_bytes=max_line_bytes)
    resolved = _resolve(metrics, options)
    _check_inputs(loaded, resolved)
    if any(m.family == "judge" for m in resolved):
        from rageval.judge.run import check_judge

        check_judge(loaded, resolved)

    per_metric = _score_all(resolved, loaded, batch_size, progress, run)
    summary = {
        name: summary_item
        for metric, result in per_metric.items()
        for name, summary_item in _summarise(metric, result, seed, bootstrap).items()
    }
    manifest = _manifest(source, loaded, resolved, options, seed, bootstrap, started)
    if judged_info is not None:
        manifest["judged_judgments"] = judged_info.manifest()
    if any(m.family == "judge" for m in [*resolved, *graders]):
        from rageval.judge.run import judge_manifest

        manifest["judge"] = judge_manifest(run, [*resolved, *graders])
    return Results(_record_results(loaded, per_metric), summary, manifest)


def _with_qrels(
    records: list[Record],
    qrels: str | os.PathLike[str] | Mapping[str, Mapping[str, int]] | None,
    records_source: str,
) -> tuple[list[Record], str]:
    """Fill judgments from qrels; return the records and where their judgments came from."""
    if qrels is None:
        return records, "inline"
    if isinstance(qrels, Mapping):
        mapping, source = qrels, "<qrels mapping>"
    else:
        from rageval.retrieval.trec import read_qrels

        source = str(qrels)
        mapping = read_qrels(source).to_dict()
    filled = apply_judgments(records, mapping, source=source, records_source=records_source)
    from_qrels = sum(1 for r in records if r.id in mapping)
    if from_qrels == 0:
        raise InputError("no query id of the qrels matches a record id", path=source)
    inline = sum(1 for r in records if r.judgments is not None)
    return filled, "qrels" if inline == 0 else "mixed"


def _check_settings(seed: int, bootstrap: int, batch_size: int) -> None:
    for name, value, low in (("seed", seed, 0), ("bootstrap", bootstrap, 1),
                             ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UsageError(f"{name} must be an integer of at least {low}, got {value!r}")


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


def _check_inputs(records: list[Record], metrics: list[Metric]) -> None:
    """Stop before scoring when a metric could not score a single record."""
    if not records:
        raise UsageError("no records to score")
    for metric in metrics:
        for needed in sorted(metric.needs):
            if not any(_FIELD_PRESENT[needed](r) for r in records):
                hint = " (or give --qrels)" if needed == "judgments" else ""
                if needed == "contexts":
                    hint = " (every record's contexts list is empty)"
                raise UsageError(
                    f"metric {metric} needs '{needed}', and no record has it{hint}"
                )


def _score_all(
    metrics: list[Metric],
    records: list[Record],
    batch_size: int,
    progress: ProgressHook | None,
    run: Batch | None = None,
) -> dict[Metric, MetricResult]:
    """Score batch by batch; within a batch every metric shares the batch's cache (one ranking
    for all retrieval metrics, one tokenisation for all ROUGE variants)."""
    parts: dict[Metric, list[MetricResult]] = {m: [] for m in metrics}
    run = run if run is not None else Batch(records)
    for start in range(0, len(records), batch_size):
        batch = Batch(records[start : start + batch_size], run=run, scope=records)
        for metric in metrics:
            parts[metric].append(_checked(metric, batch, metric.score(batch)))
        if progress is not None:
            progress(start + len(batch), len(records))
    return {metric: _concat(results) for metric, results in parts.items()}


def _checked(metric: Metric, batch: Batch, result: MetricResult) -> MetricResult:
    """Check a metric's result and enforce "unscored is not zero" centrally: an infinite value
    becomes unscored, and every unscored headline value has a reason."""
    expected = metric.output_names()
    if list(result.values) != expected:
        raise RuntimeError(f"{metric} returned outputs {list(result.values)}, expected {expected}")
    for name, values in result.values.items():
        if len(values) != len(batch):
            raise RuntimeError(f"{metric} returned {len(values)} values for {name}, "
                               f"expected {len(batch)}")
        overflow = np.isinf(values)
        if overflow.any():
            values[overflow] = np.nan
            for i in np.flatnonzero(overflow):
                result.reasons[i] = result.reasons[i] or f"{name} is not finite (overflow)"
    headline = result.values[expected[0]]
    for i in np.flatnonzero(np.isnan(headline)):
        result.reasons[i] = result.reasons[i] or "undefined value"
    return result


def _concat(parts: list[MetricResult]) -> MetricResult:
    names = list(parts[0].values)
    details: list[dict[str, Any] | None] | None = None
    if any(p.details is not None for p in parts):
        details = [d for p in parts for d in (p.details or [None] * len(p.reasons))]
    return MetricResult(
        {n: np.concatenate([p.values[n] for p in parts]) for n in names},
        [r for p in parts for r in p.reasons],
        details,
    )


def _summarise(
    metric: Metric, result: MetricResult, seed: int, bootstrap: int
) -> dict[str, MetricSummary]:
    signature = metric.result_signature(result)
    reasons = Counter(r for r in result.reasons if r is not None)
    out: dict[str, MetricSummary] = {}
    for name, values in result.values.items():
        scored = ~np.isnan(values)
        kept = values[scored]
        indices = np.flatnonzero(scored)
        corpus = metric.corpus_value(result, indices) if len(kept) else None
        if corpus is not None and name == metric.output_names()[0]:
            value, aggregate = corpus, "corpus"
            ci = bootstrap_ci(
                kept, resamples=bootstrap, seed=seed,
                statistic=lambda idx, m=metric, r=result, ix=indices: m.corpus_value(r, ix[idx]),
            )
        else:
            value = float(kept.mean()) if len(kept) else None
            aggregate = "mean"
            ci = bootstrap_ci(kept, resamples=bootstrap, seed=seed)
        out[name] = MetricSummary(
            value, int(scored.sum()), int((~scored).sum()), ci, signature.format(),
            dict(reasons), aggregate, signature.format(short=True),
            in_table=name in metric.table_names(),
        )
    return out


def _record_results(
    records: list[Record], per_metric: dict[Metric, MetricResult]
) -> list[RecordResult]:
    rows = []
    for i, record in enumerate(records):
        scores: dict[str, float | None] = {}
        errors: dict[str, str] = {}
        details: dict[str, Any] = {}
        for metric, result in per_metric.items():
            for name, values in result.values.items():
                value = float(values[i])
                scores[name] = None if np.isnan(value) else value
            if result.reasons[i] is not None:
                errors[str(metric)] = result.reasons[i]
            if result.details is not None and result.details[i] is not None:
                details[str(metric)] = result.details[i]
        rows.append(RecordResult(record.id, scores, errors, details))
    return rows


def _manifest(
    source: str,
    records: list[Record],
    metrics: list[Metric],
    options: ScoreOptions,
    seed: int,
    bootstrap: int,
    started: float,
) -> dict[str, Any]:
    return {
        "rageval": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "records": {"source": source if source == "<memory>" else str(Path(source)),
                    "count": len(records)},
        "metrics": [str(m) for m in metrics],
        "judgments": options.judgments_source,
        "trec_convention": options.trec_convention,
        "bootstrap": {"resamples": bootstrap, "seed": seed, "level": 0.95,
                      "method": "percentile"},
        "versions": _versions(),
        "wall_time_s": round(time.perf_counter() - started, 3),
    }


# Libraries whose version can change a value; read from package metadata (nothing is imported).
_VERSIONED = ("numpy", "polars", "sacrebleu", "nltk", "bert-score", "transformers", "torch")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for package in _VERSIONED:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return out
