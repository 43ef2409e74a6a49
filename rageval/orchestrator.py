"""The orchestrator: records x metrics -> :class:`~rageval.core.results.Results`, through the
metric lifecycle, naming no family.

:func:`run_metrics` resolves metric names, has each metric's run hooks check that the run can go
ahead before anything is read from outside, written or sent, lets a judgments provider fill in
the judgments of records without any, checks that every metric can score at least one record,
has the hooks prepare over the whole run, scores in batches, aggregates each output (mean or the
metric's corpus figure, seeded bootstrap CI, unscored counts with reasons), and collects the
manifest sections of the hooks. The public entry point is :func:`rageval.evaluate`.
"""

from __future__ import annotations

import platform
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import numpy as np

from rageval.compare.stats import bootstrap_ci
from rageval.core.errors import UsageError
from rageval.core.field_hints import field_hint
from rageval.core.metric import (
    Batch,
    JudgmentsProvider,
    Metric,
    MetricResult,
    RunHooks,
    ScoreOptions,
)
from rageval.core.records import Record
from rageval.core.registry import create, judgments_provider
from rageval.core.results import MetricSummary, RecordResult, Results
from rageval.core.version import __version__

# Which record field each "needs" entry refers to, and how to tell it is present.
_FIELD_PRESENT: dict[str, Callable[[Record], bool]] = {
    "judgments": lambda r: r.judgments is not None,
    "contexts": lambda r: bool(r.contexts),
    "answer": lambda r: r.answer is not None,
    "reference": lambda r: bool(r.references),
    "query": lambda r: r.query is not None,
}

ProgressHook = Callable[[int, int], None]  # (records done, records total)


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
) -> Results:
    """Score ``records`` with ``metrics`` under ``options`` and aggregate (see the module).

    ``started`` is the :func:`time.perf_counter` reading the run's wall time counts from (the
    caller's, when it read the records; default: now).
    """
    started = time.perf_counter() if started is None else started
    check_settings(seed, bootstrap, batch_size)
    if not records:
        raise UsageError("no records to score")
    provider = (judgments_provider(judgments_from, options) if judgments_from is not None
                else None)
    resolved = _resolve(metrics, options)
    for hooks, group in _by_hooks(resolved):
        hooks.check(records, group)
    run = Batch(records)
    extra: dict[str, Any] = {}
    if provider is not None:
        _check_inputs(records, resolved, but="judgments")  # before the provider's work
        records, resolved, options, extra[provider.section] = _fill_judgments(
            provider, records, resolved, options, run)
    _check_inputs(records, resolved)
    helpers = provider.metrics() if provider is not None else []
    for hooks, group in _by_hooks(resolved):
        hooks.prepare(run, group)
    per_metric = _score_all(resolved, records, batch_size, progress, run)
    summary = {
        name: summary_item
        for metric, result in per_metric.items()
        for name, summary_item in _summarise(metric, result, seed, bootstrap).items()
    }
    manifest = _manifest(source, records, resolved, helpers, options, seed, bootstrap)
    for hooks, group in _by_hooks([*resolved, *helpers]):
        extra[hooks.section] = hooks.manifest(run, group)
    _add_sections(manifest, extra)
    manifest["wall_time_s"] = round(time.perf_counter() - started, 3)
    return Results(_record_results(records, per_metric), summary, manifest)


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


def _check_inputs(records: list[Record], metrics: list[Metric], but: str | None = None) -> None:
    """Stop before scoring when a metric could not score a single record (``but``: a field
    left for later, when something is about to fill it)."""
    for metric in metrics:
        for needed in sorted(metric.needs - {but}):
            if not any(_FIELD_PRESENT[needed](r) for r in records):
                hint = field_hint(needed, {key for r in records for key in r.extra}) or {
                    "judgments": " (or give --qrels)",
                    "contexts": " (every record's contexts list is empty)",
                }.get(needed, "")
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
    """Score batch by batch; within a batch every metric shares the batch's cache, so what
    several metrics derive from the same records (a ranking, a tokenisation) is built once."""
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
                # Metrics that share one analysis (claim-level judging) share one key.
                details.setdefault(metric.details_key(), result.details[i])
        rows.append(RecordResult(record.id, scores, errors, details))
    return rows


def _manifest(
    source: str,
    records: list[Record],
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
        "records": {"source": source, "count": len(records)},
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
