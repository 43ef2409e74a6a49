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

from rageval.compare.runs.pairing import NamedRun, PairedBlock
from rageval.compare.runs.statistics import LEVEL, Draws, finite
from rageval.stats.exact import ExactSums, exact_mean
from rageval.stats.poisson import drawn_sums, seeded_keys
from rageval.stats.resampling import paired_bootstrap_ci, percentile_interval

__all__ = ["TurnSums", "per_turn_rows"]


def per_turn_rows(base: NamedRun, system: NamedRun, block: PairedBlock,
                  draws: Draws) -> list[dict[str, Any]]:
    """One row per (output, turn position) of one baseline-system comparison held in memory
    (``block``: every pair, with its turn position, 0 where it is not a turn)."""
    bsum, ssum = base.results.summary, system.results.summary
    turns = block.turns
    assert turns is not None  # runs of conversations
    rows = []
    for name in block.names:
        if bsum[name].aggregate != "mean" or ssum[name].aggregate != "mean":
            continue
        b, s = block.values(name)
        kept = ~(np.isnan(b) | np.isnan(s)) & (turns > 0)
        for position in np.unique(turns[kept]):
            here = kept & (turns == position)
            differences = s[here] - b[here]
            ci = paired_bootstrap_ci(differences, resamples=draws.resamples, seed=draws.seed,
                                     level=LEVEL)
            rows.append({
                "metric": name, "baseline": base.name, "system": system.name,
                "turn": int(position), "n": int(here.sum()),
                "baseline_value": exact_mean(b[here]),
                "system_value": exact_mean(s[here]),
                "delta": exact_mean(differences),
                "ci95": [float(ci[0]), float(ci[1])],
                "headline": bool(bsum[name].in_table),
            })
    return rows


class TurnSums:
    """The per-turn rows of one comparison streamed from disk: for each turn position and
    mean output, exact sums of the paired turns' values and differences, and their
    Poisson-weighted sums (each turn weighed with its conversation's weights)."""

    def __init__(self, names: list[str], draws: Draws) -> None:
        self.names, self.resamples, self.seed = names, draws.resamples, draws.seed
        self._positions: dict[int, tuple[ExactSums, np.ndarray, np.ndarray]] = {}

    def add(self, block: PairedBlock) -> None:
        """A block of pairs of runs of conversations (each pair weighed with its
        conversation's weights)."""
        b, s = block.columns(self.names)
        turns, groups, unit_keys = block.turns, block.groups, block.unit_keys
        assert turns is not None and groups is not None and unit_keys is not None
        keys = unit_keys[groups]  # each pair's conversation's key
        kept = ~(np.isnan(b) | np.isnan(s)) & (turns > 0)[:, None]
        diffs = np.where(kept, s - b, 0.0)
        width = len(self.names)
        for position in np.unique(turns[kept.any(axis=1)]).tolist():
            here = turns == position
            exact, counts, weighted = self._positions.setdefault(
                position, (ExactSums(3 * width), np.zeros(width, np.int64),
                           np.zeros((self.resamples, 2 * width))))
            shown = kept[here]
            sides = [np.where(shown, x[here], 0.0) for x in (b, s)]
            exact.add(np.hstack([diffs[here], *sides]))
            counts += shown.sum(axis=0)
            columns = np.hstack([diffs[here], shown.astype(np.float64)])
            weighted += drawn_sums(seeded_keys(keys[here], self.seed), columns, self.resamples)

    def rows(self, base: NamedRun, system: NamedRun) -> list[dict[str, Any]]:
        out = []
        width = len(self.names)
        for k, name in enumerate(self.names):
            for position in sorted(self._positions):
                exact, counts, weighted = self._positions[position]
                n = int(counts[k])
                if not n:
                    continue
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratios = weighted[:, k] / weighted[:, width + k]
                low, high = percentile_interval(ratios, LEVEL) or (np.nan, np.nan)
                out.append({
                    "metric": name, "baseline": base.name, "system": system.name,
                    "turn": position, "n": n,
                    "baseline_value": exact.mean(width + k, n),
                    "system_value": exact.mean(2 * width + k, n),
                    "delta": exact.mean(k, n),
                    "ci95": [finite(low), finite(high)],
                    "headline": bool(base.results.summary[name].in_table),
                })
        return out
