"""Nugget metrics (the TREC 2024 RAG track's AutoNuggetizer): pure formulas from one record's
nugget verdicts.

Metric card. Nuggets are the facts a good answer to the query should hold, created from the
query and its relevant passages; each is labelled ``vital`` or ``okay`` (importance) and each is
assigned against the answer: ``support`` (1), ``partial_support`` (0.5 in the non-strict scores,
0 in the strict ones), ``not_support`` (0). Values are on 0-1.

- ``vital_strict`` (nuggetizer ``strict_vital_score``): #{vital nuggets supported} / #{vital
  nuggets}. The TREC 2024 RAG track's headline score.
- ``vital`` (``vital_score``): (#{vital supported} + 0.5 #{vital partially supported}) /
  #{vital nuggets}.
- ``all_strict`` (``strict_all_score``): #{nuggets supported} / #{nuggets}.
- ``all`` (``all_score``): (#{supported} + 0.5 #{partially supported}) / #{nuggets}.

The arithmetic is nuggetizer 0.0.5's ``calculate_nugget_scores`` (integer counts, halves summed,
then one division), so the values are identical to it.

Unscored, with a reason: no nuggets were created (``errors["nuggets"]`` says why when it knows),
the nugget list is empty, created so or supplied so by the record (nuggetizer scores 0), a
nugget lacks its importance (the vital metrics only: ``all``/``all_strict`` do not need it) or
a nugget the metric counts lacks its assignment
(``errors["importance"]`` / ``errors["assignment"]``), and for the vital metrics no nugget is
vital (nuggetizer scores 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NUGGET_METRICS", "ORACLE_NAMES", "nugget_score"]

NUGGET_METRICS: tuple[str, ...] = ("vital_strict", "vital", "all_strict", "all")

ORACLE_NAMES: dict[str, str] = {
    "vital_strict": "strict_vital_score",
    "vital": "vital_score",
    "all_strict": "strict_all_score",
    "all": "all_score",
}

_IMPORTANCES = ("vital", "okay")
_ASSIGNMENTS = ("support", "partial_support", "not_support")

_NOT_CREATED = "the nuggets were not created"
_NO_NUGGETS = "no nuggets were created for the query (nuggetizer scores 0)"
_NONE_SUPPLIED = "the record supplies an empty list of nuggets (nuggetizer scores 0)"
_NO_IMPORTANCE = "a nugget's importance was not labelled"
_NO_ASSIGNMENT = "a nugget was not assigned against the answer"
_NO_VITAL = "no nugget is vital (nuggetizer scores 0)"


def nugget_score(details: Mapping[str, Any], metric: str) -> tuple[float, str | None]:
    """One record's value of ``metric`` (nan when unscored) and why it is unscored (else None)."""
    if metric not in ORACLE_NAMES:
        raise ValueError(f"unknown nugget metric {metric!r}; known: {', '.join(NUGGET_METRICS)}")
    errors = details.get("errors") or {}
    nuggets = details.get("nuggets")
    if not isinstance(nuggets, list | tuple):
        return math.nan, errors.get("nuggets") or _NOT_CREATED
    if not nuggets:
        return math.nan, _NONE_SUPPLIED if details.get("source") == "record" else _NO_NUGGETS
    vital_only = metric.startswith("vital")
    if vital_only:
        if any(nugget.get("importance") is None for nugget in nuggets):
            return math.nan, errors.get("importance") or _NO_IMPORTANCE
        nuggets = [nugget for nugget in nuggets if _importance(nugget) == "vital"]
        if not nuggets:
            return math.nan, _NO_VITAL
    if any(nugget.get("assignment") is None for nugget in nuggets):
        return math.nan, errors.get("assignment") or _NO_ASSIGNMENT
    return _score(nuggets, strict=metric.endswith("strict")), None


def _score(nuggets: Sequence[Mapping[str, Any]], strict: bool) -> float:
    """nuggetizer's arithmetic: an integer count of supports, plus the halves, over the count."""
    assignments = [_assignment(nugget) for nugget in nuggets]
    supported = sum(1 for a in assignments if a == "support")
    if strict:
        return supported / len(nuggets)
    return (supported + sum(0.5 for a in assignments if a == "partial_support")) / len(nuggets)


def _importance(nugget: Mapping[str, Any]) -> str:
    return _label(nugget["importance"], _IMPORTANCES, "importance")


def _assignment(nugget: Mapping[str, Any]) -> str:
    return _label(nugget["assignment"], _ASSIGNMENTS, "assignment")


def _label(value: Any, known: tuple[str, ...], what: str) -> str:
    # An unknown label would silently count as "okay" / "not_support"; refuse it instead.
    if value not in known:
        raise ValueError(f"unknown nugget {what} {value!r}; expected one of {', '.join(known)}")
    return value
