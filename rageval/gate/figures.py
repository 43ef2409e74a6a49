"""The run figures a threshold can name, summed over the manifest's sections of judge work.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rageval.core.manifest import judge_sections

__all__ = ["FIGURE_BASIS", "RunFigure", "run_figure"]

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
