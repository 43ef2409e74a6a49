"""Statistics with explicit, seeded random generators (never a global or environment seed)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Resampling matrices are built in blocks so that 100k records x 10k resamples stays in memory.
_BLOCK_CELLS = 4_000_000


def bootstrap_ci(
    values: np.ndarray,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    statistic: Callable[[np.ndarray], float] | None = None,
) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean (or of ``statistic(indices)``).

    ``values`` holds the scored values only (no NaN). With ``statistic`` given, it is called with
    an array of resampled indices into ``values`` and returns the statistic of that resample;
    corpus-level metrics (corpus BLEU) use it to recompute from sufficient statistics.
    Returns None when there is nothing to resample; a single value gives ``(v, v)``.
    """
    n = len(values)
    if n == 0:
        return None
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples, dtype=np.float64)
    block = max(1, _BLOCK_CELLS // n)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        if statistic is None:
            stats[start : start + size] = values[idx].mean(axis=1)
        else:
            stats[start : start + size] = [statistic(row) for row in idx]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)
