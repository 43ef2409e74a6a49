"""Retrieval metrics over records, with trec_eval 10.0 semantics.

Every metric here is a thin, named face over a numeric kernel of
:mod:`rageval.retrieval.kernels`; the
``rageval trec-eval`` command runs the very same kernels over TREC files, so a record's
``ndcg@10`` and trec_eval's ``ndcg_cut_10`` cannot drift apart.

A record's contexts are its ranking, in the order given (position 1 first): that is the order the
generator saw. (In TREC run files, by contrast, the rank column is ignored and scores decide, as
trec_eval does.) Judgments come inline (``judgments``), from a qrels file (``--qrels``), or from
the judge. ``(rel=N)`` sets the grade from which a judged document counts as relevant.

Undefined is not zero: a record with no judgments is unscored for every retrieval metric, and a
record whose judgments hold no relevant document is unscored for every metric whose value would
be 0/0 (recall, MAP, NDCG, MRR, ...). ``ScoreOptions(trec_convention=True)``
(``--trec-convention``) scores the latter as trec_eval does (0) instead.

What every retrieval metric shares (:class:`RetrievalMetric`): a kernel of
:mod:`rageval.retrieval.kernels` run over the :class:`~rageval.retrieval.ranking.Ranking` built
once per batch (:func:`batch_ranking`), and why a record is unscored: no judgments, or, for a
metric whose value would be 0/0, no relevant judged document (unless ``trec_convention``).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import ClassVar

import numpy as np

from rageval.core.errors import UsageError
from rageval.core.metric import Batch, Metric, MetricResult, ScoreOptions, Slot
from rageval.core.params import Param
from rageval.core.registry import register
from rageval.core.scale import RATIO, UNBOUNDED, Scale
from rageval.core.signature import Field
from rageval.retrieval import kernels
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


_REL = Param("rel", int, 1, "grade from which a judged context counts as relevant", minimum=1)
_GAIN = Param(
    "gain",
    str,
    "linear",
    "gain of a grade g: linear = g (trec_eval), exp = 2^g - 1 (Burges et al. 2005)",
    choices=("linear", "exp"),
)


@register
class Precision(RetrievalMetric):
    """P@k: relevant contexts among the top k, divided by k (trec_eval ``P_k``).

    A ranking shorter than k still divides by k, as trec_eval does. Range 0-1.
    Example: relevance [1, 0, 0, 1, 1] gives P@5 = 3/5 = 0.6.
    """

    base = "p"
    cutoff_rule = "required"
    params = (_REL,)
    summary = "precision at k: relevant contexts in the top k / k"
    defined_without_relevant = True

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.precision_at(ranking, k=self.cutoff, rel_level=self.rel)


@register
class Recall(RetrievalMetric):
    """Recall@k: relevant contexts in the top k / all relevant judged documents (``recall_k``).

    Without a cutoff, over the whole ranking. Range 0-1; undefined without relevant judgments.
    """

    base = "recall"
    cutoff_rule = "optional"
    params = (_REL,)
    summary = "recall at k: relevant contexts in the top k / all relevant judged documents"

    def compute(self, ranking: Ranking) -> np.ndarray:
        if self.cutoff is None:
            return kernels.set_recall(ranking, rel_level=self.rel)
        return kernels.recall_at(ranking, k=self.cutoff, rel_level=self.rel)


@register
class F1(RetrievalMetric):
    """F1@k: harmonic mean of P@k and recall@k (0 when both are 0).

    Without a cutoff, k is the length of the ranking. Range 0-1.
    Example: P@5 = 2/5 and recall@5 = 2/3 give F1@5 = 0.5.
    """

    base = "f1"
    cutoff_rule = "optional"
    params = (_REL,)
    summary = "F1 at k: harmonic mean of P@k and recall@k"
    trec_eval_measure = False  # set_F without a cutoff; F1@k is not a trec_eval measure

    def compute(self, ranking: Ranking) -> np.ndarray:
        if self.cutoff is None:
            # k = the ranking's own length: set precision and set recall (trec_eval set_F).
            return kernels.set_f(ranking, beta=1.0, rel_level=self.rel)
        return kernels.f1_at(ranking, k=self.cutoff, rel_level=self.rel)


@register
class Hit(RetrievalMetric):
    """hit@k (hit rate, success@k): 1 if any of the top k is relevant, else 0 (``success_k``).

    Its mean over records is the hit rate. Undefined without relevant judgments.
    """

    base = "hit"
    cutoff_rule = "optional"
    params = (_REL,)
    summary = "hit rate at k (success@k): 1 if a relevant context is in the top k"

    def compute(self, ranking: Ranking) -> np.ndarray:
        if self.cutoff is None:
            return (kernels.num_rel_ret(ranking, rel_level=self.rel) > 0).astype(np.float64)
        return kernels.hit_at(ranking, k=self.cutoff, rel_level=self.rel)


@register
class MRR(RetrievalMetric):
    """Reciprocal rank of the first relevant context; 0 when none is retrieved (``recip_rank``).

    ``mrr@k`` only looks at the top k. The mean over records is MRR.
    Example: first relevant at ranks 2 and 3 give MRR = (1/2 + 1/3) / 2 = 0.4167.
    """

    base = "mrr"
    cutoff_rule = "optional"
    params = (_REL,)
    summary = "reciprocal rank of the first relevant context (0 if none), optionally in the top k"

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.reciprocal_rank(ranking, rel_level=self.rel, k=self.cutoff)


@register
class MeanRank(RetrievalMetric):
    """Rank (1-based) of the first relevant context; its mean over records is the mean rank.

    Policy when no relevant context is retrieved (within the top k for ``mean_rank@k``):
    ``missing=skip`` (default) leaves the record unscored with that reason, and the summary counts
    it, so a mean rank is always read next to its ``unscored`` count; ``missing=penalize`` (which
    needs a cutoff) scores it k + 1, one past the end of the cut list.
    Lower is better. Example: first relevant at ranks 3, 2, 5 gives mean rank 3.33.
    """

    value_range = UNBOUNDED

    base = "mean_rank"
    cutoff_rule = "optional"
    params = (
        _REL,
        Param("missing", str, "skip", "no relevant context retrieved: skip or penalize",
              choices=("skip", "penalize")),
    )
    summary = "rank of the first relevant context (lower is better)"
    trec_eval_measure = False

    def __init__(self, cutoff: int | None = None, options: ScoreOptions | None = None,
                 **params: object) -> None:
        super().__init__(cutoff, options, **params)
        if self.values["missing"] == "penalize" and self.cutoff is None:
            # Without a cutoff the penalty would depend on each list's length: a record that
            # retrieved nothing would score 1, the best possible rank.
            raise UsageError("mean_rank(missing=penalize) needs a cutoff, e.g. "
                             "'mean_rank(missing=penalize)@10'")

    def compute(self, ranking: Ranking) -> np.ndarray:
        ranks = kernels.first_relevant_rank(ranking, rel_level=self.rel, k=self.cutoff)
        if self.values["missing"] == "penalize" and self.cutoff is not None:
            ranks = np.where(np.isnan(ranks), self.cutoff + 1.0, ranks)
        return ranks

    def lower_is_better(self, output: str) -> bool:
        return True  # a rank: 1 is the best

    def extra_reason(self, ranking: Ranking, i: int, value: float) -> str | None:
        if np.isnan(value):
            where = f"in the top {self.cutoff}" if self.cutoff is not None else ""
            return f"no relevant context retrieved {where}".strip() + " (missing=skip)"
        return None


@register
class AveragePrecision(RetrievalMetric):
    """Average precision: sum of P@i over the ranks i of relevant contexts / all relevant judged.

    Divides by every relevant judged document, retrieved or not (trec_eval ``map``); ``map@k``
    stops at rank k (``map_cut_k``). Example: relevant at ranks 2, 3, 5 of 5 with 3 relevant:
    (1/2 + 2/3 + 3/5) / 3 = 0.589.
    """

    base = "map"
    cutoff_rule = "optional"
    params = (_REL,)
    summary = "average precision (mean over records = MAP), optionally cut at k"

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.average_precision(ranking, rel_level=self.rel, k=self.cutoff)


@register
class RPrecision(RetrievalMetric):
    """R-precision: precision at rank R, where R is the number of relevant judged documents."""

    base = "rprec"
    params = (_REL,)
    summary = "precision at R, R = number of relevant judged documents"

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.r_precision(ranking, rel_level=self.rel)


@register
class Bpref(RetrievalMetric):
    """bpref (Buckley & Voorhees 2004), as trec_eval computes it: judged documents only."""

    base = "bpref"
    params = (_REL,)
    summary = "binary preference: how often relevant contexts precede judged non-relevant ones"

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.bpref(ranking, rel_level=self.rel)


@register
class DCG(RetrievalMetric):
    """DCG@k = sum over the top k of gain(g_i) / log2(i + 1), in gain units (not normalised).

    gain=linear uses the grade itself (trec_eval), gain=exp uses 2^g - 1 (Burges et al. 2005).
    Example: grades [3, 2, 3] give DCG@3 = 3 + 2/log2(3) + 3/2 = 5.76.
    """

    value_range = UNBOUNDED

    base = "dcg"
    cutoff_rule = "optional"
    params = (_GAIN,)
    summary = "discounted cumulative gain at k: sum gain(grade_i) / log2(i + 1)"
    defined_without_relevant = True

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.dcg_at(ranking, k=self.cutoff, gain=self.values["gain"])

    def relevance_floor(self) -> int:
        return 1


@register
class NDCG(RetrievalMetric):
    """NDCG@k = DCG@k / IDCG@k, the ideal DCG taken from ALL judgments of the query.

    The ideal ranking sorts every judged document by grade, not just the retrieved ones
    (trec_eval ``ndcg_cut_k``; ``ndcg`` without a cutoff is trec_eval's ``ndcg``). Range 0-1.
    Example: grades [5, 3, 5, 0, 2] give NDCG@3 = 9.39 / 9.654 = 0.973 and NDCG@5 = 0.967.
    """

    base = "ndcg"
    cutoff_rule = "optional"
    params = (_GAIN,)
    summary = "normalised DCG at k; ideal DCG from all of the query's judgments"

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.ndcg_at(ranking, k=self.cutoff, gain=self.values["gain"])

    def relevance_floor(self) -> int:
        return 1


@register
class ERR(RetrievalMetric):
    """Expected reciprocal rank (Chapelle et al. 2009) over the top k.

    R_i = (2^g_i - 1) / 2^gmax is the probability that context i satisfies the user;
    ERR = sum_i (1/i) R_i prod_{j<i} (1 - R_j). ``gmax`` is the highest grade of the scale
    (default 3, the TREC 0-3 scale); a record with a grade above it is unscored.
    Range 0 to just under 1.
    """

    base = "err"
    cutoff_rule = "optional"
    params = (Param("gmax", int, 3, "highest grade of the relevance scale", minimum=1),)
    summary = "expected reciprocal rank: cascade model with R = (2^g - 1) / 2^gmax"
    trec_eval_measure = False
    defined_without_relevant = True

    def compute(self, ranking: Ranking) -> np.ndarray:
        gmax = int(self.values["gmax"])
        # Grades above gmax are reported per record (extra_reason); clip so the rest still scores.
        clipped = dataclasses.replace(
            ranking,
            grades=np.minimum(ranking.grades, gmax),
            judged_grades=np.minimum(ranking.judged_grades, gmax),
        )
        return kernels.err_at(clipped, k=self.cutoff, gmax=gmax)

    def relevance_floor(self) -> int:
        return 1

    def extra_reason(self, ranking: Ranking, i: int, value: float) -> str | None:
        lo, hi = ranking.judged_offsets[i], ranking.judged_offsets[i + 1]
        if hi > lo and ranking.judged_grades[lo] > self.values["gmax"]:
            top = int(ranking.judged_grades[lo])
            return f"grade {top} exceeds gmax={self.values['gmax']}; set err(gmax={top})"
        return None


@register
class AUC(RetrievalMetric):
    """ROC AUC of the context scores: the chance that a retrieved relevant context scores higher
    than a retrieved non-relevant one (unjudged counts as non-relevant), ties counted 1/2.

    Needs a ``score`` on every context; undefined when the ranking lacks relevant or non-relevant
    contexts. Range 0-1, 0.5 = no discrimination.
    """

    base = "auc"
    params = (_REL,)
    summary = "ROC AUC of context scores, retrieved relevant vs non-relevant (ties count 1/2)"
    trec_eval_measure = False

    def compute(self, ranking: Ranking) -> np.ndarray:
        return kernels.roc_auc(ranking, rel_level=self.rel)

    def extra_reason(self, ranking: Ranking, i: int, value: float) -> str | None:
        if not np.isnan(value):
            return None
        if ranking.scores is None or np.isnan(
            ranking.scores[ranking.offsets[i] : ranking.offsets[i + 1]]
        ).any():
            return "undefined: auc needs a 'score' on every context"
        return "undefined: needs both a relevant and a non-relevant retrieved context"
