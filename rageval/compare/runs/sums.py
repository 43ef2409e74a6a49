"""The running sums of one baseline-system comparison streamed from disk.

Records (or whole conversations: the units) come in partition by partition, never all at once.
For each compared output the sums keep the exact sums of the units' baseline values, system
values and differences; for each bootstrap resample the differences and counts weighted by the
units' Poisson(1) weights; for each relabelling of the randomization test the differences with
the units' signs (:mod:`rageval.stats.poisson`: both derived from the seed and the unit's id,
so a unit weighs the same however the runs are partitioned). A corpus metric (corpus BLEU)
keeps the same sums of its additive statistics. That is ``(resamples + relabellings) x
columns`` numbers, whatever the runs' length.

The statistics are those of :mod:`~rageval.compare.runs.statistics` with each draw replaced:
the bootstrap's weighted mean of the differences is ``sum(w * d) / sum(w)``; a relabelling
flips the sign of a unit's difference (for a corpus metric: moves its statistics to the other
side) with probability 1/2.
"""

from __future__ import annotations

import numpy as np

from rageval.compare.runs.pairing import PairedBlock
from rageval.compare.runs.statistics import Draws, Tally, finite, tally
from rageval.core.metric import Metric
from rageval.stats.exact import ExactSums, exact_group_means
from rageval.stats.groups import group_rows
from rageval.stats.poisson import drawn_sums, seeded_keys, sign_flips
from rageval.stats.resampling import extreme_counts, percentile_interval

__all__ = ["PairedSums", "PastFloats"]


class PastFloats(Exception):
    """An output whose differences or exact sums pass the largest float (values near 1e308):
    there is no figure to give. :attr:`name` is the output's."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

class PairedSums:
    """The sums of one comparison (see the module): ``names`` the compared outputs, ``corpus``
    the metric of each corpus output among them."""

    def __init__(self, names: list[str], corpus: dict[str, Metric], widths: dict[str, int],
                 draws: Draws, level: float) -> None:
        self.names, self.corpus, self.widths = names, corpus, widths
        resamples, permutations = draws.resamples, draws.permutations
        self.resamples, self.permutations, self.seed, self.level = (
            resamples, permutations, draws.seed, level)
        self.means = [n for n in names if n not in corpus]
        self.tallies = {name: Tally() for name in names}
        m = len(self.means)
        # Differences, baseline values, system values: summed as the draws weigh them (the
        # observed statistic of the randomization test), and each unit's correctly rounded
        # mean over its pairs (the values reported; the same sums for units of one record).
        self._exact = ExactSums(3 * m)
        self._units: ExactSums | None = None
        self._totals = {n: np.zeros((2, w), dtype=np.int64) for n, w in widths.items()}
        # Weighted: per mean output its difference and count, per corpus output its baseline
        # and system statistics and count. Relabelled: differences, statistics moved.
        width = 2 * m + sum(2 * w + 1 for w in widths.values())
        self._weighted = np.zeros((resamples, width))
        self._relabelled = np.zeros((permutations, m + sum(widths.values())))

    def add(self, block: PairedBlock,
            stats: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Add a block of pairs (its values, in :attr:`names` order, its units and their
        keys), and ``stats``: each corpus output's statistics on either side, pair by pair.
        :class:`PastFloats` naming the output when a difference passes the largest float."""
        b, s, groups, keys = block.base, block.system, block.groups, block.unit_keys
        assert keys is not None  # streamed blocks carry their units' keys
        units = len(keys)
        for k, name in enumerate(self.names):
            self.tallies[name] += tally(b[:, k], s[:, k], groups)
        index = [self.names.index(n) for n in self.means]
        kept = ~(np.isnan(b[:, index]) | np.isnan(s[:, index]))
        shares = kept.astype(np.float64)
        if groups is not None:  # each kept turn weighs one over its conversation's kept turns
            sizes = group_rows(shares, groups, units)
            shares = shares / np.maximum(sizes[groups], 1.0)
        with np.errstate(over="ignore", invalid="ignore"):  # past the largest float: below
            diffs = np.where(kept, s[:, index] - b[:, index], 0.0) * shares
        sides = [np.where(kept, x[:, index], 0.0) * shares for x in (b, s)]
        d, mask = group_rows(diffs, groups, units), group_rows(shares, groups, units)
        beyond = ~np.isfinite(d).all(axis=0)  # a difference past the largest float
        if beyond.any():
            raise PastFloats(self.means[int(np.argmax(beyond))])
        self._exact.add(np.hstack([d, *(group_rows(x, groups, units) for x in sides)]))
        if groups is not None:
            self._add_unit_means(kept, s[:, index] - b[:, index], b[:, index], s[:, index],
                                 groups=groups, units=units)
        weighted, moved = [d, mask], [d]
        for name in self.corpus:
            both = ~(np.isnan(b[:, self.names.index(name)])
                     | np.isnan(s[:, self.names.index(name)]))
            bs, ss = (np.where(both[:, None], x, 0) for x in stats[name])
            bu, su = group_rows(bs, groups, units), group_rows(ss, groups, units)
            self._totals[name] += np.vstack([bu.sum(axis=0), su.sum(axis=0)])
            scored = group_rows(both[:, None].astype(np.float64), groups, units)
            weighted += [bu, su, scored]
            moved.append(bu - su)
        self._weigh(seeded_keys(keys, self.seed), np.hstack(weighted).astype(np.float64),
                    np.hstack(moved).astype(np.float64))

    def _add_unit_means(self, kept: np.ndarray, *columns: np.ndarray, groups: np.ndarray,
                        units: int) -> None:
        """Each unit's correctly rounded mean of each of ``columns`` over its kept pairs (0
        where it has none: it is not counted)."""
        if self._units is None:
            self._units = ExactSums(3 * kept.shape[1])
        means = [np.nan_to_num(exact_group_means(x[kept[:, j], j], groups[kept[:, j]], units))
                 for x in columns for j in range(kept.shape[1])]
        self._units.add(np.column_stack(means) if means else np.zeros((units, 0)))

    def _weigh(self, seeded: np.ndarray, weighted: np.ndarray, moved: np.ndarray) -> None:
        self._weighted += drawn_sums(seeded, weighted, self.resamples)
        self._relabelled += drawn_sums(seeded, moved, self.permutations, sign_flips)

    def statistics(self) -> dict[str, dict[str, object]]:
        """Per compared output with a scored pair: value, delta, CI and p-value. An
        :class:`PastFloats` naming the output when its exact sums pass the largest float
        (values near 1e308)."""
        out: dict[str, dict[str, object]] = {}
        m = len(self.means)
        for k, name in enumerate(self.means):
            n = self.tallies[name].n
            try:
                if n:
                    out[name] = self._mean_row(k, m, n)
            except OverflowError:  # the exact sums' conversion to a float
                raise PastFloats(name) from None
        column, moved = 2 * m, m
        for name, metric in self.corpus.items():
            width = self.widths[name]
            if self.tallies[name].n:
                out[name] = self._corpus_row(metric, self._totals[name],
                                             self._weighted[:, column : column + 2 * width + 1],
                                             self._relabelled[:, moved : moved + width])
            column, moved = column + 2 * width + 1, moved + width
        return out

    def _mean_row(self, k: int, m: int, n: int) -> dict[str, object]:
        ratios = _ratio(self._weighted[:, k], self._weighted[:, m + k])
        observed = self._exact.value(k)
        means = self._exact if self._units is None else self._units
        return _row(means.mean(m + k, n), means.mean(2 * m + k, n),
                    means.mean(k, n), percentile_interval(ratios, self.level),
                    self._p(observed, self._relabelled[:, k]))

    def _corpus_row(self, metric: Metric, totals: np.ndarray, weighted: np.ndarray,
                    moved: np.ndarray) -> dict[str, object]:
        width = totals.shape[1]

        def figure(sums: np.ndarray) -> float:
            return float(metric.corpus_from_sums(np.rint(sums).astype(np.int64)))  # type: ignore[arg-type]

        base, system = figure(totals[0]), figure(totals[1])
        resampled = np.array([figure(r[width : 2 * width]) - figure(r[:width])
                              if r[-1] > 0 else np.nan for r in weighted])
        # Relabelling j moves sum(f * (b - s)) from the baseline to the system, where a unit's
        # f = (1 - sign) / 2: half of (all of b - s) less the signed sum.
        shifted = ((totals[0] - totals[1])[None, :] - moved) / 2
        relabelled = np.array([figure(totals[1] + x) - figure(totals[0] - x) for x in shifted])
        return _row(base, system, system - base, percentile_interval(resampled, self.level),
                    self._p(system - base, relabelled))

    def _p(self, observed: float, relabelled: np.ndarray) -> float:
        count = extreme_counts(np.array([observed]), relabelled.reshape(len(relabelled), -1))
        return float(min(1.0, (int(count[0]) + 1) / (self.permutations + 1)))


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def _row(base: float, system: float, delta: float, ci: tuple[float, float] | None,
         p: float) -> dict[str, object]:
    low, high = (np.nan, np.nan) if ci is None else ci
    return {"baseline_value": finite(base), "system_value": finite(system),
            "delta": finite(delta), "ci95": [finite(low), finite(high)], "p_value": finite(p),
            "p_method": "monte-carlo"}
