"""The public entry point :func:`evaluate`: reads what the caller names (records, qrels), turns
the keyword options into the run's :class:`~rageval.core.metric.ScoreOptions`, and hands the
work to the orchestrator."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rageval.core.errors import InputError, UsageError
from rageval.core.metric import Metric, ScoreOptions
from rageval.core.records import Record, apply_judgments, load_records
from rageval.core.results import Results
from rageval.inputs import InputSpec, load_inputs
from rageval.orchestrator import ProgressHook, check_settings, run_metrics

if TYPE_CHECKING:
    from rageval.core.progress import LoadProgress, StepProgress
    from rageval.judge.options import JudgeOptions

__all__ = ["evaluate"]


def evaluate(
    records: Sequence[Record] | str | os.PathLike[str] | InputSpec,
    metrics: Iterable[str | Metric],
    *,
    qrels: str | os.PathLike[str] | Mapping[str, Mapping[str, int]] | None = None,
    trec_convention: bool = False,
    seed: int = 0,
    bootstrap: int = 1000,
    batch_size: int = 1000,
    progress: ProgressHook | None = None,
    load_progress: LoadProgress | None = None,
    steps: StepProgress | None = None,
    embedding_cache: str | None = None,
    judge: JudgeOptions | None = None,
    judgments_from: str | None = None,
    format: str | None = None,
    max_line_bytes: int | None = None,
) -> Results:
    """Score ``records`` with ``metrics`` and aggregate.

    ``records`` is a list of :class:`Record`, a path (JSONL, CSV, Parquet), or an
    :class:`~rageval.inputs.InputSpec` naming files in another format (ragas-style columns, a
    TREC RAG run, a TREC run joined with BEIR queries, corpus and qrels; see docs/inputs.md).
    ``metrics`` are names (``"ndcg@10"``) or metric objects. ``qrels`` (a TREC qrels path or a
    mapping ``{record_id: {doc_id: grade}}``) fills the judgments of records.
    ``trec_convention`` scores queries without relevant judgments as trec_eval does (0) instead
    of leaving them unscored.
    ``seed`` and ``bootstrap`` drive the CIs; ``progress`` is called after each batch.
    ``load_progress`` is told how far a records file has been read (``(done, total)``, see
    :func:`~rageval.core.records.load_records`); ``steps`` (a
    :class:`~rageval.core.progress.StepProgress`) how far the long steps inside metrics are
    (BERTScore's embedding). Neither changes a value or a signature.
    ``embedding_cache`` is where BERTScore keeps embeddings between runs (a directory, or
    ``"none"``); by default ``$RAGEVAL_EMBEDDING_CACHE`` or ``~/.cache/rageval/bertscore``.
    ``judge`` (a :class:`~rageval.judge.options.JudgeOptions`) configures ``judge:*`` metrics:
    model, endpoint, cache, offline replay. ``judgments_from="judge"`` has the judge grade the
    contexts of records without judgments (``context_relevance``, 0-3) and uses the grades as
    their judgments (see :mod:`rageval.judge.judgments`). ``format`` and ``max_line_bytes``
    apply to every records file the run reads (see :func:`~rageval.core.records.load_records`).
    """
    started = time.perf_counter()
    check_settings(seed, bootstrap, batch_size)  # before anything is read
    if judgments_from == "judge" and judge is None:
        raise UsageError("judgments_from='judge' needs a judge (judge=JudgeOptions(model=...), "
                         "or --judge-model)")
    spec = records if isinstance(records, InputSpec) else None
    if spec is not None:  # the spec's own settings win over the keywords', as the more specific
        spec = replace(spec, format=spec.format or format,
                       max_line_bytes=(spec.max_line_bytes if spec.max_line_bytes is not None
                                       else max_line_bytes))
        max_line_bytes = spec.max_line_bytes
    loaded, source, from_beir = _read(records if spec is None else spec, format, max_line_bytes,
                                      load_progress)
    loaded, judgments_source = _with_qrels(loaded, qrels, source)
    if from_beir:
        judgments_source = "qrels"  # a BEIR dataset's qrels file
    options = ScoreOptions(trec_convention=trec_convention, judgments_source=judgments_source,
                           embedding_cache=embedding_cache, judge=judge,
                           max_line_bytes=max_line_bytes, steps=steps)
    if steps is not None:
        # A metric object built elsewhere equals itself under these options (steps is not
        # compared), so the orchestrator would keep it, without the hook: hand it over.
        metrics = [m.with_options(options) if isinstance(m, Metric) else m
                   for m in ([metrics] if isinstance(metrics, str) else metrics)]
    results = run_metrics(loaded, metrics, options, source=source,
                          judgments_from=judgments_from, seed=seed, bootstrap=bootstrap,
                          batch_size=batch_size, progress=progress, started=started)
    if spec is not None:  # how to read the records again (rageval report)
        results.manifest["records"]["inputs"] = spec.to_manifest()
    return results


def _read(records: Sequence[Record] | str | os.PathLike[str] | InputSpec, format: str | None,
          max_line_bytes: int | None, load_progress: LoadProgress | None,
          ) -> tuple[list[Record], str, bool]:
    """The records, where they came from, and whether a BEIR qrels file judged them."""
    if isinstance(records, InputSpec) and not records.is_plain():
        inputs = load_inputs(records)
        return inputs.records, inputs.source, inputs.judgments_source is not None
    if isinstance(records, InputSpec):  # a records file read as rageval's own
        records, format = records.records or "", records.format
    if not isinstance(records, (str, os.PathLike)):
        return list(records), "<memory>", False
    loaded = load_records(records, format=format, max_line_bytes=max_line_bytes,
                          progress=load_progress)
    return loaded, str(Path(records)), False


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
