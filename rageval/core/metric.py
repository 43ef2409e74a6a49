"""The metric base class, its parameter declarations and its run lifecycle.

A metric is an immutable, parameterised value (the ir_measures idea): ``p(rel=2)@5`` is the class
registered as ``p`` built with ``rel=2`` and cutoff 5. A small table of :class:`Param` declarations
drives validation, the canonical name, the signature and ``rageval metrics``.

Metrics score a whole batch of records at once; derived data for a batch (the retrieval
metrics' columnar ranking) lives in the :class:`Batch` cache, built once, each value in a
:class:`Slot` that names its type (``batch.cached(RANKING, build)`` is a ranking). Work a kind
of metric does around scoring (checks before anything is read or sent, preparation of each
window, a manifest section) goes through :class:`RunHooks`, statistics over the whole run through a
:class:`RunPass`, so the orchestrator calls every family the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.names import MetricName
from rageval.core.params import Param, render_value
from rageval.core.records.model import CONTEXTS_WITHOUT_TEXT
from rageval.core.scale import UNBOUNDED, Scale
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__

if TYPE_CHECKING:
    from rageval.core.records import Record

CutoffRule = Literal["none", "optional", "required"]

T = TypeVar("T")


@dataclass(frozen=True)
class Slot(Generic[T]):
    """Where a batch keeps one value of type ``T`` derived from its records, or a run one
    value every window shares: ``Slot[Ranking]("ranking")``. Slots with equal ``name`` are
    the same slot (a name can hold the parts that tell apart the values of one kind, e.g. a
    metric's settings)."""

    name: Hashable


@dataclass(frozen=True)
class ScoreOptions:
    """Run-wide options that change how a metric treats undefined cases (part of signatures)."""

    # trec_eval scores a query with no relevant judgments as 0; rageval leaves it unscored.
    trec_convention: bool = False
    judgments_source: str = "inline"
    # Where BERTScore keeps embeddings between runs ("none": nowhere); None: its own default.
    # Changes speed only, never a value, so it is not part of any signature.
    embedding_cache: str | None = None
    # How the LLM judge is reached and cached (judge:* metrics): a frozen options object of
    # the judge family (rageval.judge.llm.options.JudgeOptions), opaque down here.
    judge: Any = None
    # The longest line read from any records file of the run (None: the loader's default).
    max_line_bytes: int | None = None
    # Where long steps of a metric report progress: a rageval.core.progress.StepProgress, or
    # None. It never changes a value, so it is left out of equality and hashing (a metric
    # built with or without it is the same metric) and of every signature.
    steps: Any = field(default=None, compare=False, repr=False)

    def same_run(self, other: ScoreOptions) -> bool:
        """Whether these options are ``other`` as a run uses them: equal, with the same progress
        hook and the same run state of the judge (its session), which equality leaves out."""
        return (self == other and self.steps is other.steps
                and getattr(self.judge, "session", None) is getattr(other.judge, "session", None))


class Batch:
    """The records scored together, plus a cache of data derived from them. ``run`` is the
    window the batch belongs to (a Batch whose cache all its batches share; a run held in
    memory is one window); a batch built on its own is its own run."""

    def __init__(self, records: Sequence[Record], run: Batch | None = None,
                 scope: Sequence[Record] | None = None,
                 shared: dict[Any, Any] | None = None,
                 passes: Mapping[Hashable, Any] | None = None) -> None:
        self.records = records
        self._cache: dict[Any, Any] = {}
        self.run: Batch = self if run is None else run
        # The records scored batch by batch in the same pass, this batch among them (default:
        # this batch alone): a metric may prepare work for all of them at once (the judge).
        self.scope: Sequence[Record] = records if scope is None else scope
        # What outlives a window (counters for the manifest): every window's run Batch is
        # given the same dict; else the run's cache. So are the results of the run's passes.
        if shared is None:
            shared = self._cache if run is None else run._shared
        self._shared: dict[Any, Any] = shared
        self.passes: Mapping[Hashable, Any] = (
            passes if passes is not None else {} if run is None else run.passes)

    def __len__(self) -> int:
        return len(self.records)

    def cached(self, slot: Slot[T], build: Callable[[], T]) -> T:
        """Data derived from these records, built once (dropped with the batch)."""
        if slot not in self._cache:
            self._cache[slot] = build()
        value: T = self._cache[slot]
        return value

    def run_wide(self, slot: Slot[T], build: Callable[[], T]) -> T:
        """An object every window of the run shares (a counter the manifest reports), built
        once per run (a Ray worker's come back with its batches, merged: see the engines)."""
        if slot not in self._shared:
            self._shared[slot] = build()
        value: T = self._shared[slot]
        return value

    def passed(self, run_pass: RunPass[T]) -> T:
        """The result of ``run_pass`` over every record of the run: the run's pass, made before
        scoring, or (a batch scored outside a run) one over this batch's run, made here."""
        if run_pass.key in self.run.passes:
            return self.run.passes[run_pass.key]

        def made() -> T:
            run_pass.add(self.run.records)
            return run_pass.result()

        return self.run.cached(Slot[T](("run pass", run_pass.key)), made)


class RunPass(ABC, Generic[T]):
    """Statistics over every record of the run a metric needs before it scores any (BERTScore's
    idf), counted window by window in a pass of their own before the run is scored and handed
    to every batch, on any engine. Passes with equal :attr:`key` are made once per run."""

    key: Hashable

    @abstractmethod
    def add(self, records: Sequence[Record]) -> None:
        """Count one window of the run's records."""

    @abstractmethod
    def result(self) -> T:
        """What the batches read (picklable: an engine may score elsewhere)."""


NO_ANSWER = "no answer (the record has no 'answer')"
NO_REFERENCE = "no reference (the record has no 'reference')"


def context_text_reason(record: Record) -> str | None:
    """Why a metric that reads the contexts' text cannot score ``record``, or None: some of its
    contexts have no text because its trace recorded the retrieved documents without their
    content (a reader of traces says so in :data:`CONTEXTS_WITHOUT_TEXT`). An empty context
    text alone is a text like any other."""
    note = record.extra.get(CONTEXTS_WITHOUT_TEXT)
    if not note or not record.contexts:
        return None
    empty = sum(not context.text for context in record.contexts)
    if not empty:
        return None
    carry = "carries" if empty == 1 else "carry"
    return (f"the contexts have no text: {empty} of {len(record.contexts)} retrieved documents "
            f"{carry} no content ({note})")


def answer_reference_reason(record: Record) -> str | None:
    """Why a generation metric cannot score a record (no answer or no reference), or None."""
    if record.answer is None:
        return NO_ANSWER
    if not record.references:
        return NO_REFERENCE
    return None


@dataclass
class MetricResult:
    """What a metric returns for a batch: ``values`` maps output names (the headline and any
    components such as ``bertscore.precision``) to float arrays aligned with the batch, NaN
    where unscored; ``reasons[i]`` says why record ``i`` is unscored (None when scored);
    ``details[i]`` is an optional per-record dict (judge reasoning, BLEU statistics, ...)."""

    values: dict[str, np.ndarray]
    reasons: list[str | None]
    details: list[dict[str, Any] | None] | None = None
    # Per-record sufficient statistics of a corpus figure, one row per record (BLEU's n-gram
    # counts): what the summary sums, so a streamed run need not keep every record's details.
    stats: np.ndarray | None = None


class Metric(ABC):
    """Base class of every metric. Subclasses declare class attributes and implement ``score``."""

    family: ClassVar[str]  # "retrieval", "lexical", "semantic", "judge"
    # The registered base name, e.g. "ndcg". A name-prefixed family ("judge:", "claims:")
    # names each of its metrics when it is made: ``__init__(name="judge:faithfulness")``.
    base: str
    params: ClassVar[tuple[Param, ...]] = ()
    cutoff_rule: ClassVar[CutoffRule] = "none"
    summary: ClassVar[str]  # one-line definition for `rageval metrics`
    # Record fields required: "contexts", ... (a name-prefixed family's, given to __init__).
    needs: frozenset[str] = frozenset()
    # What it scores: every record, a conversation's turns among them ("turn"), or each
    # conversation as a whole ("conversation": the run hands it one record per conversation,
    # with ``turn`` 0, and writes its values on the conversation's own line).
    level: str = "turn"
    # Whether the metric's configuration is part of the evaluation set, as a grader's is (a
    # judge's model, prompt and parameters set the scale of its values): see :meth:`grading`.
    grades: ClassVar[bool] = False
    # Signature keys that say where a grader is reached, not how it grades (left out of
    # :meth:`grading`: the same model behind another address grades the same).
    reached_at: ClassVar[frozenset[str]] = frozenset()
    hooks: ClassVar[RunHooks | None] = None  # work around scoring, shared (None: none)
    value_range: ClassVar[Scale] = UNBOUNDED  # the values' range (a ratio's is RATIO)
    libraries: ClassVar[tuple[str, ...]] = ()  # whose versions can change a value (manifest)
    _frozen: bool = False

    def __init__(
        self,
        cutoff: int | None = None,
        options: ScoreOptions | None = None,
        *,
        name: str | None = None,
        needs: Iterable[str] | None = None,
        **params: Any,
    ) -> None:
        if name is not None:  # a metric of a name-prefixed family, named as it is made
            self.base = name
        if needs is not None:
            self.needs = frozenset(needs)
        label = self.base
        if self.cutoff_rule == "none" and cutoff is not None:
            raise UsageError(f"{label} takes no cutoff '@{cutoff}'")
        if self.cutoff_rule == "required" and cutoff is None:
            raise UsageError(f"{label} needs a cutoff, e.g. '{label}@10'")
        if cutoff is not None and (isinstance(cutoff, bool) or int(cutoff) < 1):
            raise UsageError(f"{label}: the cutoff must be a positive integer, got {cutoff!r}")
        declared = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(declared))
        if unknown:
            known = ", ".join(declared) or "none"
            raise UsageError(f"{label}: unknown parameter(s) {', '.join(unknown)}; known: {known}")
        values = {
            name: (p.convert(params[name], label) if name in params else p.default)
            for name, p in declared.items()
        }
        self.cutoff = None if cutoff is None else int(cutoff)
        self.options = options or ScoreOptions()
        self.values: Mapping[str, Any] = MappingProxyType(values)
        self._frozen = True

    def with_options(self, options: ScoreOptions) -> Metric:
        """The same metric (same parameters and cutoff) under other run options."""
        return type(self)(cutoff=self.cutoff, options=options, **dict(self.values))

    def __setattr__(self, key: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(f"metric {self.name} is immutable")
        super().__setattr__(key, value)

    @property
    def name(self) -> MetricName:
        """Canonical name: parameters left at their defaults are omitted."""
        declared = {p.name: p for p in self.params}
        shown = tuple(
            (k, render_value(v)) for k, v in self.values.items() if v != declared[k].default
        )
        return MetricName(self.base, shown, self.cutoff)

    def __str__(self) -> str:
        return str(self.name)

    def __repr__(self) -> str:
        return f"<metric {self.name}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Metric):
            return NotImplemented
        return (str(self), self.options) == (str(other), other.options)

    def __hash__(self) -> int:
        return hash((str(self), self.options))

    def output_names(self) -> list[str]:
        """Names of the values this metric writes; the first is the headline."""
        return [str(self.name)]

    def lower_is_better(self, output: str) -> bool:
        """Whether lower values of ``output`` (one of :meth:`output_names`) are better."""
        return False

    def details_key(self) -> str:
        """The key of this metric's per-record details in ``records.jsonl``. Metrics that
        share one per-record analysis (the claim-level metrics: every ``claims:*`` reads the
        same claims and verdicts) share one key, so the analysis is written once per record."""
        return str(self.name)

    def table_names(self) -> list[str]:
        """The outputs the terminal summary shows by default (the files hold every output)."""
        return self.output_names()[:1]

    def signature(self) -> Signature:
        """Known before scoring: metric, every parameter, run options, versions last."""
        fields = [Field("metric", self.base, "m")]
        if self.cutoff is not None:
            fields.append(Field("cutoff", str(self.cutoff), "k"))
        fields += [Field(k, render_value(v)) for k, v in self.values.items()]
        fields += self.signature_extra()
        fields.append(Field("rageval", __version__, "v", version=True))
        return Signature.of(fields)

    def grading(self) -> str:
        """What of the evaluation set this metric's configuration is, for the run's data
        digest: for a grader (:attr:`grades`), its signature without versions; else nothing."""
        if not self.grades:
            return ""
        return Signature.of(f for f in self.signature().fields
                            if not f.version and f.key not in self.reached_at).format()

    def result_signature(self, result: MetricResult) -> Signature:
        """The signature written next to scored values; the same as :meth:`signature` unless a
        field can only be read from the data (sacrebleu's ``nrefs``)."""
        return self.signature()

    def signature_extra(self) -> list[Field]:
        """Metric-specific fields (judgment source, library versions, ...)."""
        return []

    @abstractmethod
    def score(self, batch: Batch) -> MetricResult:
        """Score every record of the batch."""

    def corpus_value(self, result: MetricResult, indices: np.ndarray) -> float | None:
        """A corpus-level figure over the given records, where the metric defines one (None:
        the summary value is the mean of the per-record headline values)."""
        return None

    def corpus_sums(self, stats: np.ndarray) -> np.ndarray | None:
        """For a metric with a corpus figure: the additive integer statistics of each row of a
        summary part's ``stats``, all a summary kept as running sums keeps of them (the
        figure is :meth:`corpus_from_sums` of their sum); None: no corpus figure."""
        return None

    def corpus_row(self, detail: Mapping[str, Any]) -> np.ndarray | None:
        """The additive statistics of one record from its ``details`` as ``records.jsonl``
        holds them (:meth:`corpus_from_sums` of their sum is the corpus figure), for
        ``rageval compare`` to recompute it on resamples and relabellings; None: no corpus
        figure."""
        return None

    def corpus_from_sums(self, sums: np.ndarray) -> float | None:
        """The corpus figure of records whose :meth:`corpus_sums` add up to ``sums``."""
        return None

    def summary_part(self, result: MetricResult) -> MetricResult:
        """What the summary keeps of a batch's result: the values, and what
        :meth:`corpus_value` and :meth:`result_signature` read (reasons are counted apart);
        the default drops the details."""
        return MetricResult(result.values, [], None, result.stats)

    def signature_rows(self, part: MetricResult) -> MetricResult:
        """What :meth:`result_signature` reads of a summary part once the summary no longer
        keeps every record: the details (the caller keeps distinct ones; the signature reads
        which values occur). A metric whose signature reads ``stats`` keeps the rows it needs."""
        return MetricResult({}, [], part.details, None)

    def summary_keeps_rows(self) -> bool:
        """Whether the summary reads every record's row of :meth:`summary_part` (agreement or
        stability over the records): then its parts are held whole, however long the run."""
        return False

    def streams(self) -> bool:
        """Whether the metric can score a run read window by window (False: it needs every
        record of the run at once)."""
        return True

    def run_pass(self) -> RunPass | None:
        """The pass over the run (:class:`RunPass`) this metric's scoring reads; None: none."""
        return None

    def summary_figures(self, result: MetricResult) -> dict[str, Any]:
        """Figures the summary reports beside the headline value, by key (a judge's stability)."""
        return {}

    def noise_samples(self, result: MetricResult) -> np.ndarray | None:
        """Per record, the values its headline is the mean of (a judge's samples, NaN after),
        which ``--ci judge-noise`` resamples within each record; None: one each."""
        return None

    def score_range(self) -> tuple[float, float] | None:
        """The headline's fixed scale, where grading needs it (a rubric's 1-5); else None."""
        return None

    def output_scale(self, output: str) -> Scale:
        """The range ``output``'s values take (:mod:`rageval.core.scale`), shown beside them:
        the fixed :meth:`score_range`, else :attr:`value_range`; components share it."""
        return self.score_range() or self.value_range


class RunHooks:
    """Work a kind of metric does once per run, around the per-batch ``score`` calls.

    Metrics that share an object of this class as their ``hooks`` are handed to it together
    (the judge metrics share one cache and one manifest section). :meth:`check` comes before
    anything is read from outside, written or sent; the engine calls :meth:`prepare` over each
    window's records (on Ray, each block's) before its batches; :meth:`manifest` comes after
    scoring, reading what the run kept run-wide. The default of each does nothing.
    """

    section: ClassVar[str]  # the manifest key :meth:`manifest` fills

    def check(self, records: Sequence[Record], metrics: Sequence[Metric]) -> None:
        """Raise a :class:`~rageval.core.errors.RagevalError` if the run cannot go ahead."""

    def prepare(self, run: Batch, metrics: Sequence[Metric]) -> None:
        """Work over a window's records, kept in ``run``'s cache for its batches."""

    def manifest(self, run: Batch, metrics: Sequence[Metric]) -> dict[str, Any] | None:
        """The manifest section of these metrics (None: none)."""
        return None


def by_hooks(metrics: Sequence[Metric]) -> list[tuple[RunHooks, list[Metric]]]:
    """The metrics grouped by the run hooks they share, in the order first met."""
    groups: dict[int, tuple[RunHooks, list[Metric]]] = {}
    for metric in metrics:
        if metric.hooks is not None:
            groups.setdefault(id(metric.hooks), (metric.hooks, []))[1].append(metric)
    return list(groups.values())


def settled(metrics: Sequence[Metric], options: ScoreOptions,
            judgments_source: str) -> list[Metric]:
    """The metrics under the run's ``options`` once the run knows where its judgments came
    from (what the retrieval metrics sign with); a metric already under them is kept."""
    options = replace(options, judgments_source=judgments_source)
    return [m if m.options == options else m.with_options(options) for m in metrics]
