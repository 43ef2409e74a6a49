"""The tool-call family: ``tools:precision``, ``tools:recall`` and ``tools:f1`` compare the
calls an agent made with the calls expected of it (:mod:`rageval.tools.metric`, matched by
:mod:`rageval.tools.matching`). Importing this package registers the ``tools:`` names."""

from __future__ import annotations

from rageval.core.metric import Metric, ScoreOptions
from rageval.core.names import MetricName
from rageval.core.registry import register_namespace


def tool_metric(name: MetricName, options: ScoreOptions) -> Metric:
    """The metric a ``tools:<kind>`` name denotes."""
    from rageval.tools.metric import ToolCallMetric

    return ToolCallMetric(name.base.split(":", 1)[1], cutoff=name.cutoff, options=options,
                          **dict(name.params))


register_namespace("tools", tool_metric)
