"""Which way is better for an output name of a run: asked of the metric that wrote it.

A summary name is an output name (:meth:`~rageval.core.metric.Metric.output_names`): a metric
name (``mean_rank@10``, ``claims:noise_sensitivity.relevant``) or a metric name plus a component
(``rouge2.precision``, ``bertscore(model=x).recall``). The metric is rebuilt from the name, or
from the name with trailing ``.component`` parts cut off, until one lists the output; then
:meth:`~rageval.core.metric.Metric.lower_is_better` answers.
"""

from __future__ import annotations

import functools

from rageval.core.errors import RagevalError
from rageval.core.registry import create

__all__ = ["lower_is_better"]


@functools.lru_cache(maxsize=256)
def lower_is_better(output: str) -> bool:
    """Whether lower values of ``output`` are better.

    An output no metric can be rebuilt for here (a judge rubric given by a path that does not
    exist in this directory, a metric of a newer rageval) counts as higher-is-better, the
    direction of nearly every metric.
    """
    for candidate in _candidates(output):
        try:
            metric = create(candidate)
        except (RagevalError, ValueError, OSError):
            continue
        if output in metric.output_names():
            return metric.lower_is_better(output)
    return False


def _candidates(output: str) -> list[str]:
    """The name itself, then with its last ``.part`` cut off, and so on (a dot may belong to
    the metric name: ``claims:noise_sensitivity.relevant``, a rubric file ``judge:x.toml``)."""
    out = [output]
    while "." in out[-1]:
        out.append(out[-1].rsplit(".", 1)[0])
    return out
