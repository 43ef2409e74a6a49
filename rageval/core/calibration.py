"""A judge mean calibrated by human labels, as the summary reports it: the prediction-powered
estimate (PPI, with the power-tuned PPI++ beside it), what the labels alone say, and how many
records of each kind it rests on, or why there is no estimate (computed by
:mod:`rageval.stats.calibration`).

PPI is the headline: PPI++ is narrower on average, and never wider than the labels alone in
the simulation of ``bench/ppi_coverage.py``, but wider than PPI in some trials with few labels
(docs/calibration.md), so it stands beside PPI rather than in its place."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["MIN_LABELLED", "Calibration"]

#: Fewer labelled records than this and the summary refuses to calibrate: a normal interval
#: over a handful of labels would claim more than it knows.
MIN_LABELLED = 10

Interval = tuple[float, float]


@dataclass(frozen=True)
class Calibration:
    """``mean`` and ``ci95``: PPI; ``tuned_*``: PPI++ (``lam`` its tuned weight);
    ``human_*``: the labelled records alone. ``refused`` says why there is no estimate.
    ``method``: ``ppi`` (labels of a uniform sample), or ``active`` (labels under active
    selection: the active-inference mean over the pool the selection went through, whose
    ``unlabelled`` records are those it passed over; no PPI++ beside it)."""

    labelled: int
    unlabelled: int
    mean: float | None = None
    ci95: Interval | None = None
    lam: float | None = None
    tuned_mean: float | None = None
    tuned_ci95: Interval | None = None
    human_mean: float | None = None
    human_ci95: Interval | None = None
    refused: str | None = None
    method: str = "ppi"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"labelled": self.labelled, "unlabelled": self.unlabelled}
        if self.refused is not None:
            out["refused"] = self.refused
        if self.method != "ppi":
            out["method"] = self.method
        if self.mean is not None:
            out.update({"method": self.method, "mean": self.mean, "ci95": _pair(self.ci95)})
        if self.tuned_mean is not None:
            out["ppi++"] = {"mean": self.tuned_mean, "ci95": _pair(self.tuned_ci95),
                            "lam": self.lam}
        if self.human_mean is not None:
            out["human"] = {"mean": self.human_mean, "ci95": _pair(self.human_ci95)}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        tuned, human = data.get("ppi++") or {}, data.get("human") or {}
        return cls(int(data["labelled"]), int(data["unlabelled"]), data.get("mean"),
                   _interval(data.get("ci95")), tuned.get("lam"), tuned.get("mean"),
                   _interval(tuned.get("ci95")), human.get("mean"),
                   _interval(human.get("ci95")), data.get("refused"),
                   data.get("method", "ppi"))


def _pair(interval: Interval | None) -> list[float] | None:
    if interval is None:
        return None
    return [v if math.isfinite(v) else None for v in interval]  # type: ignore[misc]


def _interval(value: Any) -> Interval | None:
    if not value:
        return None
    return (float(value[0]), float(value[1]))
