"""How the judge family joins the registry: ``judge:<rubric>`` and ``judge:pairwise`` names,
the claim-level ``claims:``, ``nuggets:`` and ``citations:`` names, and
``judgments_from="judge"``. The registry imports this module on first use."""

from __future__ import annotations

from rageval.core.errors import UsageError
from rageval.core.metric import Metric, ScoreOptions
from rageval.core.names import MetricName
from rageval.core.registry import register_judgments, register_namespace
from rageval.judge.claims.metrics import KINDS, claim_level_metric
from rageval.judge.judgments import JudgeJudgments
from rageval.judge.metric import JudgeMetric
from rageval.judge.pairwise import PAIRWISE, PairwiseMetric


def judge_metric(name: MetricName, options: ScoreOptions) -> Metric:
    """The metric a ``judge:<target>`` name denotes."""
    target = name.base.split(":", 1)[1]
    if name.cutoff is not None:
        raise UsageError(f"{name.base} takes no cutoff '@{name.cutoff}'")
    if target == PAIRWISE:
        return PairwiseMetric(options=options, **dict(name.params))
    return JudgeMetric(target, options=options, **dict(name.params))


register_namespace("judge", judge_metric)
for kind in KINDS:
    register_namespace(kind, claim_level_metric)
register_judgments("judge", JudgeJudgments)
