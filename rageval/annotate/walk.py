"""The order in which a metric's pool is walked, and under ``--select active`` which records
the walk offers and with what probability, exactly as every part of the labelling loop reads
them:

* the order: records sorted by ``sha256(f"{seed}:{metric}:{id}")``, the same for every
  annotator and across restarts;
* ``uniform``: every record is offered;
* ``active``: ``pi = selection_probabilities(uncertainty, budget)`` over the pool, and record
  ``i`` is offered when ``U_i < pi_i`` with ``U_i = int(sha256(f"{seed}:{metric}:{id}:draw"))
  / 2**256``."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from rageval.annotate.run import LabellingRun
from rageval.annotate.uncertainty import uncertainty
from rageval.stats.active import selection_probabilities

__all__ = ["DEFAULT_BUDGET", "SELECT", "Walk", "draw", "pool_uncertainty", "walk_key"]

#: The ways of choosing what to label (``--select``).
SELECT = ("uniform", "active")
#: The expected number of labels an active walk asks for (``--budget``).
DEFAULT_BUDGET = 100


def walk_key(seed: int, metric: str, record_id: str) -> str:
    """A record's place in the walk (hex digits: their order is the number's)."""
    return hashlib.sha256(f"{seed}:{metric}:{record_id}".encode()).hexdigest()


def draw(seed: int, metric: str, record_id: str) -> float:
    """The record's uniform draw in [0, 1), the same wherever and whenever it is made."""
    digest = hashlib.sha256(f"{seed}:{metric}:{record_id}:draw".encode()).hexdigest()
    return int(digest, 16) / 2**256


def pool_uncertainty(run: LabellingRun) -> list[float]:
    """The judge's uncertainty of each record of the pool, in the run's order."""
    scale = run.scale
    return [uncertainty(item.score, item.details, scale.low, scale.high)
            for item in run.items.values()]


@dataclass(frozen=True)
class Walk:
    """The walk of one metric's pool: ``order`` (every record), the ``probability`` of each
    under active selection (empty under uniform) and the records its draw ``offered`` (what
    a labels file already decided of a record overrides the draw: see the queue)."""

    metric: str
    selection: str
    order: tuple[str, ...]
    probability: Mapping[str, float]
    offered: frozenset[str]
    seed: int
    position: Mapping[str, int]  # each record's place in the order, 0 first
    budget: float | None = None  # active: the expected number of labels it draws

    @classmethod
    def build(cls, run: LabellingRun, selection: str = "uniform", *,
              budget: float = DEFAULT_BUDGET, seed: int = 0) -> Walk:
        if selection not in SELECT:
            raise ValueError(f"selection must be one of {', '.join(SELECT)}, got {selection!r}")
        ids = list(run.items)
        order = tuple(sorted(ids, key=lambda i: walk_key(seed, run.metric, i)))
        position = {record_id: k for k, record_id in enumerate(order)}
        if selection == "uniform":
            return cls(run.metric, selection, order, {}, frozenset(ids), seed, position)
        pi = selection_probabilities(pool_uncertainty(run), budget)
        probability = {i: float(p) for i, p in zip(ids, pi, strict=True)}
        offered = frozenset(i for i in ids if draw(seed, run.metric, i) < probability[i])
        return cls(run.metric, selection, order, probability, offered, seed, position,
                   float(budget))

    @property
    def active(self) -> bool:
        return self.selection == "active"
