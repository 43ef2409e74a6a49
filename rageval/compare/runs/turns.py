"""``rageval compare`` on conversations: the paired differences at each turn position.

Turns pair by their conversation and position (:func:`~rageval.compare.runs.pairing.pair_key`).
For each turn position (1, 2, ...) and each mean-aggregated output both runs scored per turn,
the mean of the system's and the baseline's values over the conversations whose turn at that
position is scored in both, the mean difference, its 95% paired bootstrap CI (the turns at one
position are one per conversation: independent draws), and how many were compared: where in a
conversation a change helps or hurts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rageval.compare.runs.pairing import NamedRun
from rageval.compare.runs.statistics import LEVEL, column
from rageval.stats.resampling import paired_bootstrap_ci

__all__ = ["per_turn_rows"]


def per_turn_rows(base: NamedRun, system: NamedRun, base_pos: np.ndarray,
                  system_pos: np.ndarray, turns: np.ndarray, *, resamples: int,
                  seed: int) -> list[dict[str, Any]]:
    """One row per (output, turn position) of one baseline-system comparison (``turns``: each
    paired record's turn position, 0 where it is not a turn)."""
    bsum, ssum = base.results.summary, system.results.summary
    rows = []
    for name in (n for n in bsum if n in ssum):
        if bsum[name].aggregate != "mean" or ssum[name].aggregate != "mean":
            continue
        b = column(base.results, name)[base_pos]
        s = column(system.results, name)[system_pos]
        kept = ~(np.isnan(b) | np.isnan(s)) & (turns > 0)
        for position in np.unique(turns[kept]):
            here = kept & (turns == position)
            differences = s[here] - b[here]
            ci = paired_bootstrap_ci(differences, resamples=resamples, seed=seed, level=LEVEL)
            rows.append({
                "metric": name, "baseline": base.name, "system": system.name,
                "turn": int(position), "n": int(here.sum()),
                "baseline_value": float(b[here].mean()),
                "system_value": float(s[here].mean()),
                "delta": float(differences.mean()),
                "ci95": [float(ci[0]), float(ci[1])],
                "headline": bool(bsum[name].in_table),
            })
    return rows
