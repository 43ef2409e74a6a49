"""The claim-level metrics: ``claims:<name>``, ``nuggets:<name>``, ``citations:<name>``.

Every metric of a kind reads the same per-record analysis (the claims and their verdicts, the
nuggets and their labels, the statements and their citations), built once per run for all the
metrics of that kind (:mod:`.hooks` prepares it with the checks every requested metric needs)
and written once per record under the kind's details key (``claims``, ``nuggets``,
``nuggets(source=contexts)``, ``citations``, ...). The value is the kind's formula applied to
those details alone (:mod:`.claim_scores`, :mod:`.nugget_scores`, :mod:`.citation_scores`), so
``records.jsonl`` suffices to recompute it. Values are on 0-1.

The signature names the judge model, the endpoint and response format of the replies used,
each step prompt's version and hash, the claims per request, and where the claims and verdicts
came from (``from``: ``judge``, ``record``, or both).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, MetricResult, ScoreOptions, Slot
from rageval.core.names import MetricName
from rageval.core.params import Param
from rageval.core.signature import Field, Signature
from rageval.judge.claims import citation_pipeline, claim_pipeline, nugget_pipeline
from rageval.judge.claims.asking import Asker
from rageval.judge.claims.citation_scores import CITATION_METRICS, citation_score
from rageval.judge.claims.claim_scores import CLAIM_METRICS, PIECES, claim_score
from rageval.judge.claims.hooks import CLAIM_HOOKS, analysis
from rageval.judge.claims.nugget_scores import NUGGET_METRICS, nugget_score
from rageval.judge.claims.steps import RENDER_VERSION, load_step
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.replies import provenance_only
from rageval.judge.llm.transport.params import DEFAULTED, signed_defaults

if TYPE_CHECKING:
    from rageval.core.records import Record

__all__ = ["KINDS", "NAMES", "CitationsMetric", "ClaimLevelMetric", "ClaimsMetric", "NuggetsMetric",
           "claim_level_metric"]

# The signature fields that describe the judge (meaningless when the records gave everything).
_JUDGE_KEYS = ("judge", "endpoint", "response_format", "temperature", "max_tokens",
               "reasoning_effort", "seed")
# The claim metrics where a lower value is better (the rest are on 0-1, higher better).
_LOWER_IS_BETTER = frozenset({"hallucination", "noise_sensitivity.relevant",
                              "noise_sensitivity.irrelevant"})
_PIECE_FIELDS = {"answer_claims": "answer", "reference_claims": "reference",
                 "reference": "reference", "answer": "answer", "contexts": "contexts"}


class ClaimLevelMetric(Metric):
    """One value read from a kind's per-record analysis (see the module)."""

    family = "judge"
    grades = True  # its model, prompt and parameters are part of the evaluation set
    reached_at = frozenset({"endpoint"})
    hooks = CLAIM_HOOKS
    kind: ClassVar[str]
    targets: ClassVar[tuple[str, ...]]
    steps: ClassVar[tuple[str, ...]]
    chunk: ClassVar[int]

    def __init__(self, target: str, cutoff: int | None = None,
                 options: ScoreOptions | None = None, **params: Any) -> None:
        if target not in self.targets:
            raise UsageError(f"unknown metric '{self.kind}:{target}'; the {self.kind} metrics "
                             f"are {', '.join(f'{self.kind}:{t}' for t in self.targets)}")
        if cutoff is not None:
            raise UsageError(f"{self.kind}:{target} takes no cutoff '@{cutoff}'")
        self.target = target
        super().__init__(cutoff=None, options=options, name=f"{self.kind}:{target}",
                         needs=self.fields_needed(target), **params)

    # -- what subclasses say ----------------------------------------------------------------

    @abstractmethod
    def fields_needed(self, target: str) -> set[str]:
        """The record fields the metric reads (the orchestrator checks some record has each)."""

    def config(self) -> tuple[Any, ...]:
        """What the kind's analysis depends on besides the judge (its parameters)."""
        return tuple(sorted(self.values.items()))

    def wants(self) -> frozenset[str]:
        """The parts of the analysis this metric reads (the run builds their union)."""
        return frozenset()

    @abstractmethod
    def analyse(self, asker: Asker, wants: frozenset[str]) -> list[dict[str, Any]]:
        """The kind's per-record analysis of the run, with the parts in ``wants``."""

    @abstractmethod
    def formula(self, details: Mapping[str, Any]) -> tuple[float, str | None]:
        """The value (NaN when unscored) and the reason, from one record's details alone."""

    def reads_judgments(self) -> bool:
        """Whether the analysis depends on the records' judgments (which a judgments
        provider may fill in after the run's checks)."""
        return False

    # -- the metric -------------------------------------------------------------------------

    @property
    def judge(self) -> JudgeOptions:
        return self.options.judge or JudgeOptions()

    def with_options(self, options: ScoreOptions) -> Metric:
        return type(self)(self.target, options=options, **dict(self.values))

    def details_key(self) -> str:
        return str(MetricName(self.kind, self.name.params))

    def score_range(self) -> tuple[float, float]:
        return 0.0, 1.0

    def used_steps(self) -> tuple[str, ...]:
        """The steps this metric's values rest on (those its signature names)."""
        return self.steps

    def ready(self) -> None:
        """Raise a usage error, before any scoring, when the metric cannot run."""
        for step in self.used_steps():
            load_step(step, self.judge.prompts_dir)

    def signature_extra(self) -> list[Field]:
        judge = self.judge
        fields = [*judge.signed("model", "base_url", "response_format"),
                  Field("render", RENDER_VERSION, "rd"),
                  *judge.signed("temperature", "max_tokens", "reasoning_effort", "seed",
                                "extra")]
        for step in self.used_steps():
            prompt = load_step(step, judge.prompts_dir)
            fields.append(Field(step, f"{prompt.version}:{prompt.short_hash}"))
        fields += [Field("chunk", str(self.chunk)), Field("from", "judge")]
        return fields

    def summary_part(self, result: MetricResult) -> MetricResult:
        return MetricResult(result.values, [],
                            provenance_only(result.details, ("endpoint", "response_format",
                                                             "sources", *DEFAULTED)))

    def result_signature(self, result: MetricResult) -> Signature:
        """Endpoint and response format of the replies used (a replay signs with what recorded
        them), a parameter the model's default stood for as ``default``, and where the analysis
        came from."""
        used: dict[str, set[str]] = {"endpoint": set(), "response_format": set(), "from": set()}
        for detail in result.details or []:
            detail = detail or {}
            for key in ("endpoint", "response_format"):
                value = detail.get(key)
                used[key].update([value] if isinstance(value, str) else value or [])
            used["from"].update(detail.get("sources", {}).values())
        fields = [replace(f, value="+".join(sorted(used[f.key])) if f.key == "from"
                          else ",".join(sorted(used[f.key])))
                  if used.get(f.key) else f for f in self.signature().fields]
        fields = signed_defaults(fields, result.details or [])
        if used["from"] == {"record"}:  # no judge or prompt behind any value: say so
            unused = {*_JUDGE_KEYS, *self.used_steps(), "render", "chunk"}
            fields = [replace(f, value="none") if f.key in unused else f for f in fields]
        return Signature(tuple(fields))

    def score(self, batch: Batch) -> MetricResult:
        analysis = self._analysis(batch)
        values = np.full(len(batch), np.nan)
        reasons: list[str | None] = []
        details: list[dict[str, Any] | None] = []
        for i, record in enumerate(batch.records):
            found = analysis(record)
            value, reason = self.formula(found)
            values[i] = value
            reasons.append(reason)
            details.append(found)
        return MetricResult({str(self.name): values}, reasons, details)

    def _analysis(self, batch: Batch) -> Callable[[Record], dict[str, Any]]:
        run = batch.run
        records = run.records
        position = run.cached(Slot[dict[int, int]](("claims", "positions", id(records))),
                              lambda: {id(record): i for i, record in enumerate(records)})
        if id(batch.records[0]) not in position:  # a batch scored apart from its run
            records = batch.records
            position = {id(record): i for i, record in enumerate(records)}
        details = analysis(run, records, [self])
        return lambda record: details[position[id(record)]]


class ClaimsMetric(ClaimLevelMetric):
    """RAGChecker's claim metrics (:mod:`.claim_scores` is the card)."""

    kind = "claims"
    targets = CLAIM_METRICS
    steps = ("extract_claims", "check_claims")
    chunk = claim_pipeline.CHUNK
    summary = ("RAGChecker claim metrics: claims:precision|recall|f1|claim_recall|"
               "context_precision|context_utilization|noise_sensitivity.relevant|"
               "noise_sensitivity.irrelevant|hallucination|self_knowledge|faithfulness")

    def fields_needed(self, target: str) -> set[str]:
        return {_PIECE_FIELDS[part] for piece in PIECES[target] for part in piece.split(".")}

    def wants(self) -> frozenset[str]:
        return frozenset(PIECES[self.target])

    def analyse(self, asker: Asker, wants: frozenset[str]) -> list[dict[str, Any]]:
        return claim_pipeline.analyse_claims(asker, wants)

    def formula(self, details: Mapping[str, Any]) -> tuple[float, str | None]:
        return claim_score(details, self.target)

    def lower_is_better(self, output: str) -> bool:
        # Shares of answer claims that are wrong: fewer is better (RAGChecker's direction).
        return self.target in _LOWER_IS_BETTER


class NuggetsMetric(ClaimLevelMetric):
    """TREC 2024 RAG's nugget scores (:mod:`.nugget_scores` is the card)."""

    kind = "nuggets"
    targets = NUGGET_METRICS
    steps = ("nuggets_create", "nuggets_importance", "nuggets_assign")
    chunk = nugget_pipeline.CHUNK
    params = (Param("source", str, "reference",
                    "what nuggets are created from when the record gives none: its reference "
                    "answer(s), or its contexts judged relevant", nugget_pipeline.SOURCES),)
    summary = ("TREC RAG nugget recall (AutoNuggetizer): nuggets:vital_strict|vital|"
               "all_strict|all (strict: full support only; else partial counts 0.5)")

    def fields_needed(self, target: str) -> set[str]:
        return {"answer"}

    def reads_judgments(self) -> bool:
        return self.values["source"] == "contexts"

    def used_steps(self) -> tuple[str, ...]:
        if self.target.startswith("vital"):
            return self.steps
        return tuple(step for step in self.steps if step != "nuggets_importance")

    def wants(self) -> frozenset[str]:
        return frozenset({"importance"} if self.target.startswith("vital") else ())

    def analyse(self, asker: Asker, wants: frozenset[str]) -> list[dict[str, Any]]:
        return nugget_pipeline.analyse_nuggets(asker, self.values["source"],
                                               "importance" in wants)

    def formula(self, details: Mapping[str, Any]) -> tuple[float, str | None]:
        return nugget_score(details, self.target)


class CitationsMetric(ClaimLevelMetric):
    """ALCE's citation recall and precision (:mod:`.citation_scores` is the card)."""

    kind = "citations"
    targets = CITATION_METRICS
    steps = ("check_claims",)
    chunk = citation_pipeline.CHUNK
    params = (Param("max_citations", int, 3, "citations read per statement (ALCE's "
                    "at_most_citations)", minimum=1),)
    summary = ("ALCE citation support: citations:recall (statements their citations entail), "
               "citations:precision (citations needed); answers cite contexts as [1] or [id]")

    def fields_needed(self, target: str) -> set[str]:
        return {"answer", "contexts"}

    def wants(self) -> frozenset[str]:
        return frozenset({"precision"} if self.target == "precision" else ())

    def analyse(self, asker: Asker, wants: frozenset[str]) -> list[dict[str, Any]]:
        return citation_pipeline.analyse_citations(asker, self.values["max_citations"],
                                                   "precision" in wants)

    def formula(self, details: Mapping[str, Any]) -> tuple[float, str | None]:
        return citation_score(details, self.target)


KINDS: dict[str, type[ClaimLevelMetric]] = {
    cls.kind: cls for cls in (ClaimsMetric, NuggetsMetric, CitationsMetric)}
#: Every claim-level metric name, kind by kind.
NAMES: tuple[str, ...] = tuple(f"{kind}:{target}" for kind, cls in KINDS.items()
                               for target in cls.targets)


def claim_level_metric(name: MetricName, options: ScoreOptions) -> Metric:
    """The metric a ``claims:``, ``nuggets:`` or ``citations:`` name denotes."""
    kind, target = name.base.split(":", 1)
    return KINDS[kind](target, cutoff=name.cutoff, options=options, **dict(name.params))
