"""Threshold checks: each named output (or run figure) against its minimum or maximum.

``on="mean"`` compares the summary value (the mean, or the corpus figure where the metric
defines one: corpus BLEU). ``on="ci"`` compares the 95% CI bound on the failing side (the lower
bound for a minimum, the upper for a maximum), so a run passes only when its whole interval
clears the limit: a small evaluation set then has to be good by a margin, not by luck. Run
figures (:func:`run_figure`) are counts, not estimates, and are compared as they are.

An output that was left unscored on every record, or has no CI under ``on="ci"``, fails with a
note saying why: unscored is not zero, and a gate that cannot see a number must not pass it.

The run figures a threshold can name are summed over the manifest's sections of judge work.
Every section that accounts for judge work (the rubric judge's ``judge``, claim-level judging's
``claims``, ... : those written by :func:`rageval.judge.llm.checks.judge_section`) has
``requests``, ``failed``, ``usage`` (tokens asked for this run), ``cached_usage`` (tokens of
replies replayed from the cache) and, when prices were given, ``cost_usd`` with ``this_run`` and
``replayed_from_cache``. The sections are found by those keys, not by name, so a family that
adds a section of its own is counted without a change here.

- ``cost_usd`` and ``tokens`` count the replies replayed from the cache as well as those asked
  for: the gate bounds what this evaluation costs, a figure that must not change between a
  fresh run and its offline replay (a replay would otherwise always cost 0 and pass).
- ``requests`` and ``failed_requests`` count what this run sent to the endpoint (cache hits are
  no request): ``--fail-over requests=0`` checks that a replay asked for nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rageval.core.errors import UsageError, did_you_mean
from rageval.core.manifest import judge_sections
from rageval.core.results import MetricSummary, Results
from rageval.gate.model import RUN_FIGURES, GateRow, Threshold
from rageval.gate.model import format_number as num

__all__ = ["FIGURE_BASIS", "GATE_ON", "RunFigure", "check_thresholds", "rule_basis", "run_figure",
           "summary_note", "unknown_threshold_names"]

GATE_ON: tuple[str, ...] = ("mean", "ci")


def check_thresholds(results: Results, thresholds: Sequence[Threshold], *,
                     on: str = "mean") -> list[GateRow]:
    """One row per threshold, in the order given (see the module for ``on``)."""
    if on not in GATE_ON:
        raise UsageError(f"gate on must be 'mean' or 'ci', got {on!r}")
    names = list(results.summary)
    rows = []
    for threshold in thresholds:
        if threshold.metric in RUN_FIGURES:
            rows.append(_figure_row(results, threshold))
        elif threshold.metric in results.summary:
            rows.append(_metric_row(results.summary[threshold.metric], threshold, on))
        else:
            rule = _rule(threshold, rule_basis(threshold, None, on))
            rows.append(GateRow("threshold", threshold.metric, rule, None, False,
                                unknown_name_note(threshold.metric, names)))
    return rows


def unknown_threshold_names(thresholds: Iterable[Threshold], names: Iterable[str]) -> list[str]:
    """One message per threshold whose metric is neither one of ``names`` (the run's output
    names) nor a run figure, naming close matches: checked before scoring, a typo fails in a
    second instead of after an hour of judging."""
    known = list(names)
    return [f"threshold {t.metric}: {unknown_name_note(t.metric, known)}"
            for t in thresholds if t.metric not in RUN_FIGURES and t.metric not in known]


def unknown_name_note(name: str, names: Sequence[str]) -> str:
    """``not an output of this run; did you mean 'ndcg@10'?`` (with up to 3 close matches)."""
    hint = did_you_mean(name, [*names, *RUN_FIGURES], n=3)
    return f"not an output of this run{'; ' + hint if hint else ''}"


def rule_basis(threshold: Threshold, item: MetricSummary | None, on: str) -> str:
    """What the threshold is compared with: ``mean``, ``corpus``, ``CI lower bound``, ... ."""
    if threshold.metric in RUN_FIGURES:
        return FIGURE_BASIS[threshold.metric]
    if on == "ci":
        return "CI lower bound" if threshold.direction == "under" else "CI upper bound"
    return "corpus" if item is not None and item.aggregate == "corpus" else "mean"


def summary_note(item: MetricSummary, *, with_value: bool = False) -> str:
    """``95% CI [3.25, 4.0], n=8`` (and the unscored count, and the value when asked)."""
    parts = [f"{item.aggregate} {num(item.value)}"] if with_value else []
    if item.ci95 is not None:
        parts.append(f"95% CI [{num(item.ci95[0])}, {num(item.ci95[1])}]")
    parts.append(f"n={item.n}")
    if item.unscored:
        parts.append(f"{item.unscored} unscored")
    return ", ".join(parts)


def _rule(threshold: Threshold, basis: str) -> str:
    return f"{threshold.operator} {num(threshold.limit)} ({basis})"


def _figure_row(results: Results, threshold: Threshold) -> GateRow:
    figure = run_figure(results.manifest, threshold.metric)
    rule = _rule(threshold, figure.basis)
    passed = figure.value is not None and threshold.holds(figure.value)
    return GateRow("threshold", threshold.metric, rule, figure.value, passed, figure.note)


def _metric_row(item: MetricSummary, threshold: Threshold, on: str) -> GateRow:
    basis = rule_basis(threshold, item, on)
    rule = _rule(threshold, basis)
    if _missing(item.value):
        return GateRow("threshold", threshold.metric, rule, None, False, _no_value(item))
    if on == "mean":
        observed: float | None = item.value
        note = summary_note(item)
    else:
        bound = None if item.ci95 is None else item.ci95[0 if threshold.direction == "under"
                                                          else 1]
        observed = None if _missing(bound) else bound
        note = (summary_note(item, with_value=True) if observed is not None
                else f"no 95% CI to compare ({summary_note(item, with_value=True)})")
    passed = observed is not None and threshold.holds(observed)
    return GateRow("threshold", threshold.metric, rule, observed, passed, note, label=basis,
                   value=item.value)


def _no_value(item: MetricSummary) -> str:
    """Why an output has no value: unscored everywhere (with the commonest reason), or not."""
    if item.n > 0:
        return f"no value (n={item.n})"
    reason, count = max(item.reasons.items(), key=lambda kv: kv[1], default=(None, 0))
    why = f" ({count} x {reason})" if reason else ""
    return f"unscored on every record{why}"


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


# What each run figure counts, as the rule text of a threshold says it.
FIGURE_BASIS: dict[str, str] = {
    "cost_usd": "this run + replayed from cache",
    "tokens": "asked + replayed from cache",
    "requests": "sent this run",
    "failed_requests": "sent this run",
}


@dataclass(frozen=True)
class RunFigure:
    """A run figure's value (None when it cannot be known), what it counts, and why not."""

    value: float | None
    basis: str  # what the number counts, for the rule text
    note: str


def run_figure(manifest: Mapping[str, Any], name: str) -> RunFigure:
    """The figure ``name`` (one of :data:`rageval.gate.model.RUN_FIGURES`) of a run."""
    sections = judge_sections(manifest)
    where = ", ".join(sections) if sections else "no judge work in this run"
    if name == "cost_usd":
        return _cost(sections, where)
    if name == "tokens":
        asked = sum(_tokens(s.get("usage")) for s in sections.values())
        replayed = sum(_tokens(s.get("cached_usage")) for s in sections.values())
        return RunFigure(float(asked + replayed), FIGURE_BASIS[name],
                         f"{asked} asked, {replayed} replayed ({where})")
    key = {"requests": "requests", "failed_requests": "failed"}.get(name)
    if key is None:
        raise ValueError(f"not a run figure: {name!r}")
    total = sum(int(s.get(key) or 0) for s in sections.values())
    return RunFigure(float(total), FIGURE_BASIS[name], where)


def _cost(sections: Mapping[str, Mapping[str, Any]], where: str) -> RunFigure:
    basis = FIGURE_BASIS["cost_usd"]
    total, unpriced = 0.0, []
    for key, section in sections.items():
        cost = section.get("cost_usd")
        if isinstance(cost, Mapping):
            total += float(cost.get("this_run") or 0.0)
            total += float(cost.get("replayed_from_cache") or 0.0)
        elif _tokens(section.get("usage")) + _tokens(section.get("cached_usage")) > 0:
            unpriced.append(key)  # tokens spent at no known price: the cost is unknown
    if unpriced:
        return RunFigure(None, basis, f"cost unknown: no prices for {', '.join(unpriced)} "
                         "(give --judge-price-in and --judge-price-out)")
    return RunFigure(total, basis, where)


def _tokens(usage: Any) -> int:
    """Tokens of one usage account: its total, else prompt + completion."""
    if not isinstance(usage, Mapping):
        return 0
    total = usage.get("total_tokens")
    if total:
        return int(total)
    return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
