"""The public entry point :func:`evaluate`: reads what the caller names (records, qrels), turns
the keyword options into the run's :class:`~rageval.core.metric.ScoreOptions`, and hands the
work to the orchestrator."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rageval.core.errors import InputError, UsageError
from rageval.core.files import creatable
from rageval.core.metric import Metric, ScoreOptions
from rageval.core.records import Record, apply_judgments, iter_windows
from rageval.core.results import Results
from rageval.engine.local import Engine
from rageval.engine.sink import FileSink
from rageval.inputs import InputSpec, load_inputs
from rageval.orchestrator import ProgressHook, check_settings, run_metrics, stream_metrics

if TYPE_CHECKING:
    from rageval.core.progress import LoadProgress, StepProgress
    from rageval.judge.llm.options import JudgeOptions

__all__ = ["DEFAULT_RAY_WINDOW", "DEFAULT_WINDOW", "ENGINES", "evaluate"]

#: What can score a run's batches: this process, or a Ray cluster.
ENGINES = ("local", "ray")

#: Records read and scored together when a records file is streamed: large enough that the
#: judge keeps its requests flowing across batches, small enough that a window's records and
#: their derived data stay a few tens of MB.
DEFAULT_WINDOW = 10_000
#: The window on Ray: each window gets its own pool of actors, which load their models again
#: (BERTScore's), so a window there holds more blocks.
DEFAULT_RAY_WINDOW = 100_000


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
    out: str | os.PathLike[str] | None = None,
    window: int | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    ray_workers: int | None = None,
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
    ``judge`` (a :class:`~rageval.judge.llm.options.JudgeOptions`) configures ``judge:*`` metrics:
    model, endpoint, cache, offline replay. ``judgments_from="judge"`` has the judge grade the
    contexts of records without judgments (``context_relevance``, 0-3) and uses the grades as
    their judgments (see :mod:`rageval.judge.rubric.judgments`). ``format`` and ``max_line_bytes``
    apply to every records file the run reads (see :func:`~rageval.core.records.load_records`).

    A records file in rageval's own format is read and scored ``window`` records at a time
    (default :data:`DEFAULT_WINDOW`, or :data:`DEFAULT_RAY_WINDOW` on Ray; see
    docs/scale.md): memory holds one window of records, the summary's compact parts and,
    unless ``out`` names a run directory, every record's results. With ``out`` the
    per-record results go to ``out/records.jsonl`` as they finish and ``summary.json`` follows
    once the run is complete (the returned results read the records back from there when
    asked). Metrics that need every record at once (BERTScore with ``idf=true``, claim-level
    judging, ``judgments_from``) are scored over one window holding the whole run. Values
    never depend on ``window``.

    ``engine="ray"`` scores each window's batches on a Ray cluster (``pip install
    'rageval[ray]'``): the one at ``ray_address``, else a local one started for the run, with
    ``ray_workers`` actors (default: its CPUs, at most 8). Values, summaries and signatures
    are the local engine's.
    """
    started = time.perf_counter()
    check_settings(seed, bootstrap, batch_size)  # before anything is read
    if out is not None and (problem := creatable(out)) is not None:
        raise UsageError(f"out {os.fspath(out)}: cannot write the results there: {problem}")
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    if judgments_from == "judge" and judge is None:
        raise UsageError("judgments_from='judge' needs a judge (judge=JudgeOptions(model=...), "
                         "or --judge-model)")
    spec = records if isinstance(records, InputSpec) else None
    if spec is not None:  # the spec's own settings win over the keywords', as the more specific
        spec = replace(spec, format=spec.format or format,
                       max_line_bytes=(spec.max_line_bytes if spec.max_line_bytes is not None
                                       else max_line_bytes))
        max_line_bytes = spec.max_line_bytes
    qrels_in = _Qrels(qrels)
    if window is None:
        window = DEFAULT_RAY_WINDOW if engine == "ray" else DEFAULT_WINDOW
    windows, source, from_beir = _read(records if spec is None else spec, format,
                                       max_line_bytes, load_progress, window)
    if judgments_from is not None and not isinstance(windows, list):
        # The provider labels its judgments after those already there: read them all first.
        windows = [record for part in windows for record in part]
    windows = qrels_in.applied(windows, source)
    streamed = not isinstance(windows, list)
    if not streamed:  # held in memory: where the judgments came from is known before scoring
        judgments_source = "qrels" if from_beir else qrels_in.source()
    options = ScoreOptions(trec_convention=trec_convention,
                           judgments_source="qrels" if qrels is not None else "inline",
                           embedding_cache=embedding_cache, judge=judge,
                           max_line_bytes=max_line_bytes, steps=steps)
    if not streamed:
        options = replace(options, judgments_source=judgments_source)
    if steps is not None:
        # A metric object built elsewhere equals itself under these options (steps is not
        # compared), so the orchestrator would keep it, without the hook: hand it over.
        metrics = [m.with_options(options) if isinstance(m, Metric) else m
                   for m in ([metrics] if isinstance(metrics, str) else metrics)]
    sink = FileSink(out) if out is not None else None
    common = dict(source=source, judgments_from=judgments_from, seed=seed,
                  bootstrap=bootstrap, batch_size=batch_size, progress=progress,
                  started=started, sink=sink)
    with _engine(engine, ray_address, ray_workers) as scorer:
        if streamed:
            def signing() -> ScoreOptions:
                return replace(options, judgments_source=qrels_in.source())

            results = stream_metrics(windows, metrics, options, signing=signing,
                                     engine=scorer, **common)
        else:
            results = run_metrics(windows, metrics, options, engine=scorer, **common)
    if spec is not None:  # how to read the records again (rageval report)
        results.manifest["records"]["inputs"] = spec.to_manifest()
        if out is not None:
            results.write(out)  # the manifest changed after the run was written
    return results


def _read(records: Sequence[Record] | str | os.PathLike[str] | InputSpec, format: str | None,
          max_line_bytes: int | None, load_progress: LoadProgress | None, window: int,
          ) -> tuple[list[Record] | Iterator[list[Record]], str, bool]:
    """The records (a list, or windows of a records file read as the run goes), where they
    came from, and whether a BEIR qrels file judged them."""
    if isinstance(records, InputSpec) and not records.is_plain():
        inputs = load_inputs(records)
        return inputs.records, inputs.source, inputs.judgments_source is not None
    if isinstance(records, InputSpec):  # a records file read as rageval's own
        records, format = records.records or "", records.format
    if not isinstance(records, (str, os.PathLike)):
        return list(records), "<memory>", False
    windows = iter_windows(records, window, format=format, max_line_bytes=max_line_bytes,
                           progress=load_progress)
    return windows, str(Path(records)), False


@contextlib.contextmanager
def _engine(name: str, ray_address: str | None,
            ray_workers: int | None) -> Iterator[Engine | None]:
    """The engine that scores the batches (None: the local one)."""
    if name == "local":
        if ray_address is not None or ray_workers is not None:
            raise UsageError("ray_address and ray_workers go with engine='ray'")
        yield None
        return
    from rageval.engine.ray_engine import RayEngine

    with RayEngine(ray_address, ray_workers) as engine:
        yield engine


class _Qrels:
    """Judgments from qrels (a TREC qrels path or a mapping ``{record_id: {doc_id: grade}}``)
    filled into records as they are read, counting what they matched."""

    def __init__(self, qrels: str | os.PathLike[str] | Mapping[str, Mapping[str, int]] | None,
                 ) -> None:
        self.mapping: Mapping[str, Mapping[str, int]] | None = None
        self.path = "<qrels mapping>"
        if isinstance(qrels, Mapping):
            self.mapping = qrels
        elif qrels is not None:
            from rageval.retrieval.trec import read_qrels

            self.path = str(qrels)
            self.mapping = read_qrels(self.path).to_dict()
        self.matched = 0
        self.inline = 0

    def applied(self, windows: list[Record] | Iterator[list[Record]], records_source: str,
                ) -> list[Record] | Iterator[list[Record]]:
        if self.mapping is None:
            return windows
        if isinstance(windows, list):
            return self._fill(windows, records_source)
        return (self._fill(window, records_source) for window in windows)

    def _fill(self, records: list[Record], records_source: str) -> list[Record]:
        assert self.mapping is not None
        self.matched += sum(1 for r in records if r.id in self.mapping)
        self.inline += sum(1 for r in records if r.judgments is not None)
        return apply_judgments(records, self.mapping, source=self.path,
                               records_source=records_source)

    def source(self) -> str:
        """Where the records' judgments came from, once every record was filled."""
        if self.mapping is None:
            return "inline"
        if self.matched == 0:
            raise InputError("no query id of the qrels matches a record id", path=self.path)
        return "qrels" if self.inline == 0 else "mixed"
