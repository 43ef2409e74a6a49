"""How the judge family joins the registry: ``judge:<rubric>`` and ``judge:pairwise`` names,
the claim-level ``claims:``, ``nuggets:`` and ``citations:`` names, and
``judgments_from="judge"``. The registry imports this module on first use.

The factories import the judge's modules when a judge name is first built: a run of lexical
or retrieval metrics never pays for openai, the rubric machinery or the claim pipelines."""

from __future__ import annotations

from rageval.core.errors import UsageError
from rageval.core.metric import Metric, ScoreOptions
from rageval.core.names import MetricName
from rageval.core.providers import JudgmentsProvider
from rageval.core.registry import register_judgments, register_namespace

# The claim-level namespaces; a test holds this equal to ``claims.metrics.KINDS``.
CLAIM_KINDS: tuple[str, ...] = ("claims", "nuggets", "citations")


def judge_metric(name: MetricName, options: ScoreOptions) -> Metric:
    """The metric a ``judge:<target>`` name denotes."""
    from rageval.judge.pairwise.prompt import PAIRWISE
    from rageval.judge.rubric.metric import JudgeMetric

    target = name.base.split(":", 1)[1]
    if name.cutoff is not None:
        raise UsageError(f"{name.base} takes no cutoff '@{name.cutoff}'")
    panel = options.judge is not None and bool(options.judge.panel)
    if target == PAIRWISE:
        if panel:
            raise UsageError("judge:pairwise is judged by one judge: a panel (--judge SPEC) "
                             "grades rubrics")
        from rageval.judge.pairwise.metric import PairwiseMetric

        return PairwiseMetric(options=options, **dict(name.params))
    if panel:
        from rageval.judge.panel.metric import PanelMetric

        return PanelMetric(target, options=options, **dict(name.params))
    return JudgeMetric(target, options=options, **dict(name.params))


def claim_metric(name: MetricName, options: ScoreOptions) -> Metric:
    """The metric a ``claims:``, ``nuggets:`` or ``citations:`` name denotes."""
    from rageval.judge.claims.metrics import claim_level_metric

    return claim_level_metric(name, options)


def judge_judgments(options: ScoreOptions) -> JudgmentsProvider:
    """``judgments_from="judge"``: relevance judgments asked of the judge."""
    from rageval.judge.rubric.judgments import JudgeJudgments

    return JudgeJudgments(options)


register_namespace("judge", judge_metric)
for kind in CLAIM_KINDS:
    register_namespace(kind, claim_metric)
register_judgments("judge", judge_judgments)
