"""What every retrieval metric shares: one kernel call over the batch's columnar ranking.

:class:`RetrievalMetric` runs a kernel of :mod:`rageval.retrieval.kernels` over the
:class:`~rageval.retrieval.ranking.Ranking` built once per batch (:func:`batch_ranking`) and says
why a record is unscored: no judgments, or, for a metric whose value would be 0/0, no relevant
judged document (unless ``trec_convention``). The metrics themselves are registered in
:mod:`rageval.retrieval.measures`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from rageval.core.metric import Batch, Metric, MetricResult, Slot
from rageval.core.scale import RATIO, Scale
from rageval.core.signature import Field
from rageval.retrieval.ranking import Ranking

NO_JUDGMENTS = ("no relevance judgments for this record (give 'judgments' inline, --qrels, "
                "or --judgments-from judge)")
NOT_JUDGED = ("no relevance judgments for this record: the judge could not grade all of its "
              "contexts (see the manifest's judged_judgments)")

# The batch's columnar ranking, shared by every retrieval metric of the batch.
RANKING = Slot[Ranking]("ranking")


def batch_ranking(batch: Batch) -> Ranking:
    """The columnar ranking of a batch, built once and shared by every retrieval metric."""

    def build() -> Ranking:
        records = batch.records
        scores = [
            [c.score for c in r.contexts]
            if r.contexts and all(c.score is not None for c in r.contexts)
            else None
            for r in records
        ]
        return Ranking.from_lists(
            [r.id for r in records],
            [[c.id for c in r.contexts] for r in records],
            [r.judgments for r in records],
            scores,
        )

    return batch.cached(RANKING, build)


class RetrievalMetric(Metric):
    """A ranked-list metric: one kernel call over the batch's columnar ranking."""

    family = "retrieval"
    value_range: ClassVar[Scale] = RATIO  # DCG and ranks are unbounded
    needs = frozenset({"judgments", "contexts"})
    # Metrics trec_eval also computes (same conventions); the others are rageval's own.
    trec_eval_measure: ClassVar[bool] = True
    # False for metrics whose value is 0/0 when the query has no relevant document.
    defined_without_relevant: ClassVar[bool] = False

    def signature_extra(self) -> list[Field]:
        fields = [Field("judgments", self.options.judgments_source, "j")]
        if not self.defined_without_relevant:
            undefined = "zero" if self.options.trec_convention else "skip"
            fields.append(Field("undefined", undefined, "u"))
        if self.trec_eval_measure and self.values.get("gain", "linear") == "linear":
            fields.append(Field("semantics", "trec_eval-10.0", "s"))
        return fields

    @property
    def rel(self) -> int:
        return int(self.values.get("rel", 1))

    def score(self, batch: Batch) -> MetricResult:
        ranking = batch_ranking(batch)
        values = np.asarray(self.compute(ranking), dtype=np.float64).copy()
        reasons = self.reasons(batch, ranking, values)
        values[[i for i, reason in enumerate(reasons) if reason is not None]] = np.nan
        return MetricResult({str(self.name): values}, reasons)

    @abstractmethod
    def compute(self, ranking: Ranking) -> np.ndarray:
        """Per-query kernel values (trec_eval's conventions), aligned with the batch."""

    def reasons(self, batch: Batch, ranking: Ranking, values: np.ndarray) -> list[str | None]:
        has_relevant = ranking.num_rel(self.relevance_floor()) > 0
        out: list[str | None] = []
        for i, record in enumerate(batch.records):
            if record.judgments is None:
                judged = "judge/" in self.options.judgments_source
                out.append(NOT_JUDGED if judged and record.contexts else NO_JUDGMENTS)
            elif not (has_relevant[i] or self.defined_without_relevant
                      or self.options.trec_convention):
                out.append(f"undefined: no judged context with grade >= {self.relevance_floor()}")
            else:
                out.append(self.extra_reason(ranking, i, values[i]))
        return out

    def relevance_floor(self) -> int:
        return self.rel

    def extra_reason(self, ranking: Ranking, i: int, value: float) -> str | None:
        return None
