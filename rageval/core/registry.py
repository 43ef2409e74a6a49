"""Metric base class, parameter declarations and the name -> class table.

A metric is an immutable, parameterised value (the ir_measures idea): ``p(rel=2)@5`` is the class
registered as ``p`` built with ``rel=2`` and cutoff 5. A small table of :class:`Param` declarations
drives validation, the canonical name, the signature and ``rageval metrics``.

Metrics score a whole batch of records at once (BERTScore and the judge need batches); shared,
derived data for a batch (the columnar ranking of the retrieval metrics, say) lives in the
:class:`Batch` cache so that ten retrieval metrics build it once.
"""

from __future__ import annotations

import difflib
import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.names import MetricName, parse
from rageval.core.signature import Field, Signature
from rageval.core.version import __version__

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.judge.options import JudgeOptions

CutoffRule = Literal["none", "optional", "required"]


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter: its name, type, default, allowed values and meaning."""

    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None

    def convert(self, raw: Any, metric: str) -> Any:
        value = self._coerce(raw, metric)
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise UsageError(f"{metric}: {self.name}={raw} is not one of: {allowed}")
        if self.minimum is not None and value < self.minimum:
            raise UsageError(f"{metric}: {self.name}={raw} must be at least {self.minimum:g}")
        return value

    def _coerce(self, raw: Any, metric: str) -> Any:
        if isinstance(raw, self.type) and not (self.type is int and isinstance(raw, bool)):
            return raw
        if not isinstance(raw, str):
            raise UsageError(f"{metric}: {self.name} must be {self.type.__name__}, got {raw!r}")
        try:
            if self.type is bool:
                return _parse_bool(raw)
            return self.type(raw)
        except ValueError:
            raise UsageError(
                f"{metric}: {self.name}={raw} is not a valid {self.type.__name__}"
            ) from None


def _parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(raw)


@dataclass(frozen=True)
class ScoreOptions:
    """Run-wide options that change how a metric treats undefined cases (part of signatures)."""

    # trec_eval scores a query with no relevant judgments as 0; rageval leaves it unscored.
    trec_convention: bool = False
    judgments_source: str = "inline"
    # Where BERTScore keeps embeddings between runs ("none": nowhere); None: its own default.
    # Changes speed only, never a value, so it is not part of any signature.
    embedding_cache: str | None = None
    # How the LLM judge is reached and cached (judge:* metrics); see rageval.judge.metric.
    judge: JudgeOptions | None = None
    # The longest line read from any records file of the run (None: the loader's default).
    max_line_bytes: int | None = None


class Batch:
    """The records scored together, plus a cache of data derived from them.

    ``run`` is the whole run the batch belongs to (a Batch of every record ``evaluate`` scores,
    whose cache all its batches share), for statistics over the run such as BERTScore's idf over
    all references. A batch built on its own is its own run.
    """

    def __init__(self, records: Sequence[Record], run: Batch | None = None,
                 scope: Sequence[Record] | None = None) -> None:
        self.records = records
        self._cache: dict[Any, Any] = {}
        self.run: Batch = self if run is None else run
        # The records scored batch by batch in the same pass, this batch among them (default:
        # this batch alone): a metric may prepare work for all of them at once (the judge).
        self.scope: Sequence[Record] = records if scope is None else scope

    def __len__(self) -> int:
        return len(self.records)

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


NO_ANSWER = "no answer (the record has no 'answer')"
NO_REFERENCE = "no reference (the record has no 'reference')"


def answer_reference_reason(record: Record) -> str | None:
    """Why a generation metric cannot score a record (no answer or no reference), or None."""
    if record.answer is None:
        return NO_ANSWER
    if not record.references:
        return NO_REFERENCE
    return None


@dataclass
class MetricResult:
    """What a metric returns for a batch.

    ``values`` maps output names (the headline name and any components such as
    ``bertscore.precision``) to float arrays aligned with the batch, NaN where unscored;
    ``reasons[i]`` explains why record ``i`` is unscored (None when scored); ``details[i]`` is an
    optional per-record dict (judge reasoning, BLEU statistics, ...).
    """

    values: dict[str, np.ndarray]
    reasons: list[str | None]
    details: list[dict[str, Any] | None] | None = None


class Metric(ABC):
    """Base class of every metric. Subclasses declare class attributes and implement ``score``."""

    family: ClassVar[str]  # "retrieval", "lexical", "semantic", "judge"
    base: ClassVar[str]  # registered base name, e.g. "ndcg"
    params: ClassVar[tuple[Param, ...]] = ()
    cutoff_rule: ClassVar[CutoffRule] = "none"
    summary: ClassVar[str]  # one-line definition for `rageval metrics`
    needs: ClassVar[frozenset[str]] = frozenset()  # record fields required: "contexts", ...

    _frozen: bool = False

    def __init__(
        self,
        cutoff: int | None = None,
        options: ScoreOptions | None = None,
        **params: Any,
    ) -> None:
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

    def table_names(self) -> list[str]:
        """The outputs the terminal summary shows by default (every output is in the files)."""
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
        """A corpus-level figure over the given records, where the metric defines one.

        None means the summary value is the mean of the per-record headline values.
        """
        return None


def render_value(value: Any) -> str:
    """A parameter value as metric names write it (``true``, ``17``, ``roberta-large``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_REGISTRY: dict[str, type[Metric]] = {}
_NAMESPACES: dict[str, Callable[[MetricName, ScoreOptions], Metric]] = {}
_FAMILIES: list[tuple[re.Pattern[str], Callable[[str], type[Metric]]]] = []


def register(cls: type[Metric]) -> type[Metric]:
    """Class decorator: add a metric class to the name table."""
    if cls.base in _REGISTRY:
        raise ValueError(f"metric {cls.base!r} registered twice")
    _REGISTRY[cls.base] = cls
    return cls


def register_family(pattern: str, make_class: Callable[[str], type[Metric]]) -> None:
    """Bases matching ``pattern`` (e.g. ``rouge[0-9]+``) are built by ``make_class(base)``.

    For open-ended families such as ROUGE-N; ``make_class`` should return the same class for the
    same base so that equal names give equal metrics.
    """
    _FAMILIES.append((re.compile(pattern), make_class))


def register_namespace(
    namespace: str, factory: Callable[[MetricName, ScoreOptions], Metric]
) -> None:
    """Names like ``judge:faithfulness`` are built by a factory of their namespace."""
    _NAMESPACES[namespace] = factory


def metric_classes() -> dict[str, type[Metric]]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def create(name: str | MetricName, options: ScoreOptions | None = None) -> Metric:
    """Build the metric a name denotes; unknown names get "did you mean ...?"."""
    _load_builtin()
    parsed = parse(name) if isinstance(name, str) else name
    opts = options or ScoreOptions()
    if parsed.namespace is not None:
        factory = _NAMESPACES.get(parsed.namespace)
        if factory is None:
            raise UsageError(_unknown(parsed.namespace + ":", [f"{n}:" for n in _NAMESPACES]))
        return factory(parsed, opts)
    cls = _lookup(parsed.base)
    if cls is None:
        raise UsageError(_unknown(parsed.base, [*_REGISTRY, *_ALIASES]))
    return cls(cutoff=parsed.cutoff, options=opts, **dict(parsed.params))


def _lookup(base: str) -> type[Metric] | None:
    """Exact name, then case-insensitive name or alias, then a family pattern (``rouge3``)."""
    if base in _REGISTRY:
        return _REGISTRY[base]
    folded = {name.lower(): cls for name, cls in _REGISTRY.items()}
    key = base.lower()
    if key in folded:
        return folded[key]
    if key in _ALIASES:
        return _REGISTRY[_ALIASES[key]]
    for pattern, make_class in _FAMILIES:
        if pattern.fullmatch(key):
            return make_class(key)
    return None


def _unknown(what: str, known: list[str]) -> str:
    close = difflib.get_close_matches(what.lower(), known, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown metric {what!r}{hint} (`rageval metrics` lists them all)"


# Friendly aliases; the canonical name is the registered one.
_ALIASES: dict[str, str] = {
    "precision": "p",
    "success": "hit",
    "hit_rate": "hit",
    "recip_rank": "mrr",
    "r_precision": "rprec",
}

# Importing these modules registers their metrics; heavy libraries load lazily inside them.
BUILTIN_MODULES: tuple[str, ...] = (
    "rageval.retrieval.measures",
    "rageval.generation.rouge",
    "rageval.generation.bleu",
    "rageval.generation.bertscore",
    "rageval.judge.metric",
)
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
